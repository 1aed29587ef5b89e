"""store_order: an imported order's segments checked against the corpus and stored as a
stream every query reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lineage.api import Store
from lineage.errors import ConflictError, InputError, UsageError
from lineage.ingest import ingest_corpus
from lineage.ingest.orders import artifact_hash, store_order
from lineage.ingest.orders.common import corpus_rows
from lineage.store.part_select import part_files
from lineage.stream.imported import ImportedSpec
from lineage.stream.schedule import BatchSchedule, RankRule
from tests.conftest import stream_file_remade_from_parts

from .conftest import documents_of, pack

SEQ_LEN = 256


def _spec(store: Store, **changes: object) -> ImportedSpec:
    manifest = store.corpus("sonnets")["manifest_hash"]
    fields: dict[str, object] = {
        "manifest_hash": manifest, "seq_len": SEQ_LEN, "schedule": BatchSchedule.fixed(4),
        "rank_rule": RankRule(), "framework": "open-transformers",
        "artifacts": {"doc_map": "blake3:" + "0" * 64}, "settings": {"seed": 1}}
    fields.update(changes)
    return ImportedSpec(**fields)  # type: ignore[arg-type]


def _segments(store: Store) -> pa.Table:
    return pack(list(reversed(documents_of(store, "sonnets"))), SEQ_LEN)


def _rows(table: pa.Table) -> list[dict[str, object]]:
    return table.to_pylist()


def test_an_imported_order_answers_docs_step_with_its_segments(sonnets: Store) -> None:
    segments = _segments(sonnets)
    result = store_order(sonnets, stream="imp", corpus="sonnets", spec=_spec(sonnets),
                         segments=segments, origin=Path("doc_map.parquet"))
    windows = max(segments.column("window").to_pylist()) + 1
    assert result["status"] == "added" and result["spec"] == "imported/2"
    assert result["windows"] == windows and result["steps"] == -(-windows // 4)
    # a document running over window edges is one occurrence, as in a canonical stream
    assert result["occurrences"] == segments.column("doc_offset").to_pylist().count(0)
    assert result["tokens"] == windows * SEQ_LEN
    by_window: dict[int, list[tuple[str, int, int]]] = {}
    for row in _rows(segments):
        by_window.setdefault(row["window"], []).append(  # type: ignore[arg-type]
            (row["doc_id"], row["doc_offset"], row["doc_offset"] + row["n_tokens"]))  # type: ignore[operator]
    for step in (0, 3, result["steps"] - 1):
        answer = sonnets.docs_in_step(step, stream="imp")
        assert answer["spec"] == "imported/2" and answer["spec_hash"] == result["spec_hash"]
        got: dict[int, list[tuple[str, int, int]]] = {}
        for d in answer["documents"]:
            got.setdefault(d["window"], []).append((d["doc_id"], d["token_start"], d["token_end"]))
        assert got == {w: by_window[w] for w in range(step * 4, min(step * 4 + 4, windows))}


def test_the_parameters_hold_the_spec_and_round_trip(sonnets: Store) -> None:
    spec = _spec(sonnets, schedule=BatchSchedule(((0, 2), (5, 4))),
                 rank_rule=RankRule("micro-batches", 1))
    store_order(sonnets, stream="imp", corpus="sonnets", spec=spec,
                segments=_segments(sonnets), origin=Path("x"))
    with sonnets.reader(views=False) as con:
        parameters = con.execute("SELECT parameters, batch, seed FROM streams "
                                 "WHERE name = 'imp'").fetchone()
    assert parameters is not None
    loaded = json.loads(parameters[0])
    assert loaded["schedule"] == [[0, 2], [5, 4]]
    assert loaded["rank_rule"] == {"micro_batch": 1, "rule": "micro-batches"}
    assert parameters[1] == 4 and parameters[2] is None
    assert ImportedSpec.from_json(loaded) == spec
    assert ImportedSpec.from_json(loaded).spec_hash == spec.spec_hash


def test_the_spec_hash_covers_every_artifact_and_setting(sonnets: Store) -> None:
    base = _spec(sonnets)
    others = [_spec(sonnets, artifacts={"doc_map": "blake3:" + "1" * 64}),
              _spec(sonnets, settings={"seed": 2}), _spec(sonnets, seq_len=128),
              _spec(sonnets, schedule=BatchSchedule.fixed(8)),
              _spec(sonnets, rank_rule=RankRule("strided")), _spec(sonnets, framework="megatron")]
    assert len({base.spec_hash, *(o.spec_hash for o in others)}) == 1 + len(others)


def test_importing_again_is_unchanged_and_another_order_conflicts(sonnets: Store) -> None:
    segments = _segments(sonnets)
    first = store_order(sonnets, stream="imp", corpus="sonnets", spec=_spec(sonnets),
                        segments=segments, origin=Path("x"))
    again = store_order(sonnets, stream="imp", corpus="sonnets", spec=_spec(sonnets),
                        segments=segments, origin=Path("x"))
    assert again["status"] == "unchanged"
    assert again["occurrences_digest"] == first["occurrences_digest"]
    with pytest.raises(ConflictError, match="exists with another order"):
        store_order(sonnets, stream="imp", corpus="sonnets",
                    spec=_spec(sonnets, settings={"seed": 9}), segments=segments,
                    origin=Path("x"))


def _broken(sonnets: Store, change: dict[str, object], row: int) -> str:
    rows = _rows(_segments(sonnets))
    rows[row].update(change)
    table = pa.table({k: [r[k] for r in rows] for k in rows[0]})
    with pytest.raises(InputError) as caught:
        store_order(sonnets, stream="imp", corpus="sonnets", spec=_spec(sonnets),
                    segments=table, origin=Path("runs/doc_map.parquet"))
    assert sonnets.streams() == []  # nothing stored
    message = str(caught.value)
    assert message.startswith("runs/doc_map.parquet: ") and message.endswith("(nothing stored)")
    return message


@pytest.mark.parametrize(("change", "rule"), [
    ({"doc_id": "no-such-doc"}, "doc_id is not in the corpus"),
    ({"doc_offset": -1}, "0 <= doc_offset"),
    ({"n_tokens": 10**6}, "doc_offset + n_tokens <= the document's n_tokens"),
    ({"n_tokens": 0}, "at least 1 token"),
    ({"slot": SEQ_LEN - 1}, "segment outside its window"),
    ({"window": 40}, "windows must run 0..N-1"),
    ({"slot": 0}, "without overlapping"),
])
def test_each_broken_rule_is_named_with_its_rows(
    sonnets: Store, change: dict[str, object], rule: str
) -> None:
    rows = _rows(_segments(sonnets))
    row = next(i for i, r in enumerate(rows) if r["slot"] and 1 < r["window"] < 30)
    message = _broken(sonnets, change, row)
    assert rule in message
    assert f"window {change.get('window', rows[row]['window'])} " in message


def test_a_missing_window_is_a_gap(sonnets: Store) -> None:
    rows = [r for r in _rows(_segments(sonnets)) if r["window"] != 2]
    table = pa.table({k: [r[k] for r in rows] for k in rows[0]})
    with pytest.raises(InputError, match="window 3 slot 0 .*without gaps"):
        store_order(sonnets, stream="imp", corpus="sonnets", spec=_spec(sonnets),
                    segments=table, origin=Path("x"))


def test_a_wrong_column_type_or_a_missing_column_is_refused(sonnets: Store) -> None:
    table = _segments(sonnets)
    with pytest.raises(InputError, match="lacks column.*slot"):
        store_order(sonnets, stream="imp", corpus="sonnets", spec=_spec(sonnets),
                    segments=table.drop_columns(["slot"]), origin=Path("x"))
    as_text = table.set_column(1, "slot", table.column("slot").cast(pa.string()))
    with pytest.raises(InputError, match="'slot' holds string"):
        store_order(sonnets, stream="imp", corpus="sonnets", spec=_spec(sonnets),
                    segments=as_text, origin=Path("x"))


def test_a_spec_for_another_manifest_is_refused(sonnets: Store) -> None:
    with pytest.raises(UsageError, match="was read for manifest"):
        store_order(sonnets, stream="imp", corpus="sonnets",
                    spec=_spec(sonnets, manifest_hash="blake3:" + "a" * 64),
                    segments=_segments(sonnets), origin=Path("x"))


def test_a_spec_refuses_unknown_frameworks_and_bad_hashes(sonnets: Store) -> None:
    with pytest.raises(UsageError, match="framework 'deepspeed'"):
        _spec(sonnets, framework="deepspeed")
    with pytest.raises(UsageError, match="artifact 'idx'"):
        _spec(sonnets, artifacts={"idx": "sha256:00"})
    with pytest.raises(UsageError, match="plain JSON"):
        _spec(sonnets, settings={"lr": float("nan")})


def test_artifact_hash_is_blake3_of_the_bytes(tmp_path: Path) -> None:
    import blake3

    path = tmp_path / "a.idx"
    path.write_bytes(b"MMIDIDX\x00\x00" + bytes(range(50)))
    assert artifact_hash(path) == "blake3:" + blake3.blake3(path.read_bytes()).hexdigest()


WINDOWS_PER_STEP = 8  # every window is read back, eight to a lookup


@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(order=st.randoms(use_true_random=False), seq_len=st.integers(16, 700))
def test_any_packing_reads_back_window_by_window(
    sonnets: Store, order: object, seq_len: int
) -> None:
    """Whatever the document order and window size, every window reads back as packed,
    and each document's tokens appear once per pass (epochs count repeated passes)."""
    documents = documents_of(sonnets, "sonnets")[:40]
    order.shuffle(documents)  # type: ignore[attr-defined]
    table = pack(documents + documents, seq_len)  # two passes: epoch 0, then 1
    name = f"p{seq_len}-{len(sonnets.streams())}"
    spec = _spec(sonnets, seq_len=seq_len, schedule=BatchSchedule.fixed(WINDOWS_PER_STEP),
                 settings={"case": name})
    result = store_order(sonnets, stream=name, corpus="sonnets", spec=spec, segments=table,
                         origin=Path("x"))
    expected: dict[int, list[tuple[str, int, int]]] = {}  # by step: its windows in turn
    for row in table.to_pylist():
        expected.setdefault(row["window"] // WINDOWS_PER_STEP, []).append(
            (row["doc_id"], row["doc_offset"], row["doc_offset"] + row["n_tokens"]))
    seen: dict[str, int] = {}
    assert result["steps"] == len(expected)  # a last step of fewer windows too
    for step in range(result["steps"]):
        segments = sonnets.docs_in_step(step, stream=name)["documents"]
        assert [(d["doc_id"], d["token_start"], d["token_end"]) for d in segments] == \
            expected[step]
        for d in segments:
            if d["token_start"] == 0:
                assert d["epoch"] == seen.get(d["doc_id"], 0)
                seen[d["doc_id"]] = d["epoch"] + 1


