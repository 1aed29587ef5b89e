"""Corpus, stream, store and SQL questions answer with typed values that print exactly as
the commands' `--json` does, read as attributes, and turn into typed polars frames."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import json
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lineage.answer import AnswerList
from lineage.api import Store, init_store, open_store
from lineage.corpora.answers import Corpus, CorpusSource, CorpusSummary, TextIndex
from lineage.errors import UsageError
from lineage.ingest import ingest_corpus
from lineage.store.answers import PartProblem, StoreInit, StoreVerification
from lineage.store.query import QueryResult
from lineage.stream.answers import Stream, StreamBuildResult, StreamSummary
from lineage.stream.build import build_stream

from .conftest import Cli

MAX_SEED = 2**64 - 1


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory, example_corpus: Path,
           example_shards: Path) -> Store:
    """Two corpora (one without a text index) and two streams, one with the largest seed."""
    root = tmp_path_factory.mktemp("answers") / "store"
    init_store(root)
    store = open_store(root)
    ingest_corpus(store, [example_corpus], corpus="example",
                  license=["shakespeare=LicenseRef-PublicDomain", "python-stdlib=PSF-2.0",
                           "NOASSERTION"])
    ingest_corpus(store, [example_shards / "sonnets.jsonl.gz"], corpus="poems",
                  license="LicenseRef-PublicDomain", fingerprints=False)
    build_stream(store, corpus="example", name="main", seed=42, seq_len=1024, batch=4)
    build_stream(store, corpus="poems", name="wide", seed=MAX_SEED, seq_len=64, batch=2,
                 epochs=["sonnets=0.5"])
    return store


@pytest.fixture(scope="module")
def filled_cli(filled: Store) -> Cli:
    return Cli(filled.root)


def _names(answer_type: type) -> list[str]:
    return [f.name for f in dataclasses.fields(answer_type)]


def test_corpus_list_is_typed_and_prints_as_the_command(filled: Store, filled_cli: Cli):
    corpora = filled.corpora()
    assert filled_cli("corpus", "list", "--json").stdout == corpora.to_json() + "\n"
    assert all(isinstance(row, CorpusSummary) for row in corpora)
    assert [row.name for row in corpora] == ["example", "poems"]
    assert corpora[0].manifest_hash.startswith("blake3:") and corpora[0].tokenizer == "bytes"
    frame = corpora.to_polars()
    assert frame.columns == _names(CorpusSummary)
    assert frame["name"].to_list() == ["example", "poems"]
    assert frame["tokens"].dtype == pl.Int64
    assert frame["documents"].to_list() == [row.documents for row in corpora]


def test_corpus_show_is_typed_with_its_sources_and_text_index(filled: Store,
                                                              filled_cli: Cli):
    corpus = filled.corpus("example")
    assert isinstance(corpus, Corpus)
    assert filled_cli("corpus", "show", "example", "--json").stdout == corpus.to_json() + "\n"
    assert all(isinstance(source, CorpusSource) for source in corpus.sources)
    assert sum(source.tokens for source in corpus.sources) == corpus.tokens
    assert {"PSF-2.0", "LicenseRef-PublicDomain"} <= set(corpus.licenses)
    assert isinstance(corpus.text_index, TextIndex)
    assert corpus.text_index.text_spec == "lineage-text/1" and corpus.text_index.k > 0
    frame = corpus.to_polars()
    assert frame.columns == ["source", "documents", "tokens", "bytes", "share", "licenses"]
    assert frame["source"].to_list() == [source.source for source in corpus.sources]
    assert frame["share"].sum() == pytest.approx(1.0, abs=1e-5)
    assert frame["licenses"].dtype == pl.List(pl.String)


def test_a_corpus_without_a_text_index_says_none(filled: Store, filled_cli: Cli):
    poems = filled.corpus("poems")
    assert poems.text_index is None and poems["text_index"] is None
    printed = filled_cli("corpus", "show", "poems", "--json").stdout
    assert printed == poems.to_json() + "\n" and json.loads(printed)["text_index"] is None


def test_stream_list_is_typed_and_frames_the_largest_seed(filled: Store, filled_cli: Cli):
    streams = filled.streams()
    assert filled_cli("stream", "list", "--json").stdout == streams.to_json() + "\n"
    assert all(isinstance(row, StreamSummary) for row in streams)
    wide = streams[1]
    assert (wide.name, wide.seed, wide.epochs) == ("wide", MAX_SEED, {"sonnets": "0.5"})
    frame = streams.to_polars()
    assert frame.columns == _names(StreamSummary) == _names(Stream)
    assert frame.schema["seed"] == pl.UInt64
    assert frame["seed"].to_list() == [42, MAX_SEED]
    assert frame["steps"].to_list() == [row.steps for row in streams]


def test_stream_show_is_typed_and_reads_as_before(filled: Store, filled_cli: Cli):
    main = filled.stream("main")
    assert isinstance(main, Stream)
    assert filled_cli("stream", "show", "main", "--json").stdout == main.to_json() + "\n"
    assert main.spec == "lineage-stream/1" and main.seq_len == 1024 and main.batch == 4
    assert main.tokens == main.steps * main.batch * main.seq_len
    assert main["spec_hash"] == main.spec_hash  # still reads as the JSON object
    # a fixed-batch stream declares no schedule or rank rule: its keys are those of before
    declared_only = ("schedule", "rank_rule")
    assert main.get("batch") == 4 and "schedule" not in main
    assert list(main) == [n for n in _names(Stream) if n not in declared_only]
    with pytest.raises(UsageError, match="say which stream"):
        filled.stream()  # two streams: the name is needed


def test_stream_build_prints_its_result(filled: Store, filled_cli: Cli):
    again = build_stream(filled, corpus="example", name="main", seed=42, seq_len=1024, batch=4)
    assert isinstance(again, StreamBuildResult) and again.status == "unchanged"
    printed = filled_cli("stream", "build", "--corpus", "example", "--name", "main",
                         "--seed", "42", "--seq-len", "1024", "--batch", "4", "--json").stdout
    shown = json.loads(printed)
    # A fixed batch declares no schedule or rule; a stream found built has no `cut`.
    assert list(shown) == [n for n in _names(StreamBuildResult)
                           if n not in ("schedule", "rank_rule", "cut")]
    assert StreamBuildResult.from_dict(shown).to_json() + "\n" == printed
    expected = {**again.to_dict(), "seconds": shown["seconds"]}  # the only varying field
    assert shown == expected
    recorded = {k: v for k, v in again.items() if k not in ("status", "seconds")}
    assert recorded == filled.stream("main").to_dict()


def test_store_verify_is_typed_when_it_passes(filled: Store, filled_cli: Cli):
    report = filled.verify()
    assert isinstance(report, StoreVerification)
    assert filled_cli("store", "verify", "--json").stdout == report.to_json() + "\n"
    assert report.ok and report.problems == () and report.files_checked > 0
    frame = report.to_polars()
    assert frame.columns == ["path", "table", "status", "message", "owner"] and frame.height == 0
    assert frame.schema["status"] == pl.String


def test_store_verify_types_each_problem(store: Store, cli: Cli, tmp_path: Path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("one two three\n", encoding="utf-8")
    ingest_corpus(store, [tmp_path / "docs"], corpus="small", license="MIT")
    part = store.sql("SELECT path FROM parquet_files ORDER BY path LIMIT 1").rows[0][0]
    (store.root / part).write_bytes(b"not the bytes recorded")
    report = store.verify()
    assert not report.ok
    result = cli("store", "verify", "--json", code=1)
    assert result.stdout == report.to_json() + "\n"
    problem = report.problems[0]
    assert isinstance(problem, PartProblem)
    assert (problem.path, problem.status) == (part, "size-mismatch")
    assert report.to_polars().row(0, named=True) == problem.to_dict()


def test_init_and_migrate_print_their_result(store: Store, cli: Cli, tmp_path: Path):
    printed = cli("store", "migrate", "--json").stdout
    again = init_store(store.root)
    assert isinstance(again, StoreInit)
    assert printed == again.to_json() + "\n"
    assert (again.created, again.migrated_from) == (False, None)
    fresh = tmp_path / "fresh"
    shown = Cli(fresh)("init", "--json").stdout
    assert StoreInit.from_dict(json.loads(shown)).created is True
    assert shown == StoreInit(str(open_store(fresh).root), created=True,
                              schema_version=again.schema_version).to_json() + "\n"


_TYPED = """
SELECT doc_id, n_tokens, 2.50::DECIMAL(10,2) AS price, DATE '2020-01-02' AS day,
       'ab'::BLOB AS raw, 18446744073709551615::UBIGINT AS big, [1, 2] AS pair,
       {'a': 1} AS rec, '00000000-0000-0000-0000-000000000001'::UUID AS id, NULL AS nothing,
       MAP {'k': 7} AS tags, 1 AS doc_id
