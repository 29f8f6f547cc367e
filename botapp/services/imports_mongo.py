"""A file-store bot's MongoDB (shared/seeds/000 and 001), from `mongoexport` files (JSON lines or
`--jsonArray`, extended JSON: {"$oid"}, {"$date"}, {"$numberLong"}): what its four schedulers would
still have done, done by Courier's own rows and sweeps. `users` is read by imports.py; this module
reads the other collections, for users Courier has:

- `tokens` {user_id, status, expires_at}: a `verified` token not yet expired keeps its user
  verified until then (`verified_until`); others (pending, bypassed, expired) carry nothing;
- `token_generator_count` {user_id, token_generated, date}: today's counts become the day's
  DailyTokenCount (older days were reset at midnight: nothing to carry);
- `pending_deletions` {user_id, chat_id, message_ids, delete_at, unique_id}: a PendingDeletion each,
  deleted when due by the message deleter, with the "deleted" notice (its *Get files again* button
  when unique_id is a stored file's share id);
- `broadcasts` {delete_at, and who got which message: `message_ids` {user id: message id},
  `messages` [{user_id|chat_id, message_id}], or one record per user with `chat_id`/`user_id` and
  `message_id`}: a finished Broadcast whose deliveries the broadcast deleter removes when due.

Each collection is written in one transaction; a rerun finds what it wrote (deletions by chat and
ids, broadcasts by title) and writes nothing again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date

from django.db import transaction

from botapp import clock
from botapp.models import Broadcast, BroadcastDelivery, DailyTokenCount, PendingDeletion, StoredFile, TelegramUser
from botapp.services.audit import audited
from botapp.services.import_files import Unreadable
from botapp.services.imports import Invalid, moment_parse, user_id_parse
from botapp.signals import work_scheduled_announce

COLLECTIONS = ("users", "tokens", "token_generator_count", "pending_deletions", "broadcasts")
USER_FIELDS = ("user_id", "chat_id", "telegram_id", "id")


@dataclass
class MongoReport:
    collection: str
    read: int = 0
    carried: int = 0  # what was written (or, dry run, would be)
    known: int = 0  # already in Courier: left as it is
    nothing: int = 0  # nothing to carry (expired, used, another day)
    invalid: list[tuple[str, str]] = field(default_factory=list)
    repeated: list[tuple[str, str]] = field(default_factory=list)
    REPEATED = "the same as"

    def summary(self) -> str:
        what = {
            "tokens": "users kept verified",
            "token_generator_count": "today's counts",
            "pending_deletions": "deletions scheduled",
            "broadcasts": "broadcast messages to delete",
        }[self.collection]
        return (
            f"{self.collection}: {self.read} read: {self.carried} {what}, {self.known} already known, "
            f"{self.nothing} with nothing to carry, {len(self.invalid)} invalid"
        )


def _record(value) -> dict:
    if isinstance(value, Unreadable):
        raise Invalid(value.reason)
    if not isinstance(value, dict):
        raise Invalid(f"{value!r} is not a document (an object)")
    return {str(k).lower(): v for k, v in value.items()}


def _user(doc: dict, fields=USER_FIELDS) -> int:
    for name in fields:
        if doc.get(name) not in (None, ""):
            return user_id_parse(value=doc[name])
    raise Invalid(f"no user ({' or '.join(fields)})")


def _number(value, what: str) -> int:
    value = value.get("$numberLong", value.get("$numberInt")) if isinstance(value, dict) else value
    if isinstance(value, bool) or not str(value).strip().isdigit() or int(str(value)) <= 0:
        raise Invalid(f"{what} {value!r} is not a message id")
    return int(str(value))


def _moment(doc: dict, name: str):
    """The document's time `name` (any date form exports use), which it must have."""
    if doc.get(name) in (None, ""):
        raise Invalid(f"no {name}")
    return moment_parse(value=doc[name], now=None)


def _pks(ids) -> dict[int, int]:
    return dict(TelegramUser.objects.filter(telegram_id__in=set(ids)).values_list("telegram_id", "pk"))


@audited(action="import.mongo_tokens")
def mongo_tokens_import(*, records, dry_run: bool = False) -> MongoReport:
    """Keep each user with a verified, unexpired token verified until its expiry (never shorter
    than Courier already has them verified)."""
    report, now, until = MongoReport("tokens"), clock.now(), {}
    for where, value in records:
        report.read += 1
        try:
            doc = _record(value)
            user = _user(doc)
            expires = _moment(doc, "expires_at")
        except Invalid as exc:
            report.invalid.append((where, str(exc)))
            continue
        if str(doc.get("status", "")).lower() != "verified" or expires <= now:
            report.nothing += 1
            continue
        until[user] = max(expires, until.get(user, expires)), where
    with transaction.atomic():
        current = dict(TelegramUser.objects.filter(telegram_id__in=until).values_list("telegram_id", "verified_until"))
        for user, (expires, where) in until.items():
            if user not in current:
                report.invalid.append((where, f"user {user} is not among the imported users"))
            elif current[user] is not None and current[user] >= expires:
                report.known += 1
            else:
                report.carried += 1
                if not dry_run:
                    TelegramUser.objects.filter(telegram_id=user).update(verified_until=expires)
    return report


