"""Every error as a JSON body `{"error": ..., "exit_code": n}` with an HTTP status.

`exit_code` means what the command line's does (0 ok, 1 a lookup answered "no", 2 an
error in the question or the store); the status says the same to HTTP clients. Library
errors (`lineage.errors`) map here, in one place, as the command line maps them to exit
codes in `lineage.cli.main`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from lineage.errors import (
    EXIT_ERROR,
    ConflictError,
    InputError,
    LineageError,
    NotFoundError,
    StoreBusyError,
    StoreError,
    UnknownObjectError,
    UsageError,
)

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

# The most specific class first: StoreBusyError is a StoreError, RuleError an InputError.
_STATUS: tuple[tuple[type[LineageError], int], ...] = (
    (StoreBusyError, 503),
    (StoreError, 500),
    (UnknownObjectError, 404),
    (NotFoundError, 404),
    (ConflictError, 409),
    (InputError, 400),
    (UsageError, 400),
)


class HTTPProblem(LineageError):
    """A request the server refuses before asking the store (bad parameter, too large,
    no token): `status` is its HTTP status; the exit code is 2, an error in the question."""

    def __init__(self, status: int, message: str, *, headers: dict[str, str] | None = None
                 ) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers or {}


def status_of(exc: LineageError) -> int:
    if isinstance(exc, HTTPProblem):
        return exc.status
    for kind, status in _STATUS:
        if isinstance(exc, kind):
            return status
    return 500


def error_response(message: str, *, status: int, exit_code: int = EXIT_ERROR,
                   headers: Mapping[str, str] | None = None) -> Response:
    from starlette.responses import Response

    from lineage.jsonout import json_text

    body = json_text({"error": message, "exit_code": exit_code}) + "\n"
    return Response(body, status_code=status, media_type="application/json",
                    headers=headers)


async def lineage_error(request: Request, exc: Exception) -> Response:
    """A library error: its one-line message, its exit code, its status."""
    assert isinstance(exc, LineageError)
    headers = exc.headers if isinstance(exc, HTTPProblem) else None
    return error_response(str(exc).strip() or type(exc).__name__, status=status_of(exc),
                          exit_code=exc.exit_code, headers=headers)


async def http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own refusals (no such path, wrong method, a malformed body)."""
    from starlette.exceptions import HTTPException

    assert isinstance(exc, HTTPException)
    return error_response(exc.detail, status=exc.status_code, headers=exc.headers)


async def client_gone(request: Request, exc: Exception) -> Response:
    """A client that closed its connection before its request's body arrived (or that
    was closed for sending it too slowly, lineage/serve/tcp.py): nothing to answer, and
    nothing wrong with the server, so no traceback in its log."""
    from starlette.responses import Response

    return Response(status_code=400)


async def unexpected_error(request: Request, exc: Exception) -> Response:
    """A bug: still one line, and no traceback to the client."""
    first = (str(exc).strip().splitlines() or [""])[0]
    return error_response(f"unexpected {type(exc).__name__}: {first}", status=500)
