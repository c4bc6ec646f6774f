"""What a read costs while an old snapshot is held: the measurements behind
doc/dequeue-design.md ("The physics, measured").

    .venv/bin/python bench/snapshot_physics.py [TAKES]     # default 20000

Starts a private cluster (autovacuum off), builds a FIFO of 10,000 messages,
a 64-row rotation and two ways of keeping a state row, then holds a
REPEATABLE READ transaction with an xid open while one session takes messages
from the front (UPDATE ... SKIP LOCKED), rewrites the served channel's
rotation row at the back, and writes the state every 16 takes.  Prints the
shared buffers each read statement uses, before the hold and four times
during it.  Plain tables, not lonnymq's: this measures PostgreSQL.
"""

from __future__ import annotations

import json
import sys

import psycopg

from lonnymq_dev.pgcluster import Cluster

SCHEMA = """
CREATE TABLE q (id bigserial PRIMARY KEY, channel_id bigint NOT NULL,
                dequeue_at bigint NOT NULL, locked boolean NOT NULL DEFAULT false, pad text);
CREATE INDEX q_ix ON q (channel_id, dequeue_at, id);
CREATE TABLE rot (channel_id bigint PRIMARY KEY, next_at bigint, turn bigint);
CREATE INDEX rot_ix ON rot (next_at, turn);
CREATE SEQUENCE turn_seq;
CREATE TABLE st (channel_id bigint PRIMARY KEY, v bigint) WITH (fillfactor = 10);
CREATE TABLE log (channel_id bigint NOT NULL, id bigint NOT NULL, v bigint);
CREATE INDEX log_ix ON log (channel_id, id);
INSERT INTO q (channel_id, dequeue_at, pad) SELECT 1, g, repeat('x', 100) FROM generate_series(1, 10000) g;
INSERT INTO rot SELECT g, 0, nextval('turn_seq') FROM generate_series(1, 64) g;
INSERT INTO st VALUES (1, 0);
INSERT INTO log VALUES (1, 0, 0);
"""

FRONT = "SELECT next_at, turn FROM rot ORDER BY next_at, turn LIMIT 1"
READS = {
    "a channel's first ready message, from its beginning":
        "SELECT id FROM q WHERE channel_id = 1 AND dequeue_at <= 1e9 ORDER BY dequeue_at, id LIMIT 1",
    "the same, from the exact head":
        "SELECT id FROM q WHERE channel_id = 1 AND dequeue_at >= %(head)s AND dequeue_at <= 1e9"
        " ORDER BY dequeue_at, id LIMIT 1",
    "the same, from 64 messages behind the head":
        "SELECT id FROM q WHERE channel_id = 1 AND dequeue_at >= %(head)s - 64 AND dequeue_at <= 1e9"
        " ORDER BY dequeue_at, id LIMIT 1",
    "the rotation's front, from its beginning":
        "SELECT channel_id FROM rot WHERE next_at <= 1e12 ORDER BY next_at, turn LIMIT 1",
    "the rotation's front, from its low-water mark":
        "SELECT channel_id FROM rot WHERE (next_at, turn) >= (%(front_at)s, %(front_turn)s)"
        " AND next_at <= 1e12 ORDER BY next_at, turn LIMIT 1",
    "a state row rewritten in place, by key": "SELECT v FROM st WHERE channel_id = 1",
    "the same state as an insert-only log, newest first":
        "SELECT v FROM log WHERE channel_id = 1 ORDER BY id DESC LIMIT 1",
}


def buffers(conn, sql: str, params: dict) -> int:
    plan = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, params).fetchone()[0][0]["Plan"]
    return plan.get("Shared Hit Blocks", 0) + plan.get("Shared Read Blocks", 0)


def measure(conn) -> dict[str, int]:
    head = conn.execute("SELECT min(dequeue_at) FROM q WHERE NOT locked").fetchone()[0]
    front_at, front_turn = conn.execute(FRONT).fetchone()
    params = {"head": head, "front_at": front_at, "front_turn": front_turn}
    return {name: buffers(conn, sql, params) for name, sql in READS.items()}


def main(takes: int) -> None:
    with Cluster(settings={"autovacuum": "off"}) as cluster:
        cluster.create_database("physics", with_extension=False)
        conn = psycopg.connect(cluster.dsn("physics"), autocommit=True)
        conn.execute(SCHEMA)
        conn.execute("VACUUM ANALYZE")
        # As lonnymq's functions do: plans that are right at any size.
        conn.execute("SET enable_seqscan = off")
        conn.execute("SET enable_bitmapscan = off")
        print("before the hold:", json.dumps(measure(conn)), flush=True)
        hold = psycopg.connect(cluster.dsn("physics"))
        hold.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        hold.execute("SELECT txid_current()")
        tail = 10000
        for i in range(1, takes + 1):
            tail += 1
            conn.execute("INSERT INTO q (channel_id, dequeue_at, pad) VALUES (1, %s, repeat('x', 100))", (tail,))
            conn.execute(
                "WITH h AS (SELECT id FROM q WHERE channel_id = 1 AND dequeue_at <= 1e9"
                " ORDER BY dequeue_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)"
                " UPDATE q SET dequeue_at = 2000000000 + q.id, locked = true FROM h WHERE q.id = h.id"
            )
            conn.execute("UPDATE rot SET next_at = %s, turn = nextval('turn_seq') WHERE channel_id = %s",
                         (i, i % 64 + 1))
            if i % 16 == 0:
                conn.execute("UPDATE st SET v = v + 1 WHERE channel_id = 1")
                conn.execute("INSERT INTO log VALUES (1, %s, %s)", (i, i))
                conn.execute("DELETE FROM log WHERE channel_id = 1 AND id < %s", (i,))
            if i % (takes // 4) == 0:
                print(f"held, after {i} takes:", json.dumps(measure(conn)), flush=True)
        hold.rollback()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20000)
