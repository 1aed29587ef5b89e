"""The explorer's pages over the demo store (tests/serve/web_helpers.py), through
Starlette's TestClient: each page's JSON is the store's own answer (compared with the
Python API and with SQL over the store), the HTML shows it with every value escaped and
every link on this server, and errors carry the command line's exit codes."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.testclient import TestClient

import lineage.exp
from lineage.api import Store, open_store
from lineage.serve.web.trained_on_page import MAX_BODY_BYTES, marked_spans

from .web_helpers import EXAMPLES, ODD_IDS, demo_store_root, explorer_app


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_store_root(tmp_path_factory)


@pytest.fixture(scope="module")
def store(root: Path) -> Store:
    return open_store(root)


@pytest.fixture(scope="module")
def client(root: Path) -> Iterator[TestClient]:
    with TestClient(explorer_app(root)) as client:
        yield client


def page_json(client: TestClient, path: str, **params: Any) -> Any:
    response = client.get(path + ".json", params=params)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    return response.json()


def page_html(client: TestClient, path: str, **params: Any) -> str:
    response = client.get(path, params=params)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/html")
    return response.text


def hrefs(page: str) -> list[str]:
    return re.findall(r'(?:href|src|action)="([^"]*)"', page)


def step_of(store: Store, stream: str, window: int) -> int:
    return window // store.stream(stream).batch


def test_index_lists_what_the_list_commands_list(client: TestClient, store: Store) -> None:
    data = page_json(client, "/index")
    assert data["corpora"] == store.corpora().to_list()
    assert data["streams"] == store.streams().to_list()
    assert data["runs"] == store.runs().to_list()
    assert data["experiments"] == lineage.exp.list(store).to_list()
    html = page_html(client, "/")
    for path in ["/corpora/example", "/corpora/poems", "/streams/main", "/runs/tiny",
                 "/experiments/local-check", "/experiments/failing-check", "/trained-on"]:
        assert f'href="{path}"' in html


def test_json_by_suffix_and_by_format_parameter_are_the_same_bytes(client: TestClient) -> None:
    for path, params in [("/", {}), ("/corpora/poems", {"offset": "3"}),
                         ("/streams/main/steps/5", {"world_size": "4", "rank": "3"})]:
        suffixed = client.get("/index.json" if path == "/" else path + ".json", params=params)
        by_format = client.get(path, params={**params, "format": "json"})
        assert suffixed.status_code == by_format.status_code == 200
        assert suffixed.content == by_format.content


def test_corpus_page_shows_sources_shares_licences_and_pages_documents(
        client: TestClient, store: Store) -> None:
    data = page_json(client, "/corpora/example", offset=100)
    assert data["corpus"] == store.corpus("example").to_dict()
    with store.reader() as con:
        ids = [r[0] for r in con.execute("SELECT doc_id FROM documents WHERE corpus = "
                                         "'example' ORDER BY doc_id").fetchall()]
    page = data["documents"]
    assert page["total"] == len(ids) == 279
    assert [d["doc_id"] for d in page["documents"]] == ids[100:200]
    html = page_html(client, "/corpora/example")
    for source in data["corpus"]["sources"]:
        assert f"<td>{source['source']}</td>" in html
        assert f"{source['share']:.2%}" in html and f"{source['share']:.1%}</text>" in html
    for licence in ("LicenseRef-PublicDomain", "NOASSERTION", "PSF-2.0"):
        assert licence in html
    assert 'href="/corpora/example?offset=100"' in html  # the next page
    assert f'href="/corpora/example/document?{urlencode({"id": ids[0]})}"' in html


def test_document_page_places_the_document_where_docs_in_step_finds_it(
        client: TestClient, store: Store) -> None:
    doc_id = "shakespeare/macbeth.txt"
    data = page_json(client, "/corpora/example/document", id=doc_id)
    assert data["document"]["doc_id"] == doc_id
    assert data["document"]["content_hash"] == (
        store.trained_on([EXAMPLES / "corpus" / doc_id]).results[0].content_hash)
    (placed,) = data["streams"]
    assert placed["stream"] == "main" and placed["steps"]
    for step in placed["steps"]:
        held = {d.doc_id for d in store.docs_in_step(step, stream="main").documents}
        assert doc_id in held
    for window, step in zip(placed["windows"], placed["window_steps"], strict=True):
        assert step == step_of(store, "main", window)
        held = store.docs_in_step(step, stream="main", window=window).documents
        assert doc_id in {d.doc_id for d in held}
    # the steps just outside the document's hold other documents only
    for step in (placed["steps"][0] - 1, placed["steps"][-1] + 1):
        assert doc_id not in {d.doc_id for d in store.docs_in_step(step, stream="main").documents}
    with store.reader() as con:
        words = con.execute("SELECT n_words FROM text_documents WHERE corpus = 'example' "
                            "AND doc_id = ?", [doc_id]).fetchone()[0]
    assert data["text_index"]["status"] == "indexed" and data["text_index"]["words"] == words
    html = page_html(client, "/corpora/example/document", id=doc_id)
    assert f'href="/streams/main/steps/{placed["steps"][0]}"' in html


@pytest.mark.parametrize("doc_id", ["shakespeare/macbeth.txt", "python-stdlib/chunk.py",
                                    "python-stdlib/curses.textpad.py"])
def test_document_page_says_what_each_run_did_as_trained_on_run_does(
        client: TestClient, store: Store, doc_id: str) -> None:
    (run,) = page_json(client, "/corpora/example/document", id=doc_id)["runs"]
    (match,) = store.trained_on([EXAMPLES / "corpus" / doc_id], run="tiny").results[0].matches
    assert (run["run"], run["stream"]) == ("tiny", "main")
    # the run's steps are the stream's unless data skips moved them (`run_steps`)
    steps = match.steps if match.run_steps is None else match.run_steps
    assert run["verdict"] == match.run_verdict and tuple(run["steps"]) == steps
    html = page_html(client, "/corpora/example/document", id=doc_id)
    assert f">{match.run_verdict}</span>" in html
    assert run["last_step"] == store.run("tiny").last_step == 199
    for step in steps[:200]:  # linked to the run's record of the step, once it got there
        assert (f'href="/runs/tiny/steps/{step}"' in html) == (step <= 199)


def test_the_same_bytes_in_a_corpus_without_index_or_stream(
        client: TestClient, store: Store) -> None:
    data = page_json(client, "/corpora/copyrights/document", id="apt.txt")
    example = page_json(client, "/corpora/example/document", id="debian-copyright/apt.txt")
    assert data["document"]["content_hash"] == example["document"]["content_hash"]
    assert data["streams"] == [] and example["streams"] != []
    assert data["text_index"] == {"status": "no text index"}
    assert "No stream reads this document." in page_html(
        client, "/corpora/copyrights/document", id="apt.txt")


def test_odd_ids_are_escaped_in_pages_and_encoded_in_links(client: TestClient) -> None:
    html = page_html(client, "/corpora/odd")
    assert "<img" not in html
    for doc_id in ODD_IDS:
        href = "/corpora/odd/document?" + urlencode({"id": doc_id})
        assert f'href="{href}"' in html
        page = client.get(href)
        assert page.status_code == 200
        assert "<img" not in page.text
        assert page_json(client, "/corpora/odd/document", id=doc_id)["document"]["doc_id"] \
            == doc_id


def test_stream_page_source_mix_matches_sql_over_the_occurrences(
        client: TestClient, store: Store) -> None:
    data = page_json(client, "/streams/main")
    stream = store.stream("main")
    assert data["stream"] == stream.to_dict()
    assert [r["name"] for r in data["runs"]] == ["tiny"]
    mix = data["source_mix"]
    span, step_tokens = mix["steps_per_range"], stream.batch * stream.seq_len
    assert span == 20 and len(mix["ranges"]) == 40  # 782 steps, at most 40 ranges
    assert mix["ranges"][-1] == {**mix["ranges"][-1], "first_step": 780, "last_step": 781}
    with store.reader() as con:
        for r in mix["ranges"]:
            lo, hi = r["first_step"] * step_tokens, (r["last_step"] + 1) * step_tokens
            rows = con.execute(
                "SELECT source, sum(greatest(0, least(stream_end, ?) - greatest(stream_start, "
                "?))) FROM occurrences WHERE stream = 'main' GROUP BY source",
                [hi, lo]).fetchall()
            assert r["tokens"] == {source: int(tokens) for source, tokens in rows}
    html = page_html(client, "/streams/main")
    assert html.count("<rect ") >= len(mix["ranges"])
    for r in mix["ranges"]:
        assert f'href="/streams/main/steps/{r["first_step"]}"' in html


def test_step_page_is_lineage_docs_with_ranks(client: TestClient, store: Store) -> None:
    data = page_json(client, "/streams/main/steps/7", world_size=2, rank=1)
    assert data["docs"] == store.docs_in_step(7, stream="main", rank=1, world_size=2).to_dict()
    whole = page_json(client, "/streams/main/steps/7")["docs"]
    assert whole == store.docs_in_step(7, stream="main").to_dict()
    ranked = page_json(client, "/streams/main/steps/7", world_size=2)["docs"]
    assert ranked["windows"] == whole["windows"] == [28, 31]
    for rank in (0, 1):
        part = store.docs_in_step(7, stream="main", rank=rank, world_size=2).to_dict()
        assert [d for d in ranked["documents"] if d["rank"] == rank] == part["documents"]
    html = page_html(client, "/streams/main/steps/7", world_size=2)
    for d in ranked["documents"]:
        assert f'<a href="/streams/main/steps/7?window={d["window"]}">' in html
        assert f'?{urlencode({"id": d["doc_id"]})}"' in html
    assert 'href="/streams/main/steps/6"' in html and 'href="/streams/main/steps/8"' in html


def test_run_page_plots_series_and_links_clipped_and_skipped_steps(
        client: TestClient, store: Store) -> None:
    data = page_json(client, "/runs/tiny")
    run = store.run("tiny")
    assert data["run"] == run.to_dict()
    assert data["chain"] == store.verify_chain("tiny").to_dict()
    assert data["chain"]["ok"] and data["chain"]["batches_checked"]
    assert data["checkpoints"] == store.checkpoints("tiny").to_dict()
    assert data["audit"] == store.audit_status("tiny").to_dict()
    assert data["audit"]["intervals"]["untouched"] == 4  # 200 steps, every 50, no auditor
    with store.reader() as con:
        rows = con.execute("SELECT step, loss, grad_norm, clipped, skipped FROM steps "
                           "WHERE run = 'tiny' ORDER BY step").fetchall()
    series = data["series"]
    assert list(zip(series["step"], series["loss"], series["grad_norm"], series["clipped"],
                    series["skipped"], strict=True)) == rows
    html = page_html(client, "/runs/tiny")
    marked = set(run.clipped_steps) | set(run.skipped_steps)
    assert marked and len(run.skipped_steps) == 25
    assert html.count("<circle ") == 2 * len(marked)  # a dot per plot
    for step in marked:
        assert f'<a href="/runs/tiny/steps/{step}">' in html
    assert html.count("<svg ") == 2 and "verdict</dt><dd><span class=\"ok\">ok" in html


def test_run_step_page_is_lineage_trace(client: TestClient, store: Store) -> None:
    step = store.run("tiny").skipped_steps[0]
    data = page_json(client, f"/runs/tiny/steps/{step}")
    trace = store.trace("tiny", step=step).to_dict()
    assert data["trace"] == trace
    html = page_html(client, f"/runs/tiny/steps/{step}")
    (traced,) = trace["steps"]
    assert traced["skipped"] and traced["documents"]
    for d in traced["documents"]:
        for w in d["windows"]:
            assert f'href="/streams/main/steps/{step_of(store, "main", w)}?window={w}"' in html


def test_experiment_page_is_exp_show_and_diff(client: TestClient, store: Store) -> None:
    data = page_json(client, "/experiments/local-check")
    assert data["experiment"] == lineage.exp.show(store, "local-check").to_dict()
    assert data["diff"] is None and data["others"] == ["failing-check"]
    data = page_json(client, "/experiments/local-check", diff="failing-check")
    diff = lineage.exp.diff(store, "local-check", "failing-check").to_dict()
    assert data["diff"] == diff and not diff["same"]
    html = page_html(client, "/experiments/local-check", diff="failing-check")
    assert {"exit_code", "revision"} <= {c["field"] for c in diff["changes"]}
    for change in diff["changes"]:
        assert f"<td>{change['field']}</td>" in html


def test_trained_on_pasted_text_is_trained_on_text_with_spans_marked(
        client: TestClient, store: Store) -> None:
    text = (EXAMPLES / "queries" / "article.txt").read_text(encoding="utf-8")
    response = client.post("/trained-on.json", data={"text": text})
    assert response.status_code == 200
    answer = store.trained_on(texts=[text]).to_dict()
    assert response.json() == answer
    (result,) = answer["results"]
    assert result["verdict"] == "partial"
    html = client.post("/trained-on", data={"text": text}).text
    marked = re.findall(r"<mark>(.*?)</mark>", html, flags=re.S)
    spans = marked_spans(result, len(text))
    assert spans and len(marked) == len(spans)
    import html as html_module
    assert [html_module.unescape(m) for m in marked] == [text[a:b] for a, b in spans]
    assert "Friends, Romans, countrymen" in marked[0]


def test_trained_on_file_is_trained_on_standard_input(client: TestClient, store: Store) -> None:
    path = EXAMPLES / "corpus" / "python-stdlib" / "chunk.py"  # read in the run's steps
    files = {"file": ("chunk.py", path.read_bytes(), "text/plain")}
    response = client.post("/trained-on.json", files=files, data={"run": "tiny"})
    answer = store.trained_on(stdin=path.read_bytes(), run="tiny").to_dict()
    assert response.json() == answer and answer["results"][0]["verdict"] == "trained"
    html = client.post("/trained-on", files=files, data={"run": "tiny"}).text
    assert "chunk.py (sent as standard input)" in html
    assert '<option value="tiny" selected="selected">' in html
    assert html.count("<mark>") == 1  # an exact match covers the whole query
    # not in any corpus: "not-found", with the passages it shares below the threshold
    # (licence boilerplate) still marked
    missing = (EXAMPLES / "licenses" / "python-LICENSE.txt").read_bytes()
    html = client.post("/trained-on", files={"file": ("l.txt", missing)}).text
    (result,) = store.trained_on(stdin=missing).to_dict()["results"]
    assert result["verdict"] == "not-found" and 'class="verdict bad">not-found' in html
    assert html.count("<mark>") == len(marked_spans(result, len(missing.decode()))) > 0


def test_trained_on_refuses_bad_and_oversized_forms(client: TestClient) -> None:
    empty = client.post("/trained-on.json", data={"text": ""})
    assert empty.status_code == 400
    assert empty.json() == {"error": "paste a text or choose a file to look for",
                            "exit_code": 2}
    raw = client.post("/trained-on.json", content=b"hello", headers={"content-type":
                                                                      "text/plain"})
    assert raw.status_code == 400 and "multipart/form-data" in raw.json()["error"]
    big = client.post("/trained-on.json", files={"file": ("big.txt", b"a" * (MAX_BODY_BYTES
                                                                            + 1))})
    assert big.status_code == 413 and big.json()["exit_code"] == 2
    assert "8,388,608" in big.json()["error"]


@pytest.mark.parametrize(("path", "status", "exit_code", "message"), [
    ("/corpora/nope", 404, 2, "nope"),
    ("/streams/main/steps/782", 404, 2, "steps 0..781"),
    ("/runs/nope", 404, 2, "nope"),
    ("/experiments/nope", 404, 2, "nope"),
    ("/corpora/example/document?id=nope", 404, 2, "no document 'nope'"),
    ("/corpora/example/document", 400, 2, "?id="),
    ("/corpora/example?offset=x", 400, 2, "?offset= takes a whole number"),
    ("/streams/main/steps/2?world_size=3", 400, 2, "must divide the batch"),
])
def test_errors_say_what_is_wrong_with_the_command_lines_exit_code(
        client: TestClient, path: str, status: int, exit_code: int, message: str) -> None:
    base, _, query = path.partition("?")
    as_json = client.get(f"{base}.json" + (f"?{query}" if query else ""))
    assert as_json.status_code == status
    body = as_json.json()
    assert set(body) == {"error", "exit_code"} and body["exit_code"] == exit_code
    assert message in body["error"]
    as_html = client.get(path)
    assert as_html.status_code == status and "Error" in as_html.text


def test_pages_load_nothing_from_elsewhere(client: TestClient) -> None:
    for path in ["/", "/corpora/example", "/streams/main", "/runs/tiny", "/trained-on",
                 "/experiments/local-check", "/streams/main/steps/0"]:
        response = client.get(path)
        policy = response.headers["content-security-policy"]
        assert "default-src 'none'" in policy and "script-src" not in policy
        for target in hrefs(response.text):
            assert target.startswith(("/", "data:")), (path, target)
        assert "<script" not in response.text


@given(st.lists(st.tuples(st.integers(0, 60), st.integers(0, 20)), max_size=8))
def test_marked_spans_are_the_union_of_the_spans_sorted_and_apart(
        spans: list[tuple[int, int]]) -> None:
    ranges = [(a, a + n) for a, n in spans]
    result = {"matches": [{"match": "partial",
                           "spans": [{"query_chars": list(r)} for r in ranges]}]}
    merged = marked_spans(result, 100)
    covered = {i for a, b in ranges for i in range(a, b)}
    assert {i for a, b in merged for i in range(a, b)} == covered
    assert all(b1 < a2 for (_, b1), (a2, _) in zip(merged, merged[1:], strict=False))
    assert all(a < b for a, b in merged if (a, b) != (a, a)) or not covered


def test_json_pages_are_what_the_command_line_prints(client: TestClient, store: Store) -> None:
    """A page's JSON holds the answers exactly as `--json` prints them (key order too)."""
    text = client.get("/streams/main/steps/3.json").text
    docs = json.loads(text)["docs"]
    assert json.dumps(docs, indent=2, ensure_ascii=False) == \
        store.docs_in_step(3, stream="main").to_json()


