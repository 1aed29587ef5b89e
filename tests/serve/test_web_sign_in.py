"""Signing a browser in to a server with a token (lineage/serve/web/sign_in.py), through
Starlette's TestClient and the whole application with its RequestGuard: the form, the
cookie it sets (and what it never holds), the pages a session opens, sign-out, and the
requests refused (no session, a wrong or forged or expired one, another site's form, a
way back to another server)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from http.cookies import SimpleCookie
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from lineage.serve.app import create_app
from lineage.serve.web.sign_in import COOKIE, SESSION_SECONDS, Sessions

from .web_helpers import demo_store_root

TOKEN = "explorer-token-of-24-chars"
HTML = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_store_root(tmp_path_factory)


def client_of(root: Path, *, token: str | None = TOKEN,
              base_url: str = "http://localhost") -> TestClient:
    return TestClient(create_app(root, token=token), base_url=base_url,
                      follow_redirects=False)


@pytest.fixture()
def client(root: Path) -> Iterator[TestClient]:
    with client_of(root) as c:
        yield c


def sign_in(client: TestClient, token: str = TOKEN, next_path: str = "/") -> object:
    return client.post("/sign-in", data={"token": token, "next": next_path}, headers=HTML)


def set_cookie(response: object) -> SimpleCookie:
    cookie: SimpleCookie = SimpleCookie()
    cookie.load(response.headers["set-cookie"])  # type: ignore[attr-defined]
    return cookie


def test_a_browser_without_a_session_gets_a_page_leading_to_the_form(
        client: TestClient) -> None:
    refused = client.get("/streams/main?x=1", headers=HTML)
    assert refused.status_code == 401
    assert refused.headers["content-type"].startswith("text/html")
    assert refused.headers["www-authenticate"] == "Bearer"
    assert "default-src 'none'" in refused.headers["content-security-policy"]
    assert 'href="/sign-in?next=%2Fstreams%2Fmain%3Fx%3D1"' in refused.text
    as_json = client.get("/streams/main.json")  # a client that asks for no page: JSON
    assert as_json.status_code == 401
    assert as_json.json()["exit_code"] == 2 and "/sign-in" in as_json.json()["error"]
    form = client.get("/sign-in?next=/streams/main", headers=HTML)
    assert form.status_code == 200
    assert '<form method="post" action="/sign-in">' in form.text
    assert 'name="next" value="/streams/main"' in form.text
    assert 'type="password"' in form.text


def test_the_token_signs_in_with_a_cookie_that_holds_no_token(client: TestClient) -> None:
    response = sign_in(client, next_path="/streams/main")
    assert response.status_code == 303 and response.headers["location"] == "/streams/main"
    morsel = set_cookie(response)[COOKIE]
    header = response.headers["set-cookie"].lower()
    assert "httponly" in header and "samesite=strict" in header and "secure" not in header
    assert morsel["path"] == "/" and int(morsel["max-age"]) == SESSION_SECONDS
    assert TOKEN not in morsel.value
    assert re.fullmatch(r"v1\.\d+\.[0-9a-f]{64}", morsel.value)

    cookie = {"Cookie": f"{COOKIE}={morsel.value}"}
    page = client.get("/streams/main", headers={**HTML, **cookie})
    assert page.status_code == 200 and "<h1>Stream main</h1>" in page.text
    assert '<form class="account" method="post" action="/sign-out">' in page.text
    assert client.get("/api/corpora", headers=cookie).status_code == 200
    bearer = client.get("/streams/main", headers={**HTML, "Authorization": f"Bearer {TOKEN}"})
    assert bearer.status_code == 200 and 'action="/sign-out"' not in bearer.text


def test_over_https_the_cookie_is_secure(root: Path) -> None:
    with client_of(root, base_url="https://localhost") as client:
        response = sign_in(client)
    assert response.status_code == 303
    assert "secure" in response.headers["set-cookie"].lower()
    with client_of(root) as client:  # plain http to a proxy's https
        proxied = client.post("/sign-in", data={"token": TOKEN},
                              headers={**HTML, "X-Forwarded-Proto": "https"})
    assert "secure" in proxied.headers["set-cookie"].lower()


def test_a_wrong_token_is_refused_with_the_form_again(client: TestClient) -> None:
    for wrong in (TOKEN + "x", TOKEN[:-1], "", TOKEN.upper()):
        response = sign_in(client, wrong)
        assert response.status_code == 401, wrong
        assert "set-cookie" not in response.headers
        assert "That is not this server&#x27;s token." in response.text


def test_forged_expired_and_other_servers_cookies_are_refused(client: TestClient) -> None:
    good = Sessions(TOKEN).new_cookie()
    expiry, mac = good.split(".")[1:]
    forged = [Sessions("another-token-of-20-chars").new_cookie(),  # another server's
              f"v1.{int(expiry) + 3600}.{mac}",  # a later expiry under the same mac
              f"v1.{expiry}.{mac[:-1]}0" if mac[-1] != "0" else f"v1.{expiry}.{mac[:-1]}1",
              Sessions(TOKEN).new_cookie(now=0),  # expired in 1970
              TOKEN, f"v2.{expiry}.{mac}", "", "v1.\u00b2.x", f"v1.{expiry}.\u00e9{mac[1:]}",
              f"v1.{expiry}", "v1..", f"v1.{expiry}.{mac}.{mac}"]
    for value in forged:
        response = client.get("/", headers={**HTML, "Cookie": f"{COOKIE}={value}".encode()})
        assert response.status_code == 401, value
    assert client.get("/", headers={"Cookie": f"{COOKIE}={good}"}).status_code == 200
    sessions = Sessions(TOKEN)
    assert sessions.accepts(f"{COOKIE}={good}")
    assert not sessions.accepts(f"{COOKIE}={good}", now=int(expiry))


def test_sign_out_replaces_the_session_with_an_expired_cookie(client: TestClient) -> None:
    """(The browser test shows the browser then sending none.)"""
    out = client.post("/sign-out", headers=HTML)
    assert out.status_code == 303 and out.headers["location"] == "/sign-in"
    cleared = set_cookie(out)[COOKIE]
    assert cleared.value == "" and int(cleared["max-age"]) == 0
    header = out.headers["set-cookie"].lower()
    assert "httponly" in header and "samesite=strict" in header and "path=/" in header


def test_only_posts_from_this_servers_pages_sign_in_or_out(client: TestClient) -> None:
    elsewhere = {**HTML, "Origin": "http://evil.example"}
    posted = client.post("/sign-in", data={"token": TOKEN}, headers=elsewhere)
    assert posted.status_code == 403 and "set-cookie" not in posted.headers
    assert client.post("/sign-out", headers=elsewhere).status_code == 403
    for fetched_from in ("cross-site", "same-site"):
        posted = client.post("/sign-in", data={"token": TOKEN},
                             headers={**HTML, "Sec-Fetch-Site": fetched_from, "Origin": "null"})
        assert posted.status_code == 403 and "set-cookie" not in posted.headers
    from_form = client.post("/sign-in", data={"token": TOKEN},
                            headers={**HTML, "Sec-Fetch-Site": "same-origin", "Origin": "null"})
    assert from_form.status_code == 303 and COOKIE in from_form.headers["set-cookie"]
    here = client.post("/sign-in", data={"token": TOKEN},
                       headers={**HTML, "Origin": "http://localhost"})
    assert here.status_code == 303 and COOKIE in here.headers["set-cookie"]
    # a GET changes nothing, whatever it carries
    got = client.get("/sign-in", params={"token": TOKEN}, headers=HTML)
    assert got.status_code == 200 and "set-cookie" not in got.headers
    assert client.get("/sign-out", headers=HTML).status_code == 405


@pytest.mark.parametrize("next_path", ["//evil.example/x", "/\\evil.example", "https://e.x/",
                                       "javascript:alert(1)", "streams/main", "/\x00x"])
def test_the_way_back_after_sign_in_stays_on_this_server(client: TestClient,
                                                          next_path: str) -> None:
    response = sign_in(client, next_path=next_path)
    assert response.status_code == 303 and response.headers["location"] == "/"


def test_a_server_without_a_token_needs_no_sign_in(root: Path) -> None:
    with client_of(root, token=None) as client:
        assert client.get("/", headers=HTML).status_code == 200
        form = client.get("/sign-in", headers=HTML)
        assert form.status_code == 200 and "asks for no token" in form.text
        response = sign_in(client, "anything", "/streams/main")
        assert response.status_code == 303 and "set-cookie" not in response.headers


def test_an_oversized_sign_in_form_is_a_wrong_token(client: TestClient) -> None:
    response = client.post("/sign-in", content=b"token=" + b"a" * 5000,
                           headers={**HTML, "Content-Type": "application/x-www-form-urlencoded"})
    assert response.status_code == 401 and "set-cookie" not in response.headers


def test_the_docs_say_what_the_sign_in_does() -> None:
    from lineage.serve.web.sign_in import FORM_BYTES, OPEN_PATHS

    repo = Path(__file__).resolve().parents[2]
    serve = (repo / "docs" / "serve.md").read_text(encoding="utf-8")
    section = serve.split("## Signing in from a browser")[1].split("\n## ")[0]
    assert f"`Max-Age` {SESSION_SECONDS}" in section
    assert f"({SESSION_SECONDS // 3600} hours" in section
    assert f"`{COOKIE}=v1.<expiry>.<mac>`" in section
    assert f"{FORM_BYTES // 1024} KiB" in section
    for flag in ("`HttpOnly`", "`SameSite=Strict`", "`Path=/`", "`Secure`"):
        assert flag in section
    assert sorted(OPEN_PATHS) == ["/sign-in", "/sign-out"]
    assert "Only\n  `/sign-in` and `/sign-out` are served without either." in serve
    explorer = (repo / "docs" / "explorer.md").read_text(encoding="utf-8")
    assert f"lasts {SESSION_SECONDS // 3600} hours" in explorer
    # the cookie is as the doc spells it: v1.<expiry>.<HMAC-SHA256 of v1.<expiry>>
    import hashlib
    import hmac

    value = Sessions(TOKEN).new_cookie(now=1000)
    expiry = 1000 + SESSION_SECONDS
    mac = hmac.new(TOKEN.encode(), f"v1.{expiry}".encode(), hashlib.sha256).hexdigest()
    assert value == f"v1.{expiry}.{mac}"


@pytest.mark.slow
def test_a_session_works_across_the_real_commands_worker_processes(
        root: Path, tmp_path: Path) -> None:
    """`lineage serve --workers 2 --token-file`: the cookie one worker signed is taken by
    whichever answers next (it needs no state on the server)."""
    import signal

    import httpx

    from ..conftest import spawn_lineage  # noqa: TID252 (the suite's shared helpers)
    from .conftest import WAIT, first_answer
    from .web_helpers import free_port

    (tmp_path / "token").write_text(TOKEN + "\n")
    port = free_port()
    server = spawn_lineage("--store", str(root), "serve", "--port", str(port),
                           "--token-file", str(tmp_path / "token"), "--workers", "2")
    url = f"http://127.0.0.1:{port}"
    try:
        refused = first_answer(server, url + "/", HTML)
        assert refused.status_code == 401 and "/sign-in?next=%2F" in refused.text
        signed = httpx.post(url + "/sign-in", data={"token": TOKEN, "next": "/streams/main"},
                            timeout=WAIT)
        assert signed.status_code == 303 and signed.headers["location"] == "/streams/main"
        cookie = {"Cookie": f"{COOKIE}={set_cookie(signed)[COOKIE].value}"}
        for _ in range(8):  # a new connection each time: either worker may answer
            page = httpx.get(url + "/streams/main", headers={**HTML, **cookie}, timeout=WAIT)
            assert page.status_code == 200 and 'action="/sign-out"' in page.text
    finally:
        server.send_signal(signal.SIGINT)
        server.communicate(timeout=WAIT)


def test_openapi_lists_the_sign_in_with_what_it_answers(client: TestClient) -> None:
    described = client.get("/openapi.json", headers={"Authorization": f"Bearer {TOKEN}"})
    paths = described.json()["paths"]
    assert set(paths["/sign-in"]) == {"get", "post"} and set(paths["/sign-out"]) == {"post"}
    assert set(paths["/sign-in"]["get"]["responses"]) == {"200"}
    assert set(paths["/sign-in"]["post"]["responses"]) == {"303", "401", "403"}
    assert set(paths["/sign-out"]["post"]["responses"]) == {"303", "403"}
    # every answer listed is one the tests above see
    assert sign_in(client).status_code == 303 and sign_in(client, "x").status_code == 401
