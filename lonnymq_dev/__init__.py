"""lonnymq's development tooling, shared by the tests (test/python), the
benchmarks (bench/) and the demos (demo/):

    lonnymq_dev.pgcluster   throwaway PostgreSQL clusters (Cluster)
    lonnymq_dev.calls       the queue calls made again and again (dequeue, complete, ...)
    lonnymq_dev.limits      lonnymq's limits and the lock durations, defined once
    lonnymq_dev.spark_cluster  a throwaway Spark standalone cluster (a master and
                            workers on loopback; `python -m lonnymq_dev.spark_cluster`)

Installed (editable) with the rest of the Python side: `make venv`, i.e.
`pip install -e '.[dev]'`.
"""
