"""Run every pgTAP file in test/pgtap/ with pg_prove, one pytest test per file.

Each file runs in its own database cloned from the template (pgtap + lonnymq
installed), as the superuser postgres over the cluster's unix socket. On
failure the assertion message carries pg_prove's complete (verbose) TAP output.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from conftest import REPO_ROOT

PGTAP_DIR = REPO_ROOT / "test" / "pgtap"
PGTAP_FILES = sorted(PGTAP_DIR.glob("*.sql"), key=lambda p: p.name.encode())
TIMEOUT_S = 900


@pytest.mark.parametrize(
    "path",
    PGTAP_FILES or [None],
    ids=[p.name for p in PGTAP_FILES] or ["no-pgtap-files"],
)
def test_pgtap(path, cluster, db):
    if path is None:
        pytest.fail(f"no pgTAP files found in {PGTAP_DIR} (*.sql)", pytrace=False)
    pg_prove = shutil.which("pg_prove")
    if pg_prove is None:
        pytest.fail("pg_prove not found: install libtap-parser-sourcehandler-pgtap-perl (make deps)",
                    pytrace=False)
    cmd = [
        pg_prove,
        "--psql-bin", str(cluster.bindir / "psql"),
        *cluster.client_args(db.name),
        "--verbose",
        "--failures",
        str(path),
    ]
    proc = subprocess.run(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=cluster.client_env(),
        timeout=TIMEOUT_S,
        cwd=REPO_ROOT,
    )
    if proc.returncode != 0 or "Result: PASS" not in proc.stdout:
        pytest.fail(
            f"pg_prove failed (exit {proc.returncode}) on {path.relative_to(REPO_ROOT)}\n"
            f"command: {' '.join(cmd)}\n"
            f"----- TAP output -----\n{proc.stdout}",
            pytrace=False,
        )