def test_a_name_ending_in_json_has_its_page_and_its_json(client: TestClient,
                                                         store: Store) -> None:
    assert page_json(client, "/corpora/notes.json")["corpus"] == \
        store.corpus("notes.json").to_dict()
    page = client.get("/corpora/notes.json.json", params={"format": "html"})
    assert page.status_code == 200 and "<h1>Corpus notes.json</h1>" in page.text
    assert 'href="/corpora/notes.json.json"' in page.text  # the page's JSON
    assert client.get("/corpora/notes.json").status_code == 404  # JSON of "notes"
    assert 'href="/corpora/notes.json.json?format=html"' in page_html(client, "/")


def test_the_docs_list_every_page(client: TestClient) -> None:
    from lineage.serve.web import routes

    text = (Path(__file__).resolve().parents[2] / "docs" / "explorer.md").read_text()
    documented = {re.sub(r"\?.*", "", m) for m in re.findall(r"^\| `([^`]+)` \|", text,
                                                               flags=re.M)}
    paths = {route.path for route in routes()}  # type: ignore[attr-defined]
    pages = {p.replace("{step:int}", "{step}") for p in paths if not p.endswith(".json")}
    assert documented == pages
    for page in paths - {"/index.json"}:
        twin = "/index.json" if page == "/" else page + ".json"
        assert page.endswith(".json") or twin in paths


