"""The services' contract: every public function in botapp/services/*.py says in a docstring what it
guarantees, and takes its arguments by keyword only (`def f(*, a, b)`), so a call reads as what it
passes and two arguments of one type can never be swapped. This test reads each module with ast and
names every function that breaks the rule; private helpers (`_name`) and methods are not covered, and
a function other code calls back with a fixed signature keeps it (CALLBACKS, each with its reason)."""

import ast
from pathlib import Path

SERVICES = Path(__file__).resolve().parents[1] / "botapp" / "services"

# Functions handed to other code that calls them positionally: their signature is that code's.
CALLBACKS = {
    "user_access_hash": "the gateways' `peers` lookup (PyrogramGateway calls peers(chat_id))",
    "user_access_hashes_fill": "the gateways' `peers_learnt` (PyrogramGateway calls peers_learnt(hashes))",
}


def contract_breaches(source: str, filename: str = "<source>") -> list[str]:
    """'file:line name: what is wrong' for each public module-level function breaking the rule."""
    found = []
    for node in ast.parse(source, filename=filename).body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or node.name.startswith("_"):
            continue
        where = f"{filename}:{node.lineno} {node.name}"
        if not ast.get_docstring(node):
            found.append(f"{where}: no docstring")
        positional = [a.arg for a in node.args.posonlyargs + node.args.args]
        if (positional or node.args.vararg) and node.name not in CALLBACKS:
            found.append(f"{where}: positional arguments {positional or ['*' + node.args.vararg.arg]}")
    return found


def test_the_check_sees_what_it_is_for():
    source = '''
def good(*, a, b=1, **extra):
    """Says what it does."""

def positional(a, *, b):
    """Documented."""

def bare(*, a):
    pass

def _private(a):
    pass
'''
    assert contract_breaches(source) == [
        "<source>:5 positional: positional arguments ['a']",
        "<source>:8 bare: no docstring",
    ]


def test_every_public_service_function_is_documented_and_keyword_only():
    breaches = []
    for path in sorted(SERVICES.glob("*.py")):
        breaches += contract_breaches(path.read_text(), str(path.relative_to(SERVICES.parents[1])))
    assert breaches == []
