"""The "Current figures" table at the top of docs/performance.md keeps the format that
bench/headline.py writes (its numbers are the benchmark's, not checked here)."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]
PERF = REPO / "docs" / "performance.md"
START, END = "<!-- current-figures:start -->", "<!-- current-figures:end -->"
COLUMNS = ["figure", "lineage", "peer", "peer figure", "ratio", "target", "met"]
FACTS = ("date", "machine", "commit", "load average", "documents")


def block(text: str) -> list[str]:
    assert text.count(START) == 1 and text.count(END) == 1, "one pair of markers"
    inside = text.split(START, 1)[1].split(END, 1)[0]
    return [line for line in inside.splitlines() if line.strip()]


def table(lines: list[str]) -> list[list[str]]:
    return [[cell.strip() for cell in line.strip().strip("|").split("|")]
            for line in lines if line.startswith("|")]


def test_the_block_is_at_the_top_of_the_page() -> None:
    text = PERF.read_text()
    before = text.split(START, 1)[0]
    assert [line for line in before.splitlines() if line.strip()] == ["# Performance"]


def test_the_block_states_when_where_and_what() -> None:
    lines = block(PERF.read_text())
    for fact in FACTS:
        assert any(line.startswith(f"- {fact}") for line in lines), fact
    assert re.search(r"- date: \d{4}-\d\d-\d\d \d\d:\d\d UTC", "\n".join(lines))
    assert re.search(r"- machine: \d+ cores, \S", "\n".join(lines))


def test_every_row_names_a_peer_and_a_ratio() -> None:
    rows = table(block(PERF.read_text()))
    assert rows[0] == COLUMNS
    assert set("".join(rows[1])) <= set("-:")
    body = rows[2:]
    assert len(body) >= 10  # every headline figure
    for cells in body:
        assert len(cells) == len(COLUMNS), cells
        got = dict(zip(COLUMNS, cells, strict=True))
        assert got["figure"] and got["lineage"], cells
        assert got["peer"] and got["peer figure"], cells
        assert re.fullmatch(r"\d+\.\d\dx|—", got["ratio"]), cells
        assert got["met"] in ("yes", "no", "—"), cells
        if got["peer figure"] != "peer not installed" and got["target"] != "—" \
                and "errors" not in got["figure"]:
            assert got["ratio"] != "—", cells
    figures = " ".join(cells[0] for cells in body)
    for needed in ("ingest corpus", "stream build", "chain verify", "docs --step",
                   "trained-on", "served", "--text"):
        assert needed in figures, needed


def _headline() -> ModuleType:
    sys.path.insert(0, str(REPO / "bench"))
    try:
        spec = importlib.util.spec_from_file_location("headline", REPO / "bench" / "headline.py")
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(REPO / "bench"))


def test_the_writer_replaces_only_the_block(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    headline = _headline()
    page = tmp_path / "performance.md"
    rest = "\n## A dated section (2026-01-01)\n\nkept | as | it is\n"
    page.write_text(f"# Performance\n\n{START}\nold\n{END}\n{rest}")
    monkeypatch.setattr(headline, "PERF", page)
    rows = [headline.row("`docs --step N --json`", "90 ms", "fresh duckdb", "100 ms", 0.9,
                         "≤ 1.0x", True)]
    headline.write(headline.render(rows, 1000, "1.00 1.00 1.00"))
    text = page.read_text()
    assert text.endswith(rest) and "old" not in text
    assert table(block(text))[2] == ["`docs --step N --json`", "90 ms", "fresh duckdb",
                                      "100 ms", "0.90x", "≤ 1.0x", "yes"]
    headline.write(headline.render(rows, 1000, "1.00 1.00 1.00"))  # again: one block
    assert page.read_text().count(START) == 1
