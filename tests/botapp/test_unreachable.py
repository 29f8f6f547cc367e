"""A refused send means one thing wherever it happens (send_failure), and a user becomes blocked or
deactivated in one place (users_mark_unreachable), which never undoes a /stop."""

import pytest

from botapp.models import SendStatus, TelegramUser
from botapp.services.outgoing import send_failure
from botapp.services.users import unreachable_state, users_mark_unreachable
from botapp.telegram.gateway import BadRequest, FloodWait, OutcomeUnknown, TransientError, UserBlocked, UserDeactivated
from tests.factories import TelegramUserFactory


def test_each_refusal_maps_to_one_status_error_and_user_state():
    def mapped(exc):
        failure = send_failure(exc=exc, unreachable_status=SendStatus.SKIPPED)
        return failure.status, failure.error, failure.unreachable

    assert mapped(FloodWait(7)) == ("pending", "FloodWait: wait 7s", "")
    assert mapped(UserBlocked("USER_IS_BLOCKED")) == ("skipped", "blocked the bot", "blocked")
    assert mapped(UserDeactivated("USER_DEACTIVATED")) == ("skipped", "account deactivated", "deactivated")
    assert mapped(OutcomeUnknown("no answer")) == ("interrupted", "no answer", "")
    assert mapped(BadRequest("MESSAGE_EMPTY")) == ("failed", "MESSAGE_EMPTY", "")
    assert mapped(TransientError("x" * 300)) == ("pending", "x" * 255, "")  # nothing left: sent again later
    assert send_failure(exc=UserBlocked("b"), unreachable_status=SendStatus.BLOCKED).status == "blocked"
    assert (
        unreachable_state(exc=UserBlocked("b")),
        unreachable_state(exc=UserDeactivated("d")),
        unreachable_state(exc=FloodWait(1)),
    ) == (
        "blocked",
        "deactivated",
        "",
    )


@pytest.mark.django_db
def test_marking_users_unreachable_never_undoes_a_stop():
    def user(state):
        return TelegramUserFactory(state=state)

    active, blocked, stopped, gone = user("active"), user("blocked"), user("stopped"), user("deactivated")
    other_active, other_stopped = user("active"), user("stopped")

    assert users_mark_unreachable(by_pk={active.pk: "blocked", stopped.pk: "blocked", gone.pk: "blocked"}) == 1
    assert (
        users_mark_unreachable(
            by_telegram_id={
                blocked.telegram_id: "deactivated",
                other_active.telegram_id: "deactivated",
                other_stopped.telegram_id: "deactivated",
            }
        )
        == 2
    )
    states = dict(TelegramUser.objects.values_list("pk", "state"))
    assert states == {
        active.pk: "blocked",
        blocked.pk: "deactivated",  # a deleted account is more than a block
        stopped.pk: "stopped",  # their /stop stands: writing again must not make them active
        gone.pk: "deactivated",  # never back to "blocked"
        other_active.pk: "deactivated",
        other_stopped.pk: "stopped",
    }
    with pytest.raises(ValueError):
        users_mark_unreachable(by_pk={active.pk: "stopped"})
    assert users_mark_unreachable() == 0
