"""lonnymq's Spark pipeline: exactly-once bulk enqueue, history export, load generation.

Run it as ``python -m pipeline {enqueue,export,loadgen,sample} ...`` from the
repository root (see pipeline/README.md), or use the functions:

    from pipeline import get_spark, read_input, enqueue, EnqueueSpec, export, run_loadgen

    spark = get_spark("local[4]")
    result = enqueue(spark, read_input(spark, "events.parquet"), dsn,
                     EnqueueSpec(channel_col="channel", key_col="event_id"))
    print(result.report())

Executors connect to PostgreSQL themselves (psycopg 3, one connection per
partition), so the DSN must be reachable from every executor and psycopg must
be installed in their Python.
"""

from __future__ import annotations

from .common import PipelineError, resolve_dsn
from .enqueue import BadRow, EnqueueResult, EnqueueSpec, enqueue, read_input
from .export import ExportResult, export
from .loadgen import LoadgenConfig, run_loadgen
from .sample import write_sample
from .spark import get_spark

__all__ = [
    "BadRow",
    "EnqueueResult",
    "EnqueueSpec",
    "ExportResult",
    "LoadgenConfig",
    "PipelineError",
    "enqueue",
    "export",
    "get_spark",
    "read_input",
    "resolve_dsn",
    "run_loadgen",
    "write_sample",
]