def test_the_content_hash_copy_is_in_content_hash_order(sonnets: Store) -> None:
    documents = documents_of(sonnets, "sonnets")
    table = pack(documents[::-1] + documents, 200)  # two passes: two epochs of each
    store_order(sonnets, stream="imp", corpus="sonnets", spec=_spec(sonnets, seq_len=200),
                segments=table, origin=Path("x"))
    with sonnets.reader(views=True) as con:
        rows = con.execute("SELECT content_hash, doc_id, epoch, ordinal FROM "
                           "occurrence_hashes WHERE stream = 'imp'").fetchall()
        count = con.execute("SELECT count(*) FROM occurrences WHERE stream = 'imp'"
                            ).fetchone()
    starts = table.column("doc_offset").to_pylist().count(0)  # one per document pass
    assert count is not None and len(rows) == count[0] == starts
    assert rows == sorted(rows) and {r[2] for r in rows} == {0, 1}


def test_the_imports_stream_file_is_the_one_made_from_its_parts(sonnets: Store) -> None:
    """An import spools the stream file's columns from its segments (offsets within
    documents, two epochs); repair makes the file from the registered parts: the same
    bytes."""
    documents = documents_of(sonnets, "sonnets")
    store_order(sonnets, stream="imp", corpus="sonnets", spec=_spec(sonnets, seq_len=200),
                segments=pack(documents[::-1] + documents, 200), origin=Path("x"))
    written, remade = stream_file_remade_from_parts(sonnets, "imp")
    assert written == remade


