"""Every SQL example in README.md, UPGRADING.md and doc/*.md runs, so the documentation cannot go stale.

One test per page. The rules the pages follow:

- A fenced block whose info string starts with ``sql`` is executed. A page's blocks run in
  page order in ONE psql session (``psql -X -v ON_ERROR_STOP=1``), so psql meta-commands
  and variables (``\\gset``, ``:id``) carry from one block to the next. Each page gets a
  fresh database: cloned from the template (lonnymq installed), or, when the page runs
  ``CREATE EXTENSION lonnymq`` itself (README.md does), an empty one.
- ```` ```sql error ````: the block shows errors. psql goes on after an error inside it,
  and the ``ERROR:`` lines it prints must be, in order, those of the output block (an
  untagged ```` ``` ```` fence) right after it, and so must the SQLSTATEs that
  ``\\echo :LAST_ERROR_SQLSTATE`` prints; with no output block, at least one error.
  Any other block stops the page at its first error.
- ```` ```sql signature ````: a function's signature, not executed but compared with the
  catalog (``pg_get_function_arguments`` and ``pg_get_function_result``).
- ``cron.schedule(job, schedule, command)``: pg_cron is not on the test cluster; a
  stand-in with pg_cron's signature runs ``command`` once, so the command is checked.
- Roles a page creates are dropped after it (roles belong to the cluster).
- ```` ```python ```` blocks run after the page's SQL blocks, against its database
  (README.md's is named ``shop``, as in its examples; ``PGHOST``, ``PGPORT`` and ``PGUSER``
  point at the test cluster). A block that defines ``run(dsn)`` without calling it is
  called with the database's DSN. A block with ``while True:`` is a worker: it runs until
  no message is ready, locked or failed, then gets one more message, which it must
  complete too, and is stopped. Other blocks must exit with status 0. Blocks tagged
  otherwise (``sh``, ``text``, untagged output) are not run.

Failures name the page, the block (1 = the page's first sql block, and the line of its
opening fence) and psql's error.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
PAGES = [REPO_ROOT / "README.md", REPO_ROOT / "UPGRADING.md", *sorted((REPO_ROOT / "doc").glob("*.md"))]
PSQL_TIMEOUT_S = 300
WORKER_TIMEOUT_S = 60

FENCE = re.compile(r"^(?P<indent> *)```(?P<info>[^`\n]*)\n(?P<body>.*?)^(?P=indent)```[ \t]*$",
                   re.M | re.S)
MARK = "@@lonnymq-doc-block"

# pg_cron's cron.schedule(job_name, schedule, command), standing in: runs the command once.
CRON_STAND_IN = """
CREATE SCHEMA cron;
CREATE FUNCTION cron.schedule(job_name text, schedule text, command text) RETURNS bigint
LANGUAGE plpgsql AS $$ BEGIN EXECUTE command; RETURN 1; END $$;
"""


class Block:
    def __init__(self, page: Path, number: int, lang: str, tags: list[str], body: str,
                 output: str | None, line: int) -> None:
        self.page, self.number, self.lang, self.tags, self.body = page, number, lang, tags, body
        self.output = output  # the untagged block right after this one, if any
        self.line = line  # of its opening fence

    def where(self) -> str:
        return f"{self.page.relative_to(REPO_ROOT)}, {self.lang} block {self.number} (line {self.line})"


def blocks(page: Path) -> list[Block]:
    """The page's fenced blocks, numbered per language (sql blocks 1, 2, ...)."""
    text = page.read_text()
    fences = list(FENCE.finditer(text))
    found: list[Block] = []
    counts: dict[str, int] = {}
    for i, m in enumerate(fences):
        words = m["info"].split()
        if not words:
            continue
        lang = words[0]
        counts[lang] = counts.get(lang, 0) + 1
        output = None
        if i + 1 < len(fences):
            nxt = fences[i + 1]
            if not nxt["info"].strip() and not text[m.end():nxt.start()].strip():
                output = nxt["body"]
        found.append(Block(page, counts[lang], lang, words[1:], m["body"], output,
                           text.count("\n", 0, m.start()) + 1))
    return found


def page_id(page: Path) -> str:
    return str(page.relative_to(REPO_ROOT))


