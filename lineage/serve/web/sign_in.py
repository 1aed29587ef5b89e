"""Signing a browser in to a server started with `--token-file` (docs/serve.md).

A browser following a link cannot send `Authorization: Bearer <token>`, so `/sign-in`
(served without the token) takes the token in a form and answers with a session
cookie, which `RequestGuard` (lineage/serve/app.py) accepts instead of the header:

    lineage_session=v1.<expiry>.<HMAC-SHA256 of "v1.<expiry>" keyed by the token>

HttpOnly, SameSite=Strict, Path=/, Secure when the request came over https, for
SESSION_SECONDS. The cookie holds a keyed hash, never the token, and needs no state on
the server: every worker process checks it alike, and a new token ends every session.
Tokens and cookies are compared in constant time. Only the sign-in and sign-out POSTs
change anything (a cookie), and both refuse a request sent from another site's page.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlencode, urlsplit

from starlette.requests import Request, cookie_parser
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from lineage.serve.web.markup import Markup, document, esc, tag
from lineage.serve.web.respond import HTML_HEADERS

if TYPE_CHECKING:
    from starlette.types import Scope

COOKIE = "lineage_session"
SESSION_SECONDS = 12 * 3600
OPEN_PATHS = frozenset({"/sign-in", "/sign-out"})  # served without the token
FORM_BYTES = 4096  # a sign-in form is a token and a path


class Sessions:
    """The server's token, and the session cookies it signs."""

    def __init__(self, token: str) -> None:
        self._token = token.encode()

    def token_matches(self, given: bytes) -> bool:
        return hmac.compare_digest(given, self._token)

    def new_cookie(self, *, now: float | None = None) -> str:
        expiry = int(now if now is not None else time.time()) + SESSION_SECONDS
        return f"v1.{expiry}.{self._mac(f'v1.{expiry}')}"

    def accepts(self, cookie_header: str, *, now: float | None = None) -> bool:
        """Whether the Cookie header holds a session this token signed, not yet expired."""
        value = cookie_parser(cookie_header).get(COOKIE, "")
        version, _, rest = value.partition(".")
        expiry, _, mac = rest.partition(".")
        if version != "v1" or not (expiry.isascii() and expiry.isdigit()):
            return False
        fresh = int(expiry) > (now if now is not None else time.time())
        expected = self._mac(f"v1.{expiry}").encode()
        return hmac.compare_digest(mac.encode("utf-8", "replace"), expected) and fresh

    def _mac(self, message: str) -> str:
        return hmac.new(self._token, message.encode(), hashlib.sha256).hexdigest()


def wants_html(scope: Scope) -> bool:
    """Whether the client asked for a page (a browser's Accept names text/html)."""
    accept = dict(scope["headers"]).get(b"accept", b"")
    return b"text/html" in accept


def refusal_page(scope: Scope) -> Response:
    """The 401 a browser sees without a session: why, and a link to the sign-in form
    that comes back to the page it asked for."""
    path = scope.get("path", "/")
    query = scope.get("query_string", b"").decode("latin-1")
    back = path + ("?" + query if query else "")
    href = "/sign-in?" + urlencode({"next": back})
    body = Markup(tag("p", "This server asks for its token (lineage serve --token-file).")
                  + tag("p", Markup(f'<a href="{esc(href)}">Sign in</a> to see this page.')))
    return _page("Sign-in required", body, status=401,
                 headers={"WWW-Authenticate": "Bearer"})


def routes() -> list[BaseRoute]:
    return [Route("/sign-in", sign_in_form, methods=["GET"]),
            Route("/sign-in", sign_in, methods=["POST"]),
            Route("/sign-out", sign_out, methods=["POST"])]


_PAGE: dict[str, Any] = {"content": {"text/html": {}}}
_REFUSED = {"403": {"description": "Sent from another site's page.", **_PAGE}}
_REDIRECT = {"description": "Done: on to the page named by `next` (sign-in) or to the "
                            "form (sign-out), with the session cookie set or cleared."}
Endpoint = TypeVar("Endpoint", bound=Callable[..., Any])


def _answers(responses: dict[str, Any]) -> Callable[[Endpoint], Endpoint]:
    """What /openapi.json lists the endpoint answering (a form, not an explorer page)."""
    def mark(endpoint: Endpoint) -> Endpoint:
        endpoint.responses = responses  # type: ignore[attr-defined]
        return endpoint
    return mark


