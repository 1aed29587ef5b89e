"""The ASGI application of `lineage serve`: the JSON API, the explorer, and their guard.

    app = create_app("lineage-store")              # uvicorn runs it
    app = create_app(root, token="...", limits=Limits(max_body_bytes=1 << 20))

Every request passes `RequestGuard` first: the Host header must name this server (so a
web page elsewhere cannot reach a loopback server by DNS rebinding), the bearer token
must match when one is set, the query string and the body must stay within the limits.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from lineage.errors import LineageError, StoreError
from lineage.serve import api, errors
from lineage.serve.cache import AnswerCache
from lineage.serve.errors import HTTPProblem, error_response
from lineage.serve.limits import Limits
from lineage.serve.sql_process import SqlProcesses
from lineage.serve.web.respond import SIGNED_IN
from lineage.serve.web.sign_in import OPEN_PATHS, Sessions, refusal_page, wants_html
from lineage.serve.web.sign_in import routes as sign_in_routes
from lineage.store.arrays_use import KeptArrays
from lineage.store.base import BaseStore

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from lineage.store.lookup_copy import LookupCopies

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
# What `lineage serve` hands each uvicorn worker process (it builds its own application).
ROOT_ENV = "LINEAGE_SERVE_STORE"
TOKEN_FILE_ENV = "LINEAGE_SERVE_TOKEN_FILE"
HOSTS_ENV = "LINEAGE_SERVE_HOSTS"
# The lookup copies' folder and the BLAKE3 of their index, as "digest:folder".
COPIES_ENV = "LINEAGE_SERVE_LOOKUP_COPIES"
SQL_MEMORY_ENV = "LINEAGE_SERVE_SQL_MEMORY"  # Limits.max_sql_memory, in bytes
HEALTH_PATH = "/health"  # answered without the token: it says only that this process serves


def create_app(store_root: str | os.PathLike[str], *, token: str | None = None,
               limits: Limits | None = None, allowed_hosts: Iterable[str] | None = None,
               lookup_copies: LookupCopies | None = None) -> Starlette:
    """The application serving the store at `store_root`, read-only.

    `token`: requests must send `Authorization: Bearer <token>` or a browser's session
    cookie from `/sign-in`. `allowed_hosts`: the names the Host header may give (default:
    loopback names; "*" allows any). `lookup_copies`: the lookup tables as IPC batches
    (lineage/store/lookup_copy.py), read instead of their Parquet parts."""
    from lineage.serve.web import routes as web_routes

    root = Path(store_root)
    if not (root / "catalog.duckdb").is_file():
        raise StoreError(f"no lineage store at {root} (missing catalog.duckdb): run "
                         "`lineage init` or pass --store")
    routes: list[BaseRoute] = [*api.routes(),
                               Route("/openapi.json", openapi, methods=["GET"]),
                               Route(HEALTH_PATH, health, methods=["GET"]),
                               *web_routes(), *sign_in_routes()]
    handlers: dict[Any, Any] = {LineageError: errors.lineage_error,
                                HTTPException: errors.http_error,
                                ClientDisconnect: errors.client_gone,
                                Exception: errors.unexpected_error}
    app = Starlette(routes=routes, exception_handlers=handlers, lifespan=_lifespan)
    app.state.store_root = str(root)
    app.state.limits = limits or Limits()
    app.state.sql_processes = SqlProcesses(app.state.limits.sql_processes)
    app.state.lookup_copies = lookup_copies
    # Each lookup arrays file mapped and checked whole once per process, here at start-up
    # (lineage/store/arrays_use.py); a damaged one is left for the Parquet parts.
    app.state.kept_arrays = KeptArrays()
    try:
        app.state.kept_arrays.check_all(BaseStore(root))
    except StoreError:  # busy: each file is then checked whole at its first use
        pass
    app.state.answers = AnswerCache(app.state.limits.max_cache_bytes)
    app.state.sessions = Sessions(token) if token else None
    hosts = frozenset(allowed_hosts) if allowed_hosts is not None else LOOPBACK_HOSTS
    app.add_middleware(RequestGuard, sessions=app.state.sessions, limits=app.state.limits,
                       hosts=hosts)
    return app


def app_from_environment() -> Starlette:
    """The application `lineage serve` configured through the environment (uvicorn's
    factory, called once in each worker process)."""
    token_file = os.environ.get(TOKEN_FILE_ENV)
    hosts = [h for h in os.environ.get(HOSTS_ENV, "").split(",") if h]
    copies = None
    if os.environ.get(COPIES_ENV):
        from lineage.store.lookup_copy import LookupCopies

        digest, _, folder = os.environ[COPIES_ENV].partition(":")
        copies = LookupCopies.load(folder, digest)
    limits = Limits(max_sql_memory=int(os.environ[SQL_MEMORY_ENV])) \
        if os.environ.get(SQL_MEMORY_ENV) else None
    return create_app(os.environ[ROOT_ENV],
                      token=read_token(Path(token_file)) if token_file else None,
                      allowed_hosts=hosts or None, lookup_copies=copies, limits=limits)


@asynccontextmanager
async def _lifespan(app: Starlette) -> AsyncIterator[None]:
    """The SQL processes stop with the server (they would on their own once its end of
    their pipe closes, but a server in a test's thread outlives its requests)."""
    yield
    await app.state.sql_processes.close()


def read_token(path: Path) -> str:
    """The bearer token in `path`: one line of at least 16 characters, no spaces."""
    from lineage.errors import InputError

    try:
        token = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, f"cannot read the token ({exc})") from exc
    if len(token) < 16 or any(c.isspace() for c in token):
        raise InputError(path, "a token is one line of at least 16 characters without spaces")
    return token


