"""account.*: what a person's own account asks while it signs in (its two-step verification)."""

from __future__ import annotations

from inmemory_telegram.methods.auth import password_state
from inmemory_telegram.methods.common import Table

METHODS = Table()


@METHODS.method("account.GetPassword")
def get_password(server, query):
    return password_state(server)
