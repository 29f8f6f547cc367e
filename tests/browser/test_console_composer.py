"""The composer (issue 48, scope 4): a formatting toolbar that writes Telegram's HTML into the text
of a broadcast, a scheduled message or a sequence step, and a live preview of the text and buttons
as Telegram shows them; only Telegram's tags become formatting, anything else shows as the text it is."""

import re

from botapp.models import Broadcast
from tests.browser.conftest import screenshot
from tests.factories import BroadcastFactory, SequenceStepFactory

TOOLS = ["Bold", "Italic", "Underline", "Strikethrough", "Spoiler", "Code", "Link", "Quote"]


def select(page, field, start: int, end: int) -> None:
    field.evaluate("(el, [a, b]) => { el.focus(); el.setSelectionRange(a, b); }", [start, end])


def test_the_toolbar_writes_telegram_html_and_the_preview_shows_it_live(logged_in):
    page = logged_in
    page.goto("/botapp/broadcast/add/")
    page.get_by_label("Title").fill("Autumn sale")
    text = page.locator("textarea[name=text]")
    toolbar = page.get_by_role("toolbar", name="Formatting")
    assert [b.get_attribute("aria-label") for b in toolbar.get_by_role("button").all()] == TOOLS

    text.fill("Sale now")
    select(page, text, 0, 4)
    toolbar.get_by_role("button", name="Bold").click()
    assert text.input_value() == "<b>Sale</b> now"
    preview = page.locator(".composer-preview .tg-text")
    assert preview.locator("b").inner_text() == "Sale"

    for tool, tag, element in (
        ("Italic", "i", "i"),
        ("Underline", "u", "u"),
        ("Strikethrough", "s", "s"),
        ("Code", "code", "code"),
        ("Quote", "blockquote", "blockquote"),
    ):
        text.fill("one two")
        select(page, text, 4, 7)
        toolbar.get_by_role("button", name=tool).click()
        assert text.input_value() == f"one <{tag}>two</{tag}>", tool
        assert preview.locator(element).inner_text() == "two", tool
    text.fill("the end")
    select(page, text, 4, 7)
    toolbar.get_by_role("button", name="Spoiler").click()
    assert text.input_value() == "the <tg-spoiler>end</tg-spoiler>"
    assert preview.locator(".tg-spoiler").inner_text() == "end"

    text.fill("Go to the shop\n50% off today")
    select(page, text, 10, 14)
    toolbar.get_by_role("button", name="Link").click()
    page.keyboard.type("https://shop.example")  # the address placeholder is selected: typed over
    assert text.input_value() == 'Go to the <a href="https://shop.example">shop</a>\n50% off today'
    assert preview.get_by_role("link", name="shop").get_attribute("href") == "https://shop.example"
    assert preview.inner_text() == "Go to the shop\n50% off today"  # line breaks as typed

    page.locator("textarea[name=buttons]").fill("Shop | https://shop.example || News | https://news.example\nHelp | tap:help")
    assert page.locator(".composer-preview .tg-button").all_inner_texts() == ["Shop", "News", "Help"]
    page.locator("textarea[name=text]").scroll_into_view_if_needed()
    screenshot(page, "composer")

    page.get_by_role("button", name="Save and continue editing").click()
    page.wait_for_url(re.compile(r"/botapp/broadcast/\d+/change/"))
    assert (
        Broadcast.objects.get().text.replace("\r\n", "\n") == 'Go to the <a href="https://shop.example">shop</a>\n50% off today'
    )
    assert page.locator(".composer-preview .tg-text a").inner_text() == "shop"  # the saved text, previewed again


HOSTILE = (
    '<img src=x onerror="document.title=\'pwned\'"><script>document.title="pwned"</script>'
    "<a href=\"javascript:document.title='pwned'\">js link</a><b onclick=\"document.title='pwned'\">bold</b>"
    '<span class="x" style="color: red">span</span><tg-spoiler>secret</tg-spoiler>'
    '<a href="https://ok.example" onmouseover="document.title=\'pwned\'">ok</a> &lt;kept&gt; </b></i>'
)


def test_the_preview_renders_only_telegrams_tags_and_shows_everything_else_as_text(logged_in):
    page = logged_in
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto("/botapp/broadcast/add/")
    title = page.title()
    page.locator("textarea[name=text]").fill(HOSTILE)
    preview = page.locator(".composer-preview .tg-text")
    preview.get_by_text("secret").wait_for()
    elements = preview.evaluate(
        "el => [...el.querySelectorAll('*')].map(e => [e.tagName.toLowerCase(), [...e.attributes].map(a => a.name + '=' + a.value)])"
    )
    assert elements == [
        ["b", []],
        ["span", ["class=tg-spoiler"]],
        ["a", ["href=https://ok.example", "target=_blank", "rel=noopener"]],
    ]
    shown = preview.inner_text()
    for literal in (
        '<img src=x onerror="document.title',
        "<script>",
        '<a href="javascript:',
        '<span class="x"',
        "<kept>",
        "</i>",
    ):
        assert literal in shown, literal
    preview.get_by_text("ok").hover()
    preview.locator("b").click()
    assert page.title() == title and dialogs == []


def test_sequence_steps_and_scheduled_messages_have_the_composer(logged_in):
    page = logged_in
    page.goto("/botapp/sequence/add/")
    first = page.locator("textarea[name='steps-0-text']")
    first.fill("Welcome")
    select(page, first, 0, 7)
    page.get_by_role("toolbar", name="Formatting").first.get_by_role("button", name="Italic").click()
    assert first.input_value() == "<i>Welcome</i>"
    page.get_by_text("Add another Sequence step").click()
    second = page.locator("textarea[name='steps-1-text']")
    second.fill("<u>Day two</u>")
    step = second.locator("xpath=ancestor::*[.//*[@role='toolbar']][1]")
    assert step.get_by_role("toolbar", name="Formatting").count() == 1  # the new step's own
    assert step.locator(".composer-preview u").inner_text() == "Day two"

    saved = SequenceStepFactory(text="<b>Hi</b>")
    page.goto(f"/botapp/sequencestep/{saved.pk}/change/")
    assert page.locator(".composer-preview .tg-text b").inner_text() == "Hi"
    assert page.get_by_role("toolbar", name="Formatting").count() == 1

    scheduled = BroadcastFactory(kind=Broadcast.Kind.MESSAGE, title="Scheduled", text="<s>old</s> price")
    page.goto(f"/botapp/broadcast/{scheduled.pk}/change/")
    assert page.locator(".composer-preview .tg-text s").inner_text() == "old"
    assert page.get_by_role("toolbar", name="Formatting").count() == 1