async def openapi(request: Request) -> Response:
    """The OpenAPI description of every route this application serves."""
    from lineage.jsonout import json_text
    from lineage.serve.openapi import describe

    return Response(json_text(describe(request.app.routes)) + "\n",
                    media_type="application/json")


async def health(request: Request) -> Response:
    """Whether this server process answers requests (without the token, for readiness
    checks): `{"ok": true}`."""
    return Response('{"ok": true}\n', media_type="application/json")


health.responses = {  # type: ignore[attr-defined]
    "200": {"description": "The process answers requests: `{\"ok\": true}`.",
            "content": {"application/json": {}}}}


class RequestGuard:
    """Host, token, query-string and body bounds, checked before any route runs."""

    def __init__(self, app: ASGIApp, *, sessions: Sessions | None, limits: Limits,
                 hosts: frozenset[str]) -> None:
        self.app = app
        self.sessions = sessions
        self.limits = limits
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        problem = self._refusal(scope)
        if problem is not None:
            response = refusal_page(scope) if problem.status == 401 and wants_html(scope) \
                else error_response(str(problem), status=problem.status, headers=problem.headers)
            await response(scope, receive, send)
            return
        await self.app(scope, self._bounded(receive), send)

    def _refusal(self, scope: Scope) -> HTTPProblem | None:
        headers = {k.decode("latin-1").lower(): v for k, v in scope["headers"]}
        if "*" not in self.hosts:
            host = _host_name(headers.get("host", b"").decode("latin-1"))
            if host not in self.hosts:
                return HTTPProblem(400, f"Host {host!r} is not a name of this server "
                                        "(lineage serve --allow-host adds one)")
        if self.sessions is not None and scope["path"] not in OPEN_PATHS \
                and scope["path"] != HEALTH_PATH:
            scheme, _, given = headers.get("authorization", b"").partition(b" ")
            if scheme.lower() == b"bearer" and self.sessions.token_matches(given.strip()):
                pass
            elif self.sessions.accepts(headers.get("cookie", b"").decode("latin-1")):
                scope[SIGNED_IN] = True  # the page offers to sign out
            else:
                return HTTPProblem(401, "a bearer token is required (Authorization: "
                                        "Bearer <token>, from the server's --token-file; "
                                        "a browser signs in at /sign-in)",
                                   headers={"WWW-Authenticate": "Bearer"})
        if len(scope.get("query_string", b"")) > self.limits.max_query_length:
            return HTTPProblem(414, f"the query string is longer than "
                                    f"{self.limits.max_query_length} bytes")
        length = headers.get("content-length")
        if length is not None:
            if not length.isdigit():
                return HTTPProblem(400, "Content-Length is not a number")
            if int(length) > self.limits.max_body_bytes:
                return _too_large(self.limits.max_body_bytes)
        return None

    def _bounded(self, receive: Receive) -> Receive:
        """`receive` that refuses a body (chunked, without a length) once it is too big."""
        limit = self.limits.max_body_bytes
        seen = 0

        async def bounded() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise _too_large(limit)
            return message

        return bounded


def _too_large(limit: int) -> HTTPProblem:
    return HTTPProblem(413, f"the request body is larger than {limit:,} bytes (the "
                            "server's limit); a larger file can be looked up with "
                            "`lineage trained-on FILE` on the store's machine")


def _host_name(host: str) -> str:
    """The name of a Host header without its port ('[::1]:8000' -> '[::1]')."""
    if host.startswith("["):
        return host.split("]")[0] + "]"
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host
