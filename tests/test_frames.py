"""`Store.frame(name)`: polars frames over the store's tables that hold exactly what
`lineage sql` reads, over exactly the parts the catalog lists, refused when a part's
bytes differ from what the catalog recorded."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lineage.answer import to_jsonable
from lineage.api import Store, init_store, open_store
from lineage.errors import DamagedPartError, UnknownObjectError
from lineage.ingest import ingest_corpus
from lineage.ingest.steps import ingest_steps
from lineage.schemas import BULK_TABLES
from lineage.store.frames import catalog_tables, table_names
from lineage.stream.build import build_stream

from .conftest import EXAMPLES, Cli, load_tiny_run

DEMO_LICENSES = ["shakespeare=LicenseRef-PublicDomain", "python-stdlib=PSF-2.0",
                 "debian-copyright=NOASSERTION"]  # as examples/demo.sh gives them
# DuckDB's types as polars reads them (Arrow in between)
POLARS_TYPES = {"VARCHAR": pl.String, "BIGINT": pl.Int64, "UBIGINT": pl.UInt64,
                "UINTEGER": pl.UInt32, "INTEGER": pl.Int32, "BLOB": pl.Binary,
                "DOUBLE": pl.Float64, "BOOLEAN": pl.Boolean,
                "TIMESTAMP": pl.Datetime("us"), "VARCHAR[]": pl.List(pl.String)}



@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """The demo's corpora and stream (with text indexes), and 12 steps of its tiny run."""
    root = tmp_path_factory.mktemp("frames")
    init_store(root / "store")
    store = open_store(root / "store")
    ingest_corpus(store, [EXAMPLES / "corpus"], corpus="example", license=DEMO_LICENSES)
    ingest_corpus(store, [EXAMPLES / "shards" / "sonnets.jsonl.gz"], corpus="poems",
                  license="LicenseRef-PublicDomain")
    build_stream(store, corpus="example", name="main", seed=42, seq_len=1024, batch=4)
    load_tiny_run().train(store, "main", steps=12, out=root / "run", checkpoint_every=6)
    ingest_steps(store, root / "run" / "steps.jsonl", run="tiny", stream="main",
                 world_size=2)
    return store


def _parts(store: Store, table: str) -> list[Path]:
    rows = store.sql(f"SELECT path FROM parquet_files WHERE table_name = '{table}' "
                     "ORDER BY path").rows
    return [store.root / row[0] for row in rows]


def _records(frame: pl.DataFrame) -> list[str]:
    """Rows as `lineage sql --json` prints them, sorted (neither side promises an order)."""
    return sorted(json.dumps(to_jsonable(row), sort_keys=True) for row in frame.to_dicts())


@contextmanager
def _damaged(path: Path, offset: int, change: int) -> Iterator[None]:
    """The file with the byte at `offset` XORed with `change`, restored after."""
    data = path.read_bytes()
    offset %= len(data)
    path.write_bytes(data[:offset] + bytes([data[offset] ^ change]) + data[offset + 1:])
    try:
        yield
    finally:
        path.write_bytes(data)


def test_every_table_has_rows_in_the_demo_store(demo: Store) -> None:
    empty = {name for name in table_names() if demo.frame(name).collect().height == 0}
    assert empty == {"checkpoints", "experiments", "experiment_logs", "audit_records",
                     "openlineage_events", "audit_logs", "audit_log_entries",
                     "audit_log_tiles", "audit_log_edges"}  # no ledger: no log yet
    assert len(_parts(demo, "fingerprints")) >= 2  # two corpora: a table of several parts


@pytest.mark.parametrize("name", table_names())
def test_a_frame_holds_what_lineage_sql_prints(demo: Store, name: str) -> None:
    frame = demo.frame(name)
    assert isinstance(frame, pl.LazyFrame)
    collected = frame.collect()
    printed = Cli(demo.root).json("sql", f"SELECT * FROM {name}", "--max-rows", "0")
    assert collected.height == len(printed)
    assert collected.columns == (list(printed[0]) if printed else collected.columns)
    assert _records(collected) == sorted(json.dumps(row, sort_keys=True) for row in printed)


@pytest.mark.parametrize("name", table_names())
def test_an_empty_table_gives_an_empty_frame_with_its_columns_and_types(
        store: Store, name: str) -> None:
    described = store.sql(f"DESCRIBE SELECT * FROM {name}").rows
    frame = store.frame(name)
    assert frame.collect().height == (1 if name == "schema_info" else 0)  # the version row
    assert dict(frame.collect_schema()) == {column: POLARS_TYPES[kind]
                                            for column, kind, *_ in described}
    if name in BULK_TABLES:
        assert frame.collect_schema().names() == list(BULK_TABLES[name])


