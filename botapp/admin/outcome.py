"""A broadcast's outcome as the console shows it on its page, in the list and on the dashboard:
one bar coloured by outcome (sent, failed, blocked, skipped, interrupted, not users), each count a
link to those deliveries, and, when sends failed, why in one line (their most common error)."""

from dataclasses import dataclass
from urllib.parse import urlencode

from django.urls import reverse
from django.utils.html import format_html

from botapp.models import Broadcast
from botapp.services.outcomes import broadcast_error_common

# A sent delivery stays counted as sent after its lifetime deletion (deleted) or when that came
# too late (expired): its link lists all three.
SENT_STATUSES = "sent,deleted,expired"


@dataclass(frozen=True)
class Outcome:
    field: str  # the counter on Broadcast
    statuses: str  # the deliveries' status(es) it counts, for the link
    label: str
    colour: str  # its part of the bar; its counts' text takes courier/console.css's .outcome-<field>, readable light and dark
    bad: bool  # a user did not get it


OUTCOMES = (
    Outcome("sent", SENT_STATUSES, "sent", "#16a34a", False),
    Outcome("failed", "failed", "failed", "#dc2626", True),
    Outcome("blocked", "blocked", "blocked", "#d97706", True),
    Outcome("skipped", "skipped", "skipped", "#94a3b8", False),
    Outcome("interrupted", "interrupted", "interrupted", "#9333ea", True),
    Outcome("not_users", "not_user", "not users", "#475569", True),
)


def deliveries_url(broadcast_id: int, statuses: str) -> str:
    """The broadcast's deliveries with those statuses (comma-separated), in the console."""
    query = {"broadcast__id__exact": broadcast_id}
    query["status__in" if "," in statuses else "status__exact"] = statuses
    return f"{reverse('admin:botapp_broadcastdelivery_changelist')}?{urlencode(query)}"


def broadcast_outcome(b: Broadcast, *, why: bool = True) -> dict:
    """What the templates show: `segments` (each outcome with its count, share of the total, colour
    and link), `delivered` ("3 of 5 delivered"), `bad` (some users did not get it) and `why` (the
    most common error of its failed sends and how many had it, when any failed)."""
    segments = []
    for o in OUTCOMES:
        n = getattr(b, o.field)
        share = 100 * n / b.total if b.total else 0
        segments.append({"o": o, "n": n, "width": f"{share:.3f}", "url": deliveries_url(b.pk, o.statuses)})
    common = broadcast_error_common(broadcast_id=b.pk) if why and b.failed else None
    return {
        "segments": segments,
        "delivered": f"{b.sent:,} of {b.total:,} delivered",
        "bad": any(s["n"] for s in segments if s["o"].bad),
        "why": {"error": common[0], "n": common[1]} if common else None,
    }


def outcome_count_html(b: Broadcast, field: str):
    """One count for the list: a link to those deliveries (red when users did not get it), or —."""
    o = next(o for o in OUTCOMES if o.field == field)
    n = getattr(b, field)
    if not n:
        return "—"
    style = "font-weight: 600;" if o.bad else ""
    return format_html(
        '<a href="{}" class="outcome-text outcome-{}" style="{}">{}</a>', deliveries_url(b.pk, o.statuses), field, style, f"{n:,}"
    )
