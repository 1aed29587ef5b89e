"""The explorer's own reads of checked bytes: a stream page's source mix
(lineage/serve/web/mix.py), for any cut of the stream's tokens what SQL over the
occurrences says, and a document page's row (`row_by_doc_id` in
lineage/store/part_read.py), the row SQL gives; a part whose bytes differ from the
catalog's record is refused, not read."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lineage.api import Store, open_store
from lineage.errors import DamagedPartError
from lineage.serve.web.mix import tokens_by_range

from .web_helpers import demo_store_root


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_store_root(tmp_path_factory)


@pytest.fixture(scope="module")
def store(root: Path) -> Store:
    return open_store(root)


def sql_tokens(store: Store, bounds: list[int]) -> list[dict[str, int]]:
    """Per range [bounds[i], bounds[i+1]), the tokens each source of the stream has in
    it (0 for none), by one SQL join of the ranges with every occurrence."""
    with store.reader() as con:
        sources = [row[0] for row in con.execute(
            "SELECT DISTINCT source FROM occurrences WHERE stream = 'main'").fetchall()]
        counted = con.execute(
            "SELECT r.i, o.source, sum(least(o.stream_end, r.hi) - greatest(o.stream_start, r.lo))"
            " FROM (SELECT unnest(range(len(?::BIGINT[]))) AS i, unnest(?::BIGINT[]) AS lo,"
            "              unnest(?::BIGINT[]) AS hi) r"
            " JOIN occurrences o ON o.stream = 'main' AND o.stream_end > r.lo"
            "                       AND o.stream_start < r.hi GROUP BY ALL",
            [bounds[:-1], bounds[:-1], bounds[1:]]).fetchall()
    ranges = [dict.fromkeys(sources, 0) for _ in bounds[1:]]
    for i, source, tokens in counted:
        ranges[i][source] = int(tokens)
    return ranges


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cuts=st.lists(st.integers(min_value=0, max_value=10**7), min_size=2, max_size=7,
                     unique=True))
def test_any_cut_of_the_stream_counts_as_sql_does(store: Store, cuts: list[int]) -> None:
    """Ranges of any widths (a few tokens, many documents, past the stream's end), from
    the stream's start or from anywhere in it: each occurrence counts in every range for
    the tokens it has there."""
    bounds = sorted(cuts)
    mix = tokens_by_range(store, "main", tuple(bounds))
    expected = [{s: n for s, n in r.items() if n} for r in sql_tokens(store, bounds)]
    assert mix["sources"] == sorted({s for r in expected for s in r})
    assert [{s: n for s, n in r.items() if n} for r in mix["tokens"]] == expected


def test_narrow_ranges_split_documents_at_every_border(store: Store) -> None:
    tokens = store.stream("main").tokens
    bounds = list(range(0, tokens + 1, 97))
    mix = tokens_by_range(store, "main", tuple(bounds))
    assert mix["tokens"] == sql_tokens(store, bounds)
    assert sum(sum(r.values()) for r in mix["tokens"]) > 0


def test_the_mix_is_the_same_whatever_the_names_expected_or_the_rows_order(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Names the corpus does not have, or lacks, and parts whose rows are not in stream
    order (read in a shuffled order here) change nothing."""
    from lineage.serve.web import mix

    stream = store.stream("main")
    bounds = tuple(range(0, stream.tokens + 4096, 4096))
    expected = tokens_by_range(store, "main", bounds)
    assert expected["sources"] == ["debian-copyright", "python-stdlib", "shakespeare"]
    for names in (["python-stdlib"], ["a", "shakespeare"], expected["sources"]):
        assert tokens_by_range(store, "main", bounds, sources=names) == expected
    read = mix._read_checked
    monkeypatch.setattr(mix, "_read_checked",
                        lambda *args: read(*args).sample(fraction=1.0, shuffle=True, seed=7))
    assert tokens_by_range(store, "main", bounds, sources=expected["sources"]) == expected


def test_a_damaged_occurrence_part_is_refused(root: Path, tmp_path: Path) -> None:
    shutil.copytree(root, tmp_path / "store")
    part = sorted((tmp_path / "store" / "tables" / "occurrences").glob("*.parquet"))[-1]
    data = bytearray(part.read_bytes())
    data[len(data) // 3] ^= 0x01  # one bit inside a row group
    part.write_bytes(bytes(data))
    with pytest.raises(DamagedPartError, match="does not match the BLAKE3"):
        tokens_by_range(open_store(tmp_path / "store"), "main", (0, 10**9))


def test_a_document_page_reads_its_row_from_checked_bytes(root: Path, tmp_path: Path) -> None:
    """The document's row comes from the row group its footer says holds it (the footer
    and that row group checked first): the same row as SQL gives, and a flipped bit in
    that row group refuses the page."""
    from starlette.testclient import TestClient

    from lineage.serve.web.corpus_pages import DOCUMENT_COLUMNS
    from lineage.store.part_read import row_by_doc_id

    from .web_helpers import explorer_app

    store = open_store(root)
    columns = ", ".join(DOCUMENT_COLUMNS)
    expected = store.sql(f"SELECT {columns} FROM documents WHERE corpus = 'example' "
                         "ORDER BY doc_id").rows
    with store.reader(views=False) as con:
        for row in expected[::7]:
            assert row_by_doc_id(con, store, "documents", "example", row[1],
                                DOCUMENT_COLUMNS) == dict(zip(DOCUMENT_COLUMNS, row, strict=True))
        assert row_by_doc_id(con, store, "documents", "example", "nope", DOCUMENT_COLUMNS) \
            is None

    shutil.copytree(root, tmp_path / "store")
    for part in (tmp_path / "store" / "tables" / "documents").glob("example-*.parquet"):
        data = bytearray(part.read_bytes())
        data[len(data) // 4] ^= 0x01
        part.write_bytes(bytes(data))
    with TestClient(explorer_app(tmp_path / "store")) as client:
        damaged = client.get("/corpora/example/document.json", params={"id": expected[0][1]})
    assert damaged.status_code == 500
    assert damaged.json()["exit_code"] == 2 and "does not match" in damaged.json()["error"]
