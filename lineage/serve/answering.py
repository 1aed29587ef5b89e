"""How an endpoint answers: typed query parameters, the command's output with its exit
code, and the question run in a worker thread against the request's store, once per
catalog state (lineage/serve/cache.py)."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import blake3
from starlette.responses import Response
from starlette.routing import Route

from lineage.errors import EXIT_OK
from lineage.serve.cache import AnswerCache
from lineage.serve.errors import HTTPProblem
from lineage.serve.limits import Limits
from lineage.serve.stores import snapshots_for
from lineage.store.budget import OverBudget, lookup_budget

if TYPE_CHECKING:
    from starlette.requests import Request

    from lineage.api import Store
    from lineage.serve.stores import CatalogSnapshot

_LARGEST = 2**63 - 1
EXIT_HEADER = "X-Lineage-Exit-Code"
CACHE_HEADER = "X-Lineage-Cache"


@dataclass(frozen=True)
class Param:
    """A query parameter: its name, type ('integer', 'number', 'boolean', 'string')."""

    name: str
    kind: str = "string"
    description: str = ""
    required: bool = False
    minimum: float | None = None


@dataclass(frozen=True)
class Endpoint:
    """One route of the API with what the OpenAPI description says about it."""

    path: str
    method: str
    command: str  # the command line whose --json this answers
    handler: Callable[[Request], Awaitable[Response]]
    params: tuple[Param, ...] = ()
    body: str | None = None  # what a POST body holds
    path_params: tuple[str, ...] = field(default=())

    def route(self) -> Route:
        return Route(self.path, self.handler, methods=[self.method])


def json_answer(text: str, *, exit_code: int = EXIT_OK,
                headers: dict[str, str] | None = None) -> Response:
    """The command's standard output (JSON and a newline) with its exit code."""
    return Response(text + "\n", media_type="application/json",
                    headers={EXIT_HEADER: str(exit_code), **(headers or {})})


# -- parameters ------------------------------------------------------------------------


def query_params(request: Request, params: Sequence[Param]) -> dict[str, Any]:
    """The request's query parameters, typed and checked; a problem is a 400."""
    known = {p.name: p for p in params}
    values: dict[str, Any] = {}
    for name in request.query_params:
        if name not in known:
            listed = ", ".join(known) or "none"
            raise HTTPProblem(400, f"unknown parameter {name!r} (this endpoint takes: {listed})")
        found = request.query_params.getlist(name)
        if len(found) > 1:
            raise HTTPProblem(400, f"parameter {name!r} is given {len(found)} times")
        values[name] = _typed(known[name], found[0])
    for p in params:
        if p.required and p.name not in values:
            raise HTTPProblem(400, f"parameter {p.name!r} is required")
    return values


def _typed(param: Param, raw: str) -> Any:
    if param.kind == "string":
        return raw
    if param.kind == "boolean":
        if raw.lower() in ("1", "true", "yes"):
            return True
        if raw.lower() in ("0", "false", "no"):
            return False
        raise HTTPProblem(400, f"parameter {param.name!r} must be true or false, not {raw!r}")
    word = "an integer" if param.kind == "integer" else "a number"
    try:
        value: float = int(raw) if param.kind == "integer" else float(raw)
    except ValueError:
        raise HTTPProblem(400, f"parameter {param.name!r} must be {word}, not {raw!r}") \
            from None
    if not math.isfinite(value) or abs(value) > _LARGEST:  # what the store's columns hold
        raise HTTPProblem(400, f"parameter {param.name!r} must be a finite {word.split()[-1]}"
                               f" below 2^63, not {raw[:40]!r}")
    if param.minimum is not None and value < param.minimum:
        raise HTTPProblem(400, f"parameter {param.name!r} must be at least "
                               f"{param.minimum:g}, not {raw}")
    return value


def limits_of(request: Request) -> Limits:
    limits = request.app.state.limits
    assert isinstance(limits, Limits)
    return limits


async def answered(request: Request, question: Callable[[Store], Response], *,
                   cache: bool = True, body: bytes = b"", quick: bool = False) -> Response:
    """Run a question against the request's store in a worker thread (DuckDB and the
    hashing release the GIL; the event loop stays free), at most `max_questions` at once
    per process: more would only share the same cores, each answer slower.

    The store is the catalog's state as the request found it on arrival (a commit that
    lands while the request waits for a thread is seen by the next request).

    An answer already given for the same catalog state, path, query and `body` is given
    again from memory (lineage/serve/cache.py), with the header `X-Lineage-Cache: hit`.

    A `quick` question (a lookup: `docs`, `trained-on` by hash or a posted file found by
    its bytes) is first tried at once, on the event loop, within a budget of `quick_rows`
    rows of the server's lookup copies (lineage/store/budget.py): a few hundred rows cost
    less to answer than to hand to a thread. One that would read more, read Parquet, ask
    DuckDB or match text stops there and goes to a thread like any other (a posted text
    that no corpus holds byte for byte has then been looked up by its bytes twice).
    """
    snapshots = snapshots_for(request.app.state.store_root)
    copies = request.app.state.lookup_copies
    arrays = getattr(request.app.state, "kept_arrays", None)  # checked at start-up
    answers: AnswerCache | None = request.app.state.answers if cache else None
    asked = (request.method, request.scope["path"], request.scope["query_string"],
             blake3.blake3(body).hexdigest() if body else None)  # not `request.url`: it parses

    def kept(snapshot: CatalogSnapshot) -> Response | None:
        found = answers.get((snapshot.serial, asked)) if answers is not None else None
        if found is None:
            return None
        return Response(found[0], media_type="application/json",
                        headers={**found[1], CACHE_HEADER: "hit"})

    def call(arrived: CatalogSnapshot | None) -> Response:
        snapshot = arrived or snapshots.current()
        if (response := kept(snapshot)) is not None:
            return response
        response = question(snapshots.served(snapshot, copies, arrays))
        if answers is not None and response.status_code == 200:
            answers.put((snapshot.serial, asked), bytes(response.body),
                        {k: v for k, v in response.headers.items() if k.startswith("x-lineage-")})
        return response

    current = snapshots.peek()  # a kept answer needs no worker thread
    if current is not None and (response := kept(current)) is not None:
        return response
    rows = limits_of(request).quick_rows
    if quick and (copies is not None or arrays is not None) and current is not None \
            and rows > 0:
        try:
            with lookup_budget(rows):
                return call(current)
        except OverBudget:
            pass
    return await asyncio.get_running_loop().run_in_executor(_threads(request), call, current)


def _threads(request: Request) -> ThreadPoolExecutor:
    """The application's `max_questions` question threads (a plain pool: handing a
    question to it costs a third of what anyio's worker threads did)."""
    state = request.app.state
    threads = getattr(state, "question_threads", None)
    if threads is None:  # made by the event loop, the only thread that asks for it
        threads = state.question_threads = ThreadPoolExecutor(
            limits_of(request).max_questions, thread_name_prefix="lineage-question")
    assert isinstance(threads, ThreadPoolExecutor)
    return threads
