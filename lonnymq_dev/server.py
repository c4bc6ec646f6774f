"""A throwaway PostgreSQL server for trying lonnymq: `make server`.

Starts a cluster (lonnymq_dev.pgcluster.Cluster: a temporary directory, a
private socket, the superuser postgres with trust authentication; the
server of $PG_CONFIG, Debian's 15 unless `make server PG=18`), with lonnymq
installed from files and a database `shop` in which nothing is created yet,
prints the variables that point psql and every libpq client (psycopg
included) at it, and runs until Ctrl-C, which stops and removes it:

    $ make server
    ...
    export PGHOST=/tmp/lonnymq-pgcluster-k2j3/sock PGPORT=41234 PGUSER=postgres PGDATABASE=shop
    $ # in another shell: paste that line, then
    $ psql                                   # the tour of README.md
"""

from __future__ import annotations

import signal
import sys
import threading

from lonnymq_dev.pgcluster import Cluster


def main() -> int:
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    with Cluster() as cluster:
        cluster.create_database("shop", with_extension=False)
        version = cluster.psql("SHOW server_version")
        print(f"PostgreSQL {version} on a throwaway cluster ({cluster.base_dir}), database shop.", flush=True)
        print("In another shell, point psql and libpq clients at it:", flush=True)
        print(f"export PGHOST={cluster.socket_dir} PGPORT={cluster.port} PGUSER={cluster.superuser} "
              "PGDATABASE=shop", flush=True)
        print("Ctrl-C stops the server and removes it.", flush=True)
        stop.wait()
    print("stopped and removed.", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