def test_line_plot_draws_a_long_series_thinned_to_its_ends() -> None:
    from lineage.charts import MAX_POINTS, line_plot

    xs = list(range(100_001))
    svg = line_plot(xs, [float(x % 97) for x in xs], title="t", y_label="y")
    path = re.search(r' d="([^"]*)"', svg)
    assert path is not None
    points = path.group(1).split(" ")
    assert MAX_POINTS // 2 < len(points) <= MAX_POINTS + 1
    assert points[0].startswith("M64.0,") and points[-1].startswith("L884.0,")


def test_pages_see_a_commit_made_while_the_server_runs(root: Path, tmp_path: Path) -> None:
    import shutil

    from lineage.ingest import ingest_corpus
    from lineage.stream.build import build_stream

    shutil.copytree(root, tmp_path / "store")
    store = open_store(tmp_path / "store")
    with TestClient(explorer_app(tmp_path / "store")) as client:
        assert "later" not in {c["name"] for c in page_json(client, "/index")["corpora"]}
        assert client.get("/streams/later.json").status_code == 404
        ingest_corpus(store, [EXAMPLES / "shards" / "sonnets.jsonl.gz"], corpus="later",
                      license="LicenseRef-PublicDomain", fingerprints=False)
        build_stream(store, corpus="later", name="later", seed=1, seq_len=256, batch=2)
        assert "later" in {c["name"] for c in page_json(client, "/index")["corpora"]}
        mix = page_json(client, "/streams/later")["source_mix"]
        assert sum(sum(r["tokens"].values()) for r in mix["ranges"]) > 0


