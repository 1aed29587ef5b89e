"""The records of lineage-audit/1 (docs/audit-spec.md): ids, validation and builders.

A record is a JSON object with `"spec": "lineage-audit/1"` and a `kind`: `attestation` (one
audit unit replayed), `claim` (an auditor means to cover a step range, until it expires)
or `checkpoint` (an intermediate checkpoint offered for a relay). Its id is the BLAKE3 of
its canonical JSON without the `signature` key, so a signature never changes an id. Its
identity is the id it has unsigned and naming no key (`auditor.public_key` null): signing
writes the key into the record, which changes its id, never its identity, so the versions
of one record (as made, and as each key signed it) count as one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from lineage.errors import InputError
from lineage.runs.chain import blake3_hex, canonical_json

SPEC = "lineage-audit/1"
KINDS = ("attestation", "claim", "checkpoint")
UNITS = ("step-replay", "initial-state")
START_KINDS = ("published", "intermediate", "initial")
RESULTS = ("match", "mismatch")
SIGNATURE_ARMOR = "-----BEGIN SSH SIGNATURE-----"

_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?Z$")
_HASH = re.compile(r"^blake3:[0-9a-f]{64}$")
_COMMON = ("spec", "kind", "run", "chain_head", "auditor", "created_at")
FIELDS: dict[str, tuple[str, ...]] = {
    "attestation": (*_COMMON, "step", "unit", "start", "state_hash", "expected", "result",
                    "machine", "duration_s", "tools"),
    "claim": (*_COMMON, "first_step", "last_step", "expires_at"),
    "checkpoint": (*_COMMON, "step", "weights_digest", "state_digest", "loss", "state_hash",
                   "attestation", "location"),
}
MACHINE_FIELDS = {"backend": str, "device": str, "memory_bytes": int, "swapped": bool,
                  "os": str, "cpu": str}


class _Broken(Exception):
    """A rule the record breaks: (rule id, message)."""

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(rule, message)
        self.rule, self.message = rule, message


def record_id(record: Mapping[str, Any]) -> str:
    """`blake3:<hex>` of the canonical JSON of the record without its signature."""
    return blake3_hex(canonical_bytes(record))


def record_identity(record: Mapping[str, Any]) -> str:
    """`blake3:<hex>` of the canonical JSON of the record without its signature and with
    `auditor.public_key` null: what every version of the record, signed or not, shares."""
    body = {key: value for key, value in record.items() if key != "signature"}
    if isinstance(body.get("auditor"), Mapping):
        body["auditor"] = {**body["auditor"], "public_key": None}
    return blake3_hex(canonical_json(body).encode("utf-8"))


def canonical_bytes(record: Mapping[str, Any]) -> bytes:
    """What the id hashes and a signature signs: sorted keys, no spaces, UTF-8."""
    body = {key: value for key, value in record.items() if key != "signature"}
    return canonical_json(body).encode("utf-8")


def validate(record: Any, *, label: str = "record", where: str | None = None) -> dict[str, Any]:
    """The record, checked against lineage-audit/1; InputError naming the rule it breaks
    (`<rule>: <message>`), e.g. "kind: ..." or "attestation.result: ...". """
    try:
        _check(record)
    except _Broken as broken:
        raise InputError(label, f"{broken.rule}: {broken.message}", where=where) from None
    return dict(record)


def _check(record: Any) -> None:
    if not isinstance(record, dict):
        raise _Broken("object", f"a record is a JSON object, not {type(record).__name__}")
    if record.get("spec") != SPEC:
        raise _Broken("spec", f"spec must be {SPEC!r}, not {record.get('spec')!r}")
    kind = record.get("kind")
    if kind not in KINDS:
        raise _Broken("kind", f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    _check_keys(record, FIELDS[kind])
    _text(record, "run")
    _hash(record, "chain_head")
    _auditor(record.get("auditor"))
    _time(record, "created_at")
    if "signature" in record:
        signature = record["signature"]
        if not isinstance(signature, str) or not signature.lstrip().startswith(SIGNATURE_ARMOR):
            raise _Broken("signature", f"signature must be an armored SSHSIG ({SIGNATURE_ARMOR})")
    _CHECKS[kind](record)


def _check_keys(record: dict[str, Any], fields: tuple[str, ...]) -> None:
    missing = [key for key in fields if key not in record]
    if missing:
        raise _Broken("fields", f"a {record['kind']} needs {', '.join(missing)}")
    unknown = sorted(set(record) - set(fields) - {"signature"})
    if unknown:
        raise _Broken("fields", f"a {record['kind']} has no field {', '.join(unknown)}")


def _check_attestation(record: dict[str, Any]) -> None:
    step = _step(record, "step")
    unit = record["unit"]
    if unit not in UNITS:
        raise _Broken("attestation.unit", f"unit must be one of {', '.join(UNITS)}, not {unit!r}")
    _start(record["start"], step)
    if unit == "initial-state" and (step != 0 or record["start"]["kind"] != "initial"):
        raise _Broken("attestation.unit", "an initial-state unit is step 0 from the initial state")
    _hash(record, "state_hash")
    _hash(record, "expected")
    want = "match" if record["state_hash"] == record["expected"] else "mismatch"
    if record["result"] != want:
        raise _Broken("attestation.result", f"result must be {want!r}: state_hash "
                      f"{'equals' if want == 'match' else 'differs from'} expected")
    _machine(record["machine"])
    duration = record["duration_s"]
    if isinstance(duration, bool) or not isinstance(duration, int | float) \
            or not math.isfinite(duration) or duration < 0:
        raise _Broken("attestation.duration_s", "duration_s must be a finite number >= 0")
    tools = record["tools"]
    if not isinstance(tools, dict) or not all(isinstance(v, str) for v in tools.values()) \
            or not isinstance(tools.get("lineage"), str):
        raise _Broken("attestation.tools", "tools must map tool names to version strings, "
                      "lineage's included")


def _start(start: Any, step: int) -> None:
    if not isinstance(start, dict) or start.get("kind") not in START_KINDS:
        raise _Broken("attestation.start", "start must be an object whose kind is one of "
                      + ", ".join(START_KINDS))
    kind = start["kind"]
    keys = {"published": {"kind", "step", "weights_digest"},
            "intermediate": {"kind", "step", "checkpoint", "state_digest"},
            "initial": {"kind"}}[kind]
    if set(start) != keys:
        raise _Broken("attestation.start", f"a {kind} start has exactly the keys "
                      + ", ".join(sorted(keys)))
    if kind == "initial":
        if step != 0:
            raise _Broken("attestation.start", "only step 0 starts from the initial state")
        return
    if start["step"] != step - 1 or isinstance(start["step"], bool) or step == 0:
        raise _Broken("attestation.start", f"a replay of step {step} starts from the state "
                      f"after step {step - 1}, not {start['step']!r}")
    for key in keys - {"kind", "step"}:
        _hash(start, key, rule="attestation.start")


def _machine(machine: Any) -> None:
    if not isinstance(machine, dict):
        raise _Broken("attestation.machine", "machine must be an object")
    for key, kind in MACHINE_FIELDS.items():
        value = machine.get(key)
        if key == "swapped" and value is None:
            continue  # unknown: no swap counter could be read on the replaying machine
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise _Broken("attestation.machine", f"machine.{key} must be a {kind.__name__}"
                          + (" or null" if key == "swapped" else ""))


def _check_claim(record: dict[str, Any]) -> None:
    first, last = _step(record, "first_step"), _step(record, "last_step")
    if last < first:
        raise _Broken("claim.steps", f"last_step {last} is before first_step {first}")
    if _time(record, "expires_at") <= _time(record, "created_at"):
        raise _Broken("claim.expires_at", "a claim expires after it is made")


def _check_checkpoint(record: dict[str, Any]) -> None:
    _step(record, "step")
    for key in ("weights_digest", "state_digest", "state_hash", "attestation"):
        _hash(record, key, rule=f"checkpoint.{key}")
    loss = record["loss"]
    if loss is not None and (isinstance(loss, bool) or not isinstance(loss, int | float)
                             or not math.isfinite(loss)):
        raise _Broken("checkpoint.loss", "loss must be a finite number or null")
    _text(record, "location")


_CHECKS: dict[str, Callable[[dict[str, Any]], None]] = {
    "attestation": _check_attestation, "claim": _check_claim, "checkpoint": _check_checkpoint}


def _auditor(auditor: Any) -> None:
    if not isinstance(auditor, dict) or set(auditor) != {"name", "public_key", "payout"}:
        raise _Broken("auditor", "auditor must be an object with name, public_key, payout")
    if not isinstance(auditor["name"], str) or not auditor["name"].strip():
        raise _Broken("auditor", "auditor.name must be a non-empty string")
    key = auditor["public_key"]
    if key is not None and (not isinstance(key, str) or not key.startswith("ssh-ed25519 ")):
        raise _Broken("auditor", "auditor.public_key must be an ssh-ed25519 key line or null")
    if auditor["payout"] is not None and not isinstance(auditor["payout"], str):
        raise _Broken("auditor", "auditor.payout must be a string or null")


def _text(record: Mapping[str, Any], key: str) -> str:
    value = record[key]
    if not isinstance(value, str) or not value:
        raise _Broken(key, f"{key} must be a non-empty string")
    return value


def _hash(record: Mapping[str, Any], key: str, *, rule: str | None = None) -> None:
    value = record[key]
    if not isinstance(value, str) or not _HASH.match(value):
        raise _Broken(rule or key, f"{key} must be 'blake3:' and 64 lowercase hex digits")


def _step(record: Mapping[str, Any], key: str) -> int:
    value = record[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _Broken(key, f"{key} must be an integer >= 0")
    return value


def _time(record: Mapping[str, Any], key: str) -> datetime:
    value = record[key]
    if not isinstance(value, str) or not _TIME.match(value):
        raise _Broken(key, f"{key} must be a UTC time like 2026-12-01T15:04:05Z")
    try:
        return parse_time(value)
    except ValueError:
        raise _Broken(key, f"{key} is not a real date and time: {value!r}") from None


def parse_time(text: str) -> datetime:
    """A record's UTC time as a naive datetime (how the catalog keeps TIMESTAMPs)."""
    return datetime.fromisoformat(text.removesuffix("Z"))


