"""The actions on a broadcast's page, each after a confirmation (a GET shows, a POST acts): Send
a test, Start sending…, Resume…, Cancel… and Duplicate as draft. Each applies to some statuses
only (ACTION_STATUSES): its button shows only then, and a stale tab's request in another status gets
a page saying why, with the way back (409), not a bare 403. Writes go through
botapp/services/broadcasts.py."""

from collections.abc import Callable
from typing import TypeVar

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.utils import timezone
from unfold.decorators import action
from unfold.enums import ActionVariant

from botapp import clock
from botapp.config import admin_ids_load
from botapp.models import Broadcast, BroadcastDelivery
from botapp.services.broadcasts import (
    broadcast_cancel,
    broadcast_duplicate,
    broadcast_recipients_text,
    broadcast_resume,
    broadcast_start,
    broadcast_test_request,
)
from botapp.services.health import broker_problem, processes_state

ACTIVE = (Broadcast.Status.QUEUED, Broadcast.Status.SENDING)
# The statuses each action of the page applies to: its button shows only then, and a stale tab's
# request in another status gets a page saying why (409), not a bare 403.
ACTION_STATUSES = {
    "start_sending": ((Broadcast.Status.DRAFT,), "only a draft can be started (Duplicate as draft makes one)"),
    "cancel_sending": (
        (Broadcast.Status.SCHEDULED, Broadcast.Status.PAUSED, *ACTIVE),
        "only a broadcast scheduled, being sent or paused can be cancelled",
    ),
    "resume_sending": ((Broadcast.Status.PAUSED,), "only a paused broadcast can be resumed"),
}
T = TypeVar("T")


def _unprepared(broadcast: Broadcast) -> str:
    """What a cancel leaves out beyond the rows made: while a worker still prepares the
    recipients, the rest of the audience too (its size, once the worker has counted it)."""
    if broadcast.prepare_after is None:
        return ""
    if broadcast.audience_size is None:
        return ", nor will the rest of the audience (not prepared yet)"
    return f", nor will the {max(0, broadcast.audience_size - broadcast.total):,} users not prepared yet"


def queue_warning() -> str:
    """Why what an action queues would not go at once (the task queue unreachable, no worker
    running), said before the operator confirms; empty when a worker takes it now."""
    if problem := broker_problem():
        return problem
    worker = processes_state()["worker"]
    if not worker.ok and not worker.unknown:
        return "No worker is running: nothing queued goes until one starts (celery -A config worker; the jobs page shows the processes)."
    return ""


