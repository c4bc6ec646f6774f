#!/usr/bin/env python3
"""Checks every function's header in sql/src/ against its body.

A function's header is the block of comment lines directly above its
CREATE FUNCTION (PgQ's form): what it does, then the labelled sections

  Parameters: each parameter by name (p_x, ...), or "none"
  Returns:    what it returns
  Calls:      the extension's functions its body calls, or "none"
  Tables:     "reads" t, ... and "writes" t, ...: the extension's tables and
              sequences its body reads and writes, or "none"
  Locks:      the locks it takes, or "none"

A section runs to the next label; where a label occurs more than once in the
block (a file's general text above one function's own), the last counts.
Text in parentheses is commentary and is not read: "reads message
(message_ready_ix, from the mark)" names the table message.  What the body
does is read from its text, comments left out:

  Calls   every @extschema@.f( of a function f of sql/src/, outside string
          literals;
  Tables  every @extschema@.t of a table or sequence t of sql/src/schema/:
          written when it follows INSERT INTO, UPDATE, DELETE FROM or
          MERGE INTO, or is the sequence of a nextval or setval; read
          otherwise (a composite type's use, after :: or in DECLARE, is
          neither);
  Locks   every advisory key (a number 18191116NN, the keys of
          sql/src/LOCKS.md) must be named in Locks, and so must each row
          lock strength (FOR UPDATE, FOR NO KEY UPDATE, FOR SHARE, FOR KEY
          SHARE) the body takes.

Calls and Tables must list exactly what the body does: a name the body does
not use is an error too.  And sql/src/LOCKS.md, the list of every advisory
key, must name each key the sources use, and in that key's row, every
function whose body takes it.

Usage: tools/headers.py [--suggest]   (exit 1 on any problem; --suggest
prints the Calls and Tables the bodies give, to copy into a new header)
"""

from __future__ import annotations

import re
import sys

import manifest

LABELS = ("Parameters", "Returns", "Calls", "Tables", "Locks")
LOCK_STRENGTHS = ("FOR UPDATE", "FOR NO KEY UPDATE", "FOR SHARE", "FOR KEY SHARE")
ADVISORY_KEY = re.compile(r"\b18191116\d\d\b")
LOCKS_FILE = manifest.SRC / "LOCKS.md"


class Function:
    def __init__(self, path, name, params, header, body):
        self.path, self.name, self.params = path, name, params
        self.header, self.body = header, body


def strip_comments(sql: str) -> str:
    return re.sub(r"--[^\n]*", "", sql)


def functions() -> list[Function]:
    found = []
    for d in manifest.definitions():
        lines = d.path.read_text().splitlines()
        header: list[str] = []
        i = d.line - 1
        while i >= 0 and lines[i].startswith("--"):
            header.insert(0, re.sub(r"^--\s?", "", lines[i]))
            i -= 1
        params = re.findall(r"\b(p_\w+)\b", strip_comments(d.signature))
        found.append(Function(d.path, d.name, params, header, d.body))
    return found


def schema_objects() -> tuple[set[str], set[str]]:
    tables, sequences = set(), set()
    for path in manifest.sources():
        if path.parent.name != "schema":
            continue
        text = path.read_text()
        tables |= set(re.findall(r"^CREATE TABLE @extschema@\.(\w+)", text, re.M))
        sequences |= set(re.findall(r"^CREATE SEQUENCE @extschema@\.(\w+)", text, re.M))
    return tables, sequences


def sections(header: list[str]) -> dict[str, str]:
    """Each label's text (the last occurrence), parentheses removed."""
    text = " ".join(line.strip() for line in header)
    found: dict[str, str] = {}
    marks = list(re.finditer(r"\b(" + "|".join(LABELS) + r"):", text))
    for k, mark in enumerate(marks):
        end = marks[k + 1].start() if k + 1 < len(marks) else len(text)
        found[mark.group(1)] = text[mark.end():end].strip()
    return found


def without_parentheses(text: str) -> str:
    previous = None
    while previous != text:
        previous, text = text, re.sub(r"\([^()]*\)", " ", text)
    return text


def body_uses(f: Function, names: set[str], tables: set[str], sequences: set[str]):
    code = strip_comments(f.body)
    # (A signature in a string, '@extschema@.f(text)'::regprocedure, is not a call.)
    unquoted = re.sub(r"'(?:[^']|'')*'", "''", code)
    calls = {n for n in re.findall(r"@extschema@\.(\w+)\s*\(", unquoted) if n in names}
    reads, writes = set(), set()
    for m in re.finditer(r"@extschema@\.(\w+)", code):
        name = m.group(1)
        if name not in tables and name not in sequences:
            continue
        before = code[max(0, m.start() - 40):m.start()]
        after = code[m.end():m.end() + 10]
        # v_row @extschema@.t; (a declaration, not a statement's UPDATE t)
        declared = re.search(r"(^|;|\bDECLARE)\s*(?!(?:UPDATE|ONLY)\s)\w+\s+$", before, re.I)
        if before.rstrip().endswith("::") or after.startswith(("%ROWTYPE", "[]")) or declared:
            continue
        if name in sequences:
            (writes if re.search(r"(nextval|setval)\s*\(\s*'$", before) else reads).add(name)
        elif re.search(r"\b(INSERT\s+INTO|UPDATE(\s+ONLY)?|DELETE\s+FROM|MERGE\s+INTO)\s+$", before, re.I):
            writes.add(name)
        else:
            reads.add(name)
    keys = set(ADVISORY_KEY.findall(code))
    strengths = {s for s in LOCK_STRENGTHS if re.search(r"\b" + s.replace(" ", r"\s+") + r"\b", code)}
    # FOR UPDATE is a prefix of nothing else; FOR NO KEY UPDATE contains "KEY UPDATE", not "FOR UPDATE".
    return calls, reads, writes, keys, strengths


