"""Where the per-shard work of an ingest or a stream build runs: the executor seam.

A corpus ingest and a stream build are map/reduce shaped: many independent calls of a
plain function over one input shard, corpus part or key range (each writes its output
under the store's staging folder and returns a small summary), then a short reduce and
one commit in this process. An executor runs the calls:

* local (the default): `None`, and the callers keep their own in-process pools;
* ray (`--engine ray`): each call is a Ray task (`lineage.ingest.ray_engine`), on a local
  cluster of this machine's cores or on a running one (`--ray-address auto|HOST:PORT`).

Both run the same functions over the same inputs, so the store that results is the same
byte for byte. Nothing here imports Ray: it is an optional extra, loaded only for
`--engine ray`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

from lineage.errors import UsageError

ENGINES = ("local", "ray")
RAY_HINT = "--engine ray needs Ray: pip install 'lineage[ray]'"

T = TypeVar("T")
R = TypeVar("R")


class Executor(Protocol):
    """Runs independent calls of a plain function; results in the order of `items`.
    The first call that fails raises its own error (by position among `items`)."""

    name: str

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]: ...


class RayMissingError(UsageError):
    """`--engine ray` without Ray installed."""


@contextmanager
def open_executor(engine: str = "local", address: str | None = None,
                  progress: Any = None) -> Iterator[Executor | None]:
    """The executor for `engine`: None for local (callers use their own pools), a Ray
    executor for ray, connected for the duration of the block (a cluster it started is
    stopped at the end)."""
    if engine not in ENGINES:
        raise UsageError(f"--engine {engine!r}: expected one of {', '.join(ENGINES)}")
    if engine == "local":
        if address is not None:
            raise UsageError("--ray-address needs --engine ray")
        yield None
        return
    try:
        import ray  # noqa: F401  (only the check: ray_engine imports it again)
    except ImportError as exc:
        raise RayMissingError(RAY_HINT) from exc
    from lineage.ingest.ray_engine import connected

    with connected(address, progress) as executor:
        yield executor