def format_time(moment: datetime) -> str:
    """A time as records write it: UTC, seconds, `Z`."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def utc_now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None, microsecond=0)


# -- builders ------------------------------------------------------------------------


def auditor(name: str, *, public_key: str | None = None,
            payout: str | None = None) -> dict[str, Any]:
    return {"name": name, "public_key": public_key, "payout": payout}


def published_start(step: int, weights_digest: str) -> dict[str, Any]:
    """A replay that began from a checkpoint of the run (saved after `step`)."""
    return {"kind": "published", "step": step, "weights_digest": weights_digest}


def intermediate_start(step: int, checkpoint: str, state_digest: str) -> dict[str, Any]:
    """A replay that began from an auditor's intermediate checkpoint (its record id)."""
    return {"kind": "intermediate", "step": step, "checkpoint": checkpoint,
            "state_digest": state_digest}


def initial_start() -> dict[str, Any]:
    return {"kind": "initial"}


def attestation(*, run: str, chain_head: str, step: int, start: Mapping[str, Any],
                state_hash: str, expected: str, machine: Mapping[str, Any],
                duration_s: float, tools: Mapping[str, str], auditor: Mapping[str, Any],
                unit: str = "step-replay", created_at: str | None = None) -> dict[str, Any]:
    """An attestation record; `result` follows from state_hash and expected."""
    record = {"spec": SPEC, "kind": "attestation", "run": run, "chain_head": chain_head,
              "step": step, "unit": unit, "start": dict(start), "state_hash": state_hash,
              "expected": expected,
              "result": "match" if state_hash == expected else "mismatch",
              "machine": dict(machine), "duration_s": duration_s, "tools": dict(tools),
              "auditor": dict(auditor), "created_at": created_at or format_time(utc_now())}
    return validate(record)


