"""The README and docs/ stay true: every relative link leads to a file (and a heading) that
exists, every path into the code they name exists, and the README's commands that can run
offline do run and succeed. Commands that cannot run here are listed in SKIPPED with the reason;
a new command in the README must be one or the other."""

import ast
import io
import os
import re
import subprocess
import tokenize
from pathlib import Path

import pytest

from tests.processes import sandbox_env

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]

# The folders of code that docs name as `botapp/bot/router.py`: code moves, and its docs must follow.
CODE_DIRS = (
    "api",
    "bench",
    "botapp",
    "config",
    "inmemory_telegram",
    "offline",
    "requirements",
    "scheduler",
    "scripts",
    "templates",
    "tests",
)

FENCE = re.compile(r"^```(\w*)\n(.*?)^```\s*$", re.M | re.S)
INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^\s*\[[^\]]+\]:\s*<?(\S+?)>?\s*$", re.M)
HREF = re.compile(r"href=[\"']([^\"']+)")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
CODE_PATH = re.compile(r"(?:\.\./)*[\w.-]+(?:/[\w.-]+)*/?")


def prose(text: str) -> str:
    """The Markdown without its fenced code blocks (a link in a code sample is not a link)."""
    return FENCE.sub("", text)


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())  # a link's text
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(doc: Path) -> set[str]:
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", prose(doc.read_text()), re.M):
        name, n = anchor(heading), 1
        while name in found:  # a repeated heading gets -1, -2, …
            name, n = f"{anchor(heading)}-{n}", n + 1
        found.add(name)
    return found


def links(text: str) -> list[str]:
    text = prose(text)
    return INLINE_LINK.findall(text) + REFERENCE_LINK.findall(text) + HREF.findall(text)


def broken_links(doc: Path, text: str) -> list[str]:
    """The relative links of a Markdown file that lead nowhere: outside the repository, to a file
    that does not exist, or to a heading its file does not have."""
    broken = []
    for target in links(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):
            continue  # https:, mailto:, tg: … (not checked: no network here)
        path_part, _, fragment = target.partition("#")
        path = (doc.parent / path_part).resolve() if path_part else doc
        if not path.is_relative_to(ROOT) or not path.exists():
            broken.append(target)
        elif fragment and (path.suffix != ".md" or fragment not in anchors(path)):
            broken.append(target)
    return broken


def missing_code_paths(text: str) -> list[str]:
    """Paths into the code written as `code` (`botapp/telegram/updates.py`, `../x`) that do not
    exist in the repository. Placeholders (`bench/<name>.py`) and globs are not paths."""
    missing = []
    for span in CODE_SPAN.findall(prose(text)):
        if not CODE_PATH.fullmatch(span) or "/" not in span:
            continue
        leaves = span.startswith("../")
        if not leaves and span.split("/", 1)[0] not in CODE_DIRS:
            continue
        path = (ROOT / span).resolve()
        if not path.is_relative_to(ROOT) or not path.exists():
            missing.append(span)
    return missing


def test_the_link_checks_see_what_is_broken():
    sample = (
        "[a](../../notes.md) [b](design.md) [c](https://t.me/x) <https://my.telegram.org> [d](architecture.md#layers)\n"
        "[e](architecture.md#no-such-heading) [f](#layers) [g](#layers-1) [h](../README.md#configuration)\n"
        "![i](screenshots/dashboard.png) ![j](screenshots/none.png) [k](nowhere.md)\n[l]: ../../x.md\n"
        "```sh\n[not a link](nowhere.md)\n```\n"
    )
    assert broken_links(ROOT / "docs" / "architecture.md", sample) == [
        "../../notes.md",
        "architecture.md#no-such-heading",
        "#layers-1",
        "screenshots/none.png",
        "nowhere.md",
        "../../x.md",
    ]
    assert anchor("The in-memory Telegram (`inmemory_telegram/`)") == "the-in-memory-telegram-inmemory_telegram"
    assert anchor("Faults under load (`make chaos`)") == "faults-under-load-make-chaos"
    code = "`botapp/bot/router.py`, `botapp/telegram/handlers.py`, `bench/<name>.py`, `bench/*.py`, `var/x`, `../shared/X.md`"
    assert missing_code_paths(code) == ["botapp/telegram/handlers.py", "../shared/X.md"]