def test_doc_ids_as_a_dictionary_store_the_same_order(sonnets: Store) -> None:
    plain = _segments(sonnets)
    encoded = plain.set_column(2, "doc_id", plain.column("doc_id").dictionary_encode())
    a = store_order(sonnets, stream="plain", corpus="sonnets", spec=_spec(sonnets),
                    segments=plain, origin=Path("x"))
    b = store_order(sonnets, stream="encoded", corpus="sonnets", spec=_spec(sonnets),
                    segments=encoded, origin=Path("x"))
    assert a["occurrences_digest"] == b["occurrences_digest"]
    rows = plain.to_pylist()
    rows[7]["doc_id"] = "no-such-doc"
    broken = pa.Table.from_pylist(rows)
    broken = broken.set_column(2, "doc_id", broken.column("doc_id").dictionary_encode())
    with pytest.raises(InputError, match=r"\('no-such-doc'\): doc_id is not in the corpus"):
        store_order(sonnets, stream="broken", corpus="sonnets", spec=_spec(sonnets),
                    segments=broken, origin=Path("x"))


def _stored_rows(store: Store, table: str, stream: str) -> list[tuple[Any, ...]]:
    """A stream's rows of `table` as stored, in file order, every column but `stream`
    (occurrence_hashes holds no uri)."""
    columns = OCCURRENCE_COLUMNS if table == "occurrences" else OCCURRENCE_COLUMNS[:-1]
    with store.reader(views=True) as con:
        return con.execute(f"SELECT {', '.join(columns)} FROM {table} WHERE stream = ?",
                           [stream]).fetchall()


