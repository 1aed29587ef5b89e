"""A real run to audit, and records about it made with lineage's own builders.

The demo's tiny NumPy trainer runs 32 steps over a real stream with a checkpoint every 4
steps (8 intervals); its log and checkpoints are ingested as `lineage ingest` does. The
helpers make attestations, intermediate checkpoints and claims about that run's chain.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from lineage.api import Store, init_store, open_store
from lineage.audit import records as R
from lineage.ingest import ingest_corpus
from lineage.ingest.checkpoint import ingest_checkpoint
from lineage.ingest.steps import ingest_steps
from lineage.runs.chain import blake3_hex
from lineage.stream.build import build_stream

from ..conftest import EXAMPLES, load_tiny_run

STEPS, EVERY, RUN = 32, 4, "tiny"
NOW = datetime(2026, 12, 1, 12, 0, 0)
MACHINE = {"backend": "cpu", "device": "x86_64", "memory_bytes": 8 << 30, "swapped": False,
           "os": "Linux", "cpu": "test cpu"}
TOOLS = {"lineage": "test", "python": "3.11"}


def build_run(root: Path) -> Path:
    """The store (returned) with run "tiny": 32 steps, checkpoints after steps 3, 7, ...
    The run's log and checkpoints are kept in `root / "run"`."""
    store = _store_with_stream(root / "store")
    load_tiny_run().train(store, "s", steps=STEPS, out=root / "run", checkpoint_every=EVERY)
    _ingest_run(store, root / "run", root / "run" / "steps.jsonl")
    return root / "store"


def rebuild_run(base: Path, to: Path, log: Path) -> Store:
    """A store like `base`'s whose run "tiny" was ingested from `log` (an edited copy of
    its step log), with the same checkpoints."""
    store = _store_with_stream(to)
    _ingest_run(store, base.parent / "run", log)
    return store


def _store_with_stream(root: Path) -> Store:
    init_store(root)
    store = open_store(root)
    ingest_corpus(store, [EXAMPLES / "corpus"], corpus="example", fingerprints=False)
    build_stream(store, corpus="example", name="s", seed=42, seq_len=64, batch=2)
    return store


def _ingest_run(store: Store, run: Path, log: Path) -> None:
    ingest_steps(store, log, run=RUN, stream="s", world_size=2)
    for step in range(EVERY - 1, STEPS, EVERY):
        ingest_checkpoint(store, run / f"checkpoint-{step}", run=RUN, step=step)


def copy_store(base: Path, to: Path) -> Store:
    shutil.copytree(base, to)
    return open_store(to)


