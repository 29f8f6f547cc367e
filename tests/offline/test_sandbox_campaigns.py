"""docs/onboarding.md's sandbox lines: a campaign's welcome and sequence, /stop for good, "welcome
back" with no replay, a retired command's note."""

import io
import json
import sys

import pytest
from django.core.management import call_command

from tests.factories import SequenceFactory

LINES = """\
1001: /start campaign_x
wait 2m
1001: /stop
1001: /start
wait 1h
1001: /send
"""


@pytest.mark.django_db(transaction=True)  # the sequence sender's pool threads read the users runbot stored
def test_a_campaign_stop_and_return_in_the_sandbox(monkeypatch):
    campaign = SequenceFactory(name="Campaign X", start_payload="campaign_x")
    campaign.steps.create(delay_seconds=60, text="Campaign X, step 1")
    campaign.steps.create(delay_seconds=1800, text="Campaign X, step 2")
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdin", io.StringIO(LINES))

    call_command("sandbox", "--json", stdout=out)

    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [row["text"] for row in rows if row.get("chat") == 1001] == [
        "Hello User1001! I deliver files shared through my links.",
        "Campaign X, step 1",
        "You will get no more messages from me, and the onboarding messages still to come are cancelled for good. "
        "Send /start any time to get news again.",
        "Welcome back, User1001!",  # and in the hour after it, not step 2
        "/send is no longer available. Open a file link to get files; /help lists what I can do.",
    ], out.getvalue()
