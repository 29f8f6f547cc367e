"""The factories make valid rows with no arguments, and per-user rows go to their user's chat."""

import pytest

from tests import factories

pytestmark = pytest.mark.django_db

FACTORIES = [
    getattr(factories, name)
    for name in dir(factories)
    if name.endswith("Factory") and name != "DjangoModelFactory" and hasattr(getattr(factories, name), "_meta")
]


@pytest.mark.parametrize("factory", FACTORIES, ids=lambda f: f.__name__)
def test_every_factory_makes_a_valid_row_with_no_arguments(factory):
    row = factory()
    row.full_clean()
    assert type(row)._default_manager.filter(pk=row.pk).exists()


def test_per_user_rows_go_to_their_users_chat():
    user = factories.TelegramUserFactory()
    assert factories.BroadcastDeliveryFactory(user=user).chat_id == user.telegram_id
    assert factories.SequenceMessageFactory(user=user).chat_id == user.telegram_id
