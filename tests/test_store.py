"""The store itself: creation, schema versions and migrations, read-only SQL."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from lineage import schemas
from lineage.api import Store, init_store, open_store, resolve_store_path
from lineage.errors import StoreError, UsageError
from lineage.ingest import ingest_corpus


def test_init_is_idempotent_and_lays_out_the_store(tmp_path: Path) -> None:
    first = init_store(tmp_path / "s")
    again = init_store(tmp_path / "s")
    assert (first.created, again.created) == (True, False)
    assert (tmp_path / "s" / "catalog.duckdb").is_file()
    assert (tmp_path / "s" / "tables").is_dir() and (tmp_path / "s" / "staging").is_dir()
    assert not [p for p in (tmp_path / "s").iterdir() if p.name.startswith(".tmp-")]


def test_a_write_ends_with_the_catalog_in_its_file_and_its_lock_released(
        store: Store) -> None:
    """A writer attaches the catalog to the process's DuckDB and detaches it on exit, as
    it commits or fails: no log is left beside the file, and another process can take
    the catalog read-write at once and sees the commit, not the failed write."""
    with store.writer() as con:
        con.execute("INSERT INTO schema_info VALUES ('committed', 'yes')")
    with pytest.raises(ZeroDivisionError), store.writer() as con:
        con.execute("INSERT INTO schema_info VALUES ('failed', 'yes')")
        _ = 1 / 0
    assert not store.catalog_path.with_name("catalog.duckdb.wal").exists()
    other = subprocess.run(
        [sys.executable, "-c", "import duckdb, sys; con = duckdb.connect(sys.argv[1]); "
         "print(con.execute(\"SELECT key FROM schema_info WHERE value = 'yes'\").fetchall())",
         str(store.catalog_path)], capture_output=True, text=True, timeout=60)
    assert (other.returncode, other.stdout.strip()) == (0, "[('committed',)]"), other.stderr


def test_store_path_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LINEAGE_STORE", raising=False)
    assert resolve_store_path(None) == Path("lineage-store")
    monkeypatch.setenv("LINEAGE_STORE", "/data/ls")
    assert resolve_store_path(None) == Path("/data/ls")
    assert resolve_store_path("explicit") == Path("explicit")


def test_opening_a_missing_store_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no lineage store at .* run `lineage init`"):
        open_store(tmp_path / "nothing")


def test_a_newer_schema_is_refused(store: Store) -> None:
    con = duckdb.connect(str(store.catalog_path))
    con.execute("UPDATE schema_info SET value = '99' WHERE key = 'schema_version'")
    con.close()
    with pytest.raises(StoreError, match="schema v99 is newer"):
        store.corpora()


def test_an_older_schema_is_migrated_by_the_next_write(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    con = duckdb.connect(str(store.catalog_path))
    con.execute("UPDATE schema_info SET value = '0' WHERE key = 'schema_version'")
    con.close()
    with pytest.raises(StoreError, match="run `lineage store migrate`"):
        store.corpora()  # readers never migrate
    monkeypatch.setattr(
        "lineage.store.base.migrations", lambda: {1: "CREATE TABLE migrated_marker (x INTEGER)"}
    )
    init_store(store.root)
    assert store.sql("SELECT value FROM schema_info WHERE key = 'schema_version'").rows == [
        (str(schemas.SCHEMA_VERSION),)]
    assert store.sql("SELECT count(*) FROM migrated_marker").rows == [(0,)]


def test_a_failed_migration_leaves_the_old_version(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    con = duckdb.connect(str(store.catalog_path))
    con.execute("UPDATE schema_info SET value = '0' WHERE key = 'schema_version'")
    con.close()
    monkeypatch.setattr("lineage.store.base.migrations", lambda: {1: "THIS IS NOT SQL"})
    with pytest.raises(duckdb.Error):
        init_store(store.root)
    con = duckdb.connect(str(store.catalog_path), read_only=True)
    assert con.execute("SELECT value FROM schema_info WHERE key = 'schema_version'"
                       ).fetchall() == [("0",)]
    con.close()


def test_documents_view_has_the_promised_columns(store: Store, example_shards: Path) -> None:
    empty = store.sql("SELECT * FROM documents")
    ingest_corpus(store, [example_shards / "poems.parquet"], corpus="poems")
    full = store.sql("SELECT * FROM documents")
    for columns in (empty.columns, full.columns):
        assert columns[:8] == ["corpus", "doc_id", "source", "uri", "n_bytes", "n_tokens",
                               "content_hash", "license"]
    assert empty.rows == [] and len(full.rows) == 18
    hashes = [row[6] for row in full.rows]
    assert all(len(h) == 64 and h == h.lower() for h in hashes)


@pytest.mark.parametrize(
    "statement",
    ["COPY (SELECT 1) TO 'x.csv'", "CREATE TABLE t (x INT)", "INSERT INTO corpora VALUES (1)",
     "ATTACH 'other.db'", "SELECT 1; DROP TABLE corpora", "INSTALL httpfs"],
)
def test_sql_is_read_only(store: Store, statement: str) -> None:
    with pytest.raises(UsageError, match="read-only|does not parse"):
        store.sql(statement)
    assert store.sql("SELECT count(*) FROM corpora").rows == [(0,)]


def test_sql_errors_are_usage_errors(store: Store) -> None:
    with pytest.raises(UsageError, match="SQL failed"):
        store.sql("SELECT no_such_column FROM corpora")
    with pytest.raises(UsageError, match="no SQL statement"):
        store.sql("  ")


def test_packaged_ddl_matches_the_schema_version() -> None:
    assert "CREATE TABLE corpora" in schemas.catalog_ddl()
    assert all(version <= schemas.SCHEMA_VERSION for version in schemas.migrations())


def _catalog_before(version: int) -> str:
    """The catalog DDL as an older schema made it (each migration undone by hand)."""
    ddl = schemas.catalog_ddl()
    assert "unicode_version" in ddl and "experiment_logs" in ddl  # schemas 5 and 6
    if version < 11:  # schema 11 added the ledger's log and audit_records.log_position
        ddl = ddl[:ddl.index("-- The ledger as a transparency log (schema 11")].replace(
            "record      VARCHAR NOT NULL,     -- the whole",
            "record      VARCHAR NOT NULL      -- the whole").replace(
            "    log_position BIGINT ", "    -- log_position BIGINT ")
    if version < 10:  # schema 10 added parquet_files.arrays_record
        ddl = ddl.replace("row_groups  VARCHAR,   ", "row_groups  VARCHAR    ").replace(
            "arrays_record VARCHAR", "-- arrays_record")
    if version < 9:  # schema 9 added the OpenLineage events
        ddl = ddl[:ddl.index("-- OpenLineage events (schema 9)")]
    if version < 8:  # schema 8 added the audit ledger
        ddl = ddl[:ddl.index("-- Audit records (schema 8)")]
    if version < 7:  # schema 7 added parquet_files.row_groups
        ddl = ddl.replace("key_ranges  VARCHAR, ", "key_ranges  VARCHAR  ").replace(
            "row_groups  VARCHAR", "-- row_groups")
    if version < 6:  # schema 6 added the experiment logs
        ddl = ddl[:ddl.index("-- Experiment logs (schema 6)")]
    if version < 5:  # schema 5 added text_indexes.unicode_version
        ddl = ddl.replace(
            "index_bytes       BIGINT  NOT NULL,  -- bytes of the fingerprint parts\n"
            "    unicode_version   VARCHAR ", "index_bytes       BIGINT  NOT NULL  ")
    if version < 3:  # schema 3 added the text indexes
        ddl = ddl[:ddl.index("-- Text indexes")]
    if version < 2:  # schema 2 added parquet_files.key_ranges
        ddl = ddl.replace(",\n    key_ranges  VARCHAR", "").replace("key_ranges", "-- key_ranges")
    return ddl


def _old_store(root: Path, version: int, rows: tuple[str, ...] = ()) -> Store:
    (root / "tables").mkdir(parents=True)
    con = duckdb.connect(str(root / "catalog.duckdb"))
    con.execute(_catalog_before(version))
    if version < 4:  # schema 4 added these
        for table, column in SCHEMA_4_COLUMNS:
            con.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    con.execute("INSERT INTO schema_info VALUES ('schema_version', ?)", [str(version)])
    for statement in rows:
        con.execute(statement)
    con.close()
    return Store(root)


def test_a_version_1_store_migrates_to_the_current_schema(tmp_path: Path) -> None:
    store = _old_store(tmp_path / "old", 1)
    current = schemas.SCHEMA_VERSION
    with pytest.raises(StoreError, match=f"older than v{current}; run `lineage store migrate`"):
        store.corpora()
    result = init_store(store.root)  # what `lineage store migrate` does
    assert (result.created, result.migrated_from, result.schema_version) == (False, 1, current)
    columns = [r[0] for r in store.sql("DESCRIBE parquet_files").rows]
    assert columns[-3:] == ["key_ranges", "row_groups", "arrays_record"]
    assert store.sql("SELECT count(*) FROM text_indexes").rows == [(0,)]
    assert store.sql("SELECT count(*) FROM experiment_logs").rows == [(0,)]  # schema 6
    assert store.sql("SELECT count(*) FROM audit_records").rows == [(0,)]  # schema 8
    assert store.sql("SELECT count(*) FROM openlineage_events").rows == [(0,)]  # schema 9
    assert store.sql("SELECT value FROM schema_info WHERE key = 'schema_version'"
                     ).rows == [(str(current),)]
    for table, column in SCHEMA_4_COLUMNS:
        assert column in [r[0] for r in store.sql(f"DESCRIBE {table}").rows]


def test_migrated_catalogs_have_the_columns_of_a_new_one(tmp_path: Path) -> None:
    fresh = duckdb.connect()
    fresh.execute(schemas.catalog_ddl())
    for version in range(1, schemas.SCHEMA_VERSION):
        store = _old_store(tmp_path / f"v{version}", version)
        init_store(store.root)
        for table in ("parquet_files", "runs", "checkpoints", "text_indexes",
                      "experiment_logs", "audit_records", "openlineage_events",
                      "audit_logs", "audit_log_entries", "audit_log_tiles",
                      "audit_log_edges"):
            want = fresh.execute(f"DESCRIBE {table}").fetchall()
            assert [tuple(r[:2]) for r in store.sql(f"DESCRIBE {table}").rows] == \
                [tuple(r[:2]) for r in want], (version, table)


def test_a_text_index_from_before_schema_5_keeps_an_unrecorded_unicode_version(
        tmp_path: Path) -> None:
    store = _old_store(tmp_path / "v3", 3, (
        "INSERT INTO text_indexes VALUES ('web', 'lineage-text/1', 'lineage-fingerprint/1', "
        "5, 20, 10, 0, 1000, 95, 6000, 800)",))
    init_store(store.root)
    assert store.sql("SELECT corpus, unicode_version FROM text_indexes").rows == [("web", None)]


SCHEMA_4_COLUMNS = [("runs", "end_record"), ("runs", "skip_rule"), ("runs", "checkpoint_every"),
                    ("checkpoints", "state_digest"), ("checkpoints", "chain_state_digest"),
                    ("checkpoints", "matches_state"), ("checkpoints", "risks")]


def test_bulk_view_columns_match_the_arrow_schemas() -> None:
    # Empty views are typed from BULK_TABLES; the Parquet files from the Arrow schemas.
    arrow = {"documents": schemas.documents_schema(),
             "document_hashes": schemas.document_hashes_schema(),
             "occurrences": schemas.occurrences_schema(),
             "occurrence_hashes": schemas.occurrence_hashes_schema(),
             "text_documents": schemas.text_documents_schema(),
             "text_hashes": schemas.text_hashes_schema(),
             "fingerprints": schemas.fingerprints_schema(),
             "near_bands": schemas.near_bands_schema()}
    assert set(arrow) == set(schemas.BULK_TABLES)
    for table, schema in arrow.items():
        assert schemas.duckdb_columns(schema) == schemas.BULK_TABLES[table], table


def test_a_failed_part_write_raises_and_leaves_no_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Row groups are written on a second thread; its error reaches the caller."""
    import pyarrow as pa

    from lineage.store import parts

    schema = pa.schema([("n", pa.int64())])
    batches = [pa.record_batch([pa.array(range(i, i + 100), pa.int64())], schema=schema)
               for i in range(0, 1000, 100)]
    written = parts.write_parts(iter(batches), schema=schema, out_dir=tmp_path / "ok",
                                sorted_by=["n"], row_group_rows=100, part_rows=300,
                                range_columns=["n"])
    assert [p.rows for p in written] == [300, 300, 300, 100]
    assert [(p.first["n"], p.last["n"]) for p in written] == [(0, 299), (300, 599),
                                                                (600, 899), (900, 999)]
    original = parts._RotatingWriter.write
    calls = []

    def failing(self: object, table: object) -> None:
        calls.append(1)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        original(self, table)  # type: ignore[arg-type]

    monkeypatch.setattr(parts._RotatingWriter, "write", failing)
    with pytest.raises(OSError, match="No space left"):
        parts.write_parts(iter(batches), schema=schema, out_dir=tmp_path / "full",
                          sorted_by=["n"], row_group_rows=100)
    assert list((tmp_path / "full").iterdir()) == []


