"""Reading a step log and refusing what breaks docs/chain-spec.md, line by line.

Every log: UTF-8, LF line ends (a CR is refused), one JSON object per line nested at most
MAX_DEPTH deep, steps integers in 0..MAX_INT, records in step order one step apart (a
restart segment may start at any step). A lineage-chain log also: every line canonical,
a valid header whose genesis commits to all of it, each state hash recomputed, each
prev_hash equal to the previous record's state hash, and at most one end record, last,
closing after the log's last step. Nothing here touches the store.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lineage.errors import InputError
from lineage.runs.chain import (
    CHAIN_SPEC,
    CHAIN_SPEC_V1,
    CHAIN_SPECS,
    MAX_DEPTH,
    MAX_INT,
    canonical_json,
    end_hash,
    expected_genesis,
    is_end_record,
    line_step_hash,
)
from lineage.runs.declared import declared_reduction
from lineage.runs.skip_rule import SkipRule

HEADER_KEYS_V2 = {"algorithm", "chain", "checkpoint_every", "config", "genesis",
                  "manifest_hash", "skip_rule", "stream_spec_hash", "world_size"}
END_KEYS = {"end", "last_state_hash", "state_hash", "steps"}


@dataclass(frozen=True)
class Record:
    line: int
    step: int
    text: str
    fields: dict[str, Any]


@dataclass
class StepLog:
    path: Path
    header_text: str
    header: dict[str, Any]
    records: list[Record] = field(default_factory=list)
    end_text: str | None = None
    end: dict[str, Any] | None = None
    end_line: int | None = None
    log_hash: str = ""  # blake3:<hex> of the very bytes that were checked

    @property
    def full(self) -> bool:
        """A lineage chain, checked in full (a foreign one: for continuity only)."""
        return self.header.get("chain") in CHAIN_SPECS


def read_step_log(path: Path, *, starts_by: int = 0) -> StepLog:
    """The log, checked; its first record may be no later than step `starts_by` (the step
    after the run's stored chain: 0 for a new run)."""
    import blake3

    from lineage.ingest.input_rules import read_regular

    try:
        data = read_regular(path)  # a FIFO or device is refused unopened
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, f"cannot read the step log ({exc})") from exc
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise InputError(path, "empty step log (the first line must be the run header)")
    header = parse_line(path, 1, lines[0])
    log = StepLog(path, lines[0], header, log_hash="blake3:" + blake3.blake3(data).hexdigest())
    check_header(log)
    for number, line in enumerate(lines[1:], start=2):
        if log.end is not None:
            raise InputError(path, "a line follows the end record (the chain was closed)",
                             where=f"line {number}")
        fields = parse_line(path, number, line, canonical=log.full)
        if log.full and is_end_record(fields):
            _add_end(log, number, line, fields)
        else:
            _add_step(log, number, line, fields, starts_by)
    return log


def parse_line(path: Path, number: int, text: str, *, canonical: bool = False) -> dict[str, Any]:
    where = f"line {number}"
    if "\r" in text:
        raise InputError(path, "CR in a line (CRLF line ends?): step logs end lines with LF "
                         "only, and the bytes are what is hashed", where=where)
    if depth_over(text, MAX_DEPTH):
        raise InputError(path, f"JSON nested deeper than {MAX_DEPTH} levels", where=where)
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise InputError(path, f"malformed JSON ({exc.args[0].split(':')[0]})",
                         where=where) from exc
    if not isinstance(value, dict):
        raise InputError(path, "expected a JSON object", where=where)
    if canonical and text != canonical_json(value):
        step = f"step {value['step']}: " if _is_int(value.get("step"), low=0) else ""
        raise InputError(path, f"{step}the line is not canonical JSON (sorted keys, no spaces, "
                         "shortest floats): its bytes are what is hashed", where=where)
    return value


def depth_over(text: str, limit: int) -> bool:
    """Whether brackets outside strings nest deeper than `limit` (checked before parsing,
    so a hostile line never reaches the recursive parser)."""
    if text.count("[") + text.count("{") <= limit:
        return False  # the common case: too few brackets to nest that deep
    depth, in_string, escaped = 0, False, False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return True
        elif char in "]}":
            depth -= 1
    return False