def test_text_and_file_together_answer_text_first(client: TestClient, store: Store) -> None:
    text = "Shall I compare thee to a summer's day? Thou art more lovely and more temperate"
    data = (EXAMPLES / "corpus" / "python-stdlib" / "chunk.py").read_bytes()
    response = client.post("/trained-on.json", data={"text": text},
                           files={"file": ("chunk.py", data)})
    answer = response.json()
    assert answer == store.trained_on(texts=[text], stdin=data).to_dict()
    assert [r["file"] for r in answer["results"]] == ["<text 1>", "<stdin>"]


def test_error_statuses_follow_the_kind_of_error() -> None:
    from lineage.errors import (
        DamagedPartError,
        InputError,
        NotFoundError,
        StoreBusyError,
        UnknownObjectError,
        UsageError,
    )
    from lineage.serve.errors import status_of as error_status
    from lineage.serve.web.respond import RequestTooLargeError

    assert error_status(UnknownObjectError("x")) == 404
    assert error_status(NotFoundError("x")) == 404
    assert error_status(UsageError("x")) == 400
    assert error_status(InputError(Path("f"), "bad")) == 400
    assert error_status(RequestTooLargeError("x")) == 413
    assert error_status(StoreBusyError("catalog.duckdb", 12, 5.0)) == 503
    assert error_status(DamagedPartError("part.parquet", "row group 0")) == 500


