"""Where the server runs SQL: processes of its own, one query at a time each.

A query is bounded inside a function call only by its process (lineage/store/sql_guard.py
`process_bounds`): the operating system's data limit makes an allocation past
`max_sql_memory` fail at once, and a query the interrupt cannot stop is ended with its
process. A server process cannot be ended for one query, so each runs its SQL in at most
`sql_processes` helper processes (`python -m lineage.serve.sql_process`), started when
first needed and kept for the next query. A request waits up to `sql_timeout` seconds
for a free one, then gets a 503; a helper that does not answer in time is killed (its
request gets the time-limit error) and another is started for the next query.

The helpers speak JSON over their standard input and output: a line `{"ready": true}`
once started; then, for each request line (`root`, `sql`, `timeout`, `max_rows`,
`max_memory`, `grace`), a header line and, for an answer, its body: `{"truncated": bool,
"bytes": n}` and the n bytes of `lineage sql --json`'s output, or `{"status": s, "error":
message}` (with `"ended": true` from a helper that ends itself).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from dataclasses import dataclass
from typing import IO, Any

from lineage.errors import LineageError
from lineage.serve.errors import HTTPProblem, status_of
from lineage.store.sql_guard import GRACE_SECONDS, process_bounds

START_SECONDS = 120.0  # a helper's start (imports): long, for a busy machine
# Past the helper's own bound (its time limit and grace), how long the server waits
# before it kills it: the helper ends itself first unless it is wedged.
SLACK_SECONDS = 5.0


@dataclass(frozen=True)
class SqlAnswer:
    json: str  # what `lineage sql --json` prints, without the final newline
    truncated: bool


class SqlProcesses:
    """The SQL helpers of one server process (one event loop)."""

    def __init__(self, count: int, *, grace: float = GRACE_SECONDS) -> None:
        self._count = count
        self._grace = grace  # past the time limit, before a helper ends itself
        self._idle: list[_Helper] = []
        self._slots: asyncio.Semaphore | None = None
        self._busy: set[_Helper] = set()

    async def answer(self, root: str, sql: str, *, timeout: float, max_rows: int,
                     max_memory: int, wait: float) -> SqlAnswer:
        """The answer to `sql`; HTTPProblem for a refused or failed query (with the
        command line's message), for a time limit and when every helper stays busy."""
        if self._slots is None:  # made on the loop that uses it
            self._slots = asyncio.Semaphore(self._count)
        try:
            await asyncio.wait_for(self._slots.acquire(), wait)
        except TimeoutError:
            raise HTTPProblem(503, f"the server's {self._count} SQL process(es) stayed busy "
                                   f"for {wait:g} s; ask again later",
                              headers={"Retry-After": str(max(1, round(wait)))}) from None
        try:
            helper = self._idle.pop() if self._idle else await _Helper.start()
            self._busy.add(helper)
            try:
                header, body = await helper.ask(
                    {"root": root, "sql": sql, "timeout": timeout, "max_rows": max_rows,
                     "max_memory": max_memory, "grace": self._grace},
                    within=timeout + self._grace + SLACK_SECONDS)
            except BaseException:
                await helper.kill()  # wedged, dead or the request was cancelled
                raise
            finally:
                self._busy.discard(helper)
            if header.get("ended"):  # past its time limit: it ends itself
                await helper.kill()
            else:
                self._idle.append(helper)
        finally:
            self._slots.release()
        if "error" in header:
            raise HTTPProblem(int(header["status"]), str(header["error"]))
        return SqlAnswer(body.decode("utf-8"), bool(header["truncated"]))

    def pids(self) -> list[int]:
        """The process ids of the helpers running now."""
        return sorted(h.process.pid for h in (*self._idle, *self._busy)
                      if h.process.returncode is None)

    async def close(self) -> None:
        """Stop every helper (the server stops)."""
        for helper in [*self._idle, *self._busy]:
            await helper.kill()
        self._idle.clear()


class _Helper:
    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    @classmethod
    async def start(cls) -> _Helper:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "lineage.serve.sql_process",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
        helper = cls(process)
        try:
            assert process.stdout is not None
            ready = await asyncio.wait_for(process.stdout.readline(), START_SECONDS)
        except BaseException:
            await helper.kill()
            raise
        if json.loads(ready or b"{}").get("ready") is not True:
            code = await process.wait()
            raise HTTPProblem(500, f"the SQL process did not start (exit code {code})")
        return helper

    async def ask(self, request: dict[str, Any], *, within: float
                  ) -> tuple[dict[str, Any], bytes]:
        """The helper's answer: its header and body; HTTPProblem if it gives none."""
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None
        stdin.write(json.dumps(request).encode() + b"\n")
        try:
            await stdin.drain()
            header, body = await asyncio.wait_for(self._answer(stdout), within)
        except TimeoutError:
            raise HTTPProblem(400, _time_limit(request["timeout"])) from None
        except (ConnectionError, asyncio.IncompleteReadError):
            header, body = {}, b""
        if "error" not in header and "bytes" not in header:
            code = await self.process.wait()
            raise HTTPProblem(500, f"the SQL process ended without an answer (exit code "
                                   f"{code}); the query may need more memory than the "
                                   "machine has")
        return header, body

    @staticmethod
    async def _answer(stdout: asyncio.StreamReader) -> tuple[dict[str, Any], bytes]:
        line = await stdout.readline()
        header: dict[str, Any] = json.loads(line) if line else {}
        body = await stdout.readexactly(int(header["bytes"])) if "bytes" in header else b""
        return header, body

    async def kill(self) -> None:
        if self.process.returncode is None:
            self.process.kill()
        await self.process.wait()


def _time_limit(timeout: float) -> str:
    from lineage.store.sql_guard import time_limit_message

    return time_limit_message(timeout)


# -- the helper process ------------------------------------------------------------------


def main() -> None:
    """Answer requests from standard input until it closes (the server is gone)."""
    import duckdb  # noqa: F401  (what every query needs, loaded before the first)
    import pyarrow.dataset  # noqa: F401

    import lineage.api  # noqa: F401

    out = sys.stdout.buffer
    _write(out, {"ready": True})
    for line in sys.stdin.buffer:
        _answer_one(json.loads(line), out)


def _answer_one(request: dict[str, Any], out: IO[bytes]) -> None:
    from lineage.api import Store

    said = threading.Lock()  # one answer: the query's, or the watchdog's

    def overrun(message: str) -> None:
        if said.acquire(blocking=False):
            _write(out, {"status": 400, "error": message, "ended": True})
            os._exit(2)  # the query cannot be stopped otherwise; the server starts another

    try:
        with process_bounds(max_memory=request["max_memory"], timeout=request["timeout"],
                            on_overrun=overrun, grace=request["grace"]):
            result = Store(request["root"]).sql(
                request["sql"], timeout=request["timeout"], max_rows=request["max_rows"],
                max_memory=request["max_memory"])
            body = result.to_json().encode("utf-8")
        header: dict[str, Any] = {"truncated": result.truncated, "bytes": len(body)}
    except LineageError as exc:
        header, body = {"status": status_of(exc), "error": str(exc).strip()}, b""
    except MemoryError:
        from lineage.store.sql_guard import memory_limit_message

        header, body = {"status": 400, "error": memory_limit_message(request["max_memory"])}, b""
    except Exception as exc:  # a bug: one line, as the server says any
        first = (str(exc).strip().splitlines() or [""])[0]
        header, body = {"status": 500, "error": f"unexpected {type(exc).__name__}: {first}"}, b""
    if said.acquire(blocking=False):
        _write(out, header, body)


def _write(out: IO[bytes], header: dict[str, Any], body: bytes = b"") -> None:
    out.write(json.dumps(header).encode() + b"\n" + body)
    out.flush()


if __name__ == "__main__":
    main()
