"""docs/serve.md says what the server does: its endpoint table is the API's routes, its
limits are the defaults, its examples answer as it says."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from starlette.testclient import TestClient

from lineage.serve.api import ENDPOINTS
from lineage.serve.limits import Limits

from ..conftest import EXAMPLES, REPO, Cli

DOC = (REPO / "docs" / "serve.md").read_text(encoding="utf-8")


def _table_rows(first_header: str) -> list[list[str]]:
    lines = DOC.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} "))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return rows


def test_the_endpoint_table_is_the_api() -> None:
    documented = set()
    for route, command in _table_rows("method and path"):
        method, path = route.strip("`").split(" ", 1)
        documented.add((method, re.sub(r"\[.*$|\?.*$", "", path)))
        endpoint = [e for e in ENDPOINTS if (e.method, e.path) == (method, path.split("?")[0]
                                                                   .split("[")[0])]
        if endpoint:  # the command it answers for, as the OpenAPI description says
            assert endpoint[0].command.split(" (")[0] in command.replace("`", "")
            named = set(re.findall(r"[?&\[](\w+)", path))
            assert named <= {p.name for p in endpoint[0].params}, path
    served = {(e.method, e.path) for e in ENDPOINTS} | {("GET", "/openapi.json"),
                                                         ("GET", "/health")}
    assert documented == served


def test_the_limits_table_is_the_defaults() -> None:
    defaults = dataclasses.asdict(Limits())
    rows = {name.strip("`"): value for name, value, _ in _table_rows("limit")}
    assert set(rows) == set(defaults)
    for name, text in rows.items():
        number = float(text.split()[0])
        unit = text.split()[1] if " " in text else ""
        scale = {"MiB": 1 << 20, "GiB": 1 << 30}.get(unit, 1)
        assert number * scale == defaults[name], name


def test_the_examples_answer_as_the_doc_says(client: TestClient, demo_cli: Cli,
                                             tmp_path: Path) -> None:
    docs = client.get("/api/docs?step=2&stream=main&window=9")
    expected = demo_cli("docs", "--step", "2", "--stream", "main", "--window", "9", "--json")
    assert docs.content == expected.stdout_bytes
    macbeth = (EXAMPLES / "corpus" / "shakespeare" / "macbeth.txt").read_bytes()
    answer = client.post("/api/trained-on", content=macbeth)
    assert answer.json()["results"][0]["verdict"] == "in-stream"
    sql = client.post("/api/sql?max_rows=100",
                      content=b"SELECT source, count(*) AS n FROM documents GROUP BY ALL")
    assert sql.status_code == 200 and sql.json()
    form = client.post("/api/trained-on", files={"file": ("page.html", b"<p>hello</p>")},
                       data={"text": "Friends, Romans, countrymen"})
    assert [r["file"] for r in form.json()["results"]] == ["<text 1>", "<stdin>"]
