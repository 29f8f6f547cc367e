"""Owner-only mode: while Bot settings' `allow_list_enabled` is on, the bot answers only admins and
the users on the allow-list (AllowedUser); everyone else gets `allow_list_text`.

Guarantees: the list is kept in PostgreSQL, by Telegram id (a user may be added before they ever
write); adding an id twice keeps one row; switching the mode on or off changes no stored data (the
list, users, files and plans stay as they are); each change is in the audit trail. Bad input (not
a Telegram user id) is named, and nothing of it is stored.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable

from django.db import transaction

from botapp.models import AllowedUser, BotSettings
from botapp.services.audit import audit_current, audit_record
from botapp.telegram.limits import USER_ID_MAX

CSV_ROWS_MAX = 100_000


def allow_list_blocks(*, user_id: int, conf: BotSettings, admin_ids: frozenset[int]) -> bool:
    """Whether owner-only mode keeps `user_id` out: it is on, they are no admin and not listed."""
    if not conf.allow_list_enabled or user_id in admin_ids:
        return False
    return not AllowedUser.objects.filter(telegram_id=user_id).exists()


def telegram_id_parse(*, text: str) -> int:
    """A Telegram user id from `text`, or ValueError saying what is wrong."""
    try:
        value = int(text.strip())
    except ValueError:
        raise ValueError(f"{text.strip()[:40]!r} is not a Telegram user id (a number, e.g. 123456789).") from None
    if not 0 < value <= USER_ID_MAX:
        raise ValueError(f"{value} is not a Telegram user id (from 1 to {USER_ID_MAX}).")
    return value


def allow_list_add(*, telegram_ids: Iterable[int], note: str = "") -> int:
    """Put the ids on the allow-list (those already on it are left as they are). Returns how many
    were added."""
    ids = sorted(set(telegram_ids))
    context = audit_current()
    actor = context.who()[0] if context is not None else ""
    with transaction.atomic():
        have = set(AllowedUser.objects.filter(telegram_id__in=ids).values_list("telegram_id", flat=True))
        new = [AllowedUser(telegram_id=i, note=note[:255], added_by=actor[:64]) for i in ids if i not in have]
        AllowedUser.objects.bulk_create(new, ignore_conflicts=True)
        if new:
            shown = ", ".join(str(u.telegram_id) for u in new[:20]) + (f" and {len(new) - 20} more" if len(new) > 20 else "")
            audit_record(action="allowlist.add", detail=shown)
    return len(new)


def allow_list_remove(*, telegram_ids: Iterable[int]) -> int:
    """Take the ids off the allow-list. Returns how many were on it."""
    ids = sorted(set(telegram_ids))
    with transaction.atomic():
        removed, _ = AllowedUser.objects.filter(telegram_id__in=ids).delete()
        if removed:
            audit_record(action="allowlist.remove", detail=", ".join(map(str, ids[:20])))
    return removed


def allow_list_csv_read(*, data: bytes) -> list[int]:
    """The Telegram ids of a CSV file: the first column of each row (a header row whose first
    cell is not a number is skipped; empty rows too). Raises ValueError naming every bad row (at
    most ten), so nothing is added from a file with a mistake in it."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError("The file is not UTF-8 text: save it as CSV (UTF-8).") from None
    ids, problems = [], []
    for number, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        cell = row[0].strip() if row else ""
        if not cell:
            continue
        if number == 1 and not cell.lstrip("-").isdigit():
            continue  # a header
        try:
            ids.append(telegram_id_parse(text=cell))
        except ValueError as exc:
            problems.append(f"row {number}: {exc}")
        if number > CSV_ROWS_MAX:
            raise ValueError(f"The file has more than {CSV_ROWS_MAX:,} rows: split it.")
    if problems:
        more = f" (and {len(problems) - 10} more)" if len(problems) > 10 else ""
        raise ValueError("; ".join(problems[:10]) + more)
    if not ids:
        raise ValueError("The file has no Telegram user ids (one per row, in the first column).")
    return ids
