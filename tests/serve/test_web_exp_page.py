"""The explorer's experiment page draws a metric's history (`--metrics` as JSON lines) as
an SVG line plot, and says when a metrics file was refused."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

import lineage.exp
from lineage.api import Store
from lineage.serve.app import create_app


@pytest.fixture
def client(store: Store, weights: Path, tmp_path: Path) -> Iterator[TestClient]:
    rows = [{"step": s, "loss": 4.0 / (1 + s), "lr": 1e-3} for s in range(0, 300, 3)]
    rows.append({"step": 300, "loss": float("nan"), "lr": 1e-3})  # diverged: a gap
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text("".join(json.dumps(r) + "\n" for r in rows))
    lineage.exp.run(store, ["true"], weights=weights, revision="r", name="trained",
                    metrics=metrics, echo=False)
    bad = tmp_path / "bad.json"
    bad.write_text("[" * 100 + "]" * 100)
    lineage.exp.run(store, ["true"], weights=weights, revision="r", name="refused",
                    metrics=bad, echo=False)
    with TestClient(create_app(store.root), base_url="http://127.0.0.1") as test_client:
        yield test_client


def test_the_experiment_page_plots_each_metric_history(client: TestClient,
                                                       store: Store) -> None:
    data = client.get("/experiments/trained.json").json()
    assert data["experiment"] == lineage.exp.show(store, "trained").to_dict()
    history = data["experiment"]["metrics"]["history"]
    assert set(history) == {"loss", "lr"} and history["loss"]["points"] == 101
    html = client.get("/experiments/trained").text
    plots = re.findall(r"<svg .*?</svg>", html, flags=re.S)
    titles = [re.search(r"<title>(.*?)</title>", p).group(1) for p in plots]  # type: ignore[union-attr]
    assert titles == ["loss: 101 points", "lr: 101 points"]
    path = re.search(r'<path d="([^"]*)"', plots[0]).group(1)  # type: ignore[union-attr]
    assert path.startswith("M") and path.count("L") == 99  # 100 finite points, one line
    assert "<td>loss</td>" in html and "<code>&quot;nan&quot;</code>" in html


def test_a_refused_metrics_file_is_said_on_the_page(client: TestClient) -> None:
    html = client.get("/experiments/refused").text
    assert "refused:" in html and "nesting-depth: JSON nested deeper than 32 levels" in html
    assert "<svg" not in html
