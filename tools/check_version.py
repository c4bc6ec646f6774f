#!/usr/bin/env python3
"""Check that every place that names the extension version agrees.

Used by `make check-version` (and so by `make all`). Standard library only:
it runs before the virtualenv exists.

Checks:
  * lonnymq.control: default_version (and, if given, the value make parsed);
  * META.json: valid JSON, PGXN Meta Spec 1.0.0 required keys, `version`,
    `provides.lonnymq.version`, `provides.lonnymq.file`;
  * CHANGELOG.md: the top release heading `## [X.Y.Z] - YYYY-MM-DD`
    or `- unreleased` for a version in progress (a leading `## [Unreleased]`
    section is allowed and skipped).
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

EXTENSION = "lonnymq"
ROOT = Path(__file__).resolve().parent.parent
SEMVER = re.compile(r"^\d+\.\d+\.\d+$")
META_REQUIRED = (
    "name", "abstract", "version", "maintainer", "license", "provides", "meta-spec",
)


def control_version() -> str:
    text = (ROOT / f"{EXTENSION}.control").read_text()
    m = re.search(r"^\s*default_version\s*=\s*'([^']*)'", text, re.M)
    if not m:
        raise SystemExit(f"{EXTENSION}.control: no default_version = '...' line")
    return m.group(1)


def main(argv: list[str]) -> int:
    errors: list[str] = []
    version = control_version()
    if not SEMVER.match(version):
        errors.append(f"{EXTENSION}.control: default_version {version!r} is not X.Y.Z")
    if len(argv) > 1 and argv[1] != version:
        errors.append(f"Makefile parsed VERSION={argv[1]!r} but {EXTENSION}.control says {version!r}")

    # META.json
    try:
        meta = json.loads((ROOT / "META.json").read_text())
    except (OSError, ValueError) as exc:
        errors.append(f"META.json: cannot load: {exc}")
        meta = None
    if isinstance(meta, dict):
        missing = [k for k in META_REQUIRED if k not in meta]
        if missing:
            errors.append(f"META.json: missing required key(s): {', '.join(missing)}")
        if meta.get("name") != EXTENSION:
            errors.append(f"META.json: name is {meta.get('name')!r}, expected {EXTENSION!r}")
        spec = meta.get("meta-spec") or {}
        if not isinstance(spec, dict) or spec.get("version") != "1.0.0":
            errors.append("META.json: meta-spec.version must be \"1.0.0\"")
        if meta.get("version") != version:
            errors.append(f"META.json: version is {meta.get('version')!r}, control says {version!r}")
        prov = (meta.get("provides") or {}).get(EXTENSION)
        if not isinstance(prov, dict):
            errors.append(f"META.json: provides.{EXTENSION} missing")
        else:
            for key in ("file", "version"):
                if key not in prov:
                    errors.append(f"META.json: provides.{EXTENSION}.{key} missing")
            if prov.get("version") != version:
                errors.append(
                    f"META.json: provides.{EXTENSION}.version is {prov.get('version')!r}, "
                    f"control says {version!r}"
                )
            want_file = f"sql/{EXTENSION}--{version}.sql"
            if "file" in prov and prov["file"] != want_file:
                errors.append(f"META.json: provides.{EXTENSION}.file is {prov['file']!r}, expected {want_file!r}")
    elif meta is not None:
        errors.append("META.json: top level is not an object")

    # CHANGELOG.md
    try:
        changelog = (ROOT / "CHANGELOG.md").read_text()
    except OSError as exc:
        errors.append(f"CHANGELOG.md: cannot read: {exc}")
        changelog = ""
    top = None
    for line in changelog.splitlines():
        if not line.startswith("## "):
            continue
        if re.match(r"^## \[?unreleased\]?\s*$", line, re.I):
            continue
        top = line
        break
    if top is None:
        errors.append("CHANGELOG.md: no release heading `## [X.Y.Z] - YYYY-MM-DD`")
    else:
        # A version in progress (its work spans several landings) is
        # headed "- unreleased" until the issue that makes it is done.
        m = re.match(r"^## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2}|unreleased)\s*$", top)
        if not m:
            errors.append(f"CHANGELOG.md: top release heading {top!r} is not `## [X.Y.Z] - YYYY-MM-DD` (or `- unreleased`)")
        elif m.group(1) != version:
            errors.append(f"CHANGELOG.md: top release is {m.group(1)!r}, control says {version!r}")

    if errors:
        print("check-version: FAILED - the version is not the same everywhere:", file=sys.stderr)
        for e in errors:
            print(f"  - {e}", file=sys.stderr)
        return 1
    print(f"check-version: {EXTENSION} {version} (control, META.json, CHANGELOG.md agree)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