def test_every_relative_link_leads_to_a_file_and_heading_that_exist():
    assert {str(d.relative_to(ROOT)): broken_links(d, d.read_text()) for d in DOCS} == {
        str(d.relative_to(ROOT)): [] for d in DOCS
    }


def test_every_path_into_the_code_the_docs_name_exists():
    assert {str(d.relative_to(ROOT)): missing_code_paths(d.read_text()) for d in DOCS} == {
        str(d.relative_to(ROOT)): [] for d in DOCS
    }


def test_the_first_pages_stay_short():
    """A newcomer reads the README in minutes; the benchmarks page holds the current figures, not a log."""
    assert len(README.read_text().splitlines()) <= 350
    assert len((ROOT / "docs" / "benchmarks.md").read_text().splitlines()) <= 200


SCREEN = 180  # characters: one line of a laptop's terminal or editor at a readable size


def test_every_benchmark_figure_fits_on_a_line_of_a_screen():
    """A figure's line says what, the goal, min / median / max, the commit and the command; how it was
    reached lives in git (the commit named there), not in the cell."""
    long = [line for line in (ROOT / "docs" / "benchmarks.md").read_text().splitlines() if len(line) > SCREEN]
    assert long == []


FIGURE = re.compile(r"\b\d[\d,.]*\s?(ms|µs|s|MB|KB|GB|/s)\b|\b\d+\.\d+\b")
MEASURED = re.compile(r"\b(measured|side by side|bench\w*|p95|p50|profil\w*|CPU)\b", re.IGNORECASE)


def comment_texts(source: str):
    """(line, text) of each comment and each line of each docstring or bare string of a module."""
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for offset, line in enumerate(node.value.value.splitlines()):
                yield node.lineno + offset, line


def measured_figures(source: str, filename: str = "<source>") -> list[str]:
    """Lines of comments and docstrings that give a measured figure: a time, size or rate beside a
    word of measuring (measured, side by side, bench, p95, CPU, ...)."""
    return [
        f"{filename}:{n}: {text.strip()}" for n, text in comment_texts(source) if FIGURE.search(text) and MEASURED.search(text)
    ]


def test_the_figure_check_tells_a_measurement_from_a_setting():
    source = '''
TIMEOUT = 30  # seconds: Telegram answers a callback query within 15 s
BATCH = 16  # side by side 0.954 of allowed against 0.952
def f():
    """A claim's p95 is 3.8 ms through 5M rows."""
# the deletion sweep, bench/sweep.py: 4,200 rows/s
'''
    assert [hit.split(":")[1] for hit in measured_figures(source)] == ["3", "5"]


