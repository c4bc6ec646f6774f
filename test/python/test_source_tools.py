"""The checks that keep sql/src/ readable (issue 40, items 1 and 2):
tools/manifest.py refuses a source file the manifest does not list once or
lists outside its group's folder, and tools/headers.py refuses a function
header whose Parameters, Calls, Tables or Locks disagree with the body.
make lint runs both over the real tree; these tests show that each check
fails when it should, on small made-up sources."""

from __future__ import annotations

import pathlib
import sys

import pytest

from conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "tools"))
import headers  # noqa: E402
import manifest  # noqa: E402


@pytest.fixture
def source_tree(tmp_path, monkeypatch):
    src = tmp_path / "sql" / "src"
    (src / "take").mkdir(parents=True)
    (src / "schema").mkdir()
    (src / "schema" / "message.sql").write_text("CREATE TABLE @extschema@.message (id bigint);\n")
    (src / "take" / "message_dequeue.sql").write_text("-- x\n")
    monkeypatch.setattr(manifest, "ROOT", tmp_path)
    monkeypatch.setattr(manifest, "SRC", src)
    monkeypatch.setattr(manifest, "MANIFEST", src / "MANIFEST.md")
    return src


def write_manifest(src: pathlib.Path, body: str) -> None:
    (src / "MANIFEST.md").write_text("# sources\n\n" + body)


def test_manifest_accepts_a_tree_it_lists_exactly(source_tree):
    write_manifest(source_tree, "## Schema: `schema/`\n\n- [message.sql](schema/message.sql): t\n\n"
                                "## The take: `take/`\n\n- [message_dequeue.sql](take/message_dequeue.sql): f\n")
    assert manifest.problems() == []
    assert [p.name for p in manifest.sources()] == ["message.sql", "message_dequeue.sql"]


@pytest.mark.parametrize("body, expected", [
    ("## Schema: `schema/`\n\n- [message.sql](schema/message.sql): t\n", "take/message_dequeue.sql: not listed"),
    ("## Schema: `schema/`\n\n- [message.sql](schema/message.sql): t\n- [message.sql](schema/message.sql): t\n"
     "## The take: `take/`\n\n- [message_dequeue.sql](take/message_dequeue.sql): f\n", "listed twice"),
    ("## Schema: `schema/`\n\n- [message.sql](schema/message.sql): t\n"
     "- [message_dequeue.sql](take/message_dequeue.sql): f\n", "listed under the group `schema/`"),
    ("## Schema: `schema/`\n\n- [message.sql](schema/message.sql): t\n- [gone.sql](schema/gone.sql): t\n"
     "## The take: `take/`\n\n- [message_dequeue.sql](take/message_dequeue.sql): f\n", "no such file"),
])
def test_manifest_refuses_what_it_does_not_list_once_in_place(source_tree, body, expected):
    write_manifest(source_tree, body)
    problems = manifest.problems()
    assert any(expected in p for p in problems), problems
    with pytest.raises(SystemExit):
        manifest.sources()


GOOD_HEADER = """\
Take messages.
Parameters: p_limit, how many.
Returns: the rows taken.
Calls: _clock_ms.
Tables: reads message (message_ready_ix); writes position_mark_seq.
Locks: advisory (1819111683, id) exclusive; rows FOR UPDATE SKIP LOCKED."""

BODY = """
DECLARE
    v_row @extschema@.message;
BEGIN
    PERFORM pg_catalog.pg_advisory_xact_lock(1819111683, 1);
    -- a comment naming @extschema@.other_function( is not a call
    SELECT m.* INTO v_row FROM @extschema@.message AS m
    WHERE m.dequeue_at <= @extschema@._clock_ms() LIMIT p_limit FOR UPDATE SKIP LOCKED;
    PERFORM pg_catalog.setval('@extschema@.position_mark_seq', 1);
END;
"""


def function(header: str, body: str = BODY) -> headers.Function:
    return headers.Function(pathlib.Path("take/f.sql"), "f", ["p_limit"], header.splitlines(), body)


def check(header: str, body: str = BODY) -> list[str]:
    return headers.check_function(function(header, body), {"f", "_clock_ms", "other_function"},
                                  {"message", "channel"}, {"position_mark_seq"})


def test_a_header_that_says_what_the_body_does_passes():
    assert check(GOOD_HEADER) == []


@pytest.mark.parametrize("old, new, expected", [
    ("Calls: _clock_ms.", "Calls: none.", "Calls: missing _clock_ms"),
    ("Calls: _clock_ms.", "Calls: _clock_ms, other_function.", "names other_function, which the body does not use"),
    ("reads message (message_ready_ix)", "reads channel", "Tables reads: missing message; names channel"),
    ("; writes position_mark_seq", "", "Tables writes: missing position_mark_seq"),
    ("Parameters: p_limit, how many.", "Parameters: how many.", "does not name p_limit"),
    ("advisory (1819111683, id) exclusive; ", "", "advisory key 1819111683"),
    ("rows FOR UPDATE SKIP LOCKED.", "rows locked.", "row locks FOR UPDATE"),
    ("Returns: the rows taken.\n", "", "no 'Returns:'"),
])
def test_a_header_that_disagrees_with_the_body_fails(old, new, expected):
    header = GOOD_HEADER.replace(old, new)
    assert header != GOOD_HEADER
    problems = check(header)
    assert any(expected in p for p in problems), problems


def test_lock_page_must_name_every_key_and_taker():
    rows = {"1819111683": "| (1819111683, id) | exclusive | xact | `_channel_row_lock` | why |"}
    assert headers.check_locks({"1819111683": {"_channel_row_lock"}}, rows) == []
    assert any("does not name f" in p for p in headers.check_locks({"1819111683": {"_channel_row_lock", "f"}}, rows))
    assert any("1819111684 is used" in p for p in headers.check_locks({"1819111684": {"f"}}, rows))
    assert any("listed but no function" in p for p in headers.check_locks({}, rows))


def test_an_update_after_a_statement_is_a_write_and_a_declaration_is_not():
    body = """
DECLARE
    v_row @extschema@.channel;
BEGIN
    PERFORM 1;
    UPDATE @extschema@.channel AS c SET n = 1;
END;
"""
    header = "Set.\nParameters: p_limit.\nReturns: nothing.\nCalls: none.\nTables: writes channel.\nLocks: none (commentary)."
    assert check(header, body) == []
    assert any("Tables writes: missing channel" in p for p in check(header.replace("writes channel", "none"), body))
