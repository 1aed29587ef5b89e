"""The numpy order of `lineage-stream/1` against plain Python on the spec's formulas:
exact merge keys for any token totals, ties of 64-bit key prefixes broken by full keys,
and the content-hash order of the corpus index."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from lineage.stream.order import Candidates, content_hash_order, merge_keys, place


@given(st.lists(st.tuples(st.integers(0, 2**40), st.integers(0, 2**40)), min_size=1,
                max_size=30),
       st.integers(0, 2**62 + 5))
def test_merge_keys_are_the_exact_fixed_point_midpoints(
    rows: list[tuple[int, int]], extra: int
) -> None:
    c_before = np.array([c for c, _ in rows], dtype=np.int64)
    n = np.array([t for _, t in rows], dtype=np.int64)
    # any source total at least every row's end, up to past 2^62 (the slow exact path)
    total = int(max(c + t for c, t in rows)) + extra
    high, low = merge_keys(np.zeros(len(rows), dtype=np.int64), c_before, n,
                           np.array([total], dtype=np.int64))
    for i, (c, t) in enumerate(rows):
        m = (2 * c + t) * 2**64 // max(2 * total, 1)
        assert (int(high[i]) << 64) + int(low[i]) == m


def test_a_zero_token_document_at_the_end_gets_the_key_2_to_the_64() -> None:
    high, low = merge_keys(np.zeros(2, dtype=np.int64), np.array([0, 10]),
                           np.array([10, 0]), np.array([10]))
    assert high.tolist() == [False, True] and low.tolist() == [2**63, 0]


def _key(epoch: int, doc_id: str) -> bytes:
    return hashlib.sha256(f"t\n{epoch}\n{doc_id}".encode()).digest()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3), st.integers(0, 50)),
                min_size=1, max_size=40),
       st.integers(0, 3))
def test_keys_that_agree_in_64_bits_are_ordered_by_all_256(
    rows: list[tuple[int, int, int]], prefix_bits: int
) -> None:
    """k64 is cut to a few bits, so most rows tie there: `full_keys` must decide."""
    doc_ids = [f"d{i}" for i in range(len(rows))]
    srank = np.array([s for s, _, _ in rows], dtype=np.int64)
    epoch = np.array([e for _, e, _ in rows], dtype=np.int64)
    n = np.array([t for _, _, t in rows], dtype=np.int64)
    k64 = np.array([int.from_bytes(_key(e, d)[:8]) >> (64 - prefix_bits) if prefix_bits else 0
                    for (_, e, _), d in zip(rows, doc_ids, strict=True)], dtype=np.uint64)
    candidates = Candidates(rid=np.arange(len(rows), dtype=np.int64), srank=srank,
                            epoch=epoch, n_tokens=n, k64=k64)

    def full_keys(positions: np.ndarray) -> list[tuple[bytes, bytes]]:
        return [(_key(int(epoch[p]), doc_ids[p]), doc_ids[p].encode()) for p in positions]

    placed = place(candidates, [10**9] * 3, 1, full_keys)
    # The spec, plainly: per source, sequences by (epoch, key); merged by (m, src, q).
    merged = []
    for source in range(3):
        members = sorted((r for r in range(len(rows)) if rows[r][0] == source),
                         key=lambda r: (rows[r][1], _key(rows[r][1], doc_ids[r])))
        total = sum(rows[r][2] for r in members)
        before = 0
        for q, r in enumerate(members):
            m = (2 * before + rows[r][2]) * 2**64 // max(2 * total, 1)
            merged.append(((m, source, q), r))
            before += rows[r][2]
    expected = [r for _, r in sorted(merged)]
    assert placed.rid.tolist() == expected
    starts = np.cumsum([0] + [rows[r][2] + 1 for r in expected])[:-1]
    assert placed.stream_start.tolist() == starts.tolist()


_WORD = st.sampled_from([0, 1, 2**63, 2**64 - 1, 12345])


@given(st.lists(st.tuples(_WORD, _WORD, _WORD, _WORD), min_size=1, max_size=40))
def test_content_hash_order_is_the_order_of_the_hex_strings(
    hashes: list[tuple[int, int, int, int]]
) -> None:
    words = np.array(hashes, dtype=np.uint64).reshape(len(hashes), 4)
    hex_of = ["".join(f"{w:016x}" for w in h) for h in hashes]
    expected = sorted(range(len(hashes)), key=lambda rid: (hex_of[rid], rid))
    assert content_hash_order(words).tolist() == expected


def test_a_rid_names_its_document_across_parts(tmp_path: Path) -> None:
    """The full keys of tied rows are computed from doc_ids found by rid, part by part."""
    import duckdb

    from lineage.stream.build import _doc_id

    ids = [f"doc-{i:03d}" for i in range(25)]
    parts = []
    for start in range(0, 25, 10):  # parts of 10, 10 and 5 rows, in doc_id order
        path = tmp_path / f"part-{start:02d}.parquet"
        pq.write_table(pa.table({"doc_id": ids[start:start + 10]}), path)
        parts.append((str(path), len(ids[start:start + 10])))
    con = duckdb.connect()
    assert [_doc_id(con, parts, rid) for rid in range(25)] == ids
