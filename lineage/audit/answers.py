"""The typed answers of the audit questions (lineage.answer explains the pattern):
`audit status`, `audit show`, `audit who`, `audit report`, and what `audit claim`,
`audit record`, `audit replay`, `audit export`, `audit import` and `audit sign` did."""

from __future__ import annotations

from typing import Any, ClassVar

from lineage.answer import Answer, optional


class AuditIntervals(Answer):
    """How many of the run's intervals have each status (docs/audit-spec.md, "Status")."""

    confirmed: int  # every step verified, with an unbroken chain of custody
    provisional: int  # some step attested
    claimed: int  # an unexpired claim overlaps it, nothing attested
    untouched: int
    disputed: int  # a step with both a match and a (counting) mismatch
    mismatch: int  # a step whose replays contradict the chain, none matching


class RelayLink(Answer):
    """One replay of a relay chain: it continued from the previous one's checkpoint."""

    step: int
    auditor: str
    attestation: str  # the attestation's record id


class AuditInterval(Answer):
    """One interval that is not untouched: its steps, status and verified steps."""

    interval: int  # k: steps k*I .. min((k+1)*I, steps) - 1
    first_step: int
    last_step: int
    status: str
    verified: int


class AuditChain(Answer):
    """The run's chain as `chain verify` finds it: custody runs through it."""

    verdict: str  # ok, broken, rule-violated or continuity-only
    first_broken_step: int | None
    reason: str | None  # why that step is broken
    attestations_past_break: int  # attestations on steps at or past the break: not counted
    # the run's declared reduction mode: deterministic, non-deterministic (no mismatch
    # counts: each is inconclusive) or None (undeclared)
    reduction: str | None


class AuditStatus(Answer):
    """`lineage audit status`: how far the run's audit has got, by the status rules."""

    ROWS: ClassVar[str | None] = "per_interval"

    run: str
    chain_head: str  # the state_hash every record of the run is about
    interval: int  # the run's declared checkpoint interval, in steps
    steps: int  # steps of the run (last step + 1)
    intervals: AuditIntervals
    steps_verified: int
    participants: int  # distinct auditors with a record of the run
    replay_hours: float  # the attestations' self-reported durations, summed
    longest_contiguous: int  # the longest run of consecutive verified steps
    relays: tuple[tuple[RelayLink, ...], ...]  # chains of replays that held custody
    # steps with only mismatches from machines that swapped (or could not tell)
    inconclusive: tuple[int, ...]
    chain: AuditChain
    next_unclaimed: tuple[int, ...]  # the first steps neither verified nor claimed
    per_interval: tuple[AuditInterval, ...]
    spec: str  # lineage-audit/1


class AuditStep(Answer):
    """`lineage audit show --step N`: one step's records and what they add up to."""

    run: str
    chain_head: str
    step: int
    expected: str | None  # the chain's state_hash after the step
    status: str  # verified, disputed, mismatch, inconclusive, unverified, past-break or unattested
    verified: bool
    claimed_by: tuple[str, ...]  # auditors with an unexpired claim on the step
    attestations: tuple[dict[str, Any], ...]  # the records, as lineage-audit/1 JSON
    checkpoints: tuple[dict[str, Any], ...]  # intermediate checkpoints after the step
    claims: tuple[dict[str, Any], ...]  # claims covering the step, expired ones included
    # the keys whose signatures each listed record carries (over all its versions), by id
    signed_by: dict[str, tuple[str, ...]]
    # each listed record's leaf in the store's own log and its inclusion proof at the log's
    # signed head (origin, index, size, leaf_hash, proof, root, checkpoint, verifier_key), by
    # id; a record held from before the log began has none until the next write
    log_inclusion: dict[str, dict[str, Any]]
    spec: str


