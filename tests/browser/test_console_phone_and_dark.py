"""Every main page of the console at 390 px (a phone) and in dark mode: nothing wider than the
screen (no control pushed off it), and every visible text readable against what is behind it
(WCAG's contrast: 4.5:1, 3:1 for large text). Screenshots of each page at both go to
var/browser-screens/ to look at; the dashboard in dark mode to docs/screenshots/."""

from datetime import timedelta

import pytest

from botapp import clock
from botapp.models import BotSettings
from tests.browser.conftest import ROOT, SCREENSHOTS
from tests.factories import (
    BroadcastFactory,
    JobRunFactory,
    SequenceStepFactory,
    StoredFileFactory,
    TelegramUserFactory,
    UserBanFactory,
)

SCREENS = ROOT / "var" / "browser-screens"

# Each visible element that has text of its own, with its colour and the colour behind it (the
# backgrounds of it and its ancestors composited, the page's white under all): the ones below
# WCAG's ratio. Colours are read through a canvas, which turns any CSS colour (oklch, as the
# theme writes them) into sRGB.
UNREADABLE = """() => {
  const canvas = document.createElement('canvas'); canvas.width = canvas.height = 1;
  const ctx = canvas.getContext('2d', {willReadFrequently: true});
  const rgba = (css) => { ctx.clearRect(0, 0, 1, 1); ctx.fillStyle = '#000'; ctx.fillStyle = css; ctx.fillRect(0, 0, 1, 1);
    const d = ctx.getImageData(0, 0, 1, 1).data; return [d[0], d[1], d[2], d[3] / 255]; };
  const over = (top, under) => { const a = top[3]; return [0, 1, 2].map(i => top[i] * a + under[i] * (1 - a)).concat(1); };
  const lum = (c) => { const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
  const behind = (el) => { const layers = [];
    for (let e = el; e; e = e.parentElement) { const s = getComputedStyle(e);
      if (s.backgroundImage !== 'none' && !s.backgroundImage.startsWith('url(')) return null;  // a gradient: not judged
      const c = rgba(s.backgroundColor); if (c[3] > 0) layers.push(c); if (c[3] >= 1) break; }
    let colour = [255, 255, 255, 1]; for (const layer of layers.reverse()) colour = over(layer, colour); return colour; };
  const bad = [];
  for (const el of document.body.querySelectorAll('*')) {
    if (['SCRIPT', 'STYLE', 'NOSCRIPT', 'TEMPLATE', 'OPTION', 'svg', 'CANVAS'].includes(el.tagName)) continue;
    const own = [...el.childNodes].filter(n => n.nodeType === 3).map(n => n.textContent).join('').trim();
    if (!own) continue;
    const s = getComputedStyle(el);
    if (s.fontFamily.includes('Material Symbols')) continue;  // an icon, not text
    const box = el.getBoundingClientRect();
    if (box.width < 2 || box.height < 2 || s.visibility !== 'visible' || el.closest('[hidden], [aria-hidden=true]')) continue;
    if (!el.checkVisibility({opacityProperty: true, visibilityProperty: true})) continue;
    const under = behind(el); if (!under) continue;
    const text = over(rgba(s.color), under);
    const [hi, lo] = [lum(text), lum(under)].sort((a, b) => b - a);
    const ratio = (hi + 0.05) / (lo + 0.05);
    const size = parseFloat(s.fontSize), bold = parseInt(s.fontWeight) >= 700;
    const need = size >= 24 || (bold && size >= 18.66) ? 3 : 4.5;
    if (ratio < need) bad.push(`${own.slice(0, 40)} (${ratio.toFixed(2)}:1 in <${el.tagName.toLowerCase()} class="${el.className}">)`);
  }
  return bad;
}"""


