"""`lineage chain verify`: recompute every link of a run's chain that can be recomputed.

For lineage-chain/1 (BLAKE3): the genesis from the header, each record's canonical form,
its state hash, its link to the previous step, its stream cursor, and its batch digests
against digests recomputed from the stream (proof that the trainer read the canonical
order). For a foreign chain: continuity only. The answer names the first broken step.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from lineage.chain import CHAIN_SPEC, canonical_json, genesis_hash, step_hash
from lineage.parts import part_files
from lineage.store import Store
from lineage.stream.query import _resolve, window_pieces


def verify_chain(store: Store, run: str, *, batches: bool = True) -> dict[str, Any]:
    with store.reader(views=False) as con:
        from lineage.runs import _summary

        info = _summary(con, run)
        header = json.loads(con.execute("SELECT header FROM runs WHERE name = ?",
                                        [run]).fetchone()[0])
        stream = _resolve(con, info["stream"])
        rows = con.execute("SELECT step, record FROM steps WHERE run = ? ORDER BY step",
                           [run]).fetchall()
        full = header.get("chain") == CHAIN_SPEC and header.get("algorithm") == "blake3"
        expected = _batch_digests(con, store, stream, int(info["world_size"]),
                                  [s for s, _ in rows]) if full and batches else None
    result = {"run": run, "chain": header.get("chain"), "algorithm": header.get("algorithm"),
              "checked": "full" if full else "continuity", "genesis": header.get("genesis"),
              "ok": True, "steps_checked": 0, "first_broken_step": None, "reason": None,
              "last_state_hash": None}
    problem = _check_genesis(header, stream, int(info["world_size"])) if full else None
    if problem:
        return {**result, "ok": False, "first_broken_step": rows[0][0] if rows else None,
                "reason": problem}
    prev = header.get("genesis")
    previous_step = -1
    batch = int(stream["batch"])
    for step, text in rows:
        record = json.loads(text)
        reason = _check_record(step, text, record, prev, previous_step, full, batch)
        if reason is None and expected is not None:
            digests = expected.get(step)
            if record.get("batch_digests") != digests:
                reason = "batch digests differ from the stream's segments for this step"
        if reason:
            return {**result, "ok": False, "first_broken_step": step, "reason": reason}
        prev, previous_step = record.get("state_hash"), step
        result["steps_checked"] += 1
        result["last_state_hash"] = prev
    return result


def _check_genesis(header: dict[str, Any], stream: dict[str, Any], world_size: int) -> str | None:
    expected = genesis_hash(config=header.get("config", {}), stream_spec_hash=stream["spec_hash"],
                            manifest_hash=stream["manifest_hash"], world_size=world_size)
    if header.get("genesis") != expected:
        return "the header's genesis does not match its configuration, stream and corpus"
    return None


def _check_record(step: int, text: str, record: dict[str, Any], prev: str | None,
                  previous_step: int, full: bool, batch: int) -> str | None:
    if step != previous_step + 1:
        return f"gap: step {previous_step + 1} is missing" if step > previous_step + 1 \
            else "steps out of order"
    if record.get("prev_hash") != prev:
        return "prev_hash does not equal the previous step's state_hash"
    if not full:
        return None
    if text != canonical_json(record):
        return "the record is not canonical JSON (its bytes are what is hashed)"
    if record.get("state_hash") != step_hash(record):
        return "state_hash does not match the record (the record was changed)"
    if record.get("cursor") != (step + 1) * batch:
        return f"cursor {record.get('cursor')} is not {(step + 1) * batch} windows"
    return None


def _batch_digests(con: Any, store: Store, stream: dict[str, Any], world_size: int,
                   steps: list[int]) -> dict[int, list[str]]:
    """Per step, the digest of each rank's segments, in one pass over the occurrences."""
    import blake3

    from lineage.chain import BATCH_TAG

    if not steps:
        return {}
    batch, seq_len = int(stream["batch"]), int(stream["seq_len"])
    per_rank = batch // world_size if world_size and batch % world_size == 0 else batch
    wanted = set(steps)
    hashers: dict[tuple[int, int], Any] = {}
    for window, doc_id, token_start, token_end in _segments(
            con, store, stream, min(steps) * batch, (max(steps) + 1) * batch, seq_len):
        step = window // batch
        if step not in wanted:
            continue
        rank = (window - step * batch) // per_rank
        hasher = hashers.setdefault((step, rank), blake3.blake3(BATCH_TAG))
        hasher.update(f"{window}\t{doc_id}\t{token_start}\t{token_end}\n".encode())
    empty = "blake3:" + blake3.blake3(BATCH_TAG).hexdigest()
    ranks = batch // per_rank
    return {s: ["blake3:" + hashers[(s, r)].hexdigest() if (s, r) in hashers else empty
                for r in range(ranks)] for s in steps}


def _segments(con: Any, store: Store, stream: dict[str, Any], first_window: int,
              end_window: int, seq_len: int) -> Iterator[tuple[int, str, int, int]]:
    """(window, doc_id, token_start, token_end) in window and position order."""
    start, end = first_window * seq_len, end_window * seq_len
    files = part_files(con, store, "occurrences", stream["name"], span=(start, end))
    if not files:
        return
    cursor = con.execute(
        "SELECT doc_id, stream_start, stream_end, doc_offset FROM read_parquet(?) "
        "WHERE stream_end > ? AND stream_start < ? ORDER BY ordinal", [files, start, end])
    pending: list[tuple[int, int, str, int, int]] = []
    while rows := cursor.fetchmany(8192):
        for doc_id, a, b, offset in rows:
            pending += [(w, lo, doc_id, token_start, token_end) for w, lo, token_start, token_end
                        in window_pieces(a, b, offset, seq_len, first_window, end_window - 1)]
        # segments of finished windows can go out in order; keep the last window open
        if pending:
            open_window = pending[-1][0]
            pending.sort()
            done = [p for p in pending if p[0] < open_window]
            pending = [p for p in pending if p[0] >= open_window]
            for w, _, doc_id, start, end in done:
                yield w, doc_id, start, end
    for w, _, doc_id, start, end in sorted(pending):
        yield w, doc_id, start, end
