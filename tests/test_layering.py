"""Dependencies flow one way, in every package: config below all, then botapp's floors (floor 1,
telegram, config.py, models, services, bot and admin), scheduler on botapp, the HTTP API on both;
the in-memory Telegram (inmemory_telegram/) depends on kurigram and itself only, and the harness and
sandbox (offline/) sit beside the product, never imported by it.

botapp announces what background work should react to (botapp/signals.py); scheduler connects the
receivers (scheduler/receivers.py). These tests read every module (function-level imports,
`importlib.import_module`, `__import__` and `import_string` with a literal name included) and fail
naming each import that runs up a layer, each circle, each private name taken across packages, and
each package that has no rule; each checker has a self-test on planted imports."""

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

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


# --- Every package, floor by floor --------------------------------------------------------------
#
#   config/             settings, the Celery app, error reports: below everything (urls.py wires the top)
#   botapp floor 1      clock, metrics, cache, db, runtime, signals: plain helpers every layer may use
#   botapp/telegram     the only way to Telegram (gateway, limiter, limits, kurigram): knows no layer above
#   botapp/config.py    the bot's variables, checked at start: above telegram (it reads its limits)
#   botapp/models       data; the button grammar (models/buttons.py) is a plain module beside them
#   botapp/services     business rules
#   botapp/bot          the conversation (router, admin commands): parses, calls services, replies
#   botapp/admin        the operator console
#   scheduler/          jobs, tasks, the dashboard: builds on botapp
#   api/                the HTTP API: on top of botapp and scheduler
#   inmemory_telegram/  the model of Telegram (raw TL under kurigram): kurigram and itself, nothing of ours
#   offline/            the harness and the sandbox: imports the product and the model, never imported by them
#
# Each rule: the modules it covers (a folder or a file, less the files named as its exceptions), what
# they must not import, and why. Every package has a rule (test_every_package_has_a_rule).
BOTAPP_FLOOR_1 = (
    "botapp/clock.py",
    "botapp/metrics.py",
    "botapp/cache.py",
    "botapp/db.py",
    "botapp/runtime.py",
    "botapp/signals.py",
)
BOTAPP_ABOVE_FLOOR_1 = (
    "botapp.telegram",
    "botapp.config",
    "botapp.models",
    "botapp.services",
    "botapp.bot",
    "botapp.admin",
    "botapp.views",
    "botapp.stream",
    "botapp.management",
    "botapp.checks",
)
TOOLING = ("offline", "inmemory_telegram")
PRODUCT = ("botapp", "scheduler", "api", "config")
PACKAGES = PRODUCT + TOOLING


@dataclass(frozen=True)
class Rule:
    covers: tuple[str, ...]  # folders or files, relative to the repository
    forbidden: tuple[str, ...]  # module prefixes
    why: str
    except_files: tuple[str, ...] = ()  # each with its reason in the rule's comment


