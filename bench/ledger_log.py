"""The ledger's transparency log at a million records: appending, verifying offline,
proving inclusion.

    .venv/bin/python bench/ledger_log.py [--records 1000000] [--runs 3] [--workdir DIR]

A new store gets `--records` attestation-shaped records (made with lineage's own builder,
spread over 80,957 steps and 1,000 auditors), written straight into `audit_records` so
that what is timed is the log alone:

- **append**: the first append, which takes every held record into the log (leaf hashes,
  tiles, entries, the signed checkpoint) in one writer transaction, as the first write
  after a store gains its log does; and one more record appended to the full log (the
  cost every later `audit record` or `import` pays), median of `--runs`, beside its floor:
  the commit that inserts that record alone;
- **verify offline**: what an auditor holding the entries, the checkpoint and the
  verifier key does without the store: every leaf hashed, the tree rebuilt from scratch,
  its root compared with the checkpoint's, the checkpoint's signature checked;
- **inclusion proof**: `lineage.audit.log.inclusion_proofs` for one random record on the
  store (its tiles read from the catalog), and the proof verified, median of 200.

The floor beside them, in the same run: hashlib's SHA-256 over the same entries alone.
Results go to bench/out/ledger-log.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def make_records(count: int, start: int = 0) -> list[tuple[str, str, str]]:
    from lineage.audit import records as R
    from lineage.runs.chain import canonical_json

    rng = random.Random(7 + start)
    rows = []
    for i in range(start, start + count):
        step = rng.randrange(80_957)
        state = "blake3:" + hashlib.blake2b(f"{step}".encode(), digest_size=32).hexdigest()
        record = R.attestation(
            run="open-1b", chain_head="blake3:" + "ab" * 32, step=step, unit="step-replay",
            start=R.published_start(step - 1, "blake3:" + "cd" * 32) if step else
            R.initial_start(), state_hash=state, expected=state,
            machine={"backend": "cuda", "device": "NVIDIA L4", "memory_bytes": 24 << 30,
                     "swapped": False, "os": "Linux", "cpu": "x86_64"},
            duration_s=1800.0 + i % 600, tools={"lineage": "0.1.0", "python": "3.11.9"},
            auditor=R.auditor(f"auditor-{rng.randrange(1000)}"),
            created_at=R.format_time(R.parse_time("2026-06-01T00:00:00Z")
                                     .replace(microsecond=0) + _seconds(i)))
        rows.append((R.record_id(record), canonical_json(record), record["created_at"]))
    return rows


def _seconds(i: int):  # type: ignore[no-untyped-def]
    from datetime import timedelta

    return timedelta(seconds=i)


def fill(store, rows) -> None:  # type: ignore[no-untyped-def]
    import pyarrow as pa

    from lineage.audit.records import parse_time

    n = len(rows)
    table = pa.table({
        "id": [r[0] for r in rows], "kind": ["attestation"] * n, "run": ["open-1b"] * n,
        "chain_head": ["blake3:" + "ab" * 32] * n, "step": pa.array([0] * n, pa.int64()),
        "last_step": pa.array([0] * n, pa.int64()), "auditor": ["a"] * n,
        "public_key": pa.array([None] * n, pa.string()), "signed": [False] * n,
        "created_at": pa.array([parse_time(r[2]) for r in rows], pa.timestamp("us")),
        "record": [r[1] for r in rows]})
    with store.writer() as con:
        con.register("incoming", table)
        con.execute("INSERT INTO audit_records (id, kind, run, chain_head, step, last_step, "
                    "auditor, public_key, signed, created_at, record) SELECT * FROM incoming")
        con.unregister("incoming")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()

    from lineage.api import open_store
    from lineage.audit import log as L
    from lineage.audit import merkle as M
    from lineage.audit.note import Checkpoint, Verifier, open_note
    from lineage.store.base import init_store

    out: dict[str, object] = {"records": args.records}
    with tempfile.TemporaryDirectory(dir=args.workdir) as folder:
        init_store(Path(folder) / "store")
        store = open_store(Path(folder) / "store")
        started = time.perf_counter()
        rows = make_records(args.records)
        out["make_records_s"] = round(time.perf_counter() - started, 2)
        fill(store, rows)
        started = time.perf_counter()
        with store.writer() as con:
            head = L.append_records(con, store.root, [])
        out["first_append_s"] = round(time.perf_counter() - started, 2)
        assert head.size == args.records

        entries = [r[0].encode() for r in store.sql(
            "SELECT entry FROM audit_log_entries ORDER BY position").rows]
        started = time.perf_counter()
        for entry in entries:
            hashlib.sha256(b"\x00" + entry).digest()
        out["floor_sha256_leaves_s"] = round(time.perf_counter() - started, 2)
        verify = []
        for _ in range(args.runs):
            started = time.perf_counter()
            checkpoint = Checkpoint.parse(open_note(head.checkpoint,
                                                    Verifier.parse(head.verifier_key)))
            appender = M.TileAppender(0)
            appender.append(M.leaf_hash(entry) for entry in entries)
            tiles = {(level, index): data
                     for (level, index, _), data in appender.written.items()}

            def read(level: int, index: int, width: int, tiles: dict = tiles) -> bytes:
                return tiles[(level, index)][:width * 32]

            tree = M.TiledTree(len(entries), read)
            assert tree.root() == checkpoint.root and checkpoint.size == len(entries)
            verify.append(time.perf_counter() - started)
        out["verify_offline_s"] = round(statistics.median(verify), 2)

        ids = [r[0] for r in random.Random(3).sample(rows, 200)]
        proof_times = []
        with store.reader(views=False) as con:
            for record_id in ids:
                started = time.perf_counter()
                proof = L.inclusion_proofs(con, [record_id])[record_id]
                proof_times.append(time.perf_counter() - started)
                entry = next(r[1] for r in rows if r[0] == record_id) if len(
                    proof_times) <= 3 else None
                if entry is not None:
                    assert M.verify_inclusion(proof.index, proof.size,
                                              M.leaf_hash(entry.encode()),
                                              proof.proof, head.root)
        out["inclusion_proof_ms"] = round(statistics.median(proof_times) * 1000, 2)

        more = make_records(args.runs, start=args.records)
        one, floor = [], []
        for row in more:
            started = time.perf_counter()
            fill(store, [row])  # the floor: the record's own commit, without the log
            floor.append(time.perf_counter() - started)
            started = time.perf_counter()
            with store.writer() as con:
                L.append_records(con, store.root, [row[0]])
            one.append(time.perf_counter() - started)
        out["append_one_s"] = round(statistics.median(one), 3)
        out["floor_insert_one_s"] = round(statistics.median(floor), 3)
        out["catalog_bytes"] = (store.root / "catalog.duckdb").stat().st_size
    (REPO / "bench" / "out").mkdir(exist_ok=True)
    (REPO / "bench" / "out" / "ledger-log.json").write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
