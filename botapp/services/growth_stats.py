"""Day totals of the growth events for /stats and the dashboard: verifications by step, bypasses,
bans, referrals (counted, held), redemptions, and fair-use limit hits (a user told they are over a
limit: botapp/services/fair_use.py, at most once a window each).

A count is an upsert of (day, kind) in the transaction of the event it counts, so it is counted
exactly when the event commits, in PostgreSQL (no restart loses it). These events come once per
verification, referral or redemption, not once per delivery: a row shared by a day's events is not
a queue worth avoiding here (deliveries are counted apart, services/stats.py).
"""

from __future__ import annotations

from datetime import date, timedelta

from django.db import connection

from botapp import clock
from botapp.models import GrowthCount

KINDS = ("verify1", "verify2", "verify3", "bypass", "ban", "referral", "referral_held", "redeem", "limit_hit")
LABELS = {
    "verify1": "1st verifications",
    "verify2": "2nd verifications",
    "verify3": "3rd verifications",
    "bypass": "bypasses",
    "ban": "bans",
    "referral": "referrals counted",
    "referral_held": "referrals held",
    "redeem": "codes redeemed",
    "limit_hit": "limit hits",
}


def limit_hits_by_day(*, days: list[date]) -> dict[date, int]:
    """The fair-use limit hits on `days` (users told they were over a limit)."""
    rows = GrowthCount.objects.filter(kind="limit_hit", day__in=days).values_list("day", "count")
    return {day: count for day, count in rows}


def growth_count(*, kind: str, by: int = 1) -> None:
    """Add `by` to today's `kind` (one of KINDS, or a ValueError): one upsert, in the caller's transaction."""
    if kind not in KINDS:
        raise ValueError(kind)
    quote, meta = connection.ops.quote_name, GrowthCount._meta
    table = quote(meta.db_table)
    sql = (
        f"INSERT INTO {table} (day, kind, count) VALUES (%s, %s, %s) "
        f"ON CONFLICT (day, kind) DO UPDATE SET count = {table}.count + EXCLUDED.count"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [connection.ops.adapt_datefield_value(clock.today()), kind, by])


def growth_counts(*, days: int = 1) -> dict[date, dict[str, int]]:
    """The last `days` days (today included), each with a count per kind (0 when none)."""
    today = clock.today()
    span = [today - timedelta(days=n) for n in range(days - 1, -1, -1)]
    counts = {d: dict.fromkeys(KINDS, 0) for d in span}
    for row in GrowthCount.objects.filter(day__gte=span[0], day__lte=today):
        if row.kind in KINDS:
            counts[row.day][row.kind] = row.count
    return counts


def growth_today_text() -> str:
    """/stats' lines for today: verifications by step, referrals, redemptions (and limit hits, when known)."""
    today = clock.today()
    c = growth_counts(days=1)[today]
    lines = [
        f"<b>Verifications by step</b>: 1st {c['verify1']}, 2nd {c['verify2']}, 3rd {c['verify3']} "
        f"({c['bypass']} bypasses, {c['ban']} bans)",
        f"<b>Referrals</b>: {c['referral']} counted, {c['referral_held']} held for review",
        f"<b>Codes redeemed</b>: {c['redeem']}",
    ]
    lines.append(f"<b>Limit hits</b>: {c['limit_hit']} (users told they were over a fair-use limit)")
    return "\n".join(lines)


def growth_dashboard(*, days: int = 7) -> dict:
    """The dashboard's growth cards: today's counts and the last `days` days' totals per kind, the
    limit hits among them."""
    counts = growth_counts(days=days)
    today = clock.today()
    week = {kind: sum(day[kind] for day in counts.values()) for kind in KINDS}
    return {
        "today": counts[today],
        "week": week,
        "days": days,
        "limit_hits": {"today": counts[today]["limit_hit"], "week": week["limit_hit"]},
    }