LAYER_RULES = [
    # config/urls.py is the top of the house: it wires the console and the API's URLs; asgi_stream.py
    # is the streaming process's top (it builds botapp/stream's application).
    Rule(
        ("config",),
        ("botapp", "scheduler", "api") + TOOLING,
        "settings are below every app",
        ("config/urls.py", "config/asgi_stream.py"),
    ),
    Rule(BOTAPP_FLOOR_1, BOTAPP_ABOVE_FLOOR_1 + ("config", "scheduler", "api") + TOOLING, "floor 1 is below every layer"),
    Rule(
        ("botapp/telegram",),
        tuple(f for f in BOTAPP_ABOVE_FLOOR_1 if f != "botapp.telegram") + ("config", "scheduler", "api") + TOOLING,
        "the way to Telegram knows no layer above it",
    ),
    Rule(
        ("botapp/config.py",),
        ("botapp.models", "botapp.services", "botapp.bot", "botapp.admin", "botapp.views", "botapp.management", "config"),
        "the bot's variables are read before anything runs",
    ),
    Rule(
        ("botapp/models",),
        ("botapp.services", "botapp.bot", "botapp.admin", "botapp.views", "botapp.stream", "botapp.management", "api"),
        "models are below services",
    ),
    Rule(
        ("botapp/services",),
        ("botapp.bot", "botapp.admin", "botapp.views", "botapp.stream", "botapp.management", "pyrogram"),
        "services are below the bot and admin, and never touch pyrogram",
    ),
    # The streaming process: like the console, above services; it reads files through the reader
    # of botapp/telegram (downloads.py) but never imports pyrogram itself.
    Rule(
        ("botapp/stream",),
        ("pyrogram", "botapp.bot", "botapp.admin", "botapp.management"),
        "the streaming process serves files through services and the reader",
    ),
    Rule(
        ("botapp/bot",), ("pyrogram", "botapp.admin", "botapp.management"), "the conversation speaks the gateway's domain types"
    ),
    Rule(("botapp/admin",), ("botapp.bot", "botapp.stream", "botapp.management", "pyrogram"), "the console calls services"),
    Rule(("botapp",), ("scheduler", "api") + TOOLING, "botapp asks for background work with signals"),
    # scheduler/admin.py shows job runs and schedules in the console, with the console's base classes.
    Rule(
        ("scheduler",),
        ("api", "botapp.admin", "botapp.bot") + TOOLING,
        "jobs call services; the API is on top",
        ("scheduler/admin.py",),
    ),
    # api/admin.py registers the API's tokens in the console, with the console's base class.
    Rule(
        ("api",),
        ("botapp.admin", "botapp.bot", "pyrogram") + TOOLING,
        "the API calls services (shared validation lives there), never the console",
        ("api/admin.py",),
    ),
    # The harness and the sandbox drive the bot, its jobs and the model of Telegram; never the API.
    Rule(("offline",), ("api",), "the sandbox plays Telegram's side and the operator's, not the API's clients"),
    Rule(
        ("inmemory_telegram",),
        PRODUCT + ("offline", "django"),
        "the model of Telegram depends on kurigram and itself, not on the code it tests",
    ),
]
TELEGRAM_ALLOWED_IN_MODELS = ("botapp.telegram.limits",)  # Telegram's numbers: plain constants


def _modules(folder: str) -> list[Path]:
    path = ROOT / folder
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob("*.py") if "migrations" not in p.parts)


def rule_breaches(rule: Rule, path: Path, source: str | None = None) -> list[str]:
    """Each import of `path` (its text, or `source` planted in its place) that the rule forbids."""
    relative = str(path.relative_to(ROOT))
    if relative in rule.except_files:
        return []
    text = path.read_text() if source is None else source
    return [f"{hit}  ({rule.why})" for hit in forbidden_imports(text, relative, rule.forbidden)]


def layer_breaches(rules=LAYER_RULES) -> list[str]:
    found = []
    for rule in rules:
        for folder in rule.covers:
            modules = _modules(folder)
            assert modules, folder
            for path in modules:
                found += rule_breaches(rule, path)
    return found


def test_each_layer_imports_only_what_is_below_it():
    models_to_telegram = [
        hit
        for path in _modules("botapp/models")
        for hit in forbidden_imports(path.read_text(), str(path.relative_to(ROOT)), ("botapp.telegram",))
        if not any(allowed in hit for allowed in TELEGRAM_ALLOWED_IN_MODELS)
    ]
    found = layer_breaches() + models_to_telegram
    assert found == [], "imports that run back up a layer:\n" + "\n".join(found)


def _rules_covering(relative: str) -> list[Rule]:
    return [r for r in LAYER_RULES if any(relative == c or relative.startswith(c + "/") for c in r.covers)]


