"""Every page twice: as HTML, and as JSON (`PATH.json`, or `PATH?format=json`).

A page is a loader (the request and an open store to the page's data, a JSON value) and
a renderer (that data to a title and HTML). The JSON variant sends the loader's data as
`--json` prints answers; the HTML variant renders the same data, so the two never
disagree. A lineage error becomes the same status and body in both, with the command
line's exit code: `{"error": ..., "exit_code": n}`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Route

from lineage.errors import LineageError, UsageError
from lineage.jsonout import json_text
from lineage.serve.errors import HTTPProblem, status_of
from lineage.serve.stores import store_for
from lineage.serve.web.markup import Markup, document, facts, tag

Loader = Callable[[Request, Any], Any]  # (request, lineage.Store) -> the page's data
Renderer = Callable[[Any], tuple[str, Markup]]  # the data -> (title, body)

SIGNED_IN = "lineage.signed_in"  # set in the scope of a request with a session cookie

# The browser may load nothing but this page's own inline styles; forms post here only.
HTML_HEADERS = {
    "Content-Security-Policy": ("default-src 'none'; style-src 'unsafe-inline'; "
                                "img-src data:; form-action 'self'; base-uri 'none'; "
                                "frame-ancestors 'none'"),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def page_routes(path: str, load: Loader, render: Renderer) -> list[BaseRoute]:
    """The page at `path` and its JSON at `path.json` (`/index.json` for `/`)."""
    json_path = "/index.json" if path == "/" else path + ".json"
    return [Route(json_path, _endpoint(load, render, as_json=True), methods=["GET"]),
            Route(path, _endpoint(load, render, as_json=False), methods=["GET"])]


def _endpoint(load: Loader, render: Renderer, *, as_json: bool) -> Callable[[Request], Response]:
    # A plain function: Starlette runs it in its thread pool, off the event loop.
    def endpoint(request: Request) -> Response:
        json_wanted = wants_json(request, suffixed=as_json)
        try:
            with store_for(request) as store:
                data = load(request, store)
        except LineageError as exc:
            return error_response(request, exc, as_json=json_wanted)
        return respond(request, data, render, as_json=json_wanted)

    return endpoint


def wants_json(request: Request, *, suffixed: bool) -> bool:
    """JSON for a `.json` path or `?format=json`; `?format=html` asks for the page even on
    a `.json` path (the page of a name that itself ends in `.json`)."""
    asked = request.query_params.get("format")
    return asked == "json" or (suffixed and asked != "html")


def respond(request: Request, data: Any, render: Renderer, *, as_json: bool,
            status: int = 200) -> Response:
    if as_json:
        return json_response(data, status=status)
    title, body = render(data)
    page = document(title, body, json_href=json_href(request),
                    signed_in=bool(request.scope.get(SIGNED_IN)))
    return HTMLResponse(page, status_code=status, headers=HTML_HEADERS)


def json_response(data: Any, *, status: int = 200) -> Response:
    return Response(json_text(data) + "\n", status_code=status, media_type="application/json")


def json_href(request: Request) -> str:
    """The JSON variant of the page `request` asked for."""
    path = request.url.path
    if not path.endswith(".json"):
        path = "/index.json" if path == "/" else path + ".json"
    kept = [(k, v) for k, v in request.query_params.multi_items() if k != "format"]
    query = urlencode(kept)
    return path + ("?" + query if query else "")


class RequestTooLargeError(HTTPProblem):
    """A request body over the page's limit (HTTP 413)."""

    def __init__(self, message: str) -> None:
        super().__init__(413, message)


def error_response(request: Request, exc: LineageError, *, as_json: bool) -> Response:
    body = {"error": str(exc), "exit_code": exc.exit_code}
    return respond(request, body, _render_error, as_json=as_json, status=status_of(exc))


def _render_error(data: dict[str, Any]) -> tuple[str, Markup]:
    return "Error", Markup(tag("p", data["error"], cls="bad")
                           + facts({"exit code (as the command line)": data["exit_code"]}))


def int_param(request: Request, name: str, *, minimum: int | None = 0) -> int | None:
    """The query parameter `name` as an integer, None when absent or empty."""
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise UsageError(f"?{name}= takes a whole number, not {raw!r}") from None
    if minimum is not None and value < minimum:
        raise UsageError(f"?{name}= must be at least {minimum}, not {value}")
    return value


def text_param(request: Request, name: str) -> str | None:
    raw = request.query_params.get(name)
    return raw if raw else None
