"""Documents' bytes read again from where they were ingested (lineage/corpora/doc_text.py):
many at once, file by file, exactly the bytes ingested, and each checked against its hash.
The corpus is real text in every input kind: whole files, a plain JSONL shard (read by
the byte offsets the text index records), the same shard gzipped (scanned once for all
its records) and a Parquet shard (each row group read once)."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lineage.api import Store, init_store, open_store
from lineage.corpora import doc_text
from lineage.corpora.doc_text import document_texts
from lineage.errors import StoreError
from lineage.ingest import ingest_corpus


def _inputs(folder: Path, example_corpus: Path, example_shards: Path) -> dict[str, bytes]:
    """The inputs of the corpus in `folder`, and the bytes each doc_id must read back as."""
    expected: dict[str, bytes] = {}
    files = folder / "files"
    shutil.copytree(example_corpus / "shakespeare", files)
    for path in sorted(files.iterdir()):
        expected[path.name] = path.read_bytes()
    sonnets = gzip.decompress((example_shards / "sonnets.jsonl.gz").read_bytes())
    (folder / "plain.jsonl").write_bytes(sonnets)  # the same records, uncompressed, renamed
    lines = [json.loads(line) for line in sonnets.splitlines()]
    with (folder / "plain.jsonl").open("w", encoding="utf-8") as out:
        for record in lines:
            out.write(json.dumps({**record, "id": f"plain-{record['id']}"}) + "\n")
            expected[f"plain-{record['id']}"] = record["text"].encode("utf-8")
    shutil.copy(example_shards / "sonnets.jsonl.gz", folder / "sonnets.jsonl.gz")
    for record in lines:
        expected[record["id"]] = record["text"].encode("utf-8")
    # Small row groups, so that rows come from several of them.
    table = pq.read_table(example_shards / "poems.parquet")
    pq.write_table(table, folder / "poems.parquet", row_group_size=7)
    for row in table.to_pylist():
        expected[row["id"]] = row["text"].encode("utf-8")
    return expected


def _store(root: Path, folder: Path, *, fingerprints: bool) -> Store:
    init_store(root)
    store = open_store(root)
    ingest_corpus(store, [folder / "files", folder / "plain.jsonl",
                          folder / "sonnets.jsonl.gz", folder / "poems.parquet"],
                  corpus="mixed", fingerprints=fingerprints)
    return store


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory, example_corpus: Path,
          example_shards: Path) -> tuple[Store, Store, dict[str, bytes]]:
    folder = tmp_path_factory.mktemp("mixed-inputs")
    expected = _inputs(folder, example_corpus, example_shards)
    stores = tmp_path_factory.mktemp("mixed-stores")
    return (_store(stores / "indexed", folder, fingerprints=True),
            _store(stores / "plain", folder, fingerprints=False), expected)


def test_every_document_reads_back_as_ingested(
        mixed: tuple[Store, Store, dict[str, bytes]]) -> None:
    indexed, plain, expected = mixed
    ids = {row[0] for row in indexed.sql("SELECT doc_id FROM documents", max_rows=None).rows}
    assert ids == set(expected)  # the fixture's doc_ids are the ones ingested
    assert document_texts(indexed, "mixed", ids) == expected
    assert document_texts(plain, "mixed", ids) == expected


def test_each_shard_is_read_once_for_all_its_documents(
        mixed: tuple[Store, Store, dict[str, bytes]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With a text index, a plain shard's records are read by seeking to their lines; the
    gzipped shard, which has no offsets, is scanned once for all its records (without
    the index, the plain shard too); the Parquet shard reads each of its row groups once."""
    indexed, plain, expected = mixed
    scans: list[str] = []
    groups: list[int] = []
    scan, read_row_group = doc_text._jsonl_records_text, pq.ParquetFile.read_row_group

    def counted(con: object, origin: str, records: list[int]) -> list[str]:
        scans.append(Path(origin).name)
        return scan(con, origin, records)

    def group_read(self: pq.ParquetFile, group: int, *args: object, **kwargs: object) -> object:
        if "text" in self.schema_arrow.names:  # the shard's, not the store's own tables'
            groups.append(group)
        return read_row_group(self, group, *args, **kwargs)

    monkeypatch.setattr(doc_text, "_jsonl_records_text", counted)
    monkeypatch.setattr(pq.ParquetFile, "read_row_group", group_read)
    wanted = {doc_id for doc_id in expected if not doc_id.endswith(".txt")}
    poems = pq.ParquetFile(indexed.sql("SELECT DISTINCT origin FROM documents WHERE origin "
                                       "LIKE '%.parquet'").rows[0][0])
    assert poems.num_row_groups > 2
    for store, scanned in ((indexed, ["sonnets.jsonl.gz"]),
                           (plain, ["plain.jsonl", "sonnets.jsonl.gz"])):
        scans.clear()
        groups.clear()
        assert document_texts(store, "mixed", wanted) == {d: expected[d] for d in wanted}
        assert sorted(scans) == scanned
        assert sorted(groups) == list(range(poems.num_row_groups))