def check_header(log: StepLog) -> None:
    header, path = log.header, log.path
    for key in ("chain", "algorithm", "genesis"):
        if not isinstance(header.get(key), str):
            raise InputError(path, f"run header lacks `{key}`", where="line 1")
    if not _is_int(header.get("world_size"), low=1):
        raise InputError(path, f"world_size must be an integer in 1..{MAX_INT}", where="line 1")
    chain = header["chain"]
    if chain.startswith("lineage-chain/") and chain not in CHAIN_SPECS:
        raise InputError(path, f"unknown chain spec {chain!r} (known: "
                         f"{', '.join(CHAIN_SPECS)})", where="line 1")
    try:
        declared_reduction(header)
    except ValueError as exc:
        raise InputError(path, str(exc), where="line 1") from None
    if not log.full:
        return  # a foreign chain: checked for continuity only, with its own verdict
    if log.header_text != canonical_json(header):
        raise InputError(path, "the header is not canonical JSON", where="line 1")
    if header["algorithm"] != "blake3":
        raise InputError(path, f"{chain} is defined for blake3 only, not "
                         f"{header['algorithm']!r}", where="line 1")
    if chain == CHAIN_SPEC:
        _check_header_v2(path, header)
    if header["genesis"] != expected_genesis(header):
        raise InputError(path, "genesis does not match the header's fields (expected "
                         f"{expected_genesis(header)})", where="line 1")


def _check_header_v2(path: Path, header: dict[str, Any]) -> None:
    if set(header) != HEADER_KEYS_V2:
        raise InputError(path, f"a {CHAIN_SPEC} header has exactly the fields "
                         f"{', '.join(sorted(HEADER_KEYS_V2))}", where="line 1")
    every = header["checkpoint_every"]
    if every is not None and not _is_int(every, low=1):
        raise InputError(path, "checkpoint_every must be null or an integer >= 1",
                         where="line 1")
    if header["skip_rule"] is not None:
        try:
            SkipRule.from_json(header["skip_rule"])
        except ValueError as exc:
            raise InputError(path, str(exc), where="line 1") from exc


def _add_step(log: StepLog, number: int, text: str, fields: dict[str, Any],
              starts_by: int) -> None:
    where = f"line {number}"
    step = fields.get("step")
    if not _is_int(step, low=0):
        raise InputError(log.path, f"record has no integer `step` in 0..{MAX_INT}", where=where)
    assert isinstance(step, int)  # what _is_int checked
    if not log.records and step > starts_by:
        raise InputError(log.path, f"step {step}: the run's chain so far stops before step "
                         f"{starts_by} (a run starts at step 0, and its logs are ingested in "
                         "order)", where=where)
    if log.records:
        before = log.records[-1]
        if step == before.step:
            kind = "duplicate: step {} is recorded twice" if fields == before.fields else \
                "fork: step {} is recorded twice, differently"
            raise InputError(log.path, kind.format(step) + f" (lines {before.line} and "
                             f"{number})", where=where)
        if step != before.step + 1:
            raise InputError(log.path, f"out of step order: step {step} follows step "
                             f"{before.step} (each record is the step after the one before; "
                             f"step {before.step + 1} is not here)", where=where)
    if log.full:
        _check_links(log, where, step, text, fields)
    log.records.append(Record(number, step, text, fields))


def _check_links(log: StepLog, where: str, step: int, text: str,
                 fields: dict[str, Any]) -> None:
    if fields.get("state_hash") != line_step_hash(text, fields, spec=log.header["chain"]):
        raise InputError(log.path, f"step {step}: state_hash does not follow from the record "
                         "(the record was changed, or hashed differently)", where=where)
    if log.records:
        expected, what = log.records[-1].fields.get("state_hash"), f"step {step - 1}'s state_hash"
    elif step == 0:
        expected, what = log.header["genesis"], "the genesis"
    else:
        return  # a restart segment: its first link is checked against the stored chain
    if fields.get("prev_hash") != expected:
        raise InputError(log.path, f"step {step}: prev_hash is not {what}", where=where)


def _add_end(log: StepLog, number: int, text: str, fields: dict[str, Any]) -> None:
    where = f"line {number}"
    if log.header["chain"] == CHAIN_SPEC_V1:
        raise InputError(log.path, f"{CHAIN_SPEC_V1} has no end record", where=where)
    if set(fields) != END_KEYS or fields["end"] is not True or \
            not _is_int(fields["steps"], low=0):
        raise InputError(log.path, "an end record is exactly {\"end\": true, "
                         "\"last_state_hash\", \"state_hash\", \"steps\"}", where=where)
    if fields["state_hash"] != end_hash(fields):
        raise InputError(log.path, "the end record's state_hash does not follow from it",
                         where=where)
    if log.records:
        last = log.records[-1]
        if fields["steps"] != last.step + 1:
            raise InputError(log.path, f"cut: the end record says {fields['steps']} steps, "
                             f"the log stops after step {last.step}", where=where)
        if fields["last_state_hash"] != last.fields.get("state_hash"):
            raise InputError(log.path, f"the end record's last_state_hash is not step "
                             f"{last.step}'s state_hash", where=where)
    log.end_text, log.end, log.end_line = text, fields, number


def _is_int(value: Any, *, low: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= MAX_INT


def float_or_none(value: Any) -> float | None:
    """A metric for its DOUBLE column: finite numbers only (the record keeps the rest)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:
            return None
        return number if math.isfinite(number) else None
    return None
