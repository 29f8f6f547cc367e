from datetime import timedelta

import factory

from api.models import ApiClient
from botapp import clock
from botapp.models import (
    AdminCommand,
    Broadcast,
    BroadcastAttachment,
    BroadcastDelivery,
    ButtonClick,
    DailyStat,
    DailyTokenCount,
    ForceSubChannel,
    PendingDeletion,
    PremiumPlan,
    Sequence,
    SequenceMessage,
    SequenceStep,
    StoredFile,
    TelegramUser,
    UserBan,
    VerificationToken,
)
from inmemory_telegram.process import served_on_socket
from scheduler.models import JobRun

# Rows tests need, valid with no arguments; a test names only the fields it is about. Times come
# from botapp.clock (the one clock tests move), read when the row is made. A per-user row's chat is
# its user's: BroadcastDeliveryFactory(user=alice) sends to alice's chat.


class TelegramUserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = TelegramUser

    telegram_id = factory.Sequence(lambda n: 5000 + n)
    username = factory.Sequence(lambda n: f"user{n}")
    first_name = "Test"


class StoredFileFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = StoredFile

    source_chat_id = -1001000000001
    message_ids = factory.LazyFunction(lambda: [1])
    title = "A file"


class ForceSubChannelFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ForceSubChannel

    chat_id = factory.Sequence(lambda n: -1009000000000 - n)
    title = factory.Sequence(lambda n: f"Channel {n}")
    invite_link = factory.Sequence(lambda n: f"https://t.me/+channel{n}")


class VerificationTokenFactory(factory.django.DjangoModelFactory):
    """A pending token, valid for an hour."""

    class Meta:
        model = VerificationToken

    token = factory.Sequence(lambda n: f"token-{n}")
    user = factory.SubFactory(TelegramUserFactory)
    expires_at = factory.LazyFunction(lambda: clock.now() + timedelta(hours=1))


class DailyTokenCountFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = DailyTokenCount

    user = factory.SubFactory(TelegramUserFactory)
    date = factory.LazyFunction(clock.today)
    count = 1


class DailyStatFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = DailyStat

    date = factory.LazyFunction(clock.today)


class PendingDeletionFactory(factory.django.DjangoModelFactory):
    """A deletion due now."""

    class Meta:
        model = PendingDeletion

    chat_id = factory.Sequence(lambda n: 5000 + n)
    message_ids = factory.LazyFunction(lambda: [1])
    delete_at = factory.LazyFunction(clock.now)


class BroadcastFactory(factory.django.DjangoModelFactory):
    """A draft."""

    class Meta:
        model = Broadcast

    title = factory.Sequence(lambda n: f"Broadcast {n}")
    text = "Hello"


class BroadcastDeliveryFactory(factory.django.DjangoModelFactory):
    """A pending delivery of a new broadcast to a new user."""

    class Meta:
        model = BroadcastDelivery

    broadcast = factory.SubFactory(BroadcastFactory)
    user = factory.SubFactory(TelegramUserFactory)
    chat_id = factory.LazyAttribute(lambda row: row.user.telegram_id)


class BroadcastAttachmentFactory(factory.django.DjangoModelFactory):
    """A photo of a new scheduled message, given by a Telegram file id."""

    class Meta:
        model = BroadcastAttachment

    broadcast = factory.SubFactory(BroadcastFactory, kind=Broadcast.Kind.MESSAGE)
    kind = BroadcastAttachment.Kind.PHOTO
    file_id = factory.Sequence(lambda n: f"AgACAgIAAxkBAAI{n:08d}")


class SequenceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Sequence

    name = factory.Sequence(lambda n: f"Sequence {n}")


class SequenceStepFactory(factory.django.DjangoModelFactory):
    """A step of a new sequence, a minute after /start, with no condition."""

    class Meta:
        model = SequenceStep

    sequence = factory.SubFactory(SequenceFactory)
    delay_seconds = 60
    text = "Hello"


