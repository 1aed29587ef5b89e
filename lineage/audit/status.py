"""The status rules of lineage-audit/1 (docs/audit-spec.md, "Status"), applied to a ledger.

DuckDB reduces the ledger to per-step counts (one scan of `audit_records`, joined with the
run's published checkpoints); NumPy turns them into verified steps and interval statuses.
Only the replays that start from an intermediate checkpoint (relays) are followed one by
one, in step order, since each needs the step before it to be verified already.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lineage.audit.answers import (
    AuditChain,
    AuditInterval,
    AuditIntervals,
    AuditParticipant,
    AuditStatus,
    AuditStep,
    AuditWho,
    RelayLink,
)
from lineage.audit.ledger import chain_head_of
from lineage.audit.records import SPEC, utc_now
from lineage.audit.versions import Counted, counted_versions
from lineage.errors import UnknownObjectError, UsageError
from lineage.runs.chain_verify import verify_chain
from lineage.runs.declared import declared_reduction
from lineage.store.base import BaseStore
from lineage.store.memo import remembered

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

STATUSES = ("confirmed", "provisional", "claimed", "untouched", "disputed", "mismatch")
NEXT_UNCLAIMED = 10
# Every step-replay attestation of the run, with whether its start is grounded: the
# initial state (step 0), or a published checkpoint of the run at step-1 that matches the
# chain and whose weights digest is the one the replay started from.
_GROUNDED = """
WITH att AS (
    SELECT a.id, a.step, a.result, a.swapped, a.start_kind, a.start_ref, a.auditor,
           a.result = 'match' AND (a.start_kind = 'initial' OR (a.start_kind = 'published'
               AND c.step IS NOT NULL)) AS grounded
    FROM audit_records a
    LEFT JOIN checkpoints c ON a.start_kind = 'published' AND c.run = a.run
        AND c.step = a.step - 1 AND c.matches_chain
        AND c.weights_digest = json_extract_string(a.record, '$.start.weights_digest')
    WHERE a.run = $run AND a.kind = 'attestation' AND a.unit = 'step-replay'
        AND {counted}
)
"""
_PER_STEP = _GROUNDED + """
SELECT step, count(*) FILTER (WHERE result = 'match') AS matches,
       count(*) FILTER (WHERE result = 'mismatch' AND swapped IS FALSE) AS mismatches,
       count(*) FILTER (WHERE result = 'mismatch' AND swapped IS NOT FALSE) AS swapped,
       count(*) FILTER (WHERE grounded) AS grounded
FROM att GROUP BY step
"""
# Matching replays from an intermediate checkpoint, with what their custody depends on:
# the checkpoint record (its step, state hash against the chain, state digest against the
# replay's start) and the attestation that produced it, each reference taken to the
# counted version of the record it names (lineage.audit.versions); the last four columns
# say which references found nothing.
_RELAYS = _GROUNDED + """
SELECT b.id, b.step, b.auditor,
       c.id IS NOT NULL AND c.step = b.step - 1
           AND json_extract_string(c.record, '$.state_hash') IS NOT DISTINCT FROM s.state_hash
           AND json_extract_string(c.record, '$.state_digest')
               = json_extract_string(r.record, '$.start.state_digest') AS checkpoint_ok,
       p.id, p.step, p.result = 'match', p.grounded, p.start_kind = 'intermediate', p.auditor,
       b.start_ref, c.id IS NULL, json_extract_string(c.record, '$.attestation'), p.id IS NULL
FROM att b
JOIN audit_records r ON r.id = b.id
LEFT JOIN audit_refs cr ON cr.ref = b.start_ref
LEFT JOIN audit_records c ON c.id = coalesce(cr.id, b.start_ref) AND c.kind = 'checkpoint'
    AND c.run = $run
