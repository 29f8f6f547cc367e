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


# --- The layers inside botapp, and the tooling beside the product -----------------------------
#
#   botapp/bot       the conversation (router, admin commands): parses, calls services, replies
#   botapp/services  business rules
#   botapp/models    data; the button grammar (models/buttons.py) is a plain module beside them
#   botapp/telegram  the only way to Telegram (gateway, limiter, limits, kurigram): knows no layer above
#   offline/         the in-memory Telegram and the sandbox: tooling that imports the product, never
#                    imported by it
#
# Each rule: the modules under a folder, what they must not import, and why.
LAYER_RULES = [
    ("botapp/models", ("botapp.services", "botapp.bot", "botapp.admin", "botapp.views", "api"), "models are below services"),
    (
        "botapp/services",
        ("botapp.bot", "botapp.admin", "botapp.views", "pyrogram"),
        "services are below the bot and admin, and never touch pyrogram",
    ),
    ("botapp/bot", ("pyrogram", "botapp.admin"), "the conversation speaks the gateway's domain types, never pyrogram"),
    (
        "botapp/telegram",
        ("botapp.bot", "botapp.services", "botapp.models", "botapp.admin"),
        "the way to Telegram knows no layer above it",
    ),
]
TELEGRAM_ALLOWED_IN_MODELS = ("botapp.telegram.limits",)  # Telegram's numbers: plain constants
PRODUCT = ("botapp", "scheduler", "api", "config")
TOOLING = ("offline", "inmemory_telegram")


def _modules(folder: str) -> list[Path]:
    return sorted(p for p in (ROOT / folder).rglob("*.py") if "migrations" not in p.parts)


def test_each_layer_imports_only_what_is_below_it():
    found = []
    for folder, forbidden, why in LAYER_RULES:
        modules = _modules(folder)
        assert modules, folder
        for path in modules:
            for hit in forbidden_imports(path.read_text(), str(path.relative_to(ROOT)), forbidden):
                found.append(f"{hit}  ({why})")
    models_to_telegram = [
        hit
        for path in _modules("botapp/models")
        for hit in forbidden_imports(path.read_text(), str(path.relative_to(ROOT)), ("botapp.telegram",))
        if not any(allowed in hit for allowed in TELEGRAM_ALLOWED_IN_MODELS)
    ]
    assert found + models_to_telegram == [], "imports that run back up a layer:\n" + "\n".join(found + models_to_telegram)


def test_the_product_never_imports_its_tooling():
    """The in-memory Telegram and the sandbox (offline/) are reached by settings only
    (TELEGRAM_OFFLINE_CONNECTION), as boto3 is pointed at moto by an endpoint URL."""
    found = []
    for package in PRODUCT:
        for path in _modules(package):
            found += forbidden_imports(path.read_text(), str(path.relative_to(ROOT)), TOOLING)
    assert found == [], "production modules import the offline tooling:\n" + "\n".join(found)


def import_graph(files: list[Path], root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the project modules it imports (at any depth of the file: function-level and
    TYPE_CHECKING imports count, they are dependencies all the same)."""
    names = {".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): p for p in files}
    graph: dict[str, set[str]] = {name: set() for name in names}
    for name, path in names.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parent + ([base] if base else []))
                targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
            for target in targets:
                if target in names and target != name:
                    graph[name].add(target)
                    break  # `from a.b import c`: the submodule c when there is one, else a.b
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(circles)


def test_the_circle_finder_finds_circles(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.b import x\n")
    (pkg / "b.py").write_text("def f():\n    from pkg import a\n")
    (pkg / "c.py").write_text("from . import a\n")
    graph = import_graph(sorted(pkg.glob("*.py")), root=tmp_path)
    assert graph["pkg.c"] == {"pkg.a"}
    assert import_circles(graph) == [["pkg.a", "pkg.b"]]


def test_no_import_circles_in_the_product():
    """The product has none (the in-memory Telegram has none either: tests/inmemory_telegram)."""
    files = [p for package in PRODUCT for p in _modules(package)]
    circles = import_circles(import_graph(files))
    assert circles == [], "modules that import each other:\n" + "\n".join(" <-> ".join(c) for c in circles)