@settings(max_examples=25, deadline=None)
@given(picks=st.lists(st.integers(0, 10**6), max_size=30),
       absent=st.lists(st.text(min_size=1, max_size=8), max_size=3))
def test_any_documents_read_back_as_ingested(
        mixed: tuple[Store, Store, dict[str, bytes]], picks: list[int],
        absent: list[str]) -> None:
    indexed, _, expected = mixed
    ids = sorted(expected)
    wanted = {ids[p % len(ids)] for p in picks}
    found = document_texts(indexed, "mixed", wanted | (set(absent) - set(expected)))
    assert found == {doc_id: expected[doc_id] for doc_id in wanted}


@pytest.mark.parametrize("shard", ["plain.jsonl", "sonnets.jsonl.gz", "poems.parquet"])
def test_a_changed_shard_is_an_error_naming_it(
        mixed: tuple[Store, Store, dict[str, bytes]], shard: str) -> None:
    indexed, _, expected = mixed
    path = Path(indexed.sql(f"SELECT DISTINCT origin FROM documents WHERE origin "
                            f"LIKE '%/{shard}'").rows[0][0])
    data = path.read_bytes()
    try:
        if shard.endswith(".parquet"):
            table = pq.read_table(path)
            pq.write_table(table.set_column(table.schema.get_field_index("text"), "text",
                                            table["text"][::-1]), path, row_group_size=7)
        elif shard.endswith(".gz"):
            lines = gzip.decompress(data).splitlines()
            path.write_bytes(gzip.compress(b"\n".join(lines[::-1]) + b"\n"))
        else:
            path.write_bytes(b"\n".join(data.splitlines()[::-1]) + b"\n")
        with pytest.raises(StoreError, match=f"{path}.*(changed after ingest|no longer match)"):
            document_texts(indexed, "mixed", set(expected))
    finally:
        path.write_bytes(data)
    assert document_texts(indexed, "mixed", set(expected)) == expected


def test_a_texts_candidates_in_a_compressed_shard_are_read_in_one_scan(
        mixed: tuple[Store, Store, dict[str, bytes]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A pasted text made of passages of three sonnets finds the three: their texts come
    from one scan of the gzipped shard, and the answer is the one reading each alone
    gives."""
    from lineage.text import match
    from lineage.text.trained_on import trained_on

    indexed, _, expected = mixed
    sonnets = [json.loads(line)["id"] for line in gzip.decompress(
        (Path(__file__).parents[1] / "examples" / "shards" / "sonnets.jsonl.gz").read_bytes()
    ).splitlines()]
    picked = [sonnets[3], sonnets[40], sonnets[100]]
    query = " ".join(" ".join(expected[doc_id].decode().split()[10:60]) for doc_id in picked)
    scans: list[str] = []
    scan = doc_text._jsonl_records_text

    def counted(con: object, origin: str, records: list[int]) -> list[str]:
        scans.append(Path(origin).name)
        return scan(con, origin, records)

    monkeypatch.setattr(doc_text, "_jsonl_records_text", counted)
    together = trained_on(indexed, texts=[query])
    assert scans == ["sonnets.jsonl.gz"]
    found = together["results"][0]["matches"]
    assert {m["doc_id"] for m in found if m["doc_id"] in picked} == set(picked)
    assert not any(m.get("note") for m in found)
    monkeypatch.setattr(match, "_texts_at_once", lambda *args: {})
    assert trained_on(indexed, texts=[query]) == together
    assert len(scans) > 3  # each candidate alone: a scan each
