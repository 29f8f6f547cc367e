"""API clients and their tokens: made once and shown once, kept only as a SHA-256 hash.

A token is 256 random bits (URL-safe base64, prefixed `courier_`); a SHA-256 of it is all the
database holds (a token is random, so a slow password hash would add nothing but time per request).
"""

from __future__ import annotations

import hashlib
import re
import secrets

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from api.models import ApiClient
from botapp import clock
from botapp.services.audit import audit_record

TOKEN_PREFIX = "courier_"
RATE_RE = re.compile(r"^[1-9][0-9]*/(s|sec|second|m|min|minute|h|hour|d|day)$")
LAST_USED_EVERY = 60  # seconds: last_used_at is written at most this often per client


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def apiclient_create(*, name: str, scopes: str = "read", rate: str = "") -> tuple[ApiClient, str]:
    """Make a client and its token; return both. The token is not stored and cannot be shown
    again. A ValidationError for an empty or taken name or an unknown scope."""
    name = name.strip()
    wanted = [s.strip() for s in scopes.split(",") if s.strip()]
    if not name:
        raise ValidationError("Give the client a name.")
    unknown = sorted(set(wanted) - set(ApiClient.Scope.values))
    if unknown or not wanted:
        raise ValidationError(f"Scopes are read and write (got {scopes!r}).")
    if rate and not RATE_RE.match(rate):
        raise ValidationError(f'A rate is requests per s, min, hour or day, e.g. "600/min" (got {rate!r}).')
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    try:
        with transaction.atomic():
            client = ApiClient.objects.create(
                name=name,
                token_hash=token_hash(token),
                token_prefix=token[: len(TOKEN_PREFIX) + 4],
                scopes=",".join(dict.fromkeys(wanted)),
                rate=rate,
            )
            audit_record(
                action="api_client.create", target=client, detail=f"scopes {client.scopes}; token {client.token_prefix}…"
            )
    except IntegrityError as exc:
        raise ValidationError(f"A client named {name!r} exists already.") from exc
    return client, token


def apiclient_authenticate(*, token: str) -> ApiClient | None:
    """The client this token belongs to, unless it was revoked; None for anything else."""
    if not token.startswith(TOKEN_PREFIX):
        return None
    client = ApiClient.objects.filter(token_hash=token_hash(token), revoked_at__isnull=True).first()
    if client is not None:
        now = clock.now()
        if client.last_used_at is None or (now - client.last_used_at).total_seconds() > LAST_USED_EVERY:
            ApiClient.objects.filter(pk=client.pk).update(last_used_at=now)
    return client


def apiclient_revoke(*, client: ApiClient) -> None:
    """Refuse the client's token from now on (the row stays, for the record)."""
    if ApiClient.objects.filter(pk=client.pk, revoked_at__isnull=True).update(revoked_at=clock.now()):
        audit_record(action="api_client.revoke", target=client, detail=f"token {client.token_prefix}…")
    client.refresh_from_db()
