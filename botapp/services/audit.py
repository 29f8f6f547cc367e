"""The audit trail: who did what to what, when, and from where, for every operator action that
changes what users get (starting, cancelling, resuming and deleting broadcasts, scheduled
messages, settings, bans, premium, API tokens, imports).

The services that do those things call `audit_record` themselves, so the console, the HTTP API and
the bot's admin commands are all covered by the one call. Who and where come from the context the
caller runs in (`audit_context`): the web process sets it per request (botapp/middleware.py: the signed-in
operator or the API client, and the client's address), the bot per admin command
(telegram:<id>). Anything else, a management command such as an import, is recorded as the OS
user running it.

Rows are kept as long as job runs (JOB_RUN_RETENTION_DAYS): prune_job_runs deletes both.
"""

from __future__ import annotations

import contextlib
import functools
import getpass
import ipaddress
import os
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime

from botapp import clock
from botapp.models import AuditEntry


@dataclass
class AuditContext:
    """Who acts, through what and from where. `actor` may be a callable, asked at each record:
    the web sets the context before authentication has run (the API's client is known only then)."""

    actor: str | Callable[[], tuple[str, str]]  # a name, or a callable giving (name, via)
    via: str = AuditEntry.Via.COMMAND
    address: str | None = None
    recorded: list[int] = field(default_factory=list)  # entries written under this context

    def who(self) -> tuple[str, str]:
        return self.actor() if callable(self.actor) else (self.actor, self.via)


_context: ContextVar[AuditContext | None] = ContextVar("audit_context", default=None)


@contextlib.contextmanager
def audit_context(*, context: AuditContext) -> Iterator[AuditContext]:
    """Run the block as `context`'s actor: every audit_record inside it names them."""
    token = _context.set(context)
    try:
        yield context
    finally:
        _context.reset(token)


def audit_current() -> AuditContext | None:
    """The context the caller runs in (None outside a request or a bot command)."""
    return _context.get()


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container's user)
        return f"uid {os.getuid()}"


def _address(text: str | None) -> str | None:
    """An address the column can hold, or None (a forged X-Forwarded-For may hold anything)."""
    try:
        return str(ipaddress.ip_address((text or "").strip()))
    except ValueError:
        return None


def audit_record(*, action: str, target: object = "", detail: str = "") -> AuditEntry:
    """Record one operator action now, as the current context's actor (the OS user outside any).
    `target` is what it was done to (a model instance reads as its kind, id and name)."""
    context = _context.get()
    if context is None:
        actor, via, address = _os_user(), AuditEntry.Via.COMMAND, None
    else:
        (actor, via), address = context.who(), _address(context.address)
    if hasattr(target, "_meta") and hasattr(target, "pk"):
        target = f"{target._meta.verbose_name} {target.pk}: {target}"
    entry = AuditEntry.objects.create(
        at=clock.now(),
        actor=actor[:150],
        via=via,
        address=address,
        action=action[:64],
        target=str(target)[:255],
        detail=detail,
    )
    if context is not None:
        context.recorded.append(entry.pk)
    return entry


def audited(*, action: str) -> Callable:
    """Decorate an import service: its run is recorded (with its report's summary) unless it was a
    dry run."""

    def decorate(func: Callable) -> Callable:
        @functools.wraps(func)
        def run(*args, **kwargs):
            report = func(*args, **kwargs)
            if not kwargs.get("dry_run", False):
                summary = getattr(report, "summary", None)
                detail = summary() if callable(summary) else "\n".join(getattr(report, "lines", []))
                audit_record(action=action, detail=detail)
            return report

        return run

    return decorate


def audit_prune(*, before: datetime) -> int:
    """Delete the entries recorded before `before`; how many."""
    deleted, _ = AuditEntry.objects.filter(at__lt=before).delete()
    return deleted