@dataclass
class Chain:
    """The run's chain as the ledger sees it, and record makers for it."""

    head: str
    state: dict[int, str]  # step -> state_hash
    state_digest: dict[int, str]  # step -> the chain's state_digest
    weights: dict[int, str]  # checkpoint step -> weights_digest as ingested
    clock: int = 0

    @classmethod
    def of(cls, store: Store) -> Chain:
        rows = store.sql(f"SELECT step, state_hash, record FROM steps WHERE run = '{RUN}' "
                         "ORDER BY step").rows
        ckpts = store.sql(f"SELECT step, weights_digest FROM checkpoints WHERE run = '{RUN}'"
                          " AND matches_chain").rows
        return cls(head=rows[-1][1], state={s: h for s, h, _ in rows},
                   state_digest={s: json.loads(r)["state_digest"] for s, _, r in rows},
                   weights={s: d for s, d in ckpts})

    def time(self) -> str:
        """Distinct, increasing creation times, so records sort as they were made."""
        self.clock += 1
        return R.format_time(NOW - timedelta(days=1) + timedelta(seconds=self.clock))

    def replay(self, step: int, start: dict[str, Any], *, who: str = "ann",
               match: bool = True, swapped: bool = False, unit: str = "step-replay",
               duration: float = 1800.0) -> dict[str, Any]:
        got = self.state[step] if match else blake3_hex(f"wrong {step} {who}".encode())
        return R.attestation(run=RUN, chain_head=self.head, step=step, unit=unit, start=start,
                             state_hash=got, expected=self.state[step],
                             machine={**MACHINE, "swapped": swapped}, duration_s=duration,
                             tools=TOOLS, auditor=R.auditor(who), created_at=self.time())

    def published(self, step: int, **kw: Any) -> dict[str, Any]:
        """A replay of `step` from the published checkpoint saved after step - 1."""
        return self.replay(step, R.published_start(step - 1, self.weights[step - 1]), **kw)

    def initial(self, **kw: Any) -> dict[str, Any]:
        return self.replay(0, R.initial_start(), **kw)

    def offer(self, after: dict[str, Any], *, state_hash: str | None = None) -> dict[str, Any]:
        """The intermediate checkpoint the attestation `after` saved (the state after its
        step); `state_hash` other than the chain's makes a bad one."""
        step = after["step"]
        return R.checkpoint_record(
            run=RUN, chain_head=self.head, step=step,
            weights_digest=blake3_hex(f"weights {step}".encode()),
            state_digest=self.state_digest[step], loss=2.5,
            state_hash=state_hash or self.state[step], attestation=R.record_id(after),
            location=f"https://example.org/ckpt-{step}", auditor=after["auditor"],
            created_at=self.time())

    def relay(self, checkpoint: dict[str, Any], **kw: Any) -> dict[str, Any]:
        """A replay of the step after `checkpoint`, started from it."""
        start = R.intermediate_start(checkpoint["step"], R.record_id(checkpoint),
                                     checkpoint["state_digest"])
        return self.replay(checkpoint["step"] + 1, start, **kw)

    def claim(self, first: int, last: int, *, who: str, made: datetime,
              days: int = 7) -> dict[str, Any]:
        return R.claim(run=RUN, chain_head=self.head, first_step=first, last_step=last,
                       auditor=R.auditor(who), expires=timedelta(days=days),
                       created_at=R.format_time(made))


def ledger(chain: Chain) -> list[dict[str, Any]]:
    """One record set with every status, interval by interval (I = 4):

    0 (0-3) confirmed: 0 from the initial state, then 1, 2, 3 relayed by bob, cat, dan;
    1 (4-7) one step short: 4 published, 5 and 6 relayed, 7 never replayed;
    2 (8-11) disputed: ann matched step 8, bob's machine (no swap) did not;
    3 (12-15) mismatch: step 12 contradicts the chain; a relay from its checkpoint (13)
      matches, but its custody is broken;
    4 (16-19) provisional: 16 matched (a swapped mismatch there does not count); 17 has
      only a swapped mismatch: inconclusive;
    5 (20-23) claimed by eve, unexpired;
    6 (24-27) untouched: fay's claim expired;
    7 (28-31) provisional: 28 matched; 29 relayed from a checkpoint whose state hash is not
      the chain's, so 29 is not verified.
    """
    c = chain
    records: list[dict[str, Any]] = []

    def add(*made: dict[str, Any]) -> dict[str, Any]:
        records.extend(made)
        return made[-1]

    first = add(c.initial(who="ann"))
    for who in ("bob", "cat", "dan"):
        first = add(c.relay(add(c.offer(first)), who=who))
    s4 = add(c.published(4, who="ann"))
    s5 = add(c.relay(add(c.offer(s4)), who="bob"))
    add(c.relay(add(c.offer(s5)), who="bob"))
    add(c.published(8, who="ann"), c.published(8, who="bob", match=False))
    s12 = add(c.published(12, who="cat", match=False))
    add(c.relay(add(c.offer(s12)), who="cat"))
    add(c.published(16, who="dan"), c.published(16, who="eve", match=False, swapped=True))
    add(c.relay(add(c.offer(records[-2])), who="dan", match=False, swapped=True))
    add(c.claim(20, 23, who="eve", made=NOW - timedelta(days=1)))
    add(c.claim(24, 27, who="fay", made=NOW - timedelta(days=30)))
    s28 = add(c.published(28, who="gus"))
    add(c.relay(add(c.offer(s28, state_hash=blake3_hex(b"not the chain's"))), who="gus"))
    return records