@_answers({"200": {"description": "The form.", **_PAGE}})
async def sign_in_form(request: Request) -> Response:
    """The sign-in form (HTML): the server's token, and the page to come back to."""
    return _form(request, next_path=_local(request.query_params.get("next")))


@_answers({"303": _REDIRECT, **_REFUSED,
           "401": {"description": "Not the server's token: the form again.", **_PAGE}})
async def sign_in(request: Request) -> Response:
    """The token from the form: a session cookie and the way back, or the form again."""
    sessions: Sessions | None = getattr(request.app.state, "sessions", None)
    if not _same_site(request):
        return _page("Sign-in refused", tag("p", "A sign-in must come from this server's own "
                                                 "form.", cls="bad"), status=403)
    form = await _read_form(request)
    next_path = _local(form.get("next"))
    if sessions is None:
        return RedirectResponse(next_path, status_code=303)  # no token: nothing to sign
    if not sessions.token_matches(form.get("token", "").strip().encode()):
        return _form(request, next_path=next_path, wrong=True)
    response = RedirectResponse(next_path, status_code=303)
    response.set_cookie(COOKIE, sessions.new_cookie(), max_age=SESSION_SECONDS, path="/",
                        httponly=True, samesite="strict", secure=_over_https(request))
    return response


@_answers({"303": _REDIRECT, **_REFUSED})
async def sign_out(request: Request) -> Response:
    """Forget the session in this browser (a cookie that has expired replaces it)."""
    if not _same_site(request):
        return _page("Sign-out refused", tag("p", "A sign-out must come from this server's "
                                                  "own pages.", cls="bad"), status=403)
    response = RedirectResponse("/sign-in", status_code=303)
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict",
                           secure=_over_https(request))
    return response


def _form(request: Request, *, next_path: str, wrong: bool = False) -> Response:
    sessions = getattr(request.app.state, "sessions", None)
    note = tag("p", "That is not this server's token.", cls="bad") if wrong else Markup()
    if sessions is None:
        note = tag("p", "This server asks for no token: every page is open.", cls="muted")
    form = Markup(
        '<form method="post" action="/sign-in">'
        f'<input type="hidden" name="next" value="{esc(next_path)}">'
        '<div><label for="token">token (the one line of the server\'s --token-file)</label>'
        '<input id="token" name="token" type="password" autocomplete="current-password" '
        'required size="48"></div><button type="submit">sign in</button></form>')
    return _page("Sign in", Markup(note + form), status=401 if wrong else 200)


def _page(title: str, body: Markup, *, status: int,
          headers: dict[str, str] | None = None) -> Response:
    return HTMLResponse(document(title, body, json_href=None), status_code=status,
                        headers={**HTML_HEADERS, "Cache-Control": "no-store",
                                 **(headers or {})})


def _local(path: str | None) -> str:
    """`path` if it is a page of this server, else the front page: a sign-in never sends
    the browser elsewhere ("//host", "/\\host" and "https:..." are other servers)."""
    if not path or not path.startswith("/") or path.startswith(("//", "/\\")):
        return "/"
    parts = urlsplit(path)
    if parts.scheme or parts.netloc or any(ord(c) < 0x20 for c in path):
        return "/"
    return path


def _same_site(request: Request) -> bool:
    """Whether a POST came from this server's own page. Browsers say where a request
    comes from in Sec-Fetch-Site, older ones in Origin (which is "null" from a page with
    no referrer, as this server's are); a client that sends neither (a script, curl) is
    not a page of another site."""
    fetched_from = request.headers.get("sec-fetch-site")
    if fetched_from is not None:
        return fetched_from in ("same-origin", "none")
    origin = request.headers.get("origin", "null")
    return origin == "null" or urlsplit(origin).netloc == request.headers.get("host", "")


def _over_https(request: Request) -> bool:
    """Whether the browser reached the server over https, itself or through a proxy that
    says so in X-Forwarded-Proto (`lineage serve` does not read that header for anything
    else; believing it here can only keep the cookie off plain http)."""
    forwarded = request.headers.get("x-forwarded-proto", "").split(",")[0].strip()
    return request.url.scheme == "https" or forwarded.lower() == "https"


async def _read_form(request: Request) -> dict[str, str]:
    """The urlencoded form's fields; none for a body larger than a sign-in form."""
    from urllib.parse import parse_qs

    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > FORM_BYTES:
            return {}
    try:
        fields = parse_qs(body.decode("utf-8", "replace"), max_num_fields=4)
    except ValueError:  # more fields than a sign-in form has
        return {}
    return {name: values[0] for name, values in fields.items()}

