"""The pages read as written: no sentence said twice within a table cell.

Errors tables grew by appending causes to a cell, and six 40001 rows ended up
with merged, repeated sentences ("... Retry the transaction; under REPEATABLE
READ ... Retry the transaction; ...", "Retry; ... Retry the transaction").
A cell's clauses (split at '.' and ';') of three words or more must each
appear once, and a short one must not start another. No database needed.
"""

from __future__ import annotations

import collections
import re
from pathlib import Path

import pytest

from conftest import REPO_ROOT

PAGES = [REPO_ROOT / "README.md", REPO_ROOT / "UPGRADING.md", *sorted((REPO_ROOT / "doc").glob("*.md"))]


def repeated_clauses(cell: str) -> list[str]:
    """Clauses of three words or more said twice, and a short clause of words
    ("Retry") that a longer one of the cell says again ("Retry the
    transaction")."""
    clauses = [re.sub(r"\s+", " ", c).strip().lower() for c in re.split(r"[.;](?:\s|$)", cell)]
    counts = collections.Counter(c for c in clauses if len(c.split()) >= 3)
    found = [c for c, n in counts.items() if n > 1]
    found += [a for a in dict.fromkeys(clauses) if re.fullmatch(r"[a-z]+(?: [a-z]+){0,2}", a)
              and any(b.startswith(a + " ") for b in clauses)]
    return found


def test_repeated_clauses_are_found():
    cell = "the key kept changing hands. Retry the transaction; under SERIALIZABLE too. Retry the transaction; done"
    assert repeated_clauses(cell) == ["retry the transaction"]
    assert repeated_clauses("its row could not be locked. Retry; under SERIALIZABLE. Retry the transaction") == [
        "retry"]
    assert repeated_clauses("Retry the transaction; or not. Retry later") == []
    assert repeated_clauses("at most 31536000000; 31536000000 (365 days) is the default") == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_clause_is_repeated_within_a_table_cell(page: Path):
    found = []
    in_code = False
    for n, line in enumerate(page.read_text().splitlines(), 1):
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("|"):
            continue
        for cell in line.strip().strip("|").split(" | "):
            found += [f"line {n}: {c!r}" for c in repeated_clauses(cell)]
    assert not found, f"{page.name}: a clause repeated within a table cell:\n" + "\n".join(found)