class AuditParticipant(Answer):
    """One auditor of a run (by display name) and what they recorded."""

    name: str
    public_keys: tuple[str, ...]  # the ssh-ed25519 keys their records name
    attestations: int
    steps: int  # distinct steps they attested
    claims: int
    checkpoints: int
    replay_hours: float
    payouts: tuple[str, ...]  # the payout addresses their records name, as written


class AuditWho(Answer):
    """`lineage audit who`: the run's participants, alphabetically (a list, not a ranking)."""

    ROWS: ClassVar[str | None] = "participants"

    run: str
    participants: tuple[AuditParticipant, ...]
    spec: str


class RecordsAdded(Answer):
    """`lineage audit record`: by the ids given, the records added now, the records the
    ledger already held (as given, or as another version that adds nothing), and the
    versions that added a signature to a record it held (counted once all the same)."""

    added: tuple[str, ...]
    present: tuple[str, ...]
    newly_signed: tuple[str, ...]


class ClaimMade(Answer):
    """`lineage audit claim`: the claim record, its id, and whether it was new."""

    id: str
    added: bool
    record: dict[str, Any]


class RequirementCheck(Answer):
    """One minimum the run declares, against this machine."""

    requirement: str  # memory_bytes, unified_memory_bytes, initial_memory_bytes, disk_bytes
    required: int
    available: int
    ok: bool


class AuditRequirements(Answer):
    """`lineage audit requirements`: what replaying a step needs, and whether this
    machine has it."""

    ROWS: ClassVar[str | None] = "checks"

    run: str
    step: int
    declared: dict[str, int] | None  # the run's requirements (None: it declares none)
    source: str | None  # "header", or the file they were read from
    unified_memory: bool  # this machine's GPU shares its memory (Apple silicon)
    checks: tuple[RequirementCheck, ...]
    expected_seconds: int | None  # one step's replay, as declared
    expected_seconds_swapping: int | None  # the same on a machine that swaps (x3)
    ok: bool  # every minimum met


class ReplayOutcome(Answer):
    """`lineage audit replay`: the attestation, and the relay checkpoint record when the
    replay matched and its state was saved (both signed when a key was given)."""

    attestation: dict[str, Any]
    checkpoint: dict[str, Any] | None


class BundleWritten(Answer):
    """`lineage audit export`: the bundle written, its records and its digest."""

    bundle: str
    spec: str  # lineage-audit-bundle/2 (/1 when the store has no log to carry)
    run: str
    records: int
    digest: str  # the manifest's digest


class BundleImported(Answer):
    """`lineage audit import`: a bundle checked whole, and what it added."""

    bundle: str
    records: int
    signed: int  # records carrying a signature (each verified)
    added: tuple[str, ...]
    already_present: tuple[str, ...]
    newly_signed: tuple[str, ...]  # versions that signed a record the ledger held


class RecordsSigned(Answer):
    """`lineage audit sign`: the records signed, by id, and the key that signed them."""

    file: str
    output: str | None  # where they were written; None: printed
    ids: tuple[str, ...]
    public_key: str | None  # None for a file without records
    records: tuple[dict[str, Any], ...] | None = optional()  # only when printed


class AuditMachine(Answer):
    """One kind of machine the run's attestations were replayed on, as their auditors
    reported it (nothing checks it)."""

    backend: str  # cpu, cuda, mps, ...
    device: str
    memory_bytes: int
    replays: int  # attestations made on it (both units)
    replay_hours: float  # their durations, summed
    swapped: int  # replays during which the machine swapped, or could not tell


class AuditReport(Answer):
    """`lineage audit report`: the run's audit coverage, as the coverage page shows it."""

    run: str
    chain_head: str
    at: str  # the time claims were judged at (UTC): an unexpired claim marks its interval
    status: AuditStatus  # exactly `lineage audit status --json`
    participants: tuple[AuditParticipant, ...]  # alphabetically, as `audit who`
    machines: tuple[AuditMachine, ...]  # by backend, device and memory
    rule: str  # what a match proves, and what it does not
    lineage: str  # the version that wrote the page
    spec: str
