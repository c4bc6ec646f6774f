"""lonnymq's numbers, defined once for the Python side.

The extension's limits that the Python side needs (the pipeline checks rows
against them before it sends them), time in lonnymq's unit, the lock the
tests and tools take when the lock's length is not what they test, and
PostgreSQL's integer ranges.
"""

from __future__ import annotations

# Time, in lonnymq's unit (epoch milliseconds).
SECOND_MS = 1_000
MINUTE_MS = 60 * SECOND_MS
HOUR_MS = 60 * MINUTE_MS
DAY_MS = 24 * HOUR_MS

# A lock that does not expire during a test or a benchmark run: the default
# of lonnymq_dev.calls.dequeue.
LOCK_MS = MINUTE_MS

# The extension's limits (sql/src checks them; the pgTAP files test their
# edges): the largest content or state, the largest headers (bytes of their
# jsonb text, octet_length(headers::text): _max_headers_bytes), the most
# messages one create batch takes, the longest channel name and key.
MAX_CONTENT_BYTES = 16 * 1024 * 1024  # 16,777,216
MAX_HEADERS_BYTES = 64 * 1024  # 65,536
MAX_BATCH = 10_000
MAX_CHANNEL_CHARS = 255
MAX_KEY_CHARS = 1024

# PostgreSQL's integer ranges, for the extremes of integer parameters.
BIGINT_MIN, BIGINT_MAX = -(2**63), 2**63 - 1
INTEGER_MIN, INTEGER_MAX = -(2**31), 2**31 - 1
