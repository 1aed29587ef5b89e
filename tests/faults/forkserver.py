"""A warm `lineage` process that forks one child per command: the fault matrix runs a
few hundred commands, and a fresh interpreter importing DuckDB and pyarrow each time
would cost most of its time.

Started with libfault.so preloaded (inert: LINEAGE_FI_ROOT is unset here). Reads one
JSON request per line on stdin: {"argv": [...], "env": {...}, "cwd": ..., "stdout": path,
"stderr": path}; forks a child that takes that environment, re-reads the injector's
settings (lineage_fi_reset), runs the command line as `lineage` would, and exits with
its code. Answers one JSON line: {"returncode": N} (-9 when the child was killed).
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import threading


def _child(request: dict[str, object]) -> None:
    code = 99
    try:
        os.chdir(str(request["cwd"]))
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in dict(request["env"]).items()})
        ctypes.CDLL(None).lineage_fi_reset()
        for fd, key in ((1, "stdout"), (2, "stderr")):
            target = os.open(str(request[key]), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(target, fd)
            os.close(target)
        sys.argv = ["lineage", *[str(a) for a in list(request["argv"])]]
        from lineage.cli.main import run

        try:
            run()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


def main() -> None:
    import duckdb  # noqa: F401  (warm imports: every command needs them)
    import pyarrow  # noqa: F401
    import pyarrow.parquet  # noqa: F401

    import lineage.cli.main  # noqa: F401
    import lineage.ingest.corpus  # noqa: F401

    assert threading.active_count() == 1, "a thread before fork would be lost in the child"
    print(json.dumps({"ready": os.getpid()}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(request)
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        print(json.dumps({"returncode": code}), flush=True)


if __name__ == "__main__":
    main()