@pytest.fixture
def console_pages(settings):
    """The main pages, each with something on it."""
    conf = BotSettings.load()
    conf.bot_username = "courier_test_bot"
    conf.save()
    user = TelegramUserFactory(telegram_id=4242, username="a_rather_long_username_indeed", first_name="Maximilian")
    UserBanFactory(user=user, reason="spam")
    stored = StoredFileFactory(title="Quarterly report with a long title", share_id="a-very-long-share-id-0123456789")
    sent = BroadcastFactory(title="Autumn sale", status="done", total=5, sent=3, failed=2, text="Line one\nLine two")
    draft = BroadcastFactory(title="Winter sale", text="<b>Bold</b> news")
    step = SequenceStepFactory(text="Welcome!\nHere is how it works.")
    JobRunFactory(job="send_broadcasts", processed=12, detail="2 broadcast(s): 12 sent, 0 blocked, 0 failed")
    JobRunFactory(job="cleanup_tokens", processed=0, finished_at=clock.now() + timedelta(seconds=1))
    return [
        ("dashboard", "/"),
        ("users", "/botapp/telegramuser/"),
        ("user", f"/botapp/telegramuser/{user.pk}/change/"),
        ("files", "/botapp/storedfile/"),
        ("file", f"/botapp/storedfile/{stored.pk}/change/"),
        ("broadcasts", "/botapp/broadcast/"),
        ("broadcast-new", "/botapp/broadcast/add/"),
        ("broadcast-draft", f"/botapp/broadcast/{draft.pk}/change/"),
        ("broadcast-sent", f"/botapp/broadcast/{sent.pk}/change/"),
        ("sequence", f"/botapp/sequence/{step.sequence.pk}/change/"),
        ("step", f"/botapp/sequencestep/{step.pk}/change/"),
        ("settings", "/botapp/botsettings/"),
        ("jobs", "/scheduler/backgroundjob/"),
        ("job-runs", "/scheduler/jobrun/"),
    ]


def walk(browser, live_server, cookies, pages, *, width: int, scheme: str, shots: bool = True) -> list[str]:
    """What is wrong on each page at this width and colour scheme, one line each. With `shots`, each
    page is also kept as a screenshot (after what it loads by itself has arrived)."""
    context = browser.new_context(
        viewport={"width": width, "height": 844 if width < 600 else 900},
        is_mobile=width < 600,
        color_scheme=scheme,
        base_url=live_server.url,
    )
    context.add_cookies(cookies)
    tab = context.new_page()
    problems = []
    SCREENS.mkdir(parents=True, exist_ok=True)
    try:
        for name, path in pages:
            tab.goto(path)
            if scheme == "dark":
                assert tab.evaluate("document.documentElement.classList.contains('dark')"), path
            if shots:
                tab.wait_for_load_state("networkidle")
                tab.screenshot(path=str(SCREENS / f"{name}-{width}-{scheme}.png"), full_page=True)
            wide = tab.evaluate("document.documentElement.scrollWidth")
            if wide > width:
                problems.append(f"{path} at {width} px is {wide} px wide")
            problems += [f"{path} ({scheme}): {line}" for line in tab.evaluate(UNREADABLE)]
            if name == "dashboard" and scheme == "dark" and width > 600:
                SCREENSHOTS.mkdir(parents=True, exist_ok=True)
                tab.screenshot(path=str(SCREENSHOTS / "dashboard-dark.png"))
    finally:
        context.close()
    return problems


def test_every_main_page_fits_a_phone_and_reads_in_dark_mode(logged_in, browser, live_server, console_pages):
    cookies = logged_in.context.cookies()
    problems = []
    for width, scheme in ((390, "light"), (390, "dark"), (1400, "dark")):  # 1400 px light: the rest of the suite
        problems += walk(browser, live_server, cookies, console_pages, width=width, scheme=scheme)
    assert problems == [], "\n".join(problems)


def test_every_page_the_sidebar_links_fits_a_phone_and_reads_in_dark_mode(logged_in, browser, live_server, console_pages):
    """Beyond the main pages: each list the sidebar leads to, and its Add page where it has one.
    (Looked at, not clicked: the Content-Security-Policy walk of every page is a test of its own.)"""
    cookies = logged_in.context.cookies()
    context = browser.new_context(viewport={"width": 1400, "height": 900}, base_url=live_server.url)
    context.add_cookies(cookies)
    tab = context.new_page()
    tab.goto("/")
    links = tab.evaluate(
        "() => [...new Set([...document.querySelectorAll('nav a[href^=\"/\"]')].map(a => a.getAttribute('href')))]"
        ".filter(h => h !== '/' && !h.startsWith('/logout') && !h.startsWith('/api/'))"
    )
    assert len(links) > 20, links
    pages = [(f"list{n}", path) for n, path in enumerate(links)]
    for path in links:
        tab.goto(path)
        add = tab.locator("a[href$='/add/']").first
        if add.count():
            pages.append((f"add{len(pages)}", add.get_attribute("href")))
    context.close()
    problems = []
    for width, scheme in ((390, "light"), (390, "dark")):
        problems += walk(browser, live_server, cookies, pages, width=width, scheme=scheme, shots=False)
    assert problems == [], "\n".join(problems)
