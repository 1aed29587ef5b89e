"""Running `lineage` commands with an I/O fault at a chosen point (libfault.c).

`Injector.count(...)` runs a command once and lists every call that changed a file below
the store; `points(...)` turns that list into the matrix's fault points (the first call
of each kind on each kind of path, and the last one too for the catalog's files, whose
first and last writes are a commit's start and end); `Injector.run(...)` runs the
command again with one fault. Commands run in children of a warm process
(forkserver.py), so a case costs the command, not an interpreter start.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ACTIONS = ("enospc", "eio", "kill")
# Paths whose first and last calls both count: a commit starts and ends in them.
CATALOG = re.compile(r"^catalog\.duckdb(\.wal)?$")


@dataclass(frozen=True)
class Point:
    kind: str  # create, write, fsync, rename, truncate, fallocate, mkdir, unlink
    pattern: str  # a regex of the path below the store
    nth: int  # the nth call of that kind on a matching path

    def __str__(self) -> str:
        return f"{self.kind} {self.pattern} #{self.nth}"


@dataclass(frozen=True)
class Outcome:
    returncode: int
    stdout: str
    stderr: str
    fired: bool  # the fault was reached


def build_library(folder: Path) -> Path:
    """libfault.so compiled from libfault.c (once per source text)."""
    source = HERE / "libfault.c"
    tag = hashlib.sha256(source.read_bytes()).hexdigest()[:12]
    library = folder / f"libfault-{tag}.so"
    if not library.exists():
        temp = library.with_suffix(f".{os.getpid()}.tmp")
        subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-Wall", "-Wno-format-truncation",
                        "-o", str(temp), str(source), "-ldl"], check=True)
        os.replace(temp, library)
    return library


class Injector:
    """A warm process with libfault preloaded, forking one child per command."""

    def __init__(self, library: Path, scratch: Path) -> None:
        self.scratch = scratch
        self._runs = 0
        env = {**os.environ, "LD_PRELOAD": str(library)}
        env.pop("LINEAGE_FI_ROOT", None)
        self._server = subprocess.Popen(
            [sys.executable, str(HERE / "forkserver.py")], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True, env=env)
        ready = json.loads(self._readline())
        assert "ready" in ready, ready

    def _readline(self) -> str:
        assert self._server.stdout is not None
        line = self._server.stdout.readline()
        if not line:
            raise RuntimeError(f"the fork server stopped ({self._server.wait()})")
        return line

    def close(self) -> None:
        if self._server.stdin:
            self._server.stdin.close()
        self._server.wait(timeout=60)
        if self._server.stdout:
            self._server.stdout.close()

    def run(self, argv: list[str], *, cwd: Path, store: Path, point: Point | None = None,
            action: str = "enospc", log: Path | None = None,
            env: dict[str, str] | None = None) -> Outcome:
        """`lineage ARGV` in `cwd` with one fault at `point` below `store` (none when
        `point` is None); `log` lists the calls made (count mode)."""
        self._runs += 1
        out, err, hit = (self.scratch / f"run-{self._runs}.{n}" for n in ("out", "err", "hit"))
        hit.unlink(missing_ok=True)
        settings = {"LINEAGE_FI_ROOT": str(store.resolve())}
        if log is not None:
            settings["LINEAGE_FI_LOG"] = str(log)
        if point is not None:
            settings.update(LINEAGE_FI_KIND=point.kind, LINEAGE_FI_PATH=point.pattern,
                            LINEAGE_FI_NTH=str(point.nth), LINEAGE_FI_ACTION=action,
                            LINEAGE_FI_HIT=str(hit),
                            # a full disk stays full; an I/O error is one call's
                            LINEAGE_FI_STICKY="1" if action == "enospc" else "0")
        request = {"argv": argv, "cwd": str(cwd), "stdout": str(out), "stderr": str(err),
                   "env": {**os.environ, **(env or {}), **settings}}
        assert self._server.stdin is not None
        self._server.stdin.write(json.dumps(request) + "\n")
        self._server.stdin.flush()
        code = json.loads(self._readline())["returncode"]
        outcome = Outcome(code, out.read_text(errors="replace"), err.read_text(errors="replace"),
                          hit.exists())
        for path in (out, err, hit):
            path.unlink(missing_ok=True)
        return outcome


def pattern_of(path: str) -> str:
    """The regex of a path's kind: numbers, pids and hashes in names made general, and
    the table a part belongs to (every table's parts are written by the same code)."""
    table = re.match(r"tables/[a-z_]+/", path)
    rest = path[table.end():] if table else path
    parts = re.split(r"([0-9a-f]{8,}|[0-9]+)", rest)
    general = "".join("[0-9a-f]+" if i % 2 else re.escape(p) for i, p in enumerate(parts))
    return "^" + ("tables/[a-z_]+/" if table else "") + general + "$"


def points(log: Path) -> list[Point]:
    """The fault points of one command's calls (see the module docstring): the first
    call of each kind on each kind of path, and the last one too where calls of a kind
    repeat on the catalog or on parts (a commit's start and end; the first and the last
    table's parts)."""
    calls = [line.split("\t", 1) for line in log.read_text().splitlines() if "\t" in line]
    counts = Counter((kind, pattern_of(path)) for kind, path in calls)
    found: list[Point] = []
    for (kind, pattern), count in counts.items():  # in the order the calls came
        found.append(Point(kind, pattern, 1))
        if count > 1 and (is_catalog(pattern) or pattern.startswith("^tables/[a-z_]+/")):
            found.append(Point(kind, pattern, count))
    return found


def is_catalog(pattern: str) -> bool:
    return bool(CATALOG.match(pattern.strip("^$").replace("\\", "")))


def cases(found: list[Point], *, full: bool) -> list[tuple[Point, str]]:
    """(point, action) pairs: with `full`, every action at every point. Otherwise each
    point's first call once, the actions taken in turn, and the scratch work under
    `staging/` (the same writers as the parts', in a folder of its own) once per kind of
    call: about a third of the cases, every kind of call on every kind of path still met."""
    if full:
        return [(p, a) for p in found for a in ACTIONS]
    chosen: list[tuple[Point, str]] = []
    staged: set[str] = set()
    for point in found:
        if point.nth > 1:
            continue
        if point.pattern.startswith("^staging/"):
            if point.kind in staged:
                continue
            staged.add(point.kind)
        chosen.append((point, ACTIONS[len(chosen) % len(ACTIONS)]))
    return chosen


def copy_store(template: Path, to: Path) -> Path:
    if to.exists():
        shutil.rmtree(to)
    shutil.copytree(template, to, symlinks=True)
    return to
