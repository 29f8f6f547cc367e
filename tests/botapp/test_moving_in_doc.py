"""docs/moving-in.md names, beside each claim, the test that checks it: every name must be a test
that exists, so the page cannot point at a test renamed or removed."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "moving-in.md"
# `test_file.py::test_name`, or `::test_name` for another test of the file named last.
REFERENCE = re.compile(r"`(test_\w+\.py)?::(test_\w+)`")


def missing_tests(text: str, folder: Path) -> list[str]:
    """The references of `text` to tests that `folder` (searched at any depth by file name) does not have."""
    missing, current = [], None
    for match in REFERENCE.finditer(text):
        current = match.group(1) or current
        path = next(folder.rglob(current), None) if current else None
        names = (
            {n.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.FunctionDef)}
            if path and path.is_file()
            else set()
        )
        if match.group(2) not in names:
            missing.append(f"{current}::{match.group(2)}")
    return missing


def test_every_test_the_page_names_exists_and_there_are_some():
    text = PAGE.read_text()
    assert len(REFERENCE.findall(text)) >= 15
    assert missing_tests(text, ROOT / "tests") == []


def test_the_checker_finds_a_renamed_test_and_a_missing_file():
    planted = "`test_import_mongo.py::test_gone` and `::test_todays_token_counts_are_carried_and_older_days_are_not`, `test_nowhere.py::test_x`"
    assert missing_tests(planted, ROOT / "tests") == ["test_import_mongo.py::test_gone", "test_nowhere.py::test_x"]
