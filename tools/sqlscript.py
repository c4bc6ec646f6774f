"""Read the extension's SQL scripts as statements, and follow the functions
they define.

split() cuts a script into its statements (psql meta-command lines are
statements of their own), honouring comments, quoted strings, quoted
identifiers and dollar quotes.  CatalogState replays scripts statement by
statement and tells whether a CREATE [OR REPLACE] FUNCTION, a COMMENT ON or a
REVOKE ... FROM PUBLIC would leave an object exactly as it already is: used by
tools/build_upgrade.py to write upgrade scripts that hold only what changes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_DOLLAR = re.compile(r"\$([A-Za-z_][A-Za-z_0-9]*)?\$")


@dataclass
class Statement:
    text: str          # the statement, leading comments and blank lines removed
    comments: str      # the comment lines that preceded it

    @property
    def head(self) -> str:
        """Its first words, whitespace collapsed, for classification."""
        return " ".join(self.text[:300].split())


def split(script: str) -> list[Statement]:
    out: list[Statement] = []
    i, n = 0, len(script)
    start = 0
    at_line_start = True
    while i < n:
        c = script[i]
        if at_line_start and c == "\\" and not _strip_comments(script[start:i])[1].strip():
            end = script.find("\n", i)
            end = n if end < 0 else end
            _append(out, script[start:i], script[i:end])
            i = start = end
            continue
        at_line_start = False
        if c == "\n":
            at_line_start = True
            i += 1
        elif script.startswith("--", i):
            end = script.find("\n", i)
            i = n if end < 0 else end
        elif script.startswith("/*", i):
            end = script.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif c == "'":
            escapes = i > 0 and script[i - 1] in "eE"
            i += 1
            while i < n:
                if escapes and script[i] == "\\":
                    i += 2
                    continue
                if script[i] == "'":
                    if script.startswith("''", i):
                        i += 2
                        continue
                    break
                i += 1
            i += 1
        elif c == '"':
            end = script.find('"', i + 1)
            i = n if end < 0 else end + 1
        elif c == "$" and (m := _DOLLAR.match(script, i)) and not (i > 0 and (script[i - 1].isalnum() or script[i - 1] == "_")):
            tag = m.group(0)
            end = script.find(tag, m.end())
            i = n if end < 0 else end + len(tag)
        elif c == ";":
            _append(out, script[start:i + 1])
            i = start = i + 1
        else:
            i += 1
    rest = script[start:]
    if rest.strip() and _strip_comments(rest)[1].strip():
        raise ValueError(f"unterminated statement at the end: {rest.strip()[:80]!r}")
    return out


def _strip_comments(chunk: str) -> tuple[str, str]:
    """(leading comment lines, the rest) of a chunk."""
    lines = chunk.split("\n")
    k = 0
    while k < len(lines) and (not lines[k].strip() or lines[k].lstrip().startswith("--")):
        k += 1
    return "\n".join(lines[:k]), "\n".join(lines[k:])


def _append(out: list[Statement], chunk: str, meta: str | None = None) -> None:
    """The statement that ends chunk (or the meta-command line that follows it)."""
    comments, rest = _strip_comments(chunk)
    out.append(Statement((rest if meta is None else meta).strip(), comments.strip("\n")))


_CREATE_FUNCTION = re.compile(r"^CREATE (OR REPLACE )?FUNCTION\s+([^\s(]+)\s*\(", re.I)
# COMMENT ON <kind> <target> IS ...: a function's target ends with its
# argument types; a column's is table.column.
_COMMENT = re.compile(r"^COMMENT ON (FUNCTION|TABLE|COLUMN|VIEW|TYPE|SEQUENCE|INDEX)\s+([^\s(]+(?:\s*\([^)]*\))?)\s+IS\b", re.I)
_REVOKE_FROM_PUBLIC = re.compile(r"^REVOKE ALL ON FUNCTION\s+([^\s(]+\s*\([^)]*\))\s+FROM PUBLIC;$", re.I)
_DROP_OR_ALTER_FUNCTION = re.compile(r"^(DROP|ALTER) FUNCTION\s+(?:IF EXISTS\s+)?([^\s(]+)", re.I)
_DROP_RELATION = re.compile(r"^DROP (TABLE|VIEW|TYPE|SEQUENCE|INDEX)\s+(?:IF EXISTS\s+)?([^\s;]+)", re.I)


def _parameters(text: str, open_paren: int) -> str:
    """The parameter list that opens at text[open_paren] (parentheses nest)."""
    depth = 0
    for j in range(open_paren, len(text)):
        if text[j] == "(":
            depth += 1
        elif text[j] == ")":
            depth -= 1
            if depth == 0:
                return " ".join(text[open_paren:j + 1].split())
    raise ValueError(f"unbalanced parameter list: {text[:80]!r}")


def _canonical(text: str) -> str:
    """A function definition as CREATE FUNCTION: its header (up to the body's
    dollar quote) with white space folded, as the catalog does not keep it;
    its body as written, trailing blanks removed."""
    text = re.sub(r"^CREATE OR REPLACE FUNCTION", "CREATE FUNCTION", text, flags=re.I)
    m = re.search(r"\bAS\s+(\$[A-Za-z_0-9]*\$)", text)
    head, body = (text[:m.start(1)], text[m.start(1):]) if m else (text, "")
    body = "\n".join(line.rstrip() for line in body.split("\n")).strip()
    return " ".join(head.split()) + " " + body


def _target(text: str) -> str:
    return " ".join(text.split()).lower()


@dataclass
class CatalogState:
    """What the scripts replayed so far have left that a script may set again
    to the same value: the functions (by name and parameter list), the
    comments on objects, and the functions revoked from PUBLIC."""
    definitions: dict[tuple[str, str], str] = field(default_factory=dict)
    comments: dict[tuple[str, str], str] = field(default_factory=dict)
    revoked: set[str] = field(default_factory=set)

    def replay(self, statements: list[Statement]) -> None:
        for s in statements:
            self.apply(s)

    def is_noop(self, s: Statement) -> bool:
        """Would running s leave everything as it is?"""
        m = _CREATE_FUNCTION.match(s.text)
        if m:
            key = (m.group(2).lower(), _parameters(s.text, m.end() - 1))
            return self.definitions.get(key) == _canonical(s.text)
        m = _COMMENT.match(s.text)
        if m:
            return self.comments.get((m.group(1).lower(), _target(m.group(2)))) == s.text
        m = _REVOKE_FROM_PUBLIC.match(s.text)
        if m:
            # CREATE OR REPLACE keeps a function's privileges.
            return _target(m.group(1)) in self.revoked
        return False

    def apply(self, s: Statement) -> None:
        m = _CREATE_FUNCTION.match(s.text)
        if m:
            self.definitions[(m.group(2).lower(), _parameters(s.text, m.end() - 1))] = _canonical(s.text)
            return
        m = _COMMENT.match(s.text)
        if m:
            self.comments[(m.group(1).lower(), _target(m.group(2)))] = s.text
            return
        m = _REVOKE_FROM_PUBLIC.match(s.text)
        if m:
            self.revoked.add(_target(m.group(1)))
            return
        m = _DROP_OR_ALTER_FUNCTION.match(s.text) or _DROP_RELATION.match(s.text)
        if m:
            # Keyed by name only here (a DROP FUNCTION names types, a CREATE
            # names parameters): forget everything about the name, so that
            # whatever defines it again is kept.
            name = m.group(2).lower()
            self.definitions = {k: v for k, v in self.definitions.items() if k[0] != name}
            self.comments = {k: v for k, v in self.comments.items() if not k[1].startswith(name)}
            self.revoked = {k for k in self.revoked if not k.startswith(name + "(")}