OCCURRENCE_COLUMNS = ("ordinal", "corpus", "doc_id", "source", "epoch", "stream_start",
                      "stream_end", "doc_offset", "content_hash", "uri")


def _expected_rows(store: Store, segments: pa.Table, seq_len: int) -> list[tuple[Any, ...]]:
    """The occurrences docs/importers.md describes, derived from the segments alone:
    each placed at window x seq_len + slot, a segment that continues the one before it
    (same document, its next token, the next position) joined to it, its epoch the
    document's tokens in earlier segments over its length, rounded down."""
    with store.reader(views=True) as con:
        corpus = {row[0]: row[1:] for row in con.execute(
            "SELECT doc_id, n_tokens, source, content_hash, uri FROM documents "
            "WHERE corpus = 'sonnets'").fetchall()}
    occurrences: list[list[Any]] = []
    seen: dict[str, int] = {}
    for seg in segments.to_pylist():
        doc_id, start = seg["doc_id"], seg["window"] * seq_len + seg["slot"]
        n_tokens, source, content_hash, uri = corpus[doc_id]
        last = occurrences[-1] if occurrences else None
        if last and last[2] == doc_id and last[6] == start and \
                seg["doc_offset"] == last[7] + (last[6] - last[5]):
            last[6] = start + seg["n_tokens"]
        else:
            occurrences.append([len(occurrences), "sonnets", doc_id, source,
                                seen.get(doc_id, 0) // n_tokens, start,
                                start + seg["n_tokens"], seg["doc_offset"], content_hash, uri])
        seen[doc_id] = seen.get(doc_id, 0) + seg["n_tokens"]
    return [tuple(row) for row in occurrences]


def _reference_digest(store: Store, stream: str, version: int) -> str:
    """docs/stream-spec.md §5 computed row by row from the stored occurrences."""
    from lineage.corpora.digest import lines_digest

    columns = ["ordinal", "source", "doc_id", "epoch", "stream_start", "stream_end"]
    columns += ["doc_offset"] if version == 2 else []
    with store.reader(views=True) as con:
        rows = con.execute(f"SELECT {', '.join(columns)} FROM occurrences WHERE stream = ? "
                           "ORDER BY ordinal", [stream]).fetchall()
    return lines_digest(f"lineage-occurrences/{version}", rows)