def test_the_form_keeps_the_pasted_text_and_choices(client: TestClient) -> None:
    text = "\n<b>Friends</b>, Romans, countrymen & lend me your ears"
    html = client.post("/trained-on", data={"text": text, "stream": "main"}).text
    import html as html_module
    kept = re.search(r'<textarea id="text" name="text" rows="8">\n(.*?)</textarea>', html,
                     flags=re.S)
    assert kept is not None and html_module.unescape(kept.group(1)) == text
    assert "<b>" not in html
    assert '<option value="main" selected="selected">' in html


def test_kept_answers_are_computed_once_per_key_and_the_oldest_go_first() -> None:
    from lineage.serve.web import figures

    calls: list[int] = []

    def compute(n: int) -> Any:
        calls.append(n)
        return {"n": n}

    first = figures.kept(("test", 0), lambda: compute(0))
    assert figures.kept(("test", 0), lambda: compute(0)) is first and calls == [0]
    for n in range(1, figures.KEPT_ANSWERS + 1):  # one more than the cache holds
        figures.kept(("test", n), lambda n=n: compute(n))
    figures.kept(("test", 0), lambda: compute(0))
    assert calls.count(0) == 2  # the oldest was let go
    figures.kept(("test", figures.KEPT_ANSWERS), lambda: compute(-1))
    assert -1 not in calls  # the most recent is still kept


