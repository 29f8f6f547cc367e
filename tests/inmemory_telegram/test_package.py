"""The in-memory Telegram is a package of its own, as moto is beside boto3: it depends on the
standard library, kurigram's public modules, a cipher (cryptg) and itself, never on Courier (a model that shared the
product's numbers or types would hide the product's mistakes), and has no import circle. That the
product never imports it: tests/test_layering.py."""

import ast
import sys

from tests.test_layering import ROOT, import_circles, import_graph

# kurigram's public modules the model builds on: its TL types and functions, file ids, crypto.
KURIGRAM = ("pyrogram.raw", "pyrogram.file_id", "pyrogram.crypto")
OWN = "inmemory_telegram"
# MTProto's AES-256-IGE (inmemory_telegram/wire.py): a cipher, none of Courier's code or choices.
CIPHER = ("cryptg",)


def foreign_imports(source: str, filename: str = "<source>") -> list[str]:
    """Every import (at any depth: function-level and TYPE_CHECKING ones too) of anything but the
    standard library, kurigram's public modules and the package itself, as 'file:line: statement'."""
    found = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            modules = [f"{node.module}.{alias.name}" for alias in node.names] if node.module == "pyrogram" else [node.module]
        else:
            continue
        if not all(_allowed(module) for module in modules):
            found.append((node.lineno, f"{filename}:{node.lineno}: {ast.unparse(node)}"))
    return [hit for _, hit in sorted(found)]


def _allowed(module: str) -> bool:
    top = module.split(".")[0]
    inside = (OWN, *KURIGRAM, *CIPHER)
    return top in sys.stdlib_module_names or any(module == p or module.startswith(p + ".") for p in inside)


def test_the_check_sees_an_import_of_the_product_or_of_kurigram_s_client():
    source = """
import os, json
from datetime import UTC
from pyrogram import raw
from pyrogram.raw.core import TLObject
from pyrogram.file_id import FileId
from inmemory_telegram.state import Message
from botapp import clock
def f():
    from botapp.telegram.limits import IDS_PER_CALL
    import django
from pyrogram import Client
from pyrogram.session.session import Session
from offline.telegram.clients import OfflineBot
"""
    assert [hit.split(": ", 1)[0] for hit in foreign_imports(source)] == [
        "<source>:8",
        "<source>:10",
        "<source>:11",
        "<source>:12",
        "<source>:13",
        "<source>:14",
    ]


def test_the_in_memory_telegram_depends_on_kurigram_and_itself_only():
    modules = sorted((ROOT / OWN).rglob("*.py"))
    assert len(modules) > 10  # the walk found its modules
    found = [hit for path in modules for hit in foreign_imports(path.read_text(), str(path.relative_to(ROOT)))]
    assert found == [], "the in-memory Telegram imports more than kurigram's public modules:\n" + "\n".join(found)


def test_no_import_circles_in_the_in_memory_telegram():
    files = sorted((ROOT / OWN).rglob("*.py"))
    circles = import_circles(import_graph(files))
    assert circles == [], "modules that import each other:\n" + "\n".join(" <-> ".join(c) for c in circles)