@audited(action="import.mongo_token_counts")
def mongo_token_counts_import(*, records, today: date, dry_run: bool = False) -> MongoReport:
    """Today's token counts (`today`: the operator's date) as DailyTokenCount; a count Courier has
    is kept when higher."""
    report, counts = MongoReport("token_generator_count"), {}
    for where, value in records:
        report.read += 1
        try:
            doc = _record(value)
            user = _user(doc)
            day = date.fromisoformat(str(doc.get("date", "")).strip()[:10])
            count = int(str(doc.get("token_generated", "")).strip())
        except ValueError as exc:
            report.invalid.append((where, str(exc) if isinstance(exc, Invalid) else f"date or token_generated: {exc}"))
            continue
        if day != today:
            report.nothing += 1
            continue
        counts[user] = (max(count, counts.get(user, (0,))[0]), where)
    with transaction.atomic():
        pks = _pks(counts)
        have = dict(DailyTokenCount.objects.filter(user_id__in=pks.values(), date=today).values_list("user_id", "count"))
        for user, (count, where) in counts.items():
            pk = pks.get(user)
            if pk is None:
                report.invalid.append((where, f"user {user} is not among the imported users"))
            elif have.get(pk, -1) >= count:
                report.known += 1
            else:
                report.carried += 1
                if not dry_run:
                    DailyTokenCount.objects.update_or_create(user_id=pk, date=today, defaults={"count": count})
    return report


@audited(action="import.mongo_deletions")
def mongo_deletions_import(*, records, dry_run: bool = False) -> MongoReport:
    """A PendingDeletion for each pending deletion, due at its delete_at (one already due is due
    now): the message deleter deletes the messages and sends the "deleted" notice."""
    report, now, rows = MongoReport("pending_deletions"), clock.now(), []
    for where, value in records:
        report.read += 1
        try:
            doc = _record(value)
            chat = _user(doc, ("chat_id", "user_id"))
            ids = doc.get("message_ids")
            if not isinstance(ids, list) or not ids:
                raise Invalid("message_ids: not a list of message ids")
            ids = [_number(i, "message_ids:") for i in ids]
            due = _moment(doc, "delete_at")
        except Invalid as exc:
            report.invalid.append((where, str(exc)))
            continue
        rows.append((where, chat, ids, max(due, now), str(doc.get("unique_id") or "")))
    with transaction.atomic():
        known = {
            (c, tuple(m))
            for c, m in PendingDeletion.objects.filter(chat_id__in={r[1] for r in rows}).values_list("chat_id", "message_ids")
        }
        files = set(StoredFile.objects.filter(share_id__in={r[4] for r in rows if r[4]}).values_list("share_id", flat=True))
        fresh = []
        for _where, chat, ids, due, unique in rows:
            if (chat, tuple(ids)) in known:
                report.known += 1
                continue
            known.add((chat, tuple(ids)))
            report.carried += 1
            fresh.append(
                PendingDeletion(chat_id=chat, message_ids=ids, delete_at=due, share_id=unique if unique in files else "")
            )
        if fresh and not dry_run:
            PendingDeletion.objects.bulk_create(fresh)
            work_scheduled_announce(work="deletion", due_at=min(r.delete_at for r in fresh))
    return report


def _broadcast_messages(doc: dict) -> list[tuple[int, int]]:
    """(user, message id) of each message a broadcast document names, in the shapes listed above."""
    if isinstance(doc.get("message_ids"), dict):
        return [(user_id_parse(value=k), _number(v, "message_ids:")) for k, v in doc["message_ids"].items()]
    if isinstance(doc.get("messages"), list):
        return [(_user(_record(m)), _number(_record(m).get("message_id"), "message_id")) for m in doc["messages"]]
    if "message_id" in doc:
        return [(_user(doc), _number(doc["message_id"], "message_id"))]
    raise Invalid("no message_ids, messages or message_id: which message each user got")


@audited(action="import.mongo_broadcasts")
def mongo_broadcasts_import(*, records, dry_run: bool = False) -> MongoReport:
    """Each broadcast with a deletion time becomes a finished Broadcast ("moved in: broadcasts
    <id>") whose sent deliveries carry it as delete_at: the broadcast deleter removes the messages
    when due. One with no deletion time has nothing to carry."""
    report, now = MongoReport("broadcasts"), clock.now()
    for where, value in records:
        report.read += 1
        try:
            doc = _record(value)
            if doc.get("delete_at") in (None, ""):
                report.nothing += 1
                continue
            due = moment_parse(value=doc["delete_at"], now=None)
            sent = moment_parse(value=doc.get("created_at") or doc.get("date") or now, now=None)
            messages = _broadcast_messages(doc)
        except Invalid as exc:
            report.invalid.append((where, str(exc)))
            continue
        oid = doc.get("_id")
        oid = oid.get("$oid", oid) if isinstance(oid, dict) else oid
        title = f"moved in: broadcasts {oid if oid not in (None, '') else where}"[:255]
        with transaction.atomic():
            if Broadcast.objects.filter(title=title).exists():
                report.known += len(messages)
                continue
            pks = _pks(u for u, _ in messages)
            missing = sorted({u for u, _ in messages if u not in pks})
            if missing:
                report.invalid.append((where, f"user {missing[0]} is not among the imported users ({len(missing)} such)"))
            kept = [(u, m) for u, m in messages if u in pks]
            report.carried += len(kept)
            if dry_run or not kept:
                continue
            broadcast = Broadcast.objects.create(
                title=title, text=str(doc.get("text") or doc.get("message") or "(sent by the bot moved from)"),
                status=Broadcast.Status.DONE, recipient_ids=[], total=len(kept), sent=len(kept),
                started_at=sent, finished_at=sent,
            )  # fmt: skip
            BroadcastDelivery.objects.bulk_create(
                BroadcastDelivery(
                    broadcast=broadcast, user_id=pks[u], chat_id=u, message_id=m, status=BroadcastDelivery.Status.SENT,
                    sent_at=sent, delete_at=due,
                )
                for u, m in kept
            )  # fmt: skip
    return report
