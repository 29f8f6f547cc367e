"""Sandbox transcripts in tests: lines fed to the sandbox (runbot's client and router on the
in-memory Telegram, jobs on a worker's gateway) and what it printed, as its JSON lines."""

import io
import json

from offline.sandbox import Sandbox


def sandbox(telegram, bot, gateway, *, as_json: bool = True) -> Sandbox:
    return Sandbox(telegram=telegram, bot=bot, worker=gateway, out=io.StringIO(), as_json=as_json)


class Transcript(list):
    """What the sandbox printed for some lines: full texts, buttons, notes."""

    def __contains__(self, item):
        """A row (a dict), or a text found in some row's text or note."""
        if isinstance(item, dict):
            return list.__contains__(self, item)
        return any(item in (row.get("text") or row.get("note") or "") for row in self)

    def to(self, chat_id, action=None):
        return [r for r in self if r.get("chat") == chat_id and (action is None or r["action"] == action)]

    def texts(self, chat_id, action=None):
        return [r["text"] for r in self.to(chat_id, action)]

    def buttons(self, chat_id):
        return [[b["text"] for b in row] for r in self.to(chat_id) for row in r.get("buttons", [])]


def said(box: Sandbox, *lines: str) -> Transcript:
    """Feed the lines (each must be understood); the transcript they produced."""
    start = len(box.out.getvalue())
    for line in lines:
        assert box.feed(line), line
    return Transcript(json.loads(line) for line in box.out.getvalue()[start:].splitlines())


def printed(box: Sandbox, *lines: str) -> str:
    """Feed the lines (each must be understood); the text the sandbox printed for them, as an
    operator reads it (for a box made with as_json=False)."""
    before = box.out.tell()
    for line in lines:
        assert box.feed(line), box.out.getvalue()[before:]
    return box.out.getvalue()[before:]