LEFT JOIN steps s ON s.run = $run AND s.step = b.step - 1
LEFT JOIN audit_refs pr ON pr.ref = json_extract_string(c.record, '$.attestation')
LEFT JOIN att p ON p.id = coalesce(pr.id, json_extract_string(c.record, '$.attestation'))
WHERE b.start_kind = 'intermediate' AND b.result = 'match'
ORDER BY b.step, b.id
"""


@dataclass
class ChainVerdict:
    """The run's chain as `chain verify` finds it, in short, and what the ledger's
    records past its break add up to."""

    verdict: str
    first_broken_step: int | None
    reason: str | None
    counted_steps: int  # how many steps, from step 0, the chain vouches for
    reduction: str | None = None  # the run's declared reduction mode
    attestations_past_break: int = 0

    def answer(self) -> AuditChain:
        return AuditChain(verdict=self.verdict, first_broken_step=self.first_broken_step,
                          reason=self.reason,
                          attestations_past_break=self.attestations_past_break,
                          reduction=self.reduction)


@dataclass
class Coverage:
    """Per-step facts of a run's ledger, and the relay links that hold custody."""

    run: str
    chain_head: str
    interval: int
    steps: int
    matches: npt.NDArray[np.int64]
    mismatches: npt.NDArray[np.int64]  # counting ones: from machines that did not swap
    swapped: npt.NDArray[np.int64]  # mismatches from machines that swapped (or could not tell)
    verified: npt.NDArray[np.bool_]
    claimed: npt.NDArray[np.bool_]
    chain: ChainVerdict
    links: list[tuple[RelayLink, RelayLink]] = field(default_factory=list)
    participants: list[str] = field(default_factory=list)
    replay_seconds: float = 0.0


def coverage(store: BaseStore, run: str, *, now: datetime | None = None) -> Coverage:
    """Apply the status rules to the run's ledger, at time `now` (claims expire)."""
    import numpy as np

    with store.reader(views=False) as con, counted_versions(con, run) as counted:
        head = chain_head_of(con, run)
        interval, steps = _shape(con, run)
        counts = {name: np.zeros(steps, np.int64)
                  for name in ("matches", "mismatches", "swapped", "grounded")}
        rows = con.execute(_counting(_PER_STEP, counted), {"run": run}).fetchnumpy()
        at = np.asarray(rows["step"], dtype=np.int64)
        inside = at < steps  # records are checked against the chain; this is belt and braces
        for name, target in counts.items():
            target[at[inside]] = np.asarray(rows[name])[inside]
        chain = _chain_verdict(store, run)
        chain.reduction = _reduction(con, run)
        if chain.reduction == "non-deterministic":  # a mismatch proves nothing
            counts["swapped"] += counts["mismatches"]
            counts["mismatches"][:] = 0
        past_break = at >= chain.counted_steps
        chain.attestations_past_break = int(sum(
            np.asarray(rows[name])[past_break].sum() for name in counts if name != "grounded"))
        for target in counts.values():  # past a break the chain vouches for nothing
            target[chain.counted_steps:] = 0
        grounded = counts.pop("grounded")
        cov = Coverage(run, head, interval, steps, counts["matches"], counts["mismatches"],
                       counts["swapped"], verified=(grounded > 0) & (counts["mismatches"] == 0),
                       claimed=np.zeros(steps, bool), chain=chain)
        _follow_relays(cov, _relays(con, run, counted))
        _mark_claims(cov, con, now or utc_now(), counted)
        cov.participants = [r[0] for r in con.execute(
            "SELECT DISTINCT auditor FROM audit_records WHERE run = ? ORDER BY auditor",
            [run]).fetchall()]
        seconds = con.execute(f"SELECT coalesce(sum(duration_s), 0) FROM audit_records "
                              f"WHERE run = ? AND kind = 'attestation' AND {counted.where()}",
                              [run]).fetchall()
        cov.replay_seconds = float(seconds[0][0])
    return cov


def _chain_verdict(store: BaseStore, run: str) -> ChainVerdict:
    """The run's chain checked as `chain verify` checks it (links, batch digests, end
    record). Custody runs through the chain: an attestation on a step at or past the first
    broken one is about a state the chain no longer vouches for, so it counts for nothing.
    `counted_steps` is how many steps, from step 0, the chain vouches for."""
    # A server's fixed copy of the catalog keeps it: the verdict is a function of it.
    report = remembered(store, ("chain-verdict", run), lambda: verify_chain(store, run))
    broken = report["verdict"] == "broken"
    return ChainVerdict(verdict=report["verdict"],
                        first_broken_step=report["first_broken_step"],
                        reason=report["reason"],
                        counted_steps=report["steps_checked"] if broken else _NO_BREAK)


