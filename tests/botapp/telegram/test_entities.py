"""Text people wrote, re-sent as Telegram HTML: every character survives as written (kurigram's
`Str.html` escapes only the text inside entities)."""

import pytest
from pyrogram import enums
from pyrogram.types import MessageEntity, User
from pyrogram.types.messages_and_media.message import Str

from botapp.services.telegram_html import telegram_html_check
from botapp.telegram.entities import entities_html
from botapp.telegram.limits import utf16_length
from inmemory_telegram.state import Media
from tests.transcripts import printed, sandbox

WRITTEN = "Price < 5 & size > 3, see <notes> and <b>bold"


def entity(kind, offset, length, **extra):
    return MessageEntity(type=getattr(enums.MessageEntityType, kind), offset=offset, length=length, **extra)


def test_plain_text_is_escaped_so_telegram_shows_it_as_written():
    assert entities_html(WRITTEN, []) == "Price &lt; 5 &amp; size &gt; 3, see &lt;notes&gt; and &lt;b&gt;bold"
    assert telegram_html_check(text=entities_html(WRITTEN, [])) == []


def test_entities_become_tags_at_utf16_offsets_and_the_text_around_them_is_escaped():
    text = "😀 <b> bold & italic"  # the emoji is 2 UTF-16 units: entity offsets count them so
    start = utf16_length("😀 <b> ")
    html = entities_html(text, [entity("BOLD", start, 4), entity("ITALIC", start + 7, 6)])
    assert html == "😀 &lt;b&gt; <b>bold</b> &amp; <i>italic</i>"


def test_crossing_entities_stay_well_formed_and_link_attributes_are_quoted():
    text = "one two three"
    html = entities_html(
        text,
        [entity("BOLD", 0, 7), entity("ITALIC", 4, 9), entity("TEXT_LINK", 8, 5, url='https://x.example/?q="a"&b=<c>')],
    )
    assert telegram_html_check(text=html) == []
    assert html == '<b>one <i>two</i></b><i> <a href="https://x.example/?q=&quot;a&quot;&amp;b=&lt;c&gt;">three</a></i>'


def test_mentions_custom_emoji_code_blocks_and_quotes_keep_their_meaning():
    text = "Ann said x = 1 < 2"
    html = entities_html(
        text,
        [
            entity("TEXT_MENTION", 0, 3, user=User(id=1001)),
            entity("PRE", 9, 9, language="python"),
            entity("BLOCKQUOTE", 4, 4, expandable=True),
        ],
    )
    assert html == (
        '<a href="tg://user?id=1001">Ann</a> <blockquote expandable>said</blockquote> '
        '<pre><code class="language-python">x = 1 &lt; 2</code></pre>'
    )
    assert telegram_html_check(text=html) == []


def test_a_channel_post_read_from_telegram_keeps_its_formatting_and_its_brackets():
    from pyrogram.types import Chat, Message

    from botapp.telegram.updates import channel_post_from

    text = Str("/chat Sale < today & <b>")
    text.init([entity("BOLD", 6, 4)])
    post = channel_post_from(Message(id=7, chat=Chat(id=-1001000000001), text=text))
    assert post.html == "/chat <b>Sale</b> &lt; today &amp; &lt;b&gt;"


@pytest.mark.django_db
def test_previouscaption_keeps_the_brackets_and_ampersands_the_admin_wrote(telegram, bot, gateway, conf):
    from botapp.models import StoredFile

    box = sandbox(telegram, bot, gateway, as_json=False)
    conf.file_caption = "{previouscaption}"
    conf.save()
    printed(box, f"1000 sends document a.pdf {WRITTEN}")
    printed(box, f"1001: /start {StoredFile.objects.get().share_id}")
    (copy,) = [m for m in telegram.bot_messages(1001) if m.media]
    assert copy.media == Media("document", "a.pdf")
    assert copy.text == WRITTEN and not copy.entities