FROM documents WHERE corpus = 'poems' ORDER BY doc_id
"""


def test_sql_prints_as_the_command_and_frames_with_duckdb_types(filled: Store,
                                                                filled_cli: Cli):
    result = filled.sql(_TYPED, timeout=30, max_rows=1000)
    assert isinstance(result, QueryResult) and not result.truncated
    printed = filled_cli("sql", _TYPED, "--timeout", "30", "--max-rows", "1000", "--json")
    assert printed.stdout == result.to_json() + "\n"
    assert result.to_list() == result.records() == json.loads(printed.stdout)
    assert result.column_types[:3] == ("VARCHAR", "BIGINT", "DECIMAL(10,2)")
    frame = result.to_polars()
    assert frame.columns == ["doc_id", "n_tokens", "price", "day", "raw", "big", "pair", "rec",
                             "id", "nothing", "tags", "doc_id_1"]  # a repeated name: _1
    assert frame.dtypes == [pl.String, pl.Int64, pl.Decimal(10, 2), pl.Date, pl.Binary,
                            pl.UInt64, pl.List(pl.Int32), pl.Struct({"a": pl.Int32}),
                            pl.String, pl.Null,
                            pl.List(pl.Struct({"key": pl.String, "value": pl.Int32})), pl.Int32]
    assert frame.height == len(result.rows) > 0
    first = frame.row(0, named=True)
    assert (first["doc_id"], first["n_tokens"]) == result.rows[0][:2]
    assert (first["price"], first["day"]) == (decimal.Decimal("2.50"), dt.date(2020, 1, 2))
    assert (first["raw"], first["big"], first["pair"]) == (b"ab", MAX_SEED, [1, 2])
    assert first["id"] == "00000000-0000-0000-0000-000000000001"
    assert first["tags"] == [{"key": "k", "value": 7}]  # a map, as Arrow holds it


def test_sql_keeps_types_when_no_row_comes_back(filled: Store):
    empty = filled.sql("SELECT doc_id, n_tokens FROM documents WHERE false")
    assert empty.to_json() == "[]"
    frame = empty.to_polars()
    assert frame.height == 0 and frame.schema == {"doc_id": pl.String, "n_tokens": pl.Int64}


def test_sql_cut_off_at_max_rows_prints_and_frames_the_first_rows(filled: Store,
                                                                  filled_cli: Cli):
    query = "SELECT doc_id FROM documents ORDER BY doc_id"
    cut = filled.sql(query, max_rows=2)
    assert cut.truncated and cut.to_polars().height == 2
    result = filled_cli("sql", query, "--max-rows", "2", "--json")
    assert result.stdout == cut.to_json() + "\n"
    assert "only the first 2 rows" in result.stderr


_SQL_TEXT = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"),
                    max_size=6)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.none() | st.integers(-2**63, 2**63 - 1),
                          st.none() | _SQL_TEXT,
                          st.none() | st.booleans()), max_size=6))
def test_sql_frames_hold_the_rows_duckdb_returned(filled: Store, rows):
    literal = ", ".join(
        f"(({'NULL' if n is None else n})::BIGINT, "
        f"{'NULL' if s is None else _quoted(s)}::VARCHAR, {'NULL' if b is None else b}::BOOLEAN)"
        for n, s, b in rows)
    query = (f"SELECT * FROM (VALUES {literal}) AS t(n, s, b)" if rows else
             "SELECT NULL::BIGINT AS n, NULL::VARCHAR AS s, NULL::BOOLEAN AS b WHERE false")
    result = filled.sql(query)
    frame = result.to_polars()
    assert frame.schema == {"n": pl.Int64, "s": pl.String, "b": pl.Boolean}
    assert frame.rows() == result.rows
    assert json.loads(result.to_json()) == [dict(zip("nsb", row, strict=True))
                                            for row in result.rows]


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def test_a_list_answer_equals_the_list_it_prints_as(store: Store):
    assert store.corpora() == [] and store.streams() == []
    assert isinstance(store.corpora(), AnswerList)
    assert store.corpora() != [{"name": "x"}]
