"""The in-memory Telegram is a package of its own: no import circle inside it, and (test_layering.py)
the product never imports it."""

from tests.test_layering import ROOT, import_circles, import_graph


def test_no_import_circles_in_the_in_memory_telegram():
    files = sorted((ROOT / "inmemory_telegram").rglob("*.py"))
    assert len(files) > 10  # the walk found its modules
    circles = import_circles(import_graph(files))
    assert circles == [], "modules that import each other:\n" + "\n".join(" <-> ".join(c) for c in circles)