def test_two_requests_for_one_cold_answer_compute_it_once() -> None:
    """The second waits for the first's answer instead of reading the table again; a
    computation that fails is not kept, and the next request computes afresh."""
    import threading
    import time

    from lineage.serve.web import figures

    calls: list[str] = []
    started = threading.Event()

    def slow() -> Any:
        calls.append(threading.current_thread().name)
        started.set()
        time.sleep(0.3)
        return {"mix": 1}

    answers: list[Any] = []
    threads = [threading.Thread(target=lambda: answers.append(figures.kept(("cold",), slow)))
               for _ in range(3)]
    threads[0].start()
    started.wait(5)
    for thread in threads[1:]:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(calls) == 1 and len(answers) == 3
    assert all(answer is answers[0] for answer in answers)

    def failing() -> Any:
        raise RuntimeError("damaged")

    with pytest.raises(RuntimeError):
        figures.kept(("failing",), failing)
    assert figures.kept(("failing",), lambda: "recovered") == "recovered"


def test_source_mix_ranges_follow_the_streams_schedule(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the store states a batch-size schedule (lineage.stream.query's
    `stream_schedule`), a range's tokens are those of its steps' windows under it."""
    import lineage.stream.query
    from lineage.serve.web.figures import source_mix, stream_schedule_of
    from lineage.stream.schedule import BatchSchedule

    stream = store.stream("main")
    assert stream_schedule_of(stream) == BatchSchedule.fixed(4)
    ramp = BatchSchedule(((0, 1), (100, 2), (300, 3)))
    monkeypatch.setattr(lineage.stream.query, "stream_schedule", lambda row: ramp,
                        raising=False)
    assert stream_schedule_of(stream) == ramp
    mix = source_mix(store, stream)
    with store.reader() as con:
        for r in mix["ranges"]:
            lo = ramp.first_window(r["first_step"]) * stream.seq_len
            hi = ramp.first_window(r["last_step"] + 1) * stream.seq_len
            rows = con.execute(
                "SELECT source, sum(greatest(0, least(stream_end, ?) - greatest(stream_start, "
                "?))) FROM occurrences WHERE stream = 'main' GROUP BY source",
                [hi, lo]).fetchall()
            assert r["tokens"] == {source: int(tokens) for source, tokens in rows}
    widths = {ramp.first_window(r["last_step"] + 1) - ramp.first_window(r["first_step"])
              for r in mix["ranges"]}
    assert {20, 40, 60} <= widths  # 20 steps of 1, 2 and 3 windows


@given(st.text(st.characters(exclude_categories=["Cs"])),
       st.text(st.characters(exclude_categories=["Cs"]), min_size=1))
def test_any_id_survives_a_link_and_any_text_is_escaped(doc_id: str, name: str) -> None:
    import html as html_module
    from urllib.parse import parse_qsl, unquote, urlsplit

    from lineage.serve.web.markup import esc, link, url

    href = url("corpora", name, "document", id=doc_id)
    parts = urlsplit(href)
    assert unquote(parts.path) == f"/corpora/{name}/document"
    assert dict(parse_qsl(parts.query, keep_blank_values=True)) == {"id": doc_id}
    shown = esc(doc_id)
    assert "<" not in shown and '"' not in shown and html_module.unescape(shown) == doc_id
    anchor = link(href, doc_id)
    assert anchor.count("<") == 2 and html_module.unescape(
        re.fullmatch(r'<a href="([^"]*)">.*</a>', anchor, flags=re.S).group(1)) == href
