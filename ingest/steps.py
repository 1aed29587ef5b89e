"""`lineage ingest steps`: a run's step log (docs/chain-spec.md), kept as logged.

The first log of a run creates it: its header must name the stream's spec hash and
manifest hash and the world size given, and (for lineage-chain/1) carry the genesis those
imply. Each later log is a restart segment: steps it shares with what is stored must be
byte-identical (a disagreement is reported and nothing is stored), new steps are added.
Records are stored byte for byte, without judging them: `lineage chain verify` does that,
naming the first broken step. Re-ingesting a log adds nothing and says so.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import blake3

from lineage.chain import CHAIN_SPEC, genesis_hash
from lineage.errors import ConflictError, InputError, UsageError
from lineage.manifest import NAME_RULE, is_valid_name
from lineage.store import Store


@dataclass(frozen=True)
class _Record:
    line: int
    step: int
    text: str
    fields: dict[str, Any]


def ingest_steps(
    store: Store, path: str | Path, *, run: str, stream: str, world_size: int
) -> dict[str, Any]:
    path = Path(path)
    if not is_valid_name(run):
        raise UsageError(f"--run {run!r}: {NAME_RULE}")
    header_text, header, records = _read_log(path)
    log_hash = "blake3:" + blake3.blake3(path.read_bytes()).hexdigest()
    info = store.stream(stream)
    _check_header(path, header, info, world_size)
    with store.writer() as con:
        existing = con.execute("SELECT stream, world_size, header FROM runs WHERE name = ?",
                               [run]).fetchone()
        if existing is None:
            con.execute("INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, now()::TIMESTAMP)",
                        [run, stream, world_size, header.get("chain"), header.get("algorithm"),
                         header.get("genesis"), header_text])
        elif existing != (stream, world_size, header_text):
            raise ConflictError(f"run {run!r} exists with another stream, world size or "
                                f"header; {path} belongs to a different run")
        stored = dict(con.execute("SELECT step, record FROM steps WHERE run = ?",
                                  [run]).fetchall())
        new = _new_records(path, records, stored)
        segment = None
        if new or not _already_logged(con, run, log_hash):
            segment = _add_segment(con, run, path, log_hash, records, len(new))
            for record in new:
                con.execute("INSERT INTO steps VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                            [run, record.step, segment, *_columns(record.fields), record.text])
    return {"run": run, "status": "added" if new else "unchanged", "segment": segment,
            "records": len(records), "new_steps": len(new), "log_hash": log_hash,
            "first_step": records[0].step if records else None,
            "last_step": records[-1].step if records else None}


def _read_log(path: Path) -> tuple[str, dict[str, Any], list[_Record]]:
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, f"cannot read the step log ({exc})") from exc
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise InputError(path, "empty step log (the first line must be the run header)")
    header = _parse(path, 1, lines[0])
    records = []
    seen: dict[int, _Record] = {}
    for number, text in enumerate(lines[1:], start=2):
        fields = _parse(path, number, text)
        step = fields.get("step")
        if not isinstance(step, int) or isinstance(step, bool) or step < 0:
            raise InputError(path, "record has no non-negative integer `step`",
                             where=f"line {number}")
        if step in seen:
            if seen[step].text != text:
                raise InputError(path, f"fork: step {step} is recorded twice, differently "
                                 f"(lines {seen[step].line} and {number})", where=f"line {number}")
            continue
        seen[step] = _Record(number, step, text, fields)
        records.append(seen[step])
    return lines[0], header, records


def _parse(path: Path, number: int, text: str) -> dict[str, Any]:
    try:
        value = json.loads(text.rstrip("\r"))
    except ValueError as exc:
        raise InputError(path, f"malformed JSON ({exc.args[0].split(':')[0]})",
                         where=f"line {number}") from exc
    if not isinstance(value, dict):
        raise InputError(path, "expected a JSON object", where=f"line {number}")
    return value


def _check_header(path: Path, header: dict[str, Any], info: dict[str, Any],
                  world_size: int) -> None:
    for key in ("chain", "algorithm", "genesis"):
        if not isinstance(header.get(key), str):
            raise InputError(path, f"run header lacks `{key}`", where="line 1")
    if header.get("world_size") != world_size:
        raise InputError(path, f"run header says world_size {header.get('world_size')}, "
                         f"not {world_size}", where="line 1")
    if header["chain"] != CHAIN_SPEC:
        return  # a foreign chain: checked for continuity only
    if header.get("stream_spec_hash") != info["spec_hash"] or \
            header.get("manifest_hash") != info["manifest_hash"]:
        raise InputError(path, f"run header names another stream or corpus than "
                         f"{info['name']!r} ({info['spec_hash']})", where="line 1")
    expected = genesis_hash(config=header.get("config", {}), stream_spec_hash=info["spec_hash"],
                            manifest_hash=info["manifest_hash"], world_size=world_size)
    if header["genesis"] != expected:
        raise InputError(path, "genesis does not match the header's configuration "
                         f"(expected {expected})", where="line 1")


def _new_records(path: Path, records: list[_Record], stored: dict[int, str]) -> list[_Record]:
    new = []
    for record in records:
        before = stored.get(record.step)
        if before is None:
            new.append(record)
        elif before != record.text:
            raise InputError(path, f"step {record.step} disagrees with the record an earlier "
                             "segment stored (restarts must reproduce overlapping steps)",
                             where=f"line {record.line}")
    return new


def _already_logged(con: Any, run: str, log_hash: str) -> bool:
    row = con.execute("SELECT 1 FROM run_segments WHERE run = ? AND log_hash = ?",
                      [run, log_hash]).fetchone()
    return row is not None


def _add_segment(con: Any, run: str, path: Path, log_hash: str, records: list[_Record],
                 new_steps: int) -> int:
    row = con.execute("SELECT coalesce(max(segment), -1) + 1 FROM run_segments WHERE run = ?",
                      [run]).fetchone()
    segment = int(row[0]) if row else 0
    steps = [r.step for r in records]
    con.execute("INSERT INTO run_segments VALUES (?, ?, ?, ?, ?, ?, ?, ?, now()::TIMESTAMP)",
                [run, segment, str(path.resolve()), log_hash, min(steps, default=-1),
                 max(steps, default=-1), len(records), new_steps])
    return segment


def _columns(fields: dict[str, Any]) -> list[Any]:
    def number(key: str) -> float | None:
        value = fields.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value) if math.isfinite(float(value)) else None
        return None

    def text(key: str) -> str | None:
        value = fields.get(key)
        return value if isinstance(value, str) else None

    def flag(key: str) -> bool | None:
        value = fields.get(key)
        return value if isinstance(value, bool) else None

    return [text("state_hash"), text("prev_hash"), number("loss"), number("grad_norm"),
            number("lr"), flag("clipped"), flag("skipped"), text("weights_digest")]
