"""Imports sit at the top of a module. One inside a function stays there only where a cycle or the
start-up cost demands it, or where Django's app registry is not ready when the module is imported
(models in an AppConfig), and says so in a comment on its line or the line above; an import
directly below one that gives its reason shares it (a group under one comment). The standard
library always goes to the top.

The walk covers every package of ours (migrations aside); tests/test_layering.py counts these
imports as dependencies all the same."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("botapp", "scheduler", "api", "config", "offline", "inmemory_telegram")
NOQA = re.compile(r"^\s*noqa(:\s*[A-Z]+[0-9]+(\s*,\s*[A-Z]+[0-9]+)*)?")


def _reason(line: str) -> str:
    """The comment of a source line, less a `noqa` and its codes (they silence a linter, and say no why)."""
    if "#" not in line:
        return ""
    return NOQA.sub("", line.split("#", 1)[1]).strip(" -–:")


def unexplained_imports(source: str, filename: str = "<source>") -> list[str]:
    """Every import inside a function (or a class within one) with no reason beside or above it,
    as 'file:line: statement'."""
    lines = source.splitlines()
    found = []
    explained: set[int] = set()  # line numbers of function-level imports that give or share a reason

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if in_function and isinstance(child, (ast.Import, ast.ImportFrom)):
                own = any(_reason(lines[n - 1]) for n in range(child.lineno, child.end_lineno + 1))
                above = child.lineno - 1
                above_text = lines[above - 1].strip() if above >= 1 else ""
                comment_above = above_text.startswith("#") and _reason(above_text)
                if own or comment_above or above in explained:
                    explained.add(child.end_lineno)
                else:
                    found.append((child.lineno, f"{filename}:{child.lineno}: {ast.unparse(child)}"))
            visit(child, nested)

    visit(ast.parse(source, filename=filename), False)
    return [hit for _, hit in sorted(found)]


def test_the_check_sees_an_import_without_its_reason():
    source = """
import os


def top():
    import json
    from botapp.models import TelegramUser  # noqa: F401
    return json


def explained():
    # here: models load once the app registry is ready
    from botapp.models import Sequence
    from botapp.models import SequenceStep
    from botapp import checks  # noqa: F401 - registers the system checks
    from scheduler import receivers  # here: receivers import this module

    x = 1
    from botapp.services import users

    return Sequence, SequenceStep, receivers, users, x


class Holder:
    def method(self):
        def inner():
            import hmac

        return inner

    from botapp import clock  # a class body is not a function: left to ruff and review


async def later():
    from botapp.services.files import (
        file_store,
    )
"""
    assert unexplained_imports(source) == [
        "<source>:6: import json",
        "<source>:7: from botapp.models import TelegramUser",
        "<source>:19: from botapp.services import users",
        "<source>:27: import hmac",
        "<source>:35: from botapp.services.files import file_store",
    ]
    # A reason on any line of a parenthesised import counts.
    assert unexplained_imports("def f():\n    from a import (  # here: a imports this module\n        b,\n    )\n") == []


def test_a_bare_noqa_is_no_reason():
    assert _reason("    import x  # noqa") == ""
    assert _reason("    import x  # noqa: F401") == ""
    assert _reason("    import x  # noqa: F401, E402") == ""
    assert _reason("    import x  # noqa: F401 - registers the checks") == "registers the checks"
    assert _reason("    import x  # here: cycle through y") == "here: cycle through y"


def _modules() -> list[Path]:
    return sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py") if "migrations" not in path.parts)


def test_every_function_level_import_says_why_it_is_there():
    modules = _modules()
    assert len(modules) > 100  # the walk found the packages
    found = [hit for path in modules for hit in unexplained_imports(path.read_text(), str(path.relative_to(ROOT)))]
    assert found == [], (
        "imports inside functions with no reason (move each to the module's top, or say on its line or the line above "
        "which cycle, start-up cost or unready app registry keeps it there):\n" + "\n".join(found)
    )