class SequenceMessageFactory(factory.django.DjangoModelFactory):
    """A pending step message for a new user, due now."""

    class Meta:
        model = SequenceMessage

    user = factory.SubFactory(TelegramUserFactory)
    step = factory.SubFactory(SequenceStepFactory)
    chat_id = factory.LazyAttribute(lambda row: row.user.telegram_id)
    due_at = factory.LazyFunction(clock.now)


class ButtonClickFactory(factory.django.DjangoModelFactory):
    """A user's first click of a tracked button, now."""

    class Meta:
        model = ButtonClick

    user = factory.SubFactory(TelegramUserFactory)
    button = "joined"
    clicked_at = factory.LazyFunction(clock.now)
    last_clicked_at = factory.LazyAttribute(lambda row: row.clicked_at)


class JobRunFactory(factory.django.DjangoModelFactory):
    """A successful run that started now (finished as it started)."""

    class Meta:
        model = JobRun

    job = "cleanup_tokens"
    status = JobRun.Status.OK
    started_at = factory.LazyFunction(clock.now)
    finished_at = factory.LazyAttribute(lambda run: run.started_at)


class PremiumPlanFactory(factory.django.DjangoModelFactory):
    """An active plan of a new user, from now for 30 days (the user's premium_until set to match)."""

    class Meta:
        model = PremiumPlan
        skip_postgeneration_save = True

    user = factory.SubFactory(TelegramUserFactory)
    starts_at = factory.LazyFunction(clock.now)
    ends_at = factory.LazyAttribute(lambda plan: plan.starts_at + timedelta(days=30))

    @factory.post_generation
    def mirror(plan, create, extracted, **kwargs):
        if create and plan.status == PremiumPlan.Status.ACTIVE:
            TelegramUser.objects.filter(pk=plan.user_id).update(premium_until=plan.ends_at)
            plan.user.premium_until = plan.ends_at


class UserBanFactory(factory.django.DjangoModelFactory):
    """A ban of a new user, from now until lifted (the user's admin_banned flag set)."""

    class Meta:
        model = UserBan
        skip_postgeneration_save = True

    user = factory.SubFactory(TelegramUserFactory)
    created_at = factory.LazyFunction(clock.now)

    @factory.post_generation
    def flag(ban, create, extracted, **kwargs):
        if create:
            TelegramUser.objects.filter(pk=ban.user_id).update(admin_banned=True)
            ban.user.admin_banned = True


class AdminCommandFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = AdminCommand

    admin_id = 1000
    command = "users"
    created_at = factory.LazyFunction(clock.now)


class ApiClientFactory(factory.django.DjangoModelFactory):
    """A client with the read scope; its token is unknown (tests that call the API make theirs
    with api.clients.apiclient_create)."""

    class Meta:
        model = ApiClient

    name = factory.Sequence(lambda n: f"client{n}")
    token_hash = factory.Sequence(lambda n: f"{n:064x}")
    token_prefix = "courier_test"


def meet(telegram, telegram_id: int, *, first_name: str = "Test", username: str = "") -> int:
    """The user writes /start to the bot on the in-memory Telegram (a bot can reach only users it
    has met). Returns the access hash their update carried: runbot stores it on TelegramUser, and
    workers send with it."""
    from botapp.telegram.gateway import TgUser

    telegram.user_sends(TgUser(id=telegram_id, first_name=first_name, username=username), "/start")
    return telegram.users[telegram_id].access_hash


def met_user(telegram, **kwargs) -> TelegramUser:
    """A TelegramUser who wrote to the bot, with the access hash runbot would have stored."""
    user = TelegramUserFactory(**kwargs)
    user.access_hash = meet(telegram, user.telegram_id, first_name=user.first_name, username=user.username)
    user.save(update_fields=["access_hash"])
    return user


def telegram_on_socket(telegram):
    """`telegram` served on a Unix socket, as `manage.py telegram_server` serves it to offline
    workers (TELEGRAM_OFFLINE=1). Yields the socket path."""
    return served_on_socket(telegram)