def error_lines(text: str) -> list[str]:
    """The messages of psql's ERROR lines ("psql:<stdin>:12: ERROR:  x" -> "x")."""
    return [m.group(1).strip() for m in re.finditer(r"^(?:psql:[^\n]*?: )?ERROR:\s+(.*)$", text, re.M)]


def sqlstate_lines(text: str) -> list[str]:
    return re.findall(r"^(?=.*[0-9])([0-9A-Z]{5})$", text, re.M)  # not a command tag (RESET)


def normalise_signature(text: str) -> str:
    text = re.sub(r"\s+", " ", text.lower()).strip()
    text = re.sub(r"::[a-z ]+?(\[\])?(?=,|$| returns )", "", text)  # DEFAULT NULL::integer -> DEFAULT NULL
    text = re.sub(r"\btimestamptz\b", "timestamp with time zone", text)
    return re.sub(r"\s*([(),])\s*", r"\1", text)


def check_signatures(cluster, dbname: str, block: Block) -> None:
    # Each signature starts a line; a result may name a type of the schema.
    sigs = re.findall(r"^lonnymq\.(\w+)\((.*?)\)\s+RETURNS\s+(.+?)\s*(?=^lonnymq\.\w+\(|\Z)", block.body,
                      re.S | re.M)
    assert sigs, f"{block.where()}: no signature found in a 'sql signature' block"
    for name, args, result in sigs:
        rows = cluster.psql(
            "SELECT pg_get_function_arguments(p.oid) || ' RETURNS ' || pg_get_function_result(p.oid)"
            " FROM pg_proc AS p WHERE p.pronamespace = 'lonnymq'::regnamespace"
            f" AND p.proname = '{name}'", dbname=dbname)
        actual = {normalise_signature(r) for r in rows.splitlines()}
        documented = normalise_signature(f"{args} RETURNS {result}")
        assert documented in actual, (
            f"{block.where()}: lonnymq.{name} is documented as\n  {documented}\n"
            f"but the catalog has\n  " + "\n  ".join(sorted(actual) or ["(no such function)"]))


def run_sql_blocks(cluster, dbname: str, sql_blocks: list[Block]) -> None:
    script = []
    for b in sql_blocks:
        script.append(f"\\echo {MARK} {b.number}\n\\warn {MARK} {b.number}\n")
        if "error" in b.tags:
            script.append(f"\\set ON_ERROR_STOP 0\n{b.body}\n\\set ON_ERROR_STOP 1\n")
        else:
            script.append(b.body + "\n")
    script.append(f"\\echo {MARK} end\n\\warn {MARK} end\n")
    proc = subprocess.run(
        [str(cluster.bindir / "psql"), "-X", "-v", "ON_ERROR_STOP=1", *cluster.client_args(dbname),
         "-f", "-"],
        input="".join(script), capture_output=True, text=True, env=cluster.client_env(),
        timeout=PSQL_TIMEOUT_S, cwd=REPO_ROOT,
    )
    # stderr, cut at the block markers: per block, what psql printed on stderr.
    parts = re.split(rf"^{MARK} (\S+)\n", proc.stderr, flags=re.M)
    per_block = dict(zip(parts[1::2], parts[2::2]))
    out_parts = re.split(rf"^{MARK} (\S+)\n", proc.stdout, flags=re.M)
    out_per_block = dict(zip(out_parts[1::2], out_parts[2::2]))
    by_number = {str(b.number): b for b in sql_blocks}
    if proc.returncode != 0:
        last = parts[-2] if len(parts) > 1 else None
        failed = by_number.get(last)
        where = failed.where() if failed else f"{page_id(sql_blocks[0].page)} (before any block)"
        pytest.fail(
            f"{where} failed (psql exit {proc.returncode}):\n{parts[-1] if last else proc.stderr}\n"
            f"----- the block -----\n{failed.body if failed else ''}"
            f"----- psql output of the block -----\n{proc.stdout.split(f'{MARK} {last}')[-1][-3000:]}",
            pytrace=False)
    for b in sql_blocks:
        if "error" not in b.tags:
            continue
        got = error_lines(per_block.get(str(b.number), ""))
        if b.output is not None:
            want = error_lines(b.output)
            assert got == want, (
                f"{b.where()} ('sql error'): psql printed the errors\n  " + "\n  ".join(got or ["(none)"])
                + "\nbut the output block after it shows\n  " + "\n  ".join(want or ["(none)"]))
            # \echo :LAST_ERROR_SQLSTATE prints a bare SQLSTATE line; query results are indented.
            got_states = sqlstate_lines(out_per_block.get(str(b.number), ""))
            want_states = sqlstate_lines(b.output)
            assert got_states == want_states, (
                f"{b.where()} ('sql error'): psql echoed the SQLSTATEs {got_states}, "
                f"the output block after it shows {want_states}")
        else:
            assert got, f"{b.where()} is tagged 'sql error' but raised no error"