def test_the_stored_rows_are_those_the_segments_describe(sonnets: Store) -> None:
    """Documents in several passes, some cut short (so one epoch holds two occurrences
    of a document): both tables hold exactly the rows they always held."""
    documents = documents_of(sonnets, "sonnets")
    halves = [(doc_id, n // 2) for doc_id, n in documents[5:15]]
    table = pack(documents[:30] + halves + documents[10:20] + documents[::-1], 200)
    result = store_order(sonnets, stream="imp", corpus="sonnets",
                         spec=_spec(sonnets, seq_len=200), segments=table, origin=Path("x"))
    # lineage-occurrences/2 of the stored rows; their /1 digest is the one the stream
    # recorded before /2 (the rows are those of before)
    assert result["occurrences_digest"] == _reference_digest(sonnets, "imp", 2) == (
        "blake3:feb2f0166ab9331ab765d88ff115236e15fbcfe7e422415e901c891e34d3cce4")
    assert _reference_digest(sonnets, "imp", 1) == (
        "blake3:406f9bdd45b1685760b93198ae4eebf30f8797f8e0d69c8f8b5f5f7bfe46e9ec")
    expected = _expected_rows(sonnets, table, 200)
    assert len(expected) == result["occurrences"] and max(row[4] for row in expected) == 2
    assert _stored_rows(sonnets, "occurrences", "imp") == expected
    # the by-hash table: the same rows by (content hash, doc_id, epoch, ordinal)
    by_hash = sorted((row[:-1] for row in expected),
                     key=lambda row: (row[8], row[2], row[4], row[0]))
    assert _stored_rows(sonnets, "occurrence_hashes", "imp") == by_hash


def test_corpus_rows_finds_each_document_by_its_doc_id_order_row(sonnets: Store) -> None:
    """The corpus's own doc_ids in order (recognised whole) and any other list (joined)
    give each document's row in doc_id order and its n_tokens; -1 where unknown."""
    documents = documents_of(sonnets, "sonnets")
    with sonnets.reader(views=False) as con:
        files = part_files(con, sonnets, "documents", "sonnets")
    rids, n_tokens = corpus_rows(files, pa.chunked_array(
        [pa.array([d for d, _ in documents[:50]]), pa.array([d for d, _ in documents[50:]])]))
    assert rids.tolist() == list(range(len(documents)))
    assert n_tokens.tolist() == [n for _, n in documents]
    picked = [documents[7][0], "no-such-doc", documents[3][0], documents[7][0]]
    rids, n_tokens = corpus_rows(files, pa.array(picked))
    assert rids.tolist() == [7, -1, 3, 7]
    assert n_tokens.tolist() == [documents[7][1], -1, documents[3][1], documents[7][1]]
    renamed = [d for d, _ in documents]
    renamed[-1] = "no-such-doc"  # as many as the corpus holds, but not its own
    rids, _ = corpus_rows(files, pa.array(renamed))
    assert rids.tolist() == [*range(len(documents) - 1), -1]


def test_segments_may_name_their_documents_by_corpus_row(sonnets: Store) -> None:
    """`rid` (the document's row in doc_id order) in place of doc_id stores the same
    order; a broken rule still names the doc_id, and a row the corpus lacks is named."""
    plain = _segments(sonnets)
    row_of = {doc_id: rid for rid, (doc_id, _) in enumerate(documents_of(sonnets, "sonnets"))}
    by_row = plain.set_column(2, "rid", pa.array(
        [row_of[d] for d in plain.column("doc_id").to_pylist()], pa.int32()))
    a = store_order(sonnets, stream="plain", corpus="sonnets", spec=_spec(sonnets),
                    segments=plain, origin=Path("x"))
    b = store_order(sonnets, stream="rows", corpus="sonnets",
                    spec=_spec(sonnets, settings={"seed": 2}), segments=by_row, origin=Path("x"))
    assert a["occurrences_digest"] == b["occurrences_digest"]
    rows = by_row.to_pylist()
    rows[5]["n_tokens"] = 10**6
    rows[9]["rid"] = len(row_of) + 4
    broken = pa.Table.from_pylist(rows)
    with pytest.raises(InputError) as caught:
        store_order(sonnets, stream="broken", corpus="sonnets", spec=_spec(sonnets),
                    segments=broken, origin=Path("x"))
    message = str(caught.value)
    assert f"(rid {len(row_of) + 4}): doc_id is not in the corpus" in message
    assert f"({plain.column('doc_id')[5].as_py()!r}): offsets must satisfy" in message


# --- lineage-occurrences/2: the digest places every token ---------------------------

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "occurrences" / "imported.json"


def _golden_store(store: Store, tmp_path: Path) -> tuple[Store, dict[str, Any]]:
    """The golden order's corpus, ingested as a ready manifest."""
    import pyarrow.parquet as pq

    case = json.loads(GOLDEN.read_text(encoding="utf-8"))
    rows = [{"doc_id": d["doc_id"], "source": d["source"], "uri": None,
             "n_bytes": max(d["n_tokens"], 1), "n_tokens": d["n_tokens"],
             "content_hash": f"{i:064x}"} for i, d in enumerate(case["documents"])]
    path = tmp_path / "golden.parquet"
    pq.write_table(pa.table({k: [r[k] for r in rows] for k in rows[0]}), path)
    ingest_corpus(store, [path], corpus="golden")
    return store, case


def _golden_import(store: Store, case: dict[str, Any], stream: str,
                   segments: list[list[Any]], label: str = "imported/2") -> dict[str, Any]:
    table = pa.table({name: [s[i] for s in segments] for i, name in
                      enumerate(("window", "slot", "doc_id", "doc_offset", "n_tokens"))})
    manifest = store.corpus("golden")["manifest_hash"]
    spec = ImportedSpec(manifest_hash=manifest, seq_len=case["seq_len"],
                        schedule=BatchSchedule.fixed(2), rank_rule=RankRule(),
                        framework="megatron", spec=label)
    return store_order(store, stream=stream, corpus="golden", spec=spec, segments=table,
                       origin=Path("golden"))


def test_the_golden_imported_order_and_its_digest(store: Store, tmp_path: Path) -> None:
    """tests/golden/occurrences/imported.json (tests/golden/generate.py, from the plain
    reference in tests/stream_reference.py): the rows stored and their /2 digest."""
    store, case = _golden_store(store, tmp_path)
    result = _golden_import(store, case, "golden", case["segments"])
    columns = ["ordinal", "source", "doc_id", "epoch", "stream_start", "stream_end",
               "doc_offset"]
    with store.reader(views=True) as con:
        stored = con.execute(f"SELECT {', '.join(columns)} FROM occurrences ORDER BY ordinal"
                             ).fetchall()
    assert [dict(zip(columns, row, strict=True)) for row in stored] == case["occurrences"]
    assert result["occurrences_digest"] == case["occurrences_digest"]
    assert _reference_digest(store, "golden", 1) == case["occurrences_digest_1"]


def test_a_changed_doc_offset_changes_the_digest(store: Store, tmp_path: Path) -> None:
    """The same windows, documents and positions, one segment read from another offset
    of its document (a damaged Megatron cache names such tokens): before, its digest
    (lineage-occurrences/1) equalled the good stream's."""
    store, case = _golden_store(store, tmp_path)
    good = _golden_import(store, case, "good", case["segments"])
    segments = [list(s) for s in case["segments"]]
    assert segments[13][2:4] == ["web/3", 3]
    segments[13][3] = 2  # tokens [2, 5) of web/3 instead of [3, 6)
    damaged = _golden_import(store, case, "damaged", segments)
    assert damaged["occurrences_digest"] != good["occurrences_digest"]
    assert _reference_digest(store, "damaged", 2) == damaged["occurrences_digest"]
    # what /1 hashes cannot tell them apart
    assert _reference_digest(store, "damaged", 1) == _reference_digest(store, "good", 1)


def test_a_recorded_stream_digest_covers_doc_offset(store: Store, tmp_path: Path) -> None:
    """`lineage ingest windows` records recorded/2 streams, digested under /2 too: a
    log whose segments start elsewhere in their documents digests differently."""
    import pyarrow.parquet as pq

    from lineage.ingest.windows import ingest_windows

    store, case = _golden_store(store, tmp_path)
    # web/3 first read from token 1 (a log that starts inside a document), or from 2
    log = {"step": [0, 0, 1], "rank": [0, 0, 0], "window": [0, 0, 1],
           "doc_id": ["web/0", "web/3", "web/3"], "token_start": [0, 1, 2],
           "token_end": [3, 2, 5]}
    pq.write_table(pa.table(log), tmp_path / "good.parquet")
    log["token_start"], log["token_end"] = [0, 2, 3], [3, 3, 6]
    pq.write_table(pa.table(log), tmp_path / "other.parquet")
    good = ingest_windows(store, tmp_path / "good.parquet", stream="rec", corpus="golden",
                          seq_len=4, batch=1)
    other = ingest_windows(store, tmp_path / "other.parquet", stream="rec2",
                           corpus="golden", seq_len=4, batch=1)
    assert good["spec"] == "recorded/2"
    assert good["occurrences_digest"] == _reference_digest(store, "rec", 2)
    assert other["occurrences_digest"] == _reference_digest(store, "rec2", 2)
    assert good["occurrences_digest"] != other["occurrences_digest"]
    assert _reference_digest(store, "rec", 1) == _reference_digest(store, "rec2", 1)


def test_an_order_imported_before_digest_2_stays_as_it_was(
        store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store written before lineage-occurrences/2 holds imported/1 streams digested
    under /1 (and recorded ones under /1, labelled `recorded`): the label tells which
    spec a stored digest is under, and importing the same order again answers
    "unchanged" with the stream as it was stored."""
    import functools

    import pyarrow.parquet as pq

    from lineage.ingest import windows
    from lineage.stream import tables
    from lineage.stream.spec import OCCURRENCE_DIGEST_COLUMNS, RecordedSpec, occurrences_spec

    store, case = _golden_store(store, tmp_path)
    log = tmp_path / "log.parquet"
    pq.write_table(pa.table({"step": [0], "rank": [0], "window": [0], "doc_id": ["web/1"],
                             "token_start": [0], "token_end": [4]}), log)
    with monkeypatch.context() as before:  # lineage as it wrote these streams
        before.setattr(tables, "OCCURRENCES_SPEC_2", "lineage-occurrences/1")
        before.setattr(tables, "digest_columns", lambda _: OCCURRENCE_DIGEST_COLUMNS)
        before.setattr(windows, "RecordedSpec", functools.partial(RecordedSpec,
                                                                  spec="recorded"))
        old = _golden_import(store, case, "old", case["segments"], label="imported/1")
        recorded = windows.ingest_windows(store, log, stream="rec", corpus="golden",
                                          seq_len=4, batch=1)
    assert (old["spec"], recorded["spec"]) == ("imported/1", "recorded")
    assert old["occurrences_digest"] == case["occurrences_digest_1"]
    again = _golden_import(store, case, "old", case["segments"])
    assert again["status"] == "unchanged"
    assert {k: again[k] for k in ("spec", "spec_hash", "occurrences_digest")} == \
        {k: old[k] for k in ("spec", "spec_hash", "occurrences_digest")}
    assert windows.ingest_windows(store, log, stream="rec", corpus="golden", seq_len=4,
                                  batch=1)["status"] == "unchanged"
    assert [occurrences_spec(s.spec) for s in (store.stream("old"), store.stream("rec"))] \
        == ["lineage-occurrences/1"] * 2
    new = _golden_import(store, case, "new", case["segments"])
    assert new["spec"] == "imported/2" and occurrences_spec(new["spec"]) == \
        "lineage-occurrences/2"
    assert new["occurrences_digest"] == case["occurrences_digest"]
