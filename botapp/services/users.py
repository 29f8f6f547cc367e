"""Telegram users: who they are, whether we may message them."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from django.db import connection
from django.db.models import BigIntegerField, Case, Count, Value, When

from botapp import clock
from botapp.db import row_by
from botapp.models import ChannelJoinRequest, SequenceMessage, TelegramUser
from botapp.telegram.gateway import TgUser, UserBlocked, UserDeactivated
from botapp.telegram.limits import START_PAYLOAD_LENGTH, USERNAME_LENGTH

State = TelegramUser.State

# last_seen_at is kept to this precision: writing it on every message would make every message a
# write to the user's row.
LAST_SEEN_STEP = timedelta(hours=1)


def user_seen(*, tg: TgUser, start_payload: str = "") -> tuple[TelegramUser, bool]:
    """Record that `tg` wrote to the bot; returns (user, created).

    A new user keeps the start payload that brought them (as their first and latest). Writing to the bot means they can be
    reached again, so a user marked blocked becomes active; a user who sent /stop stays stopped
    until they send /start.

    Queries: one for a returning user (a second only when a name, the access hash or the state
    changed, or the last write of last_seen_at is LAST_SEEN_STEP old); two for a new user (the
    lookup, then the INSERT). When two first messages of a new user are handled at once, the
    second INSERT finds the first one's row: that call goes on as for a returning user.
    """
    now = clock.now()
    fields = {
        "username": (tg.username or "")[:USERNAME_LENGTH],
        "first_name": (tg.first_name or "")[:128],
        "last_name": (tg.last_name or "")[:128],
        "language_code": (tg.language_code or "")[:16],
    }
    if tg.access_hash is not None:
        fields["access_hash"] = tg.access_hash
    user = row_by(TelegramUser, "telegram_id", tg.id)
    if user is None:
        user = TelegramUser(
            telegram_id=tg.id,
            start_payload=start_payload[:START_PAYLOAD_LENGTH],
            last_start_payload=start_payload[:START_PAYLOAD_LENGTH],
            joined_at=now,
            last_seen_at=now,
            **fields,
        )
        if _insert_new(user):
            return user, True
        user = TelegramUser.objects.get(telegram_id=tg.id)
    changed = [name for name, value in fields.items() if getattr(user, name) != value]
    for name in changed:
        setattr(user, name, fields[name])
    if user.state in (State.BLOCKED, State.DEACTIVATED):
        user.state = State.ACTIVE
        changed.append("state")
    if changed or now - user.last_seen_at >= LAST_SEEN_STEP:
        user.last_seen_at = now
        user.save(update_fields=[*changed, "last_seen_at"])
    return user, False


def _insert_new(user: TelegramUser) -> bool:
    """INSERT the user unless their row exists (ON CONFLICT DO NOTHING): one statement, with no
    transaction around it (bulk_create would add BEGIN and COMMIT) and no error when two updates
    race. Returns whether the row is this call's; sets its primary key."""
    meta = TelegramUser._meta
    fields = [f for f in meta.concrete_fields if not f.primary_key]
    quote = connection.ops.quote_name
    sql = (
        f"INSERT INTO {quote(meta.db_table)} ({', '.join(quote(f.column) for f in fields)}) "
        f"VALUES ({', '.join(['%s'] * len(fields))}) "
        f"ON CONFLICT ({quote(meta.get_field('telegram_id').column)}) DO NOTHING RETURNING {quote(meta.pk.column)}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [f.get_db_prep_save(f.pre_save(user, True), connection) for f in fields])
        row = cursor.fetchone()
    if row is None:
        return False
    user.pk = row[0]
    user._state.adding, user._state.db = False, connection.alias
    return True


def user_access_hash(telegram_id: int) -> int | None:
    """The access hash runbot stored for the user (None: the bot never saw them), so a worker can
    send without asking Telegram who the user is. The gateways' `peers` lookup: called as
    peers(chat_id), so its one argument stays positional."""
    return TelegramUser.objects.filter(telegram_id=telegram_id).values_list("access_hash", flat=True).first()


def user_access_hashes_fill(learnt: Mapping[int, int]) -> int:
    """Store the access hashes Telegram's answers named for users the gateway addressed by id
    alone (`learnt`: telegram id -> hash; a user imported from another bot), on the rows that have
    none: one UPDATE for a whole batch, none when nothing was learnt. A hash runbot stored from
    the user's own update is never replaced. The gateways' `peers_learnt`: called as
    peers_learnt(learnt), so its one argument stays positional. Returns the rows filled."""
    if not learnt:
        return 0
    by_id = Case(*(When(telegram_id=uid, then=Value(h)) for uid, h in learnt.items()), output_field=BigIntegerField())
    return TelegramUser.objects.filter(telegram_id__in=list(learnt), access_hash__isnull=True).update(access_hash=by_id)


def user_resume(*, user: TelegramUser) -> bool:
    """/start after /stop: the user wants messages again. Returns True if they had stopped."""
    if user.state == State.ACTIVE:
        return False
    user.state = State.ACTIVE
    user.save(update_fields=["state"])
    return True


STOP_CANCELLED = "cancelled by /stop"
# What /stop (and a confirmed opt-out button, services/optout.py) answers.
STOPPED_TEXT = (
    "You will get no more messages from me, and the onboarding messages still to come are "
    "cancelled for good. Send /start any time to get news again."
)
STOPPED_ALREADY_TEXT = "You had already stopped messages. Send /start to get them again."


def user_stop(*, user: TelegramUser) -> bool:
    """/stop: no more broadcasts or follow-ups. The user's onboarding steps still to come are
    cancelled for good (skipped, "cancelled by /stop"): a later /start brings broadcasts back but
    never these steps. A step a worker is sending at this very moment may still arrive. Returns
    False if they had already stopped."""
    SequenceMessage.objects.filter(user=user, status=SequenceMessage.Status.PENDING).update(
        status=SequenceMessage.Status.SKIPPED, error=STOP_CANCELLED, lease_until=None
    )
    if user.state == State.STOPPED:
        return False
    user.state = State.STOPPED
    user.save(update_fields=["state"])
    return True


def user_payload_record(*, user: TelegramUser, payload: str) -> bool:
    """A returning user came through campaign `payload`: it becomes their latest payload (the
    first one stays as it was). Returns False, with no query, when it already was."""
    payload = payload[:START_PAYLOAD_LENGTH]
    if not payload or user.last_start_payload == payload:
        return False
    user.last_start_payload = payload
    user.save(update_fields=["last_start_payload"])
    return True


# What "Telegram cannot reach this user" may replace, per state. A user who sent /stop stays stopped
# whatever Telegram says: writing to the bot makes a blocked user active again (user_seen) but never
# a stopped one, so marking them blocked would undo their /stop. A deleted account is never "blocked".
UNREACHABLE_REPLACES = {State.BLOCKED: (State.ACTIVE,), State.DEACTIVATED: (State.ACTIVE, State.BLOCKED)}


def unreachable_state(*, exc: Exception) -> str:
    """The state Telegram's refusal `exc` puts its user in: BLOCKED (they blocked the bot),
    DEACTIVATED (they deleted their account), or "" (nothing is known about the user)."""
    if isinstance(exc, UserBlocked):
        return State.BLOCKED
    if isinstance(exc, UserDeactivated):
        return State.DEACTIVATED
    return ""


def users_mark_unreachable(*, by_pk: Mapping[int, str] | None = None, by_telegram_id: Mapping[int, str] | None = None) -> int:
    """Record that Telegram cannot reach these users, each with the state it said (BLOCKED or
    DEACTIVATED, as `unreachable_state` gives it), keyed by TelegramUser pk or by Telegram id,
    whichever the caller has: nothing is sent to them any more (broadcasts and sequences skip them)
    until they write to the bot again.

    The one place a user becomes blocked or deactivated (runbot's replies and updates, every
    sweep). Only the states in UNREACHABLE_REPLACES change: a stopped user stays stopped. At most
    one UPDATE per state and key, whatever the number of users. Returns the rows changed."""
    keyed = {"pk": by_pk or {}, "telegram_id": by_telegram_id or {}}
    unknown = {s for states in keyed.values() for s in states.values()} - set(UNREACHABLE_REPLACES)
    if unknown:
        raise ValueError(f"not an unreachable state: {sorted(unknown)}")
    changed = 0
    for column, states in keyed.items():
        for state, replaces in UNREACHABLE_REPLACES.items():
            ids = [i for i, s in states.items() if s == state]
            if ids:
                changed += TelegramUser.objects.filter(**{f"{column}__in": ids}, state__in=replaces).update(state=state)
    return changed


def user_block_changed(*, telegram_id: int, blocked: bool) -> int:
    """Telegram said the user blocked (or unblocked) the bot. Blocking marks them unreachable
    (users_mark_unreachable); unblocking makes a blocked user active again. A user who had sent
    /stop stays stopped either way: we send them nothing anyway, and their choice must survive an
    unblock. Returns the rows changed (0 or 1)."""
    if blocked:
        return users_mark_unreachable(by_telegram_id={telegram_id: State.BLOCKED})
    return TelegramUser.objects.filter(telegram_id=telegram_id, state=State.BLOCKED).update(state=State.ACTIVE)


def user_counts() -> dict:
    """Users by state and how many joined today (operator's time zone)."""
    rows = TelegramUser.objects.values("state").annotate(n=Count("id")).order_by()
    by_state = {row["state"]: row["n"] for row in rows}
    return {
        "total": sum(by_state.values()),
        "by_state": {s: by_state.get(s, 0) for s in State.values},
        "new_today": TelegramUser.objects.filter(joined_at__gte=clock.today_start()).count(),
    }


def join_request_record(*, channel_id: int, user_id: int) -> None:
    """The user asked to join a join-request-mode channel: from now on they count as subscribed to
    it. Recorded once however often Telegram says so."""
    ChannelJoinRequest.objects.get_or_create(channel_id=channel_id, user_id=user_id)


def users_verification_reset(*, user_ids: list[int]) -> int:
    """Forget these users' verification: with verification on, their next file asks them to
    verify again. Returns how many were verified."""
    return TelegramUser.objects.filter(pk__in=user_ids, verified_until__isnull=False).update(verified_until=None)