_NO_BREAK = 2**62  # beyond any step


def _reduction(con: Any, run: str) -> str | None:
    """The run's declared reduction mode (checked when its log was ingested)."""
    (header,), = con.execute("SELECT header FROM runs WHERE name = ?", [run]).fetchall()
    return declared_reduction(json.loads(header))


def _counting(sql: str, counted: Counted) -> str:
    return sql.replace("{counted}", counted.where("a.id"))


def _relays(con: Any, run: str, counted: Counted) -> list[tuple[Any, ...]]:
    """The relay rows. A reference that found nothing is looked up by identity (a record
    signed after a relay named it unsigned), and the rows are read again: a checkpoint
    found that way may name its attestation so too, hence at most three reads."""
    sql = _counting(_RELAYS, counted)
    for _ in range(3):
        rows = con.execute(sql, {"run": run}).fetchall()
        dangling = [(start_ref, "checkpoint", step - 1) if no_checkpoint else
                    (made_by, "attestation", step - 1)
                    for _, step, *_, start_ref, no_checkpoint, made_by, no_producer in rows
                    if no_checkpoint or (no_producer and made_by is not None)]
        if not dangling or not counted.resolve(dangling):
            break
    return [row[:-4] for row in rows]


def _shape(con: Any, run: str) -> tuple[int, int]:
    (every, last), = con.execute(
        "SELECT r.checkpoint_every, (SELECT max(step) FROM steps WHERE run = r.name) "
        "FROM runs r WHERE r.name = ?", [run]).fetchall()
    if not every:
        raise UsageError(f"run {run!r}: the run declares no checkpoint interval "
                         "(checkpoint_every in its chain header)")
    return int(every), int(last) + 1


def _follow_relays(cov: Coverage, rows: list[tuple[Any, ...]]) -> None:
    """Custody through intermediate checkpoints, in step order: a relay holds when its
    checkpoint is the chain's state after the previous step, the replay started from that
    checkpoint's state, and the attestation that produced it is a match that itself has
    custody, on a verified step."""
    custody: set[str] = set()
    for b_id, step, auditor, checkpoint_ok, p_id, p_step, p_match, p_grounded, \
            p_relay, p_auditor in rows:
        if step >= cov.chain.counted_steps:
            continue  # past the chain's break
        if not (checkpoint_ok and p_id is not None and p_match and p_step == step - 1):
            continue
        if not (p_grounded or (p_relay and p_id in custody)) or not cov.verified[p_step]:
            continue
        custody.add(b_id)
        cov.links.append((RelayLink(step=p_step, auditor=p_auditor, attestation=p_id),
                          RelayLink(step=step, auditor=auditor, attestation=b_id)))
        if step < cov.steps and cov.mismatches[step] == 0:
            cov.verified[step] = True


def _mark_claims(cov: Coverage, con: Any, now: datetime, counted: Counted) -> None:
    for first, last in con.execute(
            "SELECT step, last_step FROM audit_records WHERE run = ? AND kind = 'claim' "
            f"AND expires_at > ? AND created_at <= ? AND {counted.where()}",
            [cov.run, now, now]).fetchall():
        cov.claimed[first:last + 1] = True


# -- the answers ---------------------------------------------------------------------


def audit_status(store: BaseStore, run: str, *, now: datetime | None = None) -> AuditStatus:
    """The run's `lineage audit status` answer."""
    import numpy as np

    cov = coverage(store, run, now=now)
    statuses, verified_counts = interval_statuses(cov)
    counts = np.bincount(statuses, minlength=len(STATUSES))
    open_steps = np.flatnonzero(~cov.verified & ~cov.claimed)[:NEXT_UNCLAIMED]
    only_swapped = (cov.swapped > 0) & (cov.matches == 0) & (cov.mismatches == 0)
    return AuditStatus(
        run=run, chain_head=cov.chain_head, interval=cov.interval, steps=cov.steps,
        intervals=AuditIntervals(**{name: int(counts[i]) for i, name in enumerate(STATUSES)}),
        steps_verified=int(cov.verified.sum()),
        participants=len(cov.participants),
        replay_hours=round(cov.replay_seconds / 3600, 3),
        longest_contiguous=longest_true_run(cov.verified),
        relays=relay_chains(cov.links),
        inconclusive=tuple(int(s) for s in np.flatnonzero(only_swapped)),
        chain=cov.chain.answer(),
        next_unclaimed=tuple(int(s) for s in open_steps),
        per_interval=_touched_intervals(cov, statuses, verified_counts), spec=SPEC)