def test_no_benchmark_figure_in_a_code_comment():
    """Figures live in docs/benchmarks.md beside their commit; a comment says why, and a number there
    goes stale without anyone seeing it."""
    found = [
        hit
        for package in ("botapp", "scheduler", "api", "config", "offline", "inmemory_telegram")
        for path in sorted((ROOT / package).rglob("*.py"))
        for hit in measured_figures(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert found == []


# --- The README's commands ------------------------------------------------------------------------


def shell_commands(markdown: str) -> list[tuple[str, list[str]]]:
    """(command, the output the README shows for it) for every command of the README's `sh` blocks
    (comments dropped, `\\` continuations joined) and every `$ ` line of its `console` blocks. The
    output keeps a session's `sandbox> ` lines (what was typed: the command's input)."""
    commands = []
    for lang, body in FENCE.findall(markdown):
        if lang == "sh":
            for line in re.sub(r"\s*\\\n\s*", " ", body).splitlines():
                command = comment_dropped(line).strip()
                if command:
                    commands.append((command, []))
        elif lang == "console":
            for line in body.splitlines():
                if line.startswith("$ "):
                    commands.append((line[2:].strip(), []))
                elif commands and line.strip():
                    commands[-1][1].append(line)
    return commands


def comment_dropped(line: str) -> str:
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


SANDBOX = re.compile(r"(?:printf '[^']*' \| )?make sandbox(?: DEMO=(?P<demo>files|campaign))?")
PROMPT = "sandbox> "  # an interactive sandbox's prompt: the rest of the line is typed in
FIRST_NOTE = {  # the sandbox's first line, per demo
    "files": ".. demo file stored: send '1001: /start demo'",
    "campaign": ".. demo campaign ready: send '1001: /start campaign_x'",
}
CHECK_DEPLOY = ".venv/bin/python manage.py check --deploy"

SKIPPED = {
    "make test": "the suite itself (this test is part of it)",
    "make run": "needs BOT_TOKEN, API_ID and API_HASH from Telegram in .env, and runs until stopped",
    ".venv/bin/python manage.py migrate": "migrates the database .env names; make sandbox and the suite migrate their own on every run",
    ".venv/bin/python manage.py createsuperuser": "asks for a user name and password on a terminal",
}


def runnable(command: str) -> bool:
    return bool(SANDBOX.fullmatch(command)) or command == CHECK_DEPLOY


def test_every_readme_command_is_run_here_or_skipped_with_a_reason():
    commands = [command for command, _ in shell_commands(README.read_text())]
    assert "make sandbox" in commands and CHECK_DEPLOY in commands
    neither = [c for c in commands if not runnable(c) and c not in SKIPPED]
    assert neither == [], "add each to SKIPPED (with the reason it cannot run offline) or run it here"
    assert [c for c in SKIPPED if c not in commands] == [], "SKIPPED names a command the README no longer has"


def test_shell_commands_are_read_as_a_shell_reads_them():
    sample = "```sh\nmake sandbox   # offline\nprintf '1000 forwards #3\\n' | make sandbox\ncurl -X POST x \\\n  -d y\n```\n"
    sample += '```console\n$ make sandbox\n-> 1001 #2 send "Hi"\n```\n```python\nprint(1)\n```\n'
    sample += '```console\n$ make sandbox DEMO=campaign\nsandbox> 1001: /start\n-> 1001 #2 send "Hi"\n```\n'
    assert shell_commands(sample) == [
        ("make sandbox", []),
        ("printf '1000 forwards #3\\n' | make sandbox", []),
        ("curl -X POST x -d y", []),
        ("make sandbox", ['-> 1001 #2 send "Hi"']),
        ("make sandbox DEMO=campaign", ["sandbox> 1001: /start", '-> 1001 #2 send "Hi"']),
    ]
    assert runnable("make sandbox DEMO=campaign") and not runnable("make sandbox DEMO=other")


def run_readme_command(command: str, env: dict, typed: str = "") -> subprocess.CompletedProcess:
    """As a reader runs it: bash in the repository root, a pipeline failing when any part fails,
    `typed` its input. Waits for the command to end (the timeout only stops a hung one)."""
    return subprocess.run(
        ["bash", "-o", "pipefail", "-c", command],
        cwd=ROOT,
        env=env,
        input=typed,
        capture_output=True,
        text=True,
        timeout=300,
    )


def outside_make_test() -> dict:
    """This process's environment without what `make test` set for the suite (its database, its
    Redis, its ARGS passed down to a nested make)."""
    dropped = {"DATABASE_URL", "REDIS_URL", "ARGS", "MAKEFLAGS", "MFLAGS", "MAKELEVEL"}
    return sandbox_env({k: v for k, v in os.environ.items() if k not in dropped})


README_COMMANDS = [(c, shown) for c, shown in shell_commands(README.read_text()) if runnable(c)]


@pytest.mark.slow
@pytest.mark.parametrize(("command", "shown"), README_COMMANDS, ids=[c[:50] for c, _ in README_COMMANDS])
def test_the_readme_command_runs(command, shown):
    env = outside_make_test()
    if command == CHECK_DEPLOY:  # with .env filled in for production, as the README says
        env.update(
            DEBUG="0", SECRET_KEY="k9$Vq2!mZ7x@Lp4#Rt8&Wn1^Hs6*Jd3(Fg5)Bc0-Ye2+Ua7=Xo9", ALLOWED_HOSTS="courier.example.com"
        )
    typed = "".join(line[len(PROMPT) :] + "\n" for line in shown if line.startswith(PROMPT))
    result = run_readme_command(command, env, typed)

    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    if match := SANDBOX.fullmatch(command):
        lines = result.stdout.splitlines()
        assert lines[0].startswith(FIRST_NOTE[match["demo"] or "files"])
        actions = [line for line in lines if line.startswith("-> ")]
        if shown:  # the README shows what the bot does: it must be what the bot does
            assert actions == [line for line in shown if line.startswith("-> ")]
        elif "printf" in command or typed:
            assert actions, result.stdout
