"""Regenerate the golden stream vectors from the plain reference implementation.

    .venv/bin/python tests/golden/generate.py

Run it only when the spec version changes; the vectors pin `lineage-stream/1`.
`schedules/` holds the batch-size schedule and rank rule vectors (docs/stream-spec.md §4),
their step and rank arithmetic computed here by plain loops; `occurrences/` an imported
order's occurrences and their `lineage-occurrences/2` digest (§5).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from stream_reference import (  # noqa: E402
    occurrences_digest,
    occurrences_digest_2,
    reference_imported,
    reference_stream,
)

from lineage.corpora.manifest import manifest_hash_of_rows  # noqa: E402
from lineage.stream.spec import StreamSpec, parse_epochs  # noqa: E402

CASES = {
    "two-sources": {
        "documents": [{"doc_id": f"web/{i}", "source": "web", "n_tokens": 3 + i % 5}
                      for i in range(12)]
        + [{"doc_id": f"code/{i}", "source": "code", "n_tokens": 7 + i % 3} for i in range(4)],
        "parameters": {"seed": 42, "seq_len": 8, "batch": 2, "separator_tokens": 1},
    },
    "fractional-epochs-and-budget": {
        "documents": [{"doc_id": f"d{i:02d}", "source": "dclm", "n_tokens": 10 + i}
                      for i in range(10)]
        + [{"doc_id": f"p{i:02d}", "source": "proof-pile", "n_tokens": 4} for i in range(6)],
        "parameters": {"seed": 2026, "seq_len": 16, "batch": 1, "separator_tokens": 1,
                       "epochs": {"dclm": "0.89", "proof-pile": "2.5"}, "token_budget": 200},
    },
    "no-separator-unicode-ids": {
        "documents": [{"doc_id": name, "source": "poems", "n_tokens": n}
                      for name, n in [("ode", 11), ("élégie", 5), ("sonnet-018", 14),
                                      ("haïku", 3), ("Ωmega", 9), ("ballade", 7)]],
        "parameters": {"seed": 18446744073709551615, "seq_len": 5, "batch": 3,
                       "separator_tokens": 0, "epochs": {"poems": "2"}},
    },
}


def manifest_rows(documents: list[dict[str, object]]) -> list[dict[str, object]]:
    # The same rows tests/test_stream_build.py ingests as a ready manifest.
    return [{"doc_id": d["doc_id"], "source": d["source"], "n_bytes": max(int(d["n_tokens"]), 1),
             "n_tokens": d["n_tokens"], "content_hash": f"{i:064x}", "license": None}
            for i, d in enumerate(documents)]


def main() -> None:
    for name, case in CASES.items():
        docs, params = case["documents"], case["parameters"]
        result = reference_stream(docs, **params)
        sources = sorted({str(d["source"]) for d in docs})
        spec = StreamSpec(
            manifest_hash=manifest_hash_of_rows(manifest_rows(docs)),
            seed=params["seed"], seq_len=params["seq_len"], batch=params["batch"],
            separator_tokens=params.get("separator_tokens", 1),
            epochs=parse_epochs(params.get("epochs"), sources),
            token_budget=params.get("token_budget"),
        )
        out = {"spec": "lineage-stream/1", "documents": docs, "parameters": params,
               "manifest_hash": spec.manifest_hash, "spec_hash": spec.spec_hash,
               "canonical_parameters": spec.canonical_json(),
               "steps": result["steps"], "tokens": result["tokens"],
               "occurrences_digest": occurrences_digest(result["occurrences"]),
               "occurrences": result["occurrences"]}
        (HERE / f"{name}.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n",
                                          encoding="utf-8")


# A ramped stream over the two-sources corpus: 1 window a step, then 2 from step 2,
# then 8 from step 4; the same schedule written by tokens consumed (seq_len 7).
SCHEDULED = {
    "documents": CASES["two-sources"]["documents"],
    "parameters": {"seed": 42, "seq_len": 7, "separator_tokens": 1},
    "schedule": [[0, 1], [2, 2], [4, 8]],
    "schedule_tokens": "0:1,10:2,30:8",
    "rank_rules": [{"rule": "contiguous"}, {"rule": "strided"},
                   {"micro_batch": 2, "rule": "micro-batches"}],
}


def windows_per_step(schedule: list[list[int]], step: int) -> int:
    return [windows for first, windows in schedule if first <= step][-1]


def plain_steps(schedule: list[list[int]], windows: int) -> list[list[int]]:
    """[first, last] window of each whole step within `windows` windows, walking steps."""
    steps, start, step = [], 0, 0
    while start + windows_per_step(schedule, step) <= windows:
        steps.append([start, start + windows_per_step(schedule, step) - 1])
        start += windows_per_step(schedule, step)
        step += 1
    return steps


def plain_ranks(rule: dict[str, object], first: int, last: int, world: int) -> list[list[int]]:
    """Each rank's windows of one step, by the rule's definition."""
    windows = list(range(first, last + 1))
    if rule["rule"] == "strided":
        return [windows[r::world] for r in range(world)]
    if rule["rule"] == "micro-batches":
        size = int(rule["micro_batch"])  # type: ignore[call-overload]
        micro = [windows[i:i + size] for i in range(0, len(windows), size)]
        return [[w for m in micro[r::world] for w in m] for r in range(world)]
    per = len(windows) // world
    return [windows[r * per:(r + 1) * per] for r in range(world)]


def splits(rule: dict[str, object], step: list[int], world: int) -> bool:
    return (step[1] - step[0] + 1) % (world * int(rule.get("micro_batch", 1))) == 0  # type: ignore[call-overload]


def scheduled() -> None:
    from lineage.stream.schedule import BatchSchedule, RankRule

    case, params = SCHEDULED, SCHEDULED["parameters"]
    docs = case["documents"]
    whole = reference_stream(docs, batch=1, **params)  # every full window, in order
    steps = plain_steps(case["schedule"], whole["windows"])
    tokens = (steps[-1][1] + 1) * params["seq_len"]
    occurrences = [r for r in whole["occurrences"] if r["stream_start"] < tokens]
    manifest = manifest_hash_of_rows(manifest_rows(docs))
    sources = sorted({str(d["source"]) for d in docs})
    hashes = {}
    for rule in case["rank_rules"]:
        spec = StreamSpec(manifest_hash=manifest, seed=params["seed"],
                          seq_len=params["seq_len"], batch=case["schedule"][0][1],
                          separator_tokens=params["separator_tokens"],
                          epochs=parse_epochs(None, sources),
                          schedule=BatchSchedule.from_json(case["schedule"]),
                          rank_rule=RankRule.from_json(rule))
        hashes[RankRule.from_json(rule).to_text()] = {
            "canonical_parameters": spec.canonical_json(), "spec_hash": spec.spec_hash}
    ranks = [{"rank_rule": rule, "world_size": world, "step": step,
              "ranks": plain_ranks(rule, *steps[step], world)}
             for rule in case["rank_rules"] for step, world in ((4, 2), (4, 4), (2, 2))
             if splits(rule, steps[step], world)]
    out = {"spec": "lineage-stream/1", "documents": docs, "parameters": params,
           "schedule": case["schedule"], "schedule_tokens": case["schedule_tokens"],
           "manifest_hash": manifest, "by_rank_rule": hashes, "steps": len(steps),
           "windows": steps[-1][1] + 1, "tokens": tokens, "step_windows": steps,
           "ranks": ranks, "occurrences_digest": occurrences_digest(occurrences),
           "occurrences": occurrences}
    (HERE / "schedules").mkdir(exist_ok=True)
    (HERE / "schedules" / "ramped.json").write_text(
        json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


# An imported order over the two-sources corpus (window 4 tokens): two passes cut at
# window edges, then pieces read from inside documents (as Megatron's samples are), a
# padded window, and a document read again from an offset. lineage-occurrences/2 hashes
# each occurrence's doc_offset; /1 (given beside it) does not.
IMPORTED = {
    "documents": CASES["two-sources"]["documents"][:6] + [
        {"doc_id": "code/0", "source": "code", "n_tokens": 7},
        {"doc_id": "élan/π", "source": "code", "n_tokens": 5}],
    "seq_len": 4,
    # [window, slot, doc_id, doc_offset, n_tokens]
    "segments": [
        [0, 0, "web/0", 0, 3], [0, 3, "web/1", 0, 1],
        [1, 0, "web/1", 1, 3], [1, 3, "code/0", 0, 1],
        [2, 0, "code/0", 1, 4],
        [3, 0, "code/0", 5, 2], [3, 2, "élan/π", 0, 2],
        [4, 0, "élan/π", 2, 3], [4, 3, "web/2", 0, 1],
        [5, 0, "web/2", 1, 4],
        [6, 0, "code/0", 2, 4],
        [7, 0, "web/1", 2, 2], [7, 2, "élan/π", 1, 2],
        [8, 0, "web/3", 3, 3],
        [9, 1, "web/0", 0, 3],
    ],
}


def imported() -> None:
    case = IMPORTED
    rows = reference_imported(case["documents"], case["seq_len"], case["segments"])
    one = [{k: v for k, v in r.items() if k != "doc_offset"} for r in rows]
    out = {"spec": "lineage-occurrences/2", **case,
           "occurrences_digest": occurrences_digest_2(rows),
           "occurrences_digest_1": occurrences_digest(one), "occurrences": rows}
    (HERE / "occurrences").mkdir(exist_ok=True)
    (HERE / "occurrences" / "imported.json").write_text(
        json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
    scheduled()
    imported()