@pytest.mark.parametrize("failing", ["first", "second"])
def test_overlapped_copies_leave_no_parts_when_either_fails(tmp_path: Path,
                                                            failing: str) -> None:
    """Two copies written side by side: when either fails, the other's parts are removed
    too, whichever finished first."""
    import hashlib

    import pyarrow as pa
    import pyarrow.parquet as pq

    from lineage.store import parts

    schema = pa.schema([("n", pa.int64())])

    def copy(name: str) -> list[parts.WrittenPart]:
        batch = pa.record_batch([pa.array(range(500), pa.int64())], schema=schema)
        written = parts.write_parts(iter([batch]), schema=schema, out_dir=tmp_path / name,
                                    sorted_by=["n"], row_group_rows=100, part_rows=200)
        if name == failing:  # a failing writer removes its own parts, as write_parts does
            parts.discard_parts(written)
            raise OSError(28, "No space left on device")
        return written

    def first(start_second: object) -> list[parts.WrittenPart]:
        start_second()  # type: ignore[operator]
        return copy("first")

    with pytest.raises(OSError, match="No space left"):
        parts.write_overlapped(first, lambda: copy("second"))
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []
    ok_first, ok_second = parts.write_overlapped(
        lambda start: parts.write_parts(
            iter([pa.record_batch([pa.array([1, 2], pa.int64())], schema=schema)]),
            schema=schema, out_dir=tmp_path / "a", sorted_by=["n"]),
        lambda: parts.write_parts(
            iter([pa.record_batch([pa.array([3], pa.int64())], schema=schema)]),
            schema=schema, out_dir=tmp_path / "b", sorted_by=["n"]))
    for part, rows in ((ok_first[0], [1, 2]), (ok_second[0], [3])):
        assert pq.read_table(part.temp).column("n").to_pylist() == rows
        assert part.sha256 == hashlib.sha256(part.temp.read_bytes()).hexdigest()
        assert part.n_bytes == part.temp.stat().st_size