def test_frames_query_lazily_like_sql(demo: Store) -> None:
    per_source = (demo.frame("occurrences").filter(pl.col("stream") == "main")
                  .group_by("source").agg(pl.col("doc_id").n_unique().alias("documents"))
                  .sort("source").collect())
    sql = demo.sql("SELECT source, count(DISTINCT doc_id) FROM occurrences "
                   "WHERE stream = 'main' GROUP BY source ORDER BY source").rows
    assert per_source.rows() == sql
    assert [r[0] for r in sql] == ["debian-copyright", "python-stdlib", "shakespeare"]


def test_an_unknown_name_is_an_error_naming_the_tables(demo: Store) -> None:
    with pytest.raises(UnknownObjectError) as exc:
        demo.frame("occurrence")
    assert exc.value.exit_code == 2
    message = str(exc.value)
    assert message.startswith("no table named 'occurrence' (tables: documents, ")
    for name in ("occurrences", "fingerprints", "corpora", "steps", "run_segments"):
        assert name in message
    assert "\n" not in message


def test_the_catalog_tables_are_those_of_the_schema(demo: Store) -> None:
    listed = {row[0] for row in demo.sql(
        "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE'"
    ).rows}
    assert set(catalog_tables()) == listed
    assert {"corpora", "corpus_sources", "streams", "runs", "steps", "run_segments",
            "checkpoints", "experiments", "text_indexes"} <= listed


def test_a_stray_parquet_file_in_a_table_folder_is_not_read(demo: Store,
                                                            tmp_path: Path) -> None:
    copy = tmp_path / "k=v" / "store[1]"  # a glob or a hive-partitioned read would differ
    shutil.copytree(demo.root, copy)
    store = open_store(copy)
    before = store.frame("occurrences").collect()
    (part,) = _parts(store, "occurrences")
    shutil.copy(part, part.with_name("stray-0000.parquet"))  # real rows, never registered
    shutil.copy(part, part.parent.parent / "stray.parquet")
    after = store.frame("occurrences").collect()
    assert after.equals(before) and after.columns == list(BULK_TABLES["occurrences"])
    assert store.frame("occurrences", check=False).collect().equals(before)
    assert after.height == store.sql("SELECT count(*) FROM occurrences").rows[0][0]


def test_a_damaged_part_is_refused_naming_it(demo: Store, tmp_path: Path) -> None:
    shutil.copytree(demo.root, tmp_path / "store")
    store = open_store(tmp_path / "store")
    (path,) = _parts(store, "documents")[:1]
    with _damaged(path, 100, 0x80):
        with pytest.raises(DamagedPartError, match="row group 0") as exc:
            store.frame("documents")
        assert exc.value.path == str(path) and exc.value.exit_code == 2
        store.frame("documents", check=False)  # unchecked: made, and the caller's risk
    path.write_bytes(path.read_bytes()[:-1])
    with pytest.raises(DamagedPartError, match="bytes, the catalog says"):
        store.frame("documents")


def test_parts_from_before_schema_7_are_checked_whole(demo: Store, tmp_path: Path) -> None:
    shutil.copytree(demo.root, tmp_path / "store")
    con = duckdb.connect(str(tmp_path / "store" / "catalog.duckdb"))
    con.execute("UPDATE parquet_files SET row_groups = NULL")  # as an older writer left it
    con.close()
    store = open_store(tmp_path / "store")
    before = store.frame("fingerprints").collect()
    path = _parts(store, "fingerprints")[-1]
    with _damaged(path, path.stat().st_size // 2, 0x02):
        with pytest.raises(DamagedPartError, match="SHA-256"):
            store.frame("fingerprints")
    assert store.frame("fingerprints").collect().equals(before)


@settings(max_examples=30, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(table=st.sampled_from(sorted(BULK_TABLES)), which=st.integers(0, 100),
       offset=st.integers(0, 1 << 30), bit=st.integers(0, 7))
def test_any_changed_byte_of_any_part_is_refused(
        demo: Store, table: str, which: int, offset: int, bit: int) -> None:
    """A frame reads any row group of the whole table, so every byte of every part is
    checked: no change, wherever it falls, reaches a frame."""
    parts = _parts(demo, table)
    path = parts[which % len(parts)]
    with _damaged(path, offset, 1 << bit), pytest.raises(DamagedPartError) as exc:
        demo.frame(table)
    assert exc.value.path == str(path)
