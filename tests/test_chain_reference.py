"""The writer, ingest and verifier against tests/chain_reference.py, a plain second
implementation of docs/chain-spec.md, on random runs and random tampering."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lineage.api import Store, init_store, open_store
from lineage.errors import InputError
from lineage.ingest import ingest_corpus
from lineage.ingest.steps import ingest_steps
from lineage.runs.chain import ChainWriter
from lineage.runs.chain_verify import verify_chain
from lineage.runs.skip_rule import SkipRule, check_skips
from lineage.stream.build import build_stream

from . import chain_reference as ref
from .conftest import EXAMPLES

WORLD = 2
norms = st.one_of(st.floats(min_value=0, max_value=10, allow_nan=False),
                  st.sampled_from([float("nan"), float("inf")]))
step_inputs = st.lists(st.tuples(norms, st.booleans(), st.integers(0, 3),
                                 st.floats(-1, 1, width=32)), max_size=8)
rules = st.one_of(st.none(), st.builds(SkipRule, st.floats(0, 10, allow_nan=False),
                                       st.integers(0, 5)))


@pytest.fixture(scope="module")
def stream_store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    root = tmp_path_factory.mktemp("ref") / "store"
    init_store(root)
    store = open_store(root)
    ingest_corpus(store, [EXAMPLES / "shards" / "sonnets.jsonl.gz"], corpus="sonnets",
                  fingerprints=False)
    build_stream(store, corpus="sonnets", name="s", seed=11, seq_len=64, batch=4)
    return store


def both_logs(path: Path, stream: dict[str, Any], steps: list[Any], rule: SkipRule | None,
              every: int | None, close: bool) -> tuple[list[str], list[str]]:
    """The same run written by ChainWriter and by the reference."""
    config = {"lr": 0.5, "name": "ref-run", "layers": [1, 2]}
    writer = ChainWriter(path, config=config, stream=stream, world_size=WORLD, skip_rule=rule,
                         checkpoint_every=every)
    head = ref.header(config, stream, WORLD, rule.to_json() if rule else None, every)
    lines, prev, cursor = [ref.canonical(head)], head["genesis"], 0
    for step, (norm, skipped, jump, value) in enumerate(steps):
        weights = {"w": np.full((2, 3), value, np.float32), "b": np.arange(3, dtype=np.int64)}
        optimizer = {"w.m": weights["w"] * 2}
        gradients = {"w": weights["w"] * -1}
        digests = [f"blake3:{step:064x}", f"blake3:{step + 1:064x}"]
        skip = {"reason": "resume past damaged shard", "windows": jump} if jump else None
        fields = {"batch_digests": digests, "clipped": norm > 1, "grad_norm": norm,
                  "loss": 2.5, "lr": 0.5, "rng": {"counter": step, "seed": 7},
                  "skipped": skipped, **({"data_skip": skip} if skip else {})}
        writer.append(step, weights=weights, optimizer=optimizer, gradients=gradients,
                      data_skip=skip, **{k: v for k, v in fields.items() if k != "data_skip"})
        cursor += jump + int(stream["batch"])
        record = ref.step_record(step, prev, cursor, weights=weights, optimizer=optimizer,
                                 gradients=gradients, **fields)
        lines.append(ref.canonical(record))
        prev = record["state_hash"]
    if close:
        writer.close()
        lines.append(ref.canonical(ref.end_record(len(steps), prev)))
    return path.read_text(encoding="utf-8").splitlines(), lines


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=step_inputs, rule=rules, every=st.one_of(st.none(), st.integers(1, 100)),
       close=st.booleans())
def test_the_writer_writes_what_the_reference_writes(
        tmp_path_factory: pytest.TempPathFactory, steps: list[Any], rule: SkipRule | None,
        every: int | None, close: bool) -> None:
    stream = {"spec_hash": "blake3:" + "a" * 64, "manifest_hash": "blake3:" + "b" * 64,
              "batch": 4}
    path = tmp_path_factory.mktemp("w") / "steps.jsonl"
    written, expected = both_logs(path, stream, steps, rule, every, close)
    assert written == expected
    assert ref.first_bad_line(written, batch=4) is None
    if rule is not None:
        records = [json.loads(line) for line in written[1:len(steps) + 1]]
        must = ref.must_skip(records, rule.to_json())
        found = check_skips(rule, ((r["step"], r["grad_norm"], r["skipped"]) for r in records))
        assert {v["step"] for v in found} == \
            {s for s, r in enumerate(records) if must[s] != r["skipped"]}


def _tamper(lines: list[str], kind: str, at: int) -> list[str]:
    out = list(lines)
    i = 1 + at % (len(lines) - 1)
    record = json.loads(out[i])
    if kind == "swap" and i + 1 < len(out):
        out[i], out[i + 1] = out[i + 1], out[i]
    elif kind == "drop":
        del out[i]
    elif kind == "duplicate":
        out.insert(i, out[i])
    elif kind == "edit" and "step" in record:
        record["loss"] = -1.0
        out[i] = ref.canonical(record)
    elif kind == "rehash" and "step" in record:
        record["loss"] = -1.0
        record["state_hash"] = ref.step_hash(record)
        out[i] = ref.canonical(record)
    elif kind == "cut":  # keeps step 0 at least
        out = out[:max(i, 2)] + ([out[-1]] if "end" in json.loads(out[-1]) else [])
    return out


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.tuples(st.floats(0, 1), st.booleans(), st.integers(0, 2),
                                st.floats(-1, 1, width=32)), min_size=2, max_size=6),
       close=st.booleans(), kind=st.sampled_from(["swap", "drop", "duplicate", "edit",
                                                   "rehash", "cut", "none"]),
       at=st.integers(0, 50))
def test_ingest_and_verify_agree_with_the_reference(
        stream_store: Store, tmp_path_factory: pytest.TempPathFactory, steps: list[Any],
        close: bool, kind: str, at: int) -> None:
    stream = stream_store.stream("s")
    folder = tmp_path_factory.mktemp("t")
    written, _ = both_logs(folder / "honest.jsonl", stream, steps, None, None, close)
    tampered = _tamper(written, kind, at)
    log = folder / "tampered.jsonl"
    log.write_text("\n".join(tampered) + "\n", encoding="utf-8")
    bad = ref.first_bad_line(tampered, batch=int(stream["batch"]))
    run = folder.name.replace("_", "-")
    if bad is None:
        ingest_steps(stream_store, log, run=run, stream="s", world_size=WORLD)
        report = verify_chain(stream_store, run, batches=False)
        assert report["verdict"] == "ok" and report["closed"] == ("end" in tampered[-1])
        assert report["steps_checked"] == len(tampered) - 1 - report["closed"]
        return
    with pytest.raises(InputError) as caught:
        ingest_steps(stream_store, log, run=run, stream="s", world_size=WORLD)
    assert caught.value.where == f"line {bad}", (kind, caught.value)