class BroadcastActions:
    """The page's actions, for BroadcastAdmin (django-unfold's `actions_detail`)."""

    def get_actions_detail(self, request, object_id):
        """The page's actions that apply to the broadcast's status (ACTION_STATUSES)."""
        status = (
            Broadcast.objects.filter(pk=object_id).values_list("status", flat=True).first() if str(object_id).isdigit() else None
        )
        return [
            a
            for a in super().get_actions_detail(request, object_id)
            if a.method.__name__ not in ACTION_STATUSES or status in ACTION_STATUSES[a.method.__name__][0]
        ]

    # --- the actions on the page (each asks for confirmation: a GET shows, a POST acts) ---

    def _broadcast(self, object_id) -> Broadcast:
        if not str(object_id).isdigit():  # the action URLs take any path: /1/change/start/ is no broadcast
            raise Http404("No such broadcast.")
        return get_object_or_404(Broadcast, pk=object_id)

    def _back(self, broadcast):
        return redirect("admin:botapp_broadcast_change", broadcast.pk)

    def _not_possible(self, request, broadcast, action_name: str):
        """None when `action_name` applies to the broadcast's status; else a page saying why (a
        stale tab: the broadcast moved on since the page was loaded), with a way back (409)."""
        statuses, rule = ACTION_STATUSES[action_name]
        if broadcast.status in statuses:
            return None
        since = f" (finished {timezone.localtime(broadcast.finished_at):%Y-%m-%d %H:%M})" if broadcast.finished_at else ""
        response = self._confirm(
            request,
            broadcast,
            title=f"“{broadcast.title}” is {broadcast.get_status_display().lower()} now",
            lines=[
                f"It is {broadcast.get_status_display().lower()}{since}: {rule}.",
                "The page you came from was older than that; its own page shows where it is now.",
            ],
            button="",
        )
        response.status_code = 409
        return response

    def _confirm(self, request, broadcast, *, title, lines, button, danger=False, warning=""):
        return TemplateResponse(
            request,
            "admin/botapp/broadcast_confirm.html",
            {
                **self.admin_site.each_context(request),
                "opts": self.model._meta,
                "title": title,
                "b": broadcast,
                "lines": lines,
                "button": button,
                "danger": danger,
                "warning": warning,
            },
        )

    def _act(self, request, broadcast, act: Callable[[], T], done: Callable[[T], None]):
        """The POST of an action: `act()` calls the service; its refusal (ValidationError) is shown
        as an error, otherwise `done(what act returned)` tells the operator what happened. Then
        back to the broadcast's page."""
        try:
            result = act()
        except ValidationError as exc:
            self.message_user(request, exc.messages[0], messages.ERROR)
        else:
            done(result)
        return self._back(broadcast)

    def has_send_test_permission(self, request, object_id=None):
        return self.has_change_permission(request)

    # Whether the operator may; whether the broadcast's status allows it is ACTION_STATUSES.
    def has_start_permission(self, request, object_id=None):
        return self.has_change_permission(request)

    def has_cancel_permission(self, request, object_id=None):
        return self.has_change_permission(request)

    def has_resume_permission(self, request, object_id=None):
        return self.has_change_permission(request)

    def has_duplicate_permission(self, request, object_id=None):
        return self.has_add_permission(request)

    @action(description="Send a test", url_path="send-test", icon="science", permissions=["send_test"])
    def send_test(self, request, object_id):
        broadcast = self._broadcast(object_id)
        admins = sorted(admin_ids_load())
        if request.method != "POST":
            return self._confirm(
                request,
                broadcast,
                title=f"Send a test of “{broadcast.title}”",
                lines=[
                    f"A worker sends it to the {len(admins)} admin(s) in ADMIN_IDS ({', '.join(map(str, admins)) or 'none set'}), "
                    "exactly as users would get it; tracked buttons are not tracked.",
                    "Each admin's result shows on the broadcast's page.",
                ],
                button="Send the test",
                warning=queue_warning(),
            )
        return self._act(
            request,
            broadcast,
            lambda: broadcast_test_request(broadcast=broadcast, admin_count=len(admins)),
            lambda _: self._test_queued(request, len(admins)),
        )

    def _test_queued(self, request, admins: int) -> None:
        if warning := queue_warning():
            self.message_user(request, f"The test to {admins} admin(s) waits: {warning}", messages.WARNING)
        else:
            self.message_user(request, f"A test is on its way to {admins} admin(s); their results appear below.")

    @action(description="Start sending…", url_path="start", icon="send", variant=ActionVariant.PRIMARY, permissions=["start"])
    def start_sending(self, request, object_id):
        broadcast = self._broadcast(object_id)
        if refused := self._not_possible(request, broadcast, "start_sending"):
            return refused
        later = bool(broadcast.scheduled_at and broadcast.scheduled_at > clock.now())
        if request.method != "POST":
            # Counted for the confirmation only: the start itself answers at once (at millions of
            # users, this count was most of the POST's time; docs/benchmarks.md).
            audience, who = broadcast_recipients_text(broadcast=broadcast)
            if later:
                when = f"{timezone.localtime(broadcast.scheduled_at):%Y-%m-%d %H:%M %Z}"
                # Listed users are fixed; the others are whoever is active when it starts.
                then = who if broadcast.audience == Broadcast.Audience.USERS else f"those active at that time ({who} now)"
                lines = [f"It is scheduled for {when}: it goes then to {then}."]
            else:
                lines = [f"It goes now to {who}."]
            if broadcast.delete_after_minutes:
                lines.append(f"Each copy is deleted {broadcast.delete_after_minutes} minutes after it is sent.")
            lines.append("Once started, the message can no longer be edited.")
            return self._confirm(
                request,
                broadcast,
                title=f"Start sending “{broadcast.title}”?",
                lines=lines,
                button="Schedule it" if later else f"Send to {audience:,} user{'s' if audience != 1 else ''}",
                warning=broker_problem() if later else queue_warning(),
            )
        return self._act(
            request,
            broadcast,
            lambda: broadcast_start(broadcast=broadcast),
            lambda total: self._started(request, broadcast, total),
        )

    def _started(self, request, broadcast: Broadcast, total: int) -> None:
        """What Start sending… tells the operator once `total` deliveries are queued (or scheduled)."""
        users = f"{total:,} users"
        if broadcast.prepare_after is not None:  # too many to queue at once: a worker makes the rest
            users = f"the first {total:,} users (a worker is preparing the rest)"
        if broadcast.status == Broadcast.Status.SCHEDULED:
            self.message_user(request, f"Scheduled for {timezone.localtime(broadcast.scheduled_at):%Y-%m-%d %H:%M %Z}.")
        elif problem := broker_problem():
            self.message_user(
                request,
                f"Not sending yet: {problem} The deliveries to {users} are saved; "
                "sending starts within a minute of the task queue coming back.",
                messages.WARNING,
            )
        elif (worker := processes_state()["worker"]) and not worker.ok and not worker.unknown:
            self.message_user(
                request,
                f"Queued for {users}, but no worker is running: sending starts when one does "
                "(celery -A config worker; the jobs page shows the processes).",
                messages.WARNING,
            )
        else:
            self.message_user(request, f"Sending to {users}: progress below updates by itself.")

    @action(description="Resume…", url_path="resume", icon="play_arrow", variant=ActionVariant.PRIMARY, permissions=["resume"])
    def resume_sending(self, request, object_id):
        broadcast = self._broadcast(object_id)
        if refused := self._not_possible(request, broadcast, "resume_sending"):
            return refused
        if request.method != "POST":
            pending = broadcast.deliveries.filter(status=BroadcastDelivery.Status.PENDING).count()
            return self._confirm(
                request,
                broadcast,
                title=f"Resume “{broadcast.title}”?",
                lines=[broadcast.paused_reason, f"{pending:,} users have not got it yet; sending to them starts again."],
                button="Resume sending",
            )
        return self._act(
            request,
            broadcast,
            lambda: broadcast_resume(broadcast=broadcast),
            lambda left: self.message_user(request, f"Resumed: sending to the {left:,} users left."),
        )

    @action(description="Cancel…", url_path="cancel", icon="cancel", permissions=["cancel"])
    def cancel_sending(self, request, object_id):
        broadcast = self._broadcast(object_id)
        if refused := self._not_possible(request, broadcast, "cancel_sending"):
            return refused
        if request.method != "POST":
            pending = broadcast.deliveries.filter(status=BroadcastDelivery.Status.PENDING).count()
            return self._confirm(
                request,
                broadcast,
                title=f"Cancel “{broadcast.title}”?",
                lines=[
                    f"{pending:,} users have not got it yet and will not get it{_unprepared(broadcast)}.",
                    "Messages already sent stay (and are still deleted at the end of their lifetime).",
                ],
                button="Cancel sending",
                danger=True,
            )
        return self._act(
            request,
            broadcast,
            lambda: broadcast_cancel(broadcast=broadcast),
            lambda left: self.message_user(
                request, f"Cancelled; {left:,} users will not get it{_unprepared(broadcast)}.", messages.WARNING
            ),
        )

    @action(description="Duplicate as draft", url_path="duplicate", icon="content_copy", permissions=["duplicate"])
    def duplicate(self, request, object_id):
        broadcast = self._broadcast(object_id)
        if request.method != "POST":
            return self._confirm(
                request,
                broadcast,
                title=f"Duplicate “{broadcast.title}” as a new draft?",
                lines=[
                    "The copy has the same text, media, files, buttons, options and recipients; "
                    "nothing is sent until you start it."
                ],
                button="Create the draft",
            )
        copy = broadcast_duplicate(broadcast=broadcast)
        self.message_user(request, f"“{copy.title}” is a new draft: edit it, test it, then start it.")
        return redirect("admin:botapp_broadcast_change", copy.pk)
