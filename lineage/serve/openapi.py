"""The OpenAPI 3.1 description served at `/openapi.json`, made from the routes themselves.

API routes are described from their `Endpoint` (parameters, body, the command each one
answers for); every other route (the explorer's pages) from its path, methods and the
first line of its endpoint's docstring. So a route cannot be served and left out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from starlette.routing import BaseRoute, Mount, Route

from lineage.serve.api import ENDPOINTS, EXIT_HEADER, Endpoint
from lineage.version import __version__

_PATH_PARAM = re.compile(r"{(\w+)(?::\w+)?}")
_ERROR = {"description": "An error: `{\"error\": message, \"exit_code\": n}` with the "
                         "command line's exit code.",
          "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}


def describe(routes: Sequence[BaseRoute]) -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    by_handler = {(e.path, e.method): e for e in ENDPOINTS}
    for path, route in _flat(routes):
        for method in sorted((route.methods or {"GET"}) - {"HEAD"}):
            endpoint = by_handler.get((path, method))
            operation = (_api_operation(endpoint) if endpoint
                         else _page_operation(path, method, route))
            paths.setdefault(_PATH_PARAM.sub(r"{\1}", path), {})[method.lower()] = operation
    return {
        "openapi": "3.1.0",
        "info": {"title": "lineage serve", "version": __version__,
                 "description": "Read-only questions over a lineage store; each /api "
                                "answer is exactly the command line's --json output."},
        "paths": dict(sorted(paths.items())),
        "components": {
            "schemas": {"Error": {"type": "object", "required": ["error", "exit_code"],
                                  "properties": {"error": {"type": "string"},
                                                 "exit_code": {"type": "integer"}}}},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    }


def _flat(routes: Sequence[BaseRoute], prefix: str = "") -> list[tuple[str, Route]]:
    found: list[tuple[str, Route]] = []
    for route in routes:
        if isinstance(route, Route):
            found.append((prefix + route.path, route))
        elif isinstance(route, Mount):
            found += _flat(route.routes, prefix + route.path)
    return found


def _api_operation(endpoint: Endpoint) -> dict[str, Any]:
    parameters = [{"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
                  for name in endpoint.path_params]
    for p in endpoint.params:
        schema: dict[str, Any] = {"type": p.kind}
        if p.minimum is not None:
            schema["minimum"] = p.minimum
        parameters.append({"name": p.name, "in": "query", "required": p.required,
                           "description": p.description, "schema": schema})
    operation: dict[str, Any] = {
        "summary": f"`{endpoint.command}`",
        "operationId": f"{endpoint.method.lower()}_{endpoint.handler.__name__}",
        "parameters": parameters,
        "responses": {
            "200": {"description": f"What `{endpoint.command}` prints; the header "
                                   f"{EXIT_HEADER} holds its exit code (1: the answer is no).",
                    "content": {"application/json": {}}},
            "4XX": _ERROR, "5XX": _ERROR},
    }
    if endpoint.body:
        kinds = ["application/octet-stream", "text/plain"]
        if "multipart" in endpoint.body:
            kinds.append("multipart/form-data")
        operation["requestBody"] = {"description": endpoint.body, "required": True,
                                    "content": {kind: {} for kind in kinds}}
    return operation


def _page_operation(path: str, method: str, route: Route) -> dict[str, Any]:
    doc = (route.endpoint.__doc__ or route.name or path).strip().splitlines()[0]
    parameters = [{"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
                  for name in _PATH_PARAM.findall(path)]
    operation_id = f"{method.lower()}_page" + re.sub(r"\W+", "_", path).rstrip("_")
    # an endpoint that is not an explorer page (signing in) states its own responses
    own = getattr(route.endpoint, "responses", None)
    return {"summary": doc, "operationId": operation_id,
            "parameters": parameters,
            "responses": own or {"200": {"description": "The page (HTML, or JSON with "
                                                        "?format=json)."},
                                 "4XX": _ERROR, "5XX": _ERROR}}
