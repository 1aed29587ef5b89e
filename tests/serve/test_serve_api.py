"""Each endpoint answers exactly what its command prints with --json, byte for byte, and
carries the command's exit code."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from lineage.serve.api import ENDPOINTS, EXIT_HEADER
from lineage.serve.openapi import _flat

from ..conftest import EXAMPLES, Cli

MACBETH = EXAMPLES / "corpus" / "shakespeare" / "macbeth.txt"
NOT_IN_CORPUS = EXAMPLES / "licenses" / "python-LICENSE.txt"

# (HTTP path, the command line) pairs that must print the same bytes
SAME_AS_CLI = [
    ("/api/corpora", ["corpus", "list"]),
    ("/api/corpora/example", ["corpus", "show", "example"]),
    ("/api/streams", ["stream", "list"]),
    ("/api/streams/main", ["stream", "show", "main"]),
    ("/api/docs?step=2", ["docs", "--step", "2"]),
    ("/api/docs?step=2&stream=main&rank=1&world_size=2",
     ["docs", "--step", "2", "--stream", "main", "--rank", "1", "--world-size", "2"]),
    ("/api/docs?step=3&window=13", ["docs", "--step", "3", "--window", "13"]),
    ("/api/trace?run=tiny&step=5", ["trace", "--run", "tiny", "--step", "5"]),
    ("/api/trace?run=tiny&clipped=true&limit=2",
     ["trace", "--run", "tiny", "--clipped", "--limit", "2"]),
    ("/api/runs", ["run", "list"]),
    ("/api/runs/tiny", ["run", "show", "tiny"]),
    ("/api/runs/tiny/checkpoints", ["run", "checkpoints", "tiny"]),
    ("/api/runs/tiny/checkpoints?nearest=20", ["run", "checkpoints", "tiny", "--nearest", "20"]),
    ("/api/runs/tiny/chain", ["chain", "verify", "tiny"]),
    ("/api/runs/tiny/chain?batches=false", ["chain", "verify", "tiny", "--no-batches"]),
    ("/api/audit/tiny", ["audit", "status", "tiny"]),
    ("/api/audit/tiny/step?step=3", ["audit", "show", "tiny", "--step", "3"]),
    ("/api/audit/tiny/who", ["audit", "who", "tiny"]),
    ("/api/experiments", ["exp", "list"]),
    ("/api/experiments/check-r1", ["exp", "show", "check-r1"]),
    ("/api/sql?q=SELECT%20doc_id%2C%20n_tokens%20FROM%20documents%20ORDER%20BY%20doc_id"
     "%20LIMIT%203", ["sql", "SELECT doc_id, n_tokens FROM documents ORDER BY doc_id LIMIT 3"]),
]


@pytest.mark.parametrize(("path", "command"), SAME_AS_CLI, ids=[p for p, _ in SAME_AS_CLI])
def test_get_answers_are_the_cli_json(client: TestClient, demo_cli: Cli, path: str,
                                      command: list[str]) -> None:
    expected = demo_cli(*command, "--json")
    response = client.get(path)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.headers[EXIT_HEADER] == "0"
    assert response.content == expected.stdout_bytes
    json.loads(response.text)  # and it is JSON, evidence included where the CLI has it


def test_docs_carries_the_stream_evidence(client: TestClient) -> None:
    answer = client.get("/api/docs?step=2").json()
    assert answer["spec"] == "lineage-stream/1"
    assert answer["spec_hash"].startswith("blake3:")
    assert answer["manifest_hash"].startswith("blake3:")
    assert answer["windows"] == [8, 11]
    assert {d["window"] for d in answer["documents"]} == {8, 9, 10, 11}


@pytest.mark.parametrize("path", [MACBETH, NOT_IN_CORPUS], ids=["found", "not-found"])
def test_trained_on_raw_body_is_standard_input(client: TestClient, demo_cli: Cli,
                                               path: Path) -> None:
    data = path.read_bytes()
    expected = demo_cli.runner.invoke(
        _app(), ["--store", str(demo_cli.store_path), "trained-on", "-", "--json"], input=data)
    response = client.post("/api/trained-on", content=data,
                           headers={"content-type": "application/octet-stream"})
    assert response.status_code == 200, response.text
    assert response.content == expected.stdout_bytes
    assert response.headers[EXIT_HEADER] == str(expected.exit_code)
    verdict = response.json()["results"][0]["verdict"]
    assert (verdict, expected.exit_code) in {("in-stream", 0), ("not-found", 1)}


def test_trained_on_text_match_and_run(client: TestClient, demo_cli: Cli) -> None:
    """A re-wrapped quotation matched as text; with a run, verdicts about that run."""
    article = (EXAMPLES / "queries" / "article.txt").read_bytes()
    for query, options in (("", []), ("?run=tiny&limit=5", ["--run", "tiny", "--limit", "5"])):
        expected = demo_cli.runner.invoke(
            _app(), ["--store", str(demo_cli.store_path), "trained-on", "-", *options,
                     "--json"], input=article)
        response = client.post(f"/api/trained-on{query}", content=article)
        assert response.content == expected.stdout_bytes
        assert response.headers[EXIT_HEADER] == str(expected.exit_code)
    assert response.json()["run"] == "tiny"


def test_trained_on_multipart_file_and_texts(client: TestClient, demo_cli: Cli) -> None:
    data = MACBETH.read_bytes()
    text = "To be, or not to be, that is the question"
    expected = demo_cli.runner.invoke(
        _app(), ["--store", str(demo_cli.store_path), "trained-on", "-", "--text", text,
                 "--json"], input=data)
    response = client.post("/api/trained-on", files={"file": ("macbeth.txt", data)},
                           data={"text": text})
    assert response.status_code == 200, response.text
    assert response.content == expected.stdout_bytes
    labels = [r["file"] for r in response.json()["results"]]
    assert labels == ["<text 1>", "<stdin>"]


def test_trained_on_by_hash_is_the_exact_bytes_answer(client: TestClient,
                                                      demo_cli: Cli) -> None:
    data = MACBETH.read_bytes()
    by_bytes = client.post("/api/trained-on", content=data).json()["results"][0]
    digest = by_bytes["content_hash"]
    response = client.get(f"/api/trained-on?hash=blake3:{digest}")
    assert response.status_code == 200
    result = response.json()["results"][0]
    assert result == {**by_bytes, "file": f"blake3:{digest}"}
    missing = client.get("/api/trained-on?hash=" + "0" * 64)
    assert missing.headers[EXIT_HEADER] == "1"
    assert missing.json()["results"][0]["verdict"] == "not-found"


def test_answers_of_no_keep_the_exit_code(client: TestClient, demo_cli: Cli) -> None:
    diff = client.get("/api/experiments/diff?a=check-r1&b=check-r2")
    expected = demo_cli("exp", "diff", "check-r1", "check-r2", "--json", code=1)
    assert diff.status_code == 200
    assert diff.headers[EXIT_HEADER] == "1"
    assert diff.content == expected.stdout_bytes
    assert diff.json()["same"] is False


def test_sql_post_body_and_truncation(client: TestClient, demo_cli: Cli) -> None:
    query = "SELECT doc_id FROM documents ORDER BY doc_id"
    expected = demo_cli("sql", query, "--max-rows", "5", "--json")
    response = client.post("/api/sql?max_rows=5", content=query.encode())
    assert response.content == expected.stdout_bytes
    assert len(response.json()) == 5
    assert "5" in response.headers["x-lineage-truncated"]


def test_openapi_lists_every_route(client: TestClient) -> None:
    described = client.get("/openapi.json").json()
    assert described["openapi"].startswith("3.")
    served = set()
    for path, route in _flat(client.app.routes):  # type: ignore[attr-defined]
        for method in (route.methods or {"GET"}) - {"HEAD"}:
            served.add((re.sub(r"{(\w+):\w+}", r"{\1}", path), method.lower()))
    listed = {(path, method) for path, ops in described["paths"].items() for method in ops}
    assert served == listed
    assert {(e.path, e.method.lower()) for e in ENDPOINTS} <= listed
    docs = described["paths"]["/api/docs"]["get"]
    assert [p["name"] for p in docs["parameters"]] == ["step", "stream", "rank", "world_size",
                                                        "window"]
    assert "lineage docs --step N --json" in docs["summary"]


def _app():  # the Typer application, imported late as the CLI tests do
    from lineage.cli.main import app

    return app
