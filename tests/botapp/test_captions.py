"""Caption templates: what a user sees under each delivered file, and what the settings form refuses."""

import pytest

from botapp.models import BotSettings, StoredFile
from botapp.services.captions import caption_cut, caption_template_problems, filesize_human, visible_length
from botapp.telegram.limits import CAPTION_LENGTH
from tests.transcripts import printed, sandbox

pytestmark = pytest.mark.django_db


@pytest.fixture
def box(telegram, bot, gateway, conf):
    return sandbox(telegram, bot, gateway, as_json=False)


def caption_template(text):
    conf = BotSettings.load()
    conf.file_caption = text
    conf.save()


def test_filename_and_size_fill_in_for_a_document_and_a_video(box, telegram):
    printed(box, "1000 sends document report.pdf[2.5MB] Price list", "1000 sends video clip.mp4[700KB] Trailer")
    report, clip = StoredFile.objects.order_by("id")
    caption_template("<b>{filename}</b> · {filesize}\n{previouscaption}\nfor {first_name}")

    out = printed(box, f"1001: /start {report.share_id}", f"1001: /start {clip.share_id}")

    assert "-> 1001 #" in out and 'document "report.pdf · 2.5 MB / Price list / for User1001"' in out
    assert 'video "clip.mp4 · 700 KB / Trailer / for User1001"' in out
    report_copy, clip_copy = [m for m in telegram.bot_messages(1001) if m.media]
    assert report_copy.text.startswith("report.pdf · 2.5 MB")
    assert [(e.offset, e.length) for e in report_copy.entities if type(e).__name__ == "MessageEntityBold"] == [(0, 10)]


def test_mention_links_to_the_receiving_user(box, telegram):
    printed(box, "1000 sends photo cat.jpg A cat")
    cat = StoredFile.objects.get()
    caption_template("For {mention}: {previouscaption}")

    printed(box, f"1001: /start {cat.share_id}")

    (copy,) = [m for m in telegram.bot_messages(1001) if m.media]
    assert copy.text == "For User1001: A cat"
    (link,) = [e for e in copy.entities if "MentionName" in type(e).__name__]  # as the bot sent it
    assert (link.user_id.user_id, link.offset, link.length) == (1001, 4, 8)


def test_a_long_previous_caption_is_cut_to_fit_and_the_rest_of_the_template_stays(box, telegram):
    # What an admin types is text, not HTML: no tags here (a literal "<i>" reaches users as written).
    printed(box, "1000 sends document big.pdf " + "word " * 200)
    big = StoredFile.objects.get()
    caption_template("{filename}\n{previouscaption}\nJoin @courier_news")

    printed(box, f"1001: /start {big.share_id}")

    (copy,) = [m for m in telegram.bot_messages(1001) if m.media]
    assert len(copy.text) <= CAPTION_LENGTH  # the in-memory Telegram refuses more (MEDIA_CAPTION_TOO_LONG)
    assert copy.text.startswith("big.pdf\nword word")
    assert copy.text.endswith("…\nJoin @courier_news")


def test_without_a_template_files_keep_their_own_captions_and_go_in_one_forward(box, telegram):
    printed(box, "1000 sends document report.pdf Price list")
    report = StoredFile.objects.get()
    since = len(telegram.calls)

    out = printed(box, f"1001: /start {report.share_id}")

    assert 'copy document "Price list"' in out
    assert "messages.ForwardMessages" in telegram.methods_called(since)


def test_cutting_keeps_html_well_formed():
    text = "<b>bold <i>and italic</i> text</b> &amp; more"
    assert visible_length(text=text) == 27
    assert caption_cut(text=text, limit=27) == text
    assert caption_cut(text=text, limit=12) == "<b>bold <i>and it…</i></b>"
    assert caption_cut(text="a &lt;b&gt; c", limit=4) == "a &lt;…"
    assert visible_length(text="😀") == 2  # Telegram counts UTF-16 units


def test_sizes_read_as_people_say_them():
    assert [filesize_human(size=n) for n in (0, 512, 1024, 2_621_440, 1536 * 1024**2)] == [
        "0 B",
        "512 B",
        "1 KB",
        "2.5 MB",
        "1.5 GB",
    ]


def test_template_checks_name_what_is_wrong():
    assert caption_template_problems(template="{filename} · {filesize}\n{previouscaption}") == []
    assert "Unknown placeholder {file}" in caption_template_problems(template="{file}")[0]
    assert "stray brace" in caption_template_problems(template="{filename")[0]
    assert caption_template_problems(template="{filename!r}") == [
        "{filename!r}: a placeholder takes no conversion or format; write {filename}."
    ]
    assert caption_template_problems(template="{filesize:>10}") == [
        "{filesize:>10}: a placeholder takes no conversion or format; write {filesize}."
    ]
    (too_long,) = caption_template_problems(template="x" * 770 + "{filename}")
    assert "this caption has 1025 characters; Telegram allows 1024" in too_long
    assert caption_template_problems(template="x" * 769 + "{filename}") == []