def claim(*, run: str, chain_head: str, first_step: int, last_step: int,
          auditor: Mapping[str, Any], expires: timedelta = timedelta(days=7),
          created_at: str | None = None) -> dict[str, Any]:
    """A claim on steps first_step..last_step (inclusive) that expires after `expires`."""
    made = created_at or format_time(utc_now())
    record = {"spec": SPEC, "kind": "claim", "run": run, "chain_head": chain_head,
              "first_step": first_step, "last_step": last_step, "auditor": dict(auditor),
              "created_at": made, "expires_at": format_time(parse_time(made) + expires)}
    return validate(record)


def checkpoint_record(*, run: str, chain_head: str, step: int, weights_digest: str,
                      state_digest: str, loss: float | None, state_hash: str,
                      attestation: str, location: str, auditor: Mapping[str, Any],
                      created_at: str | None = None) -> dict[str, Any]:
    """An intermediate checkpoint (the state after `step`) offered for a relay;
    `attestation` is the id of the step-replay attestation that produced it."""
    record = {"spec": SPEC, "kind": "checkpoint", "run": run, "chain_head": chain_head,
              "step": step, "weights_digest": weights_digest, "state_digest": state_digest,
              "loss": loss, "state_hash": state_hash, "attestation": attestation,
              "location": location, "auditor": dict(auditor),
              "created_at": created_at or format_time(utc_now())}
    return validate(record)