@pytest.mark.parametrize(
    ("module", "planted"),
    [
        ("botapp/telegram/console.py", "from botapp.config import bot_config_load"),
        ("botapp/telegram/limiter.py", "import botapp.services.outgoing"),
        ("botapp/telegram/updates.py", "from config.error_reports import scrub"),
        ("inmemory_telegram/server.py", "from botapp import clock"),
        ("inmemory_telegram/state.py", "def f():\n    from botapp.telegram.gateway import Media"),
        ("inmemory_telegram/server.py", "from offline.telegram.clients import OfflineBot"),
        ("inmemory_telegram/server.py", "from django.conf import settings"),
        ("api/serializers.py", "from botapp.admin.compose import ComposedMessageForm"),
        ("config/settings.py", "from botapp.telegram.limits import USER_ID_MAX"),
        ("botapp/clock.py", "from botapp.models import TelegramUser"),
        ("botapp/config.py", "from botapp.services.users import user_get"),
        ("scheduler/tasks.py", "from api import views"),
    ],
)
def test_the_rules_refuse_a_planted_import(module, planted):
    """Each rule as the real test applies it, to a real module with one import planted in it."""
    path = ROOT / module
    assert path.is_file(), module
    rules = _rules_covering(module)
    assert rules, f"no rule covers {module}"
    source = path.read_text() + "\n" + planted + "\n"
    assert any(rule_breaches(rule, path, source) for rule in rules)
    assert not any(rule_breaches(rule, path) for rule in rules)  # the module as it is passes


def test_the_config_package_is_not_botapp_config():
    rule = next(r for r in LAYER_RULES if r.covers == ("botapp/telegram",))
    path = ROOT / "botapp/telegram/limits.py"
    assert rule_breaches(rule, path, "from botapp.config import x\n")
    assert rule_breaches(rule, path, "from config.error_reports import x\n")
    assert rule_breaches(rule, path, "import config\n")
    assert not rule_breaches(rule, path, "from django.conf import settings\n")


def test_every_package_has_a_rule():
    """A new top-level package, or a module of botapp's top floor, gets a rule before it lands."""
    packages = sorted(p.parent.name for p in ROOT.glob("*/__init__.py") if p.parent.name not in ("tests",))
    assert sorted(PACKAGES) == packages
    covered = {c for rule in LAYER_RULES for c in rule.covers}
    for package in PACKAGES:
        assert package in covered or any(c.startswith(package + "/") for c in covered), package


def test_the_product_never_imports_its_tooling():
    """The in-memory Telegram and the sandbox are reached by settings only
    (TELEGRAM_OFFLINE_CONNECTION), as boto3 is pointed at moto by an endpoint URL."""
    found = []
    for package in PRODUCT:
        for path in _modules(package):
            found += forbidden_imports(path.read_text(), str(path.relative_to(ROOT)), TOOLING)
    assert found == [], "production modules import the offline tooling:\n" + "\n".join(found)


def _package_of(module: str) -> str:
    """botapp's layers count as packages of their own: botapp.telegram, botapp.services, ..."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "botapp" and len(parts) > 2 else parts[0]


def private_imports(source: str, module: str, filename: str = "<source>") -> list[str]:
    """`from other.package import _name`: a private name taken across packages, as 'file:line: name'."""
    found = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if _package_of(node.module + ".x") == _package_of(module):
                continue
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append(f"{filename}:{node.lineno}: {node.module}.{alias.name}")
    return found


def test_the_private_name_check_sees_across_packages():
    source = "from botapp.management.commands.runbot import _remember\nfrom botapp.services.users import _own\n"
    assert private_imports(source, "offline.sandbox") == [
        "<source>:1: botapp.management.commands.runbot._remember",
        "<source>:2: botapp.services.users._own",
    ]
    assert private_imports(source, "botapp.services.files") == ["<source>:1: botapp.management.commands.runbot._remember"]
    assert private_imports("from botapp.services.users import __all__\n", "api.views") == []


def test_no_private_name_is_imported_across_packages():
    found = []
    for package in PACKAGES:
        for path in _modules(package):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found += private_imports(path.read_text(), module, str(path.relative_to(ROOT)))
    assert found == [], "private names used outside their package (give them a public name):\n" + "\n".join(found)


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


def test_no_import_circles_in_any_package():
    """Function-level imports count: one that only dodges a circle at import time is a circle still."""
    files = [p for package in PACKAGES for p in _modules(package)]
    circles = import_circles(import_graph(files))
    assert circles == [], "modules that import each other:\n" + "\n".join(" <-> ".join(c) for c in circles)
