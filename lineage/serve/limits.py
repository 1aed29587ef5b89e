"""How much a request may ask of the server: body sizes, SQL rows and time, list lengths.

Every bound is a number a deployment may lower or raise when it builds the application
(`create_app(..., limits=Limits(...))`); a request may ask for less, never for more.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """The bounds one application enforces."""

    max_body_bytes: int = 8 << 20  # a posted text or file (trained-on), or SQL text
    max_sql_rows: int = 10_000  # rows a SQL answer holds at most (`truncated` beyond)
    sql_timeout: float = 10.0  # seconds a SQL query may run
    max_sql_memory: int = 1 << 30  # bytes a SQL query may use (its process's growth)
    # SQL queries one server process runs at once, each in a process of its own
    # (lineage/serve/sql_process.py); another waits up to sql_timeout, then gets a 503
    sql_processes: int = 1
    max_query_length: int = 4096  # bytes of a URL's query string
    max_trace_steps: int = 1000  # steps of a `trace --clipped/--skipped` answer
    max_candidates: int = 100  # trained-on's `limit`: candidate documents per text
    max_questions: int = 4  # questions answered at once per process; others wait their turn
    max_cache_bytes: int = 64 << 20  # answers kept per process for repeated questions (0: none)
    # rows of lookup copies a `docs` or by-hash question may read to be answered at once,
    # on the event loop, instead of in a question thread (0: never)
    quick_rows: int = 2048
    # a posted file up to this size is tried at once too (hashed on the event loop), as a
    # lookup by its bytes; text matching, if it is not found, goes to a thread
    quick_body_bytes: int = 1 << 20