def _touched_intervals(cov: Coverage, statuses: npt.NDArray[np.intp],
                       verified_counts: npt.NDArray[np.int64]) -> tuple[AuditInterval, ...]:
    """The intervals that are not untouched, in order."""
    import numpy as np

    firsts = np.arange(0, cov.steps, cov.interval)
    return tuple(
        AuditInterval(interval=int(k), first_step=int(firsts[k]),
                      last_step=int(min(firsts[k] + cov.interval, cov.steps) - 1),
                      status=STATUSES[statuses[k]], verified=int(verified_counts[k]))
        for k in np.flatnonzero(statuses != STATUSES.index("untouched")))


def interval_statuses(cov: Coverage) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.int64]]:
    """Each interval's status (an index into STATUSES) and its count of verified steps."""
    import numpy as np

    firsts = np.arange(0, cov.steps, cov.interval)
    lengths = np.minimum(firsts + cov.interval, cov.steps) - firsts

    def any_in(mask: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
        return np.logical_or.reduceat(mask, firsts)

    verified = np.add.reduceat(cov.verified.astype(np.int64), firsts)
    attested = cov.matches + cov.mismatches + cov.swapped > 0
    # Later assignments win, so they go from the last rule that applies to the first.
    status = np.full(len(firsts), STATUSES.index("untouched"), np.intp)
    status[any_in(cov.claimed)] = STATUSES.index("claimed")
    status[any_in(attested)] = STATUSES.index("provisional")
    status[verified == lengths] = STATUSES.index("confirmed")
    status[any_in((cov.mismatches > 0) & (cov.matches > 0))] = STATUSES.index("disputed")
    status[any_in((cov.mismatches > 0) & (cov.matches == 0))] = STATUSES.index("mismatch")
    return status, verified


def longest_true_run(mask: npt.NDArray[np.bool_]) -> int:
    import numpy as np

    edges = np.diff(np.concatenate(([0], mask.astype(np.int8), [0])))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    return int((ends - starts).max()) if len(starts) else 0


def relay_chains(links: list[tuple[RelayLink, RelayLink]],
                 ) -> tuple[tuple[RelayLink, ...], ...]:
    """The relay links joined into chains: each a list of replays where every one continued
    from the intermediate checkpoint of the one before; a fork gives one chain per branch."""
    following: dict[str, list[RelayLink]] = {}
    continued: set[str] = set()
    for before, after in links:
        following.setdefault(before.attestation, []).append(after)
        continued.add(after.attestation)
    chains: list[tuple[RelayLink, ...]] = []
    heads = {before.attestation: before for before, _ in links
             if before.attestation not in continued}
    for head in sorted(heads.values(), key=lambda h: (h.step, h.attestation)):
        paths: list[tuple[RelayLink, ...]] = [(head,)]
        while paths:
            path = paths.pop()
            nexts = following.get(path[-1].attestation, [])
            if not nexts:
                chains.append(path)
            paths.extend((*path, after) for after in reversed(nexts))
    return tuple(chains)


def step_status(cov: Coverage, step: int) -> str:
    """One step's word: verified, disputed, mismatch, inconclusive (only mismatches from
    machines that swapped), unverified (matches without custody), past-break (the chain
    is broken at or before it: nothing counts) or unattested."""
    if step >= cov.chain.counted_steps:
        return "past-break"
    if cov.mismatches[step] and cov.matches[step]:
        return "disputed"
    if cov.mismatches[step]:
        return "mismatch"
    if cov.verified[step]:
        return "verified"
    if cov.matches[step]:
        return "unverified"
    return "inconclusive" if cov.swapped[step] else "unattested"


def step_records(store: BaseStore, run: str, step: int, *,
                 now: datetime | None = None) -> AuditStep:
    """The `lineage audit show --step N` answer: the step's records and its word."""
    from lineage.audit.log import inclusion_proofs

    moment = now or utc_now()
    cov = coverage(store, run, now=moment)
    if not 0 <= step < cov.steps:
        raise UnknownObjectError(f"run {run!r} has no step {step} (steps 0..{cov.steps - 1})")
    with store.reader(views=False) as con, counted_versions(con, run) as counted:
        expected = con.execute("SELECT state_hash FROM steps WHERE run = ? AND step = ?",
                               [run, step]).fetchall()
        rows = con.execute(
            "SELECT kind, record, kind = 'claim' AND expires_at > ? AND created_at <= ?, id "
            "FROM audit_records WHERE run = ? AND step <= ? AND last_step >= ? "
            f"AND {counted.where()} ORDER BY created_at, id", [moment, moment, run, step, step]
        ).fetchall()
        signers = con.execute(
            "SELECT coalesce(m.id, a.id), list(DISTINCT a.public_key ORDER BY a.public_key) "
            "FROM audit_records a LEFT JOIN audit_refs m ON m.ref = a.id WHERE a.run = ? "
            "AND a.step <= ? AND a.last_step >= ? AND a.signed GROUP BY ALL",
            [run, step, step]).fetchall()
        proofs = inclusion_proofs(con, [row[3] for row in rows])
    # The records stay JSON objects: the answer lists them as lineage-audit/1 writes them.
    by_kind: dict[str, list[dict[str, Any]]] = {"attestation": [], "checkpoint": [], "claim": []}
    for kind, record, _, _ in rows:
        by_kind[kind].append(json.loads(record))
    return AuditStep(
        run=run, chain_head=cov.chain_head, step=step,
        expected=expected[0][0] if expected else None,
        status=step_status(cov, step), verified=bool(cov.verified[step]),
        claimed_by=tuple(sorted({json.loads(r)["auditor"]["name"] for _, r, live, _ in rows
                                 if live})),
        attestations=tuple(by_kind["attestation"]), checkpoints=tuple(by_kind["checkpoint"]),
        claims=tuple(by_kind["claim"]),
        signed_by={record_id: tuple(keys) for record_id, keys in sorted(signers)},
        log_inclusion={record_id: proof.to_dict() for record_id, proof in sorted(proofs.items())},
        spec=SPEC)


def participants(store: BaseStore, run: str) -> AuditWho:
    """The `lineage audit who` answer: everyone with a record, alphabetically."""
    with store.reader(views=False) as con, counted_versions(con, run) as counted:
        chain_head_of(con, run)
        kept = counted.where()
        rows = con.execute(
            "SELECT auditor, list(DISTINCT public_key ORDER BY public_key) "
            "FILTER (WHERE public_key IS NOT NULL), "
            f"count(*) FILTER (WHERE kind = 'attestation' AND {kept}), "
            f"count(DISTINCT step) FILTER (WHERE kind = 'attestation' AND {kept}), "
            f"count(*) FILTER (WHERE kind = 'claim' AND {kept}), "
            f"count(*) FILTER (WHERE kind = 'checkpoint' AND {kept}), "
            f"coalesce(sum(duration_s) FILTER (WHERE {kept}), 0), "
            "list(DISTINCT json_extract_string(record, '$.auditor.payout') "
            "ORDER BY json_extract_string(record, '$.auditor.payout')) FILTER "
            "(WHERE json_extract_string(record, '$.auditor.payout') IS NOT NULL) "
            "FROM audit_records WHERE run = ? GROUP BY auditor ORDER BY auditor",
            [run]).fetchall()
    people = tuple(
        AuditParticipant(name=name, public_keys=tuple(keys or ()), attestations=attestations,
                         steps=steps, claims=claims, checkpoints=checkpoints,
                         replay_hours=round(float(seconds) / 3600, 3),
                         payouts=tuple(payouts or ()))
        for name, keys, attestations, steps, claims, checkpoints, seconds, payouts in rows)
    return AuditWho(run=run, participants=people, spec=SPEC)
