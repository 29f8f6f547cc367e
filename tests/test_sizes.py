"""A module fits on a screen or two, and a class does one thing (docs/contributing.md): no product
module over MODULE_LINES lines and no class over CLASS_METHODS methods of its own, unless its
docstring says why in a paragraph starting "Why this size:". This test reads the product and the
tooling with ast and names each one over a bound without that paragraph."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("botapp", "scheduler", "api", "config", "offline", "inmemory_telegram")
MODULE_LINES = 600
CLASS_METHODS = 30
REASON = "Why this size:"


def oversized(source: str, filename: str = "<source>") -> list[str]:
    """'file: what is over its bound' for the module and each class of `source` without a reason."""
    tree = ast.parse(source, filename=filename)
    found = []
    lines = len(source.splitlines())
    if lines > MODULE_LINES and REASON not in (ast.get_docstring(tree) or ""):
        found.append(f"{filename}: {lines} lines")
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            methods = [n for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
            if len(methods) > CLASS_METHODS and REASON not in (ast.get_docstring(node) or ""):
                found.append(f"{filename}: class {node.name}, {len(methods)} methods")
    return found


def test_the_check_sees_long_modules_and_wide_classes_without_a_reason():
    methods = "".join(f"    def m{i}(self):\n        pass\n" for i in range(CLASS_METHODS + 1))
    wide = f"class Wide:\n{methods}"
    reasoned = f'class Wide:\n    """Does a lot.\n\n    Why this size: Django asks for each hook by name."""\n{methods}'
    long = "x = 1\n" * (MODULE_LINES + 1)
    assert oversized(wide) == [f"<source>: class Wide, {CLASS_METHODS + 1} methods"]
    assert oversized(reasoned) == []
    assert oversized(long) == [f"<source>: {MODULE_LINES + 1} lines"]
    assert oversized('"""Long.\n\nWhy this size: one format, one reader."""\n' + long) == []


def test_no_module_or_class_is_over_its_bound_without_a_reason():
    found = [
        hit
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if "migrations" not in path.parts
        for hit in oversized(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert found == []
