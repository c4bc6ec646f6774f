#!/usr/bin/env python3
"""The sources of the extension, in load order: sql/src/MANIFEST.md.

The manifest lists every source file under a heading of the group of what it
does ("## The take: `take/`"), one Markdown list item per file:
"- [name.sql](group/name.sql): what it holds".  The link is the file's path
under sql/src/, in the folder its group's heading names.  make concatenates
the files in this order into the install script; tools/build_upgrade.py and
tools/dequeue_size.py read the functions in this order too.

Usage:
  tools/manifest.py files    the source paths (sql/src/...), in load order,
                             after the check below (make's SQL_SOURCES)
  tools/manifest.py check    exit 1, naming each, when a file under sql/src/
                             is listed twice or not at all, a listed file does
                             not exist, or lies outside its group's folder
"""

from __future__ import annotations

import pathlib
import re
import sys
from typing import NamedTuple

ROOT = pathlib.Path(__file__).resolve().parent.parent
SRC = ROOT / "sql" / "src"
MANIFEST = SRC / "MANIFEST.md"

GROUP = re.compile(r"^## .*: `(\w+)/`\s*$")
ITEM = re.compile(r"^- \[([^\]]+)\]\(([^)]+)\)")


def entries() -> list[tuple[str, str]]:
    """(group folder, path under sql/src) of each listed file, in order."""
    found: list[tuple[str, str]] = []
    group = ""
    for line in MANIFEST.read_text().splitlines():
        if match := GROUP.match(line):
            group = match.group(1)
        elif match := ITEM.match(line):
            found.append((group, match.group(2)))
    return found


def problems() -> list[str]:
    listed = entries()
    errors: list[str] = []
    seen: set[str] = set()
    for group, path in listed:
        if path in seen:
            errors.append(f"{path}: listed twice")
        seen.add(path)
        if not (SRC / path).is_file():
            errors.append(f"{path}: listed, but there is no such file")
        if not group:
            errors.append(f"{path}: listed before the first group heading")
        elif pathlib.PurePosixPath(path).parent.as_posix() != group:
            errors.append(f"{path}: listed under the group `{group}/`, but lies elsewhere")
    for path in sorted(SRC.rglob("*.sql")):
        relative = path.relative_to(SRC).as_posix()
        if relative not in seen:
            errors.append(f"{relative}: not listed (every source file has its place in the manifest)")
    return errors


def sources() -> list[pathlib.Path]:
    """The source files, in load order (raises when the manifest is wrong)."""
    errors = problems()
    if errors:
        raise SystemExit("error: sql/src/MANIFEST.md:\n  " + "\n  ".join(errors))
    return [SRC / path for _, path in entries()]


def functions() -> list[pathlib.Path]:
    """The source files that create functions, in load order."""
    return [p for p in sources() if re.search(r"^CREATE FUNCTION ", p.read_text(), re.M)]


class Definition(NamedTuple):
    """One CREATE FUNCTION of a source file: its name, the text of its
    parameter list, its attributes (RETURNS ... up to AS), its body (between
    AS $$ and $$;) and the index of its first line in the file."""
    path: pathlib.Path
    name: str
    signature: str
    attributes: str
    body: str
    line: int


DEFINITION = re.compile(r"^CREATE FUNCTION @extschema@\.(\w+)\((.*?)\)\s*RETURNS(.*?)AS \$\$(.*?)\$\$;", re.S | re.M)


def definitions() -> list[Definition]:
    """Every function definition of the sources, in load order."""
    found = []
    for path in functions():
        text = path.read_text()
        for m in DEFINITION.finditer(text):
            found.append(Definition(path, *m.groups(), text.count("\n", 0, m.start())))
    return found


def main() -> int:
    command = sys.argv[1] if len(sys.argv) > 1 else "check"
    if command == "files":
        for path in sources():
            print(path.relative_to(ROOT).as_posix())
        return 0
    if command == "check":
        errors = problems()
        for error in errors:
            print(f"error: sql/src/MANIFEST.md: {error}", file=sys.stderr)
        return 1 if errors else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
