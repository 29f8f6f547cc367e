"""Dependencies flow one way: `scheduler` builds on `botapp`, `botapp` never imports `scheduler`;
the HTTP API (`api`) sits on both, and neither imports it.

botapp announces what background work should react to (botapp/signals.py); scheduler connects the
receivers (scheduler/receivers.py). This test reads every module under botapp/ (function-level
imports, `importlib.import_module` and `__import__` with a literal name included) and fails naming
each import of scheduler it finds. There are no exceptions."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = "scheduler"
ABOVE = ("scheduler", "api")  # what botapp must not import; scheduler must not import api
DYNAMIC_IMPORTS = {"import_module", "__import__", "import_string"}


def _names(module: str | None, forbidden: tuple[str, ...] = (FORBIDDEN,)) -> bool:
    return module is not None and any(module == f or module.startswith(f + ".") for f in forbidden)


def forbidden_imports(source: str, filename: str = "<source>", forbidden: tuple[str, ...] = (FORBIDDEN,)) -> list[str]:
    """Every import of a `forbidden` package (default: scheduler) in a module's source, as 'file:line: statement'."""
    found = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names if _names(alias.name, forbidden)]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module] if node.level == 0 and _names(node.module, forbidden) else []
        elif isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            first = node.args[0] if node.args else None
            literal = first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None
            names = [literal] if called in DYNAMIC_IMPORTS and _names(literal, forbidden) else []
        else:
            continue
        if names:
            found.append((node.lineno, f"{filename}:{node.lineno}: {ast.unparse(node)}"))
    return [hit for _, hit in sorted(found)]


def test_the_check_sees_every_kind_of_import():
    source = """
import scheduler
import os, scheduler.tasks as t
from scheduler.jobs.registry import job_run
def f():
    from scheduler import receivers
    importlib.import_module("scheduler.tasks")
    __import__("scheduler")
import schedulers  # another package
from botapp import scheduler_notes
from . import scheduler as sibling  # a relative import inside botapp is botapp's own module
import_module("botapp.signals")
"""
    assert [line.split(": ", 1)[0] for line in forbidden_imports(source)] == [
        "<source>:2",
        "<source>:3",
        "<source>:4",
        "<source>:6",
        "<source>:7",
        "<source>:8",
    ]


def test_botapp_never_imports_scheduler():
    modules = sorted((ROOT / "botapp").rglob("*.py"))
    assert len(modules) > 40  # the walk found botapp's modules
    found = [hit for path in modules for hit in forbidden_imports(path.read_text(), str(path.relative_to(ROOT)))]
    assert found == [], "botapp must not import scheduler (send a signal from botapp/signals.py instead):\n" + "\n".join(found)


def test_the_api_stays_on_top():
    """botapp and scheduler never import the HTTP API package (it builds on both)."""
    found = []
    for package, forbidden in (("botapp", ABOVE), ("scheduler", ("api",))):
        for path in sorted((ROOT / package).rglob("*.py")):
            found += forbidden_imports(path.read_text(), str(path.relative_to(ROOT)), forbidden)
    assert found == [], "only config/urls.py and the api package itself import api:\n" + "\n".join(found)