def work_left(cluster, dbname: str) -> int:
    """Messages a worker still owes: ready, locked, or failed at least once."""
    return int(cluster.psql(
        "SELECT count(*) FROM lonnymq.message WHERE is_locked OR num_failures > 0"
        " OR dequeue_at <= lonnymq.to_epoch(clock_timestamp())", dbname=dbname))


def run_worker(cluster, dbname: str, b: Block, code: str, env: dict[str, str]) -> None:
    """Start the worker, wait until it has done the page's work, give it one more message
    (it must still be running and take new work), then stop it."""
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=REPO_ROOT)
    deadline = time.monotonic() + WORKER_TIMEOUT_S
    try:
        for extra in (None, "SELECT lonnymq.message_create('doc-test', 'one more')"):
            if extra:
                cluster.psql(extra, dbname=dbname)
            while work_left(cluster, dbname) and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
        exited = proc.poll()
        left = work_left(cluster, dbname)
    finally:
        if proc.poll() is None:
            proc.terminate()
        out, err = proc.communicate(timeout=30)
    assert exited is None, f"{b.where()}: the worker exited (status {exited}):\n{err}"
    assert left == 0, (f"{b.where()}: {left} message(s) ready, locked or failed after "
                       f"{WORKER_TIMEOUT_S} s\n----- stdout -----\n{out}\n----- stderr -----\n{err}")


def run_python_blocks(cluster, dbname: str, py_blocks: list[Block]) -> None:
    env = cluster.client_env()
    env["PYTHONUNBUFFERED"] = "1"
    for b in py_blocks:
        code = b.body
        if re.search(r"^def run\(dsn\):", code, re.M) and not re.search(r"^run\(", code, re.M):
            code += f"\n\nrun({cluster.dsn(dbname)!r})\n"
        if "while True:" in code:
            run_worker(cluster, dbname, b, code, env)
            continue
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env=env, timeout=WORKER_TIMEOUT_S, cwd=REPO_ROOT)
        assert proc.returncode == 0, f"{b.where()} failed (exit {proc.returncode}):\n{proc.stderr}"


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_doc_examples(page, cluster, template_db):
    page_blocks = blocks(page)
    sql_blocks = [b for b in page_blocks if b.lang == "sql" and "signature" not in b.tags]
    signatures = [b for b in page_blocks if b.lang == "sql" and "signature" in b.tags]
    py_blocks = [b for b in page_blocks if b.lang == "python"]
    if not (sql_blocks or signatures or py_blocks):
        return  # nothing to run (doc/dequeue-design.md: design notes, no examples)
    creates_extension = any(re.search(r"CREATE\s+EXTENSION\s+(IF\s+NOT\s+EXISTS\s+)?lonnymq\b", b.body, re.I)
                            for b in sql_blocks)
    # README's Python examples connect to "dbname=shop".
    dbname = "shop" if page == REPO_ROOT / "README.md" else \
        "doc_" + re.sub(r"[^a-z0-9]+", "_", page_id(page).lower())[:50]
    roles_before = set(cluster.psql("SELECT rolname FROM pg_roles").splitlines())
    if creates_extension:
        cluster.create_database(dbname, with_extension=False)
    else:
        cluster.create_database(dbname, template=template_db)
    try:
        cluster.psql(CRON_STAND_IN, dbname=dbname)
        if sql_blocks:
            run_sql_blocks(cluster, dbname, sql_blocks)
        for b in signatures:
            check_signatures(cluster, dbname, b)
        if py_blocks:
            run_python_blocks(cluster, dbname, py_blocks)
    finally:
        cluster.drop_database(dbname)
        for role in set(cluster.psql("SELECT rolname FROM pg_roles").splitlines()) - roles_before:
            cluster.psql(f'DROP ROLE "{role}"')