def test_json_text_converts_what_json_lacks_like_to_jsonable() -> None:
    import datetime as dt
    import decimal
    import json
    import uuid

    from lineage.answer import json_text, to_jsonable

    value = {"when": dt.datetime(2026, 11, 29, 20, 0), "d": dt.date(2026, 1, 2),
             "amount": decimal.Decimal("1.50"), "id": uuid.UUID(int=7), "raw": b"\x00\xff",
             "span": dt.timedelta(seconds=3), 4: ("tuple", [1, 2.5, None, True]),
             "text": "naïve ✓"}
    assert json_text(value) == json.dumps(to_jsonable(value), indent=2, ensure_ascii=False)
    with pytest.raises(TypeError, match="set is not JSON serializable"):
        json_text({"s": {1, 2}})


def test_an_ingest_with_text_migrates_an_older_store_and_records_the_unicode_version(
        tmp_path: Path) -> None:
    import unicodedata

    store = _old_store(tmp_path / "v3", 3)
    folder = tmp_path / "corpus" / "web"
    folder.mkdir(parents=True)
    (folder / "a.txt").write_text("a few words of text to index here", encoding="utf-8")
    result = ingest_corpus(store, [folder.parent], corpus="c")
    assert result.text_index is not None
    assert store.sql("SELECT value FROM schema_info WHERE key = 'schema_version'").rows == [
        (str(schemas.SCHEMA_VERSION),)]
    assert store.sql("SELECT unicode_version FROM text_indexes").rows == [
        (unicodedata.unidata_version,)]
