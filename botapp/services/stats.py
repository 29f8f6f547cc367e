"""Day totals for /stats: deliveries, verifications, bypasses (operator's calendar day)."""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.db.models import F

from botapp import clock
from botapp.models import DailyStat

FIELDS = ("deliveries", "verifications", "bypasses")


def stat_increment(field: str, by: int = 1) -> None:
    """Add to today's total; one UPDATE (plus one INSERT the first time each day)."""
    if field not in FIELDS:
        raise ValueError(field)
    today = clock.today()
    if DailyStat.objects.filter(date=today).update(**{field: F(field) + by}):
        return
    try:
        with transaction.atomic():
            DailyStat.objects.create(date=today, **{field: by})
    except IntegrityError:  # another process created today's row first
        DailyStat.objects.filter(date=today).update(**{field: F(field) + by})


def stat_today() -> dict[str, int]:
    row = DailyStat.objects.filter(date=clock.today()).values(*FIELDS).first()
    return row or dict.fromkeys(FIELDS, 0)
