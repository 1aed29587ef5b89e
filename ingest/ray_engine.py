"""The Ray executor: each per-shard call is a Ray task (the optional `lineage[ray]` extra).

The pattern is smallpond's: a task is a plain DuckDB/numpy kernel over one input (a
shard, a manifest, a chunk of a folder's files, a corpus part, a key range) that writes
its output into the store's staging folder, which every node must see at the same path
(shared storage), and returns a small summary through Ray's object store. The driver
keeps the reduce and the commit.

Retries: a task whose worker dies (a node lost, a process killed) is run again, up to
$LINEAGE_RAY_MAX_RETRIES times (default 3); each task overwrites its own staged files, so
a retried task leaves what a first run would. An error the task raises (a bad input) is
not retried: it is the same error the local engine gives, raised here by the input's
position. The driver's LINEAGE_* environment (memory limit, fault points) is handed to
every task, since workers were started before it was set.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import ray
import ray.exceptions

from lineage.errors import LineageError
from lineage.store.parts import report

T = TypeVar("T")
R = TypeVar("R")

RETRIES_ENV = "LINEAGE_RAY_MAX_RETRIES"
# Fault injection for tests: the first task to create this file ends its worker process
# (after its work, before answering), as a lost node would.
KILL_ONCE_ENV = "LINEAGE_RAY_KILL_ONCE"


class EngineError(LineageError):
    """A task could not be run to its end on the cluster (its worker died too often)."""


def _call(fn: Callable[[Any], Any], item: Any, env: dict[str, str]) -> Any:
    """Run `fn(item)` on a worker with the driver's LINEAGE_* environment."""
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        result = fn(item)
        marker = env.get(KILL_ONCE_ENV)
        if marker and _first(marker):
            os._exit(1)  # the worker dies mid-ingest: its staged output is written
        return result
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _first(marker: str) -> bool:
    try:
        Path(marker).open("x").close()
    except FileExistsError:
        return False
    return True


_remote_call = ray.remote(_call)


class RayExecutor:
    name = "ray"

    def __init__(self, progress: Any = None) -> None:
        self.progress = progress
        self.tasks = 0  # tasks submitted, for the measurements of docs/scale.md

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        env = {key: value for key, value in os.environ.items() if key.startswith("LINEAGE_")}
        retries = int(os.environ.get(RETRIES_ENV, "3"))
        call = _remote_call.options(max_retries=retries, retry_exceptions=False)
        refs = [call.remote(fn, item, env) for item in items]
        self.tasks += len(refs)
        results: list[R] = []
        try:
            for done, ref in enumerate(refs, start=1):
                results.append(ray.get(ref))
                report(self.progress, f"{getattr(fn, '__name__', 'task')} on ray", done,
                       len(refs))
        except ray.exceptions.RayTaskError as exc:
            _settle(refs)
            cause = exc.cause if isinstance(exc.cause, BaseException) else None
            if cause is None:
                raise EngineError(_first_line(exc)) from exc
            raise cause from None
        except KeyboardInterrupt:  # stop the tasks now: the staging folder goes next
            for ref in refs:
                ray.cancel(ref, force=True)
            raise
        except ray.exceptions.RayError as exc:  # a worker died more often than retried
            _settle(refs)
            raise EngineError(f"a Ray task of {getattr(fn, '__name__', 'the ingest')} could "
                              f"not finish ({_first_line(exc)}); nothing was committed, run "
                              "the command again") from exc
        return results


def _settle(refs: list[Any]) -> None:
    """Wait for every task to end: the caller removes the staging folder next, and no
    task may write into it afterwards. (Not cancelled: `ray.cancel` of a task failing at
    the same time sometimes ended the driver's own process, exit 1 with no message.)"""
    for ref in refs:
        try:
            ray.get(ref)
        except ray.exceptions.RayError:
            pass


def _first_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return lines[-1].strip() if lines else type(exc).__name__


@contextmanager
def connected(address: str | None, progress: Any = None) -> Iterator[RayExecutor]:
    """A Ray executor: joins `address` ("auto": the running cluster), or starts a local
    cluster of this machine's cores (stopped again at the end); a connection already
    open in this process is used as it is."""
    started = False
    # Ray 2.52 warns on every start that a later version will stop setting
    # CUDA_VISIBLE_DEVICES for CPU tasks; that later behaviour is what is wanted here.
    os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
    if not ray.is_initialized():
        options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                   "logging_level": logging.ERROR}
        if address is None:
            ray.init(address="local", num_cpus=os.cpu_count() or 1, **options)
        else:
            ray.init(address=address, **options)
        started = True
    try:
        yield RayExecutor(progress)
    finally:
        if started:
            ray.shutdown()
