"""The explorer in a real browser: headless Chromium (through Playwright, never a
downloaded browser) opens every page of the demo store served by uvicorn, saves a
screenshot of each under test-artifacts/explorer/, finds no console error, no request
leaving the server, and every link on every page answering 200; the "was this trained
on?" form is filled in, sent, and shows the verdict with the passages marked."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import pytest

from .web_helpers import EXAMPLES, ODD_IDS, demo_store_root, explorer_app, serving

CHROMIUM = os.environ.get("LINEAGE_TEST_CHROMIUM") or shutil.which("chromium") or \
    "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "explorer"

# Every kind of page, by the name its screenshot gets.
PAGES = {
    "store": "/",
    "corpus": "/corpora/example",
    "corpus-odd-ids": "/corpora/odd",
    "document": "/corpora/example/document?id=shakespeare%2Fmacbeth.txt",
    "document-unindexed": "/corpora/copyrights/document?id=apt.txt",
    "stream": "/streams/main",
    "step": "/streams/main/steps/2",
    "step-ranks": "/streams/main/steps/2?world_size=2",
    "run": "/runs/tiny",
    "run-step-skipped": "/runs/tiny/steps/35",
    "experiment": "/experiments/local-check",
    "experiment-diff": "/experiments/local-check?diff=failing-check",
    "trained-on": "/trained-on",
}

# Where each link leads, resolved as the browser would (an SVG link's `href` property is
# not a string: read the attribute).
LINK_TARGETS = "els => els.map(e => new URL(e.getAttribute('href'), document.baseURI).href)"

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).is_file(),
                                reason=f"no Chromium at {CHROMIUM} (.ci/run installs it)")


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serving(explorer_app(demo_store_root(tmp_path_factory))) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class Watched:
    """A browser page that records console errors, page errors and foreign requests."""

    def __init__(self, browser: Any, base_url: str) -> None:
        self.page = browser.new_page(viewport={"width": 1200, "height": 900})
        self.problems: list[str] = []
        host = urlsplit(base_url).netloc
        self.page.on("console", lambda m: m.type == "error" and self.problems.append(
            f"console: {m.text}"))
        self.page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        self.page.on("request", lambda r: urlsplit(r.url).netloc in (host, "") or
                     self.problems.append(f"request elsewhere: {r.url}"))


def test_every_page_renders_without_errors_and_every_link_answers(
        browser: Any, base_url: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    watched = Watched(browser, base_url)
    links: dict[str, str] = {}
    for name, path in PAGES.items():
        response = watched.page.goto(base_url + path)
        assert response is not None and response.status == 200, path
        assert watched.page.locator("h1").count() == 1
        watched.page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
        for href in watched.page.eval_on_selector_all("a[href]", LINK_TARGETS):
            links.setdefault(href, path)
    assert watched.problems == []
    assert len(links) > 300  # documents, steps, windows, clipped and skipped steps, ...
    for href, found_on in links.items():
        assert urlsplit(href).netloc == urlsplit(base_url).netloc, (href, found_on)
        status = watched.page.request.get(href).status
        assert status == 200, f"{href} (linked from {found_on}) answered {status}"
    watched.page.close()


def test_odd_ids_arrive_intact_through_the_browser(browser: Any, base_url: str) -> None:
    watched = Watched(browser, base_url)
    watched.page.goto(base_url + "/corpora/odd")
    for doc_id in ODD_IDS:
        href = "/corpora/odd/document?" + urlencode({"id": doc_id})
        watched.page.click(f'a[href="{href}"]')
        watched.page.wait_for_load_state()
        assert watched.page.locator("h1").text_content() == f"Document {doc_id}"
        watched.page.go_back()
    assert watched.problems == []
    watched.page.close()


def test_the_trained_on_form_shows_the_verdict_with_passages_marked(
        browser: Any, base_url: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    watched = Watched(browser, base_url)
    page = watched.page
    page.goto(base_url + "/trained-on")
    article = (EXAMPLES / "queries" / "article.txt").read_text(encoding="utf-8")
    page.fill("#text", article)
    page.click("button[type=submit]")
    page.wait_for_load_state()
    assert page.locator(".verdict").inner_text() == "partial"
    marked = page.locator("pre.query mark").all_inner_texts()
    assert marked and marked[0].startswith("\u201cFriends, Romans, countrymen")
    assert page.get_by_role("link", name="shakespeare/julius_caesar.txt").count() == 1
    page.screenshot(path=str(ARTIFACTS / "trained-on-text.png"), full_page=True)

    page.goto(base_url + "/trained-on")
    page.set_input_files("#file", str(EXAMPLES / "corpus" / "python-stdlib" / "chunk.py"))
    page.select_option("#run", "tiny")
    page.click("button[type=submit]")
    page.wait_for_load_state()
    assert page.locator(".verdict").inner_text() == "trained"
    assert "chunk.py (sent as standard input)" in page.locator("h2").all_inner_texts()
    page.screenshot(path=str(ARTIFACTS / "trained-on-file.png"), full_page=True)
    assert watched.problems == []
    page.close()


def test_signing_in_to_a_server_with_a_token_opens_its_pages_until_sign_out(
        browser: Any, tmp_path_factory: pytest.TempPathFactory) -> None:
    """On a server started with a token: a page asked for without a session leads to the
    sign-in form, a wrong token is refused, the right one comes back to the page asked
    for with a session cookie (HttpOnly, SameSite=Strict, not the token), links are
    followed in the session, and sign-out ends it."""
    from lineage.serve.app import create_app
    from lineage.serve.web.sign_in import COOKIE

    token = "browser-token-of-24-chars"
    app = create_app(demo_store_root(tmp_path_factory), token=token)
    with serving(app) as url:
        watched = Watched(browser, url)
        page = watched.page
        response = page.goto(url + "/streams/main")
        assert response is not None and response.status == 401
        assert page.locator("h1").text_content() == "Sign-in required"
        page.click("text=Sign in")
        page.fill("#token", token + "-wrong")
        page.click("button[type=submit]")
        assert page.locator(".bad").text_content() == "That is not this server's token."
        page.fill("#token", token)
        page.click("button[type=submit]")
        page.wait_for_load_state()
        assert urlsplit(page.url).path == "/streams/main"
        assert page.locator("h1").text_content() == "Stream main"
        [cookie] = [c for c in page.context.cookies() if c["name"] == COOKIE]
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/"
        assert token not in cookie["value"]
        page.click("text=example")  # the stream's corpus, a link followed in the session
        page.wait_for_load_state()
        assert page.locator("h1").text_content() == "Corpus example"
        page.click("button:has-text('sign out')")
        page.wait_for_load_state()
        assert urlsplit(page.url).path == "/sign-in"
        assert [c for c in page.context.cookies() if c["name"] == COOKIE] == []
        response = page.goto(url + "/corpora/example")
        assert response is not None and response.status == 401
        # Chromium logs each 401 it is answered with; nothing else went wrong
        assert [p for p in watched.problems if "401" not in p] == []
        page.close()
