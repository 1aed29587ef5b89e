"""The audit ledger at the issue's scale: `lineage audit status RUN --json` as a process over a
run of 80,957 steps (checkpoint_every 100: 810 intervals) and 100,000 attestations.

    .venv/bin/python bench/audit.py [--runs 5] [--workdir DIR]

The run is a valid lineage-chain/2 chain of 80,957 steps over a real stream, ingested by
`lineage ingest steps` (bench/runs.py's chain fixture: records written directly, since
status reads the state hashes, not the tensors), so the status checks the chain as `chain
verify` does, batch digests included; its published checkpoints are catalog rows whose
weights digests match the chain. The records are made with lineage's builders and added with
`add_records`, the path `audit record` and `audit import` take: 50 intervals confirmed
through relay chains (5,000 attestations and their intermediate checkpoints), 810
replays from the published checkpoints, and the rest spread over random steps by 1,000
auditors, with 0.5% mismatches and 0.5% mismatches from machines that swapped, plus 200
claims. Then `lineage audit report RUN --format html -o FILE` as a process over the same
ledger: the coverage page's time and size. Results go to bench/out/audit.json.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
STEPS, EVERY, ATTESTATIONS, RUN = 80_957, 100, 100_000, "open-1b"
WEIGHTS = "blake3:" + "1" * 64  # every record's weights digest in the chain fixture


def digest(*parts: object) -> str:
    from lineage.runs.chain import blake3_hex

    return blake3_hex(" ".join(map(str, parts)).encode())


def write_run(store: Any) -> dict[int, str]:
    """The published checkpoints' catalog rows; returns the chain's state hashes by step."""
    rows = store.sql(f"SELECT step, state_hash FROM steps WHERE run = '{RUN}' ORDER BY step").rows
    state = {int(step): str(hash_) for step, hash_ in rows}
    assert len(state) == STEPS, len(state)
    with store.writer() as con:
        con.execute("INSERT INTO checkpoints (run, step, path, files, structure_ok, "
                    "weights_digest, chain_weights_digest, matches_chain, verdicts, created_at) "
                    f"SELECT '{RUN}', step, 'ckpt-' || step, '[]', true, ?, ?, true, '{{}}', "
                    f"TIMESTAMP '2026-12-01' FROM range({EVERY - 1}, {STEPS}, {EVERY}) t(step)",
                    [WEIGHTS, WEIGHTS])
    return state


def make_records(state: dict[int, str]) -> list[dict[str, Any]]:
    from lineage.audit import records as R

    rng = random.Random(7)
    head = state[STEPS - 1]
    people = [R.auditor(f"auditor-{i:04d}") for i in range(1000)]
    clock = iter(range(10**9))

    def when() -> str:
        return R.format_time(datetime(2026, 11, 1) + timedelta(seconds=next(clock)))

    def replay(step: int, start: dict[str, Any], who: dict[str, Any],
               got: str | None = None, swapped: bool = False) -> dict[str, Any]:
        return R.attestation(
            run=RUN, chain_head=head, step=step, start=start, state_hash=got or state[step],
            expected=state[step], machine={"backend": "cuda", "device": "H100",
                                           "memory_bytes": 80 << 30, "swapped": swapped,
                                           "os": "Linux", "cpu": "x86_64"},
            duration_s=rng.uniform(1800, 7200), tools={"lineage": "bench"}, auditor=who,
            created_at=when())

    def published(step: int, who: dict[str, Any], **kw: Any) -> dict[str, Any]:
        return replay(step, R.published_start(step - 1, WEIGHTS), who, **kw)

    records: list[dict[str, Any]] = []
    for interval in range(50):  # confirmed through relays
        first = interval * EVERY
        who = rng.choice(people)
        att = replay(0, R.initial_start(), who) if first == 0 else published(first, who)
        records.append(att)
        for step in range(first + 1, first + EVERY):
            ckpt = R.checkpoint_record(
                run=RUN, chain_head=head, step=step - 1, weights_digest=digest("w", step),
                state_digest=digest("sd", step), loss=2.0, state_hash=state[step - 1],
                attestation=R.record_id(att), location="s3://bucket", auditor=who,
                created_at=when())
            who = rng.choice(people)
            att = replay(step, R.intermediate_start(step - 1, R.record_id(ckpt),
                                                    digest("sd", step)), who)
            records += [ckpt, att]
    for first in range(50 * EVERY, STEPS, EVERY):  # one replay from each published checkpoint
        records.append(published(first, rng.choice(people)))
    attested = sum(r["kind"] == "attestation" for r in records)
    for _ in range(ATTESTATIONS - attested):
        step = rng.randrange(50 * EVERY + 1, STEPS)
        roll = rng.random()
        wrong = digest("wrong", step, roll) if roll < 0.01 else None
        records.append(published(step, rng.choice(people), got=wrong, swapped=roll < 0.005))
    for _ in range(200):
        first = rng.randrange(STEPS - EVERY)
        records.append(R.claim(run=RUN, chain_head=head, first_step=first,
                               last_step=first + EVERY - 1, auditor=rng.choice(people),
                               expires=timedelta(days=3650), created_at=when()))
    return records


def build(workdir: Path) -> tuple[Path, dict[str, float]]:
    import lineage
    from lineage.audit.ledger import add_records

    root = workdir / "audit-store"
    if (root / "catalog.duckdb").exists():
        return root, {}
    sys.path.insert(0, str(REPO / "bench"))
    from runs import chain_fixture

    (workdir / "audit-chain").mkdir(exist_ok=True)
    chain_store, _ = chain_fixture(workdir / "audit-chain", STEPS, run=RUN)
    shutil.copytree(chain_store, root)
    store = lineage.open(root)
    started = time.perf_counter()
    state = write_run(store)
    made = time.perf_counter()
    records = make_records(state)
    built = time.perf_counter()
    add_records(store, records, source="bench")
    added = time.perf_counter()
    return root, {"write_run_s": round(made - started, 2),
                  "make_records_s": round(built - made, 2),
                  "add_records_s": round(added - built, 2), "records": len(records)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workdir", type=Path, default=REPO / "bench" / "work")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    root, setup = build(args.workdir)
    command = [sys.executable, "-m", "lineage.cli", "--store", str(root), "audit", "status",
               RUN, "--json"]
    times, answer = [], {}
    for _ in range(args.runs):
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        times.append(time.perf_counter() - started)
        answer = json.loads(done.stdout)
    report_times, page = [], args.workdir / "coverage.html"
    for _ in range(args.runs):
        started = time.perf_counter()
        subprocess.run([*command[:-3], "report", RUN, "--format", "html", "-o", str(page)],
                       capture_output=True, text=True, check=True)
        report_times.append(time.perf_counter() - started)
    result = {"setup": setup, "status_process_s": [round(t, 3) for t in times],
              "report_html_process_s": [round(t, 3) for t in report_times],
              "report_median_s": round(statistics.median(report_times), 3),
              "report_html_bytes": page.stat().st_size,
              "median_s": round(statistics.median(times), 3),
              "summary": {k: answer[k] for k in ("steps", "interval", "intervals",
                                                 "steps_verified", "participants",
                                                 "replay_hours", "longest_contiguous")},
              "relays": len(answer["relays"])}
    out = REPO / "bench" / "out"
    out.mkdir(exist_ok=True)
    (out / "audit.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