def listed(text: str, known: set[str]) -> set[str]:
    return set(re.findall(r"\b\w+\b", without_parentheses(text))) & known


def table_lists(text: str, known: set[str]) -> tuple[set[str], set[str]] | None:
    text = without_parentheses(text)
    if re.fullmatch(r"\s*none\s*\.?\s*", text, re.I):
        return set(), set()
    reads, writes = set(), set()
    parts = re.split(r"\b(reads|writes)\b", text)
    if len(parts) == 1:
        return None
    for verb, words in zip(parts[1::2], parts[2::2]):
        (reads if verb == "reads" else writes).update(set(re.findall(r"\b\w+\b", words)) & known)
    return reads, writes


def locks_file() -> dict[str, str]:
    """Each advisory key of sql/src/LOCKS.md, with the text of its table rows."""
    rows: dict[str, str] = {}
    if LOCKS_FILE.is_file():
        for line in LOCKS_FILE.read_text().splitlines():
            if line.startswith("|"):
                for key in ADVISORY_KEY.findall(line.split("|")[1]):
                    rows[key] = rows.get(key, "") + line
    return rows


def check_function(f: Function, names: set[str], tables: set[str], sequences: set[str]) -> list[str]:
    """The problems of one function's header, given every function's name and
    the schema's tables and sequences."""
    where = f"{f.path.relative_to(manifest.ROOT) if f.path.is_absolute() else f.path}: {f.name}"
    calls, reads, writes, keys, strengths = body_uses(f, names - {f.name}, tables, sequences)
    s = sections(f.header)
    first = " ".join(f.header).split(":")[0] if f.header else ""
    if not f.header or not first.strip():
        return [f"{where}: no header (what it does, then {', '.join(LABELS)})"]
    problems = [f"{where}: the header has no '{label}:'" for label in LABELS if label not in s]
    if "Parameters" in s:
        text = s["Parameters"]
        missing = [p for p in f.params if not re.search(r"\b" + p + r"\b", text)]
        if missing:
            problems.append(f"{where}: Parameters: does not name {', '.join(missing)}")
        if not f.params and not re.match(r"none\b", text, re.I):
            problems.append(f"{where}: Parameters: the function has none: say 'none'")
    if "Calls" in s:
        said = listed(s["Calls"], names)
        if said != calls:
            problems.append(f"{where}: Calls: {fmt(said, calls)}")
    if "Tables" in s:
        lists = table_lists(s["Tables"], tables | sequences)
        if lists is None:
            problems.append(f"{where}: Tables: say 'none', or 'reads ...' and/or 'writes ...'")
        else:
            said_reads, said_writes = lists
            if said_reads != reads:
                problems.append(f"{where}: Tables reads: {fmt(said_reads, reads)}")
            if said_writes != writes:
                problems.append(f"{where}: Tables writes: {fmt(said_writes, writes)}")
    if "Locks" in s:
        text = s["Locks"]
        for key in sorted(keys):
            if key not in text:
                problems.append(f"{where}: Locks: does not name advisory key {key}, which the body takes")
        for strength in sorted(strengths):
            if strength not in text:
                problems.append(f"{where}: Locks: does not name the row locks {strength} the body takes")
    return problems


def check_locks(used_keys: dict[str, set[str]], lock_rows: dict[str, str]) -> list[str]:
    """The problems of sql/src/LOCKS.md, given which functions take each key."""
    problems = []
    for key, takers in sorted(used_keys.items()):
        row = lock_rows.get(key)
        if row is None:
            problems.append(f"sql/src/LOCKS.md: advisory key {key} is used ({', '.join(sorted(takers))}) but not listed")
            continue
        for name in sorted(takers):
            if not re.search(r"\b" + re.escape(name) + r"\b", row):
                problems.append(f"sql/src/LOCKS.md: the row of key {key} does not name {name}, which takes it")
    for key in sorted(set(lock_rows) - set(used_keys)):
        problems.append(f"sql/src/LOCKS.md: advisory key {key} is listed but no function takes it")
    return problems


def main() -> int:
    suggest = "--suggest" in sys.argv[1:]
    funcs = functions()
    names = {f.name for f in funcs}
    tables, sequences = schema_objects()
    problems: list[str] = []
    used_keys: dict[str, set[str]] = {}
    for f in funcs:
        calls, reads, writes, keys, strengths = body_uses(f, names - {f.name}, tables, sequences)
        for key in keys:
            used_keys.setdefault(key, set()).add(f.name)
        if suggest:
            tables_text = "; ".join(f"{verb} {', '.join(sorted(names_))}" for verb, names_ in
                                    (("reads", reads), ("writes", writes)) if names_) or "none"
            print(f"{f.path.relative_to(manifest.ROOT)}: {f.name}\n  Calls: {', '.join(sorted(calls)) or 'none'}.\n"
                  f"  Tables: {tables_text}."
                  + (f"\n  Locks: advisory {', '.join(sorted(keys))}; rows {', '.join(sorted(strengths))}"
                     if keys or strengths else ""))
        problems += check_function(f, names, tables, sequences)
    problems += check_locks(used_keys, locks_file())
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if problems:
        print(f"headers: {len(problems)} problem(s) in {len(funcs)} functions", file=sys.stderr)
        return 1
    print(f"headers: {len(funcs)} functions, every header agrees with its body")
    return 0


def fmt(said: set[str], does: set[str]) -> str:
    parts = []
    if does - said:
        parts.append("missing " + ", ".join(sorted(does - said)))
    if said - does:
        parts.append("names " + ", ".join(sorted(said - does)) + ", which the body does not use")
    return "; ".join(parts)


if __name__ == "__main__":
    sys.exit(main())
