"""The sandbox's campaign demo (`make sandbox DEMO=campaign`): a drip bot rebuilt on Courier.

A drip bot sends prepared posts from a channel at set times after `/start <campaign>`: here a
welcome video at once, then posts at 40 s, 3 min, 18 min (the farewell) and 2 h (a reminder only
for users who did not tap "✅ I Joined"). Everything is entered as an operator enters it: Bot
settings through the settings form, the steps through the sequence step form (which reads each
post through the console's Telegram session, as the admin page does).
"""

from __future__ import annotations

from pyrogram import raw

from botapp.admin.sequences import SequenceStepForm
from botapp.models import Sequence
from botapp.telegram.gateway import Media
from inmemory_telegram.server import TelegramServer
from offline.sandbox import setting_edit

POSTS_CHANNEL = -1001000000002
PAYLOAD = "campaign_x"
JOIN_URL = "https://t.me/+campaign_x_news"

# (post text, media, the bold prefix's length): the posts channel, in the order they are posted.
POSTS = [
    ("Welcome to Campaign X! Lesson 1 comes in a moment.", Media("video", "campaign-x-welcome.mp4"), 22),
    ("Lesson 1: join our channel, then tap ✅ I Joined.", Media("photo", "lesson-1.jpg"), 9),
    ("Lesson 2: the three rules we trade by.", None, 9),
    ("That was the intro. See you in the channel!", None, 0),
    ("Still not in? The channel is where it happens.", None, 0),
]
JOIN = f"Join Now | {JOIN_URL} | join"  # a tracked link: opening it counts a click on `join`
JOINED = (
    "✅ I Joined | tap:joined | toast: Thanks! Now tap Verify. "
    "| then: 🔎 Verify | tap:verified | reply: ✅ Verified: you are in. Lesson 2 follows in a few minutes."
)
# (delay in seconds, post number in POSTS, buttons, the click key a user must NOT have)
STEPS = [
    (40, 2, f"{JOIN}\n{JOINED}", ""),
    (180, 3, "", ""),
    (1080, 4, "", ""),
    (7200, 5, JOIN, "joined"),
]


class DemoRefused(Exception):
    """A form refused the demo's data: the sandbox's own bug, said loudly."""


def campaign_demo_setup(telegram: TelegramServer) -> str:
    """The posts channel with its posts, Bot settings naming it (the welcome is its first post)
    and the sequence for the campaign payload; returns the payload. Raises DemoRefused when a
    form refuses something (the forms are the operator's checks: the demo passes them)."""
    telegram.create_channel(POSTS_CHANNEL, title="Campaign X posts")
    ids = [
        telegram.post(
            POSTS_CHANNEL, text, media=media, entities=[raw.types.MessageEntityBold(offset=0, length=bold)] if bold else None
        )
        for text, media, bold in POSTS
    ]
    for field, value in (("posts_channel_id", str(POSTS_CHANNEL)), ("welcome_post_id", str(ids[0]))):
        if problem := setting_edit(field=field, value=value):
            raise DemoRefused(f"Bot settings {field}: {problem}")

    sequence = Sequence.objects.create(name="Campaign X", start_payload=PAYLOAD)
    for delay, post, buttons, not_clicked in STEPS:
        form = SequenceStepForm(
            data={
                "delay_seconds": delay,
                "post_id": ids[post - 1],
                "text": "",
                "media_kind": "",
                "media": "",
                "buttons": buttons,
                "condition": "not_clicked" if not_clicked else "always",
                "condition_button": not_clicked,
            },
            instance=sequence.steps.model(sequence=sequence),
        )
        if not form.is_valid():
            raise DemoRefused(f"step after {delay} s: {form.errors.as_text()}")
        form.save()
    return PAYLOAD
