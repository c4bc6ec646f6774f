"""lonnymq's development tooling, shared by the tests (test/python), the
benchmarks (bench/) and the demos (demo/):

    lonnymq_dev.pgcluster   throwaway PostgreSQL clusters (Cluster)

Installed (editable) with the rest of the Python side: `make venv`, i.e.
`pip install -e '.[dev]'`.
"""
