"""`lineage ingest steps`: a run's step log (docs/chain-spec.md), kept as logged.

The log is checked line by line first (ingest/step_log.py): order, canonical bytes, state
hashes and links, bounds. A bad log is refused naming the line and step, and nothing is
stored. The first log of a run creates it: a lineage chain's header must name the stream
and world size given. A foreign chain is bound to a stream only when one is named, and
then every record must carry batch digests, which `lineage chain verify` checks against
it. Each later log is a restart segment: its first record must link to the stored chain,
steps it shares with what is stored must be byte-identical, new steps are added; an end
record closes the run. Re-ingesting a log adds nothing and says so.

The checkpoint interval and the skip rule the audit follows are the header's. A foreign
chain may carry them in the header under lineage's keys (`checkpoint_every`, `skip_rule`),
or the person importing it declares them from the harness's own documentation
(`checkpoint_every=`, `skip_rule=`); either way they are stored with the run, and the
answer says where each came from.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lineage.api import Store
from lineage.corpora.manifest import NAME_RULE, is_valid_name
from lineage.errors import ConflictError, InputError, UsageError
from lineage.ingest.step_log import Record, StepLog, float_or_none, read_step_log
from lineage.runs.skip_rule import SkipRule
from lineage.store.durable import guarded_write
from lineage.stream.answers import Stream

_INSERT_ROWS = 8192  # steps a statement inserts: few statements, a bounded table each
_RUN_COLUMNS = ("name, stream, world_size, chain, algorithm, genesis, header, created_at, "
                "end_record, skip_rule, checkpoint_every")


@guarded_write
def ingest_steps(
    store: Store, path: str | Path, *, run: str, stream: str | None, world_size: int,
    checkpoint_every: int | None = None, skip_rule: SkipRule | None = None,
) -> dict[str, Any]:
    """Record the log at `path` as (a segment of) run `run`. `checkpoint_every` and
    `skip_rule` declare what a foreign chain's header does not say (a lineage chain's
    header says it, and a different value is refused)."""
    path = Path(path)
    if not is_valid_name(run):
        raise UsageError(f"--run {run!r}: {NAME_RULE}")
    log = read_step_log(path, starts_by=_next_step(store, run))
    log_hash = log.log_hash  # the bytes checked are the bytes recorded
    info = _bind_stream(store, log, stream, world_size)
    declared = _declared(log, checkpoint_every, skip_rule)
    with store.writer() as con:
        _add_run(con, run, log, info["name"] if info else None, world_size, declared)
        stored = dict(con.execute("SELECT step, record FROM steps WHERE run = ?",
                                  [run]).fetchall())
        new = _new_records(log, stored)
        end_row = con.execute("SELECT end_record FROM runs WHERE name = ?", [run]).fetchone()
        closes = _check_end(log, end_row[0] if end_row else None, stored, new)
        segment = None
        if new or closes or not _already_logged(con, run, log_hash):
            segment = _add_segment(con, run, path, log_hash, log.records, len(new))
            _insert_steps(con, run, segment, new)
            if closes:
                con.execute("UPDATE runs SET end_record = ? WHERE name = ?", [log.end_text, run])
    records = log.records
    return {"run": run, "status": "added" if new or closes else "unchanged",
            "segment": segment, "records": len(records), "new_steps": len(new),
            "log_hash": log_hash, "chain": log.header.get("chain"),
            "stream": info["name"] if info else None, "closed": log.end is not None or
            bool(end_row and end_row[0]),
            "first_step": records[0].step if records else None,
            "last_step": records[-1].step if records else None,
            "declared": {key: {"value": value, "from": source}
                         for key, (value, source) in declared.items()}}


Declared = dict[str, tuple[Any, str]]  # key -> (value, "header" or "import")


def _declared(log: StepLog, checkpoint_every: int | None,
              skip_rule: SkipRule | None) -> Declared:
    """The run's checkpoint interval and skip rule, with where each came from."""
    header, path = log.header, log.path
    given = {"checkpoint_every": checkpoint_every,
             "skip_rule": skip_rule.to_json() if skip_rule is not None else None}
    if log.full:
        in_header = {key: header.get(key) for key in given}
    else:
        in_header = _foreign_declarations(log)
    declared: Declared = {}
    for key, value in given.items():
        stated = in_header.get(key)
        if value is not None and stated is not None and value != stated:
            raise InputError(path, f"the header declares {key} {json.dumps(stated)}, not "
                             f"{json.dumps(value)} as given", where="line 1")
        if value is not None and stated is None and log.full:
            raise UsageError(f"{header['chain']} headers declare {key} themselves (this one: "
                             "none): the option is for foreign chains")
        if stated is not None:
            declared[key] = (stated, "header")
        elif value is not None:
            declared[key] = (value, "import")
    return declared


def _foreign_declarations(log: StepLog) -> dict[str, Any]:
    """A foreign header's `checkpoint_every` and `skip_rule`, when it carries them in
    lineage's form; InputError when it carries them in another."""
    header, path = log.header, log.path
    found: dict[str, Any] = {}
    every = header.get("checkpoint_every")
    if every is not None:
        if not isinstance(every, int) or isinstance(every, bool) or every < 1:
            raise InputError(path, "checkpoint_every must be an integer >= 1", where="line 1")
        found["checkpoint_every"] = every
    if header.get("skip_rule") is not None:
        try:
            found["skip_rule"] = SkipRule.from_json(header["skip_rule"]).to_json()
        except ValueError as exc:
            raise InputError(path, str(exc), where="line 1") from exc
    return found


def _bind_stream(store: Store, log: StepLog, stream: str | None,
                 world_size: int) -> Stream | None:
    header, path = log.header, log.path
    if header.get("world_size") != world_size:
        raise InputError(path, f"run header says world_size {header.get('world_size')}, "
                         f"not {world_size}", where="line 1")
    if stream is None:
        if log.full:
            raise UsageError(f"{header['chain']} logs are bound to their stream: give --stream")
        return None
    info = store.stream(stream)
    if not log.full:
        for record in log.records:
            digests = record.fields.get("batch_digests")
            if not isinstance(digests, list) or not all(isinstance(d, str) for d in digests):
                raise InputError(path, f"step {record.step} has no batch_digests: a foreign "
                                 "chain is bound to a stream only by batch digests checked "
                                 "against it (ingest it without --stream)",
                                 where=f"line {record.line}")
        return info
    if header.get("stream_spec_hash") != info["spec_hash"] or \
            header.get("manifest_hash") != info["manifest_hash"]:
        raise InputError(path, f"run header names another stream or corpus than "
                         f"{info['name']!r} ({info['spec_hash']})", where="line 1")
    return info


def _next_step(store: Store, run: str) -> int:
    """The step after the run's stored chain (0 for a new run); re-checked when storing."""
    with store.reader(views=False) as con:
        row = con.execute("SELECT max(step) FROM steps WHERE run = ?", [run]).fetchone()
    return 0 if row is None or row[0] is None else int(row[0]) + 1


def _add_run(con: Any, run: str, log: StepLog, stream: str | None, world_size: int,
             declared: Declared) -> None:
    existing = con.execute("SELECT stream, world_size, header, skip_rule, checkpoint_every "
                           "FROM runs WHERE name = ?", [run]).fetchone()
    header = log.header
    rule_value = declared.get("skip_rule", (None, ""))[0]
    rule = json.dumps(rule_value, sort_keys=True) if rule_value is not None else None
    every = declared.get("checkpoint_every", (None, ""))[0]
    if existing is None:
        con.execute(f"INSERT INTO runs ({_RUN_COLUMNS}) VALUES "
                    "(?, ?, ?, ?, ?, ?, ?, now()::TIMESTAMP, NULL, ?, ?)",
                    [run, stream, world_size, header.get("chain"), header.get("algorithm"),
                     header.get("genesis"), log.header_text, rule, every])
        return
    if existing[:3] != (stream, world_size, log.header_text):
        raise ConflictError(f"run {run!r} exists with another stream, world size or "
                            f"header; {log.path} belongs to a different run")
    for key, value, stored in (("skip_rule", rule, existing[3]),
                               ("checkpoint_every", every, existing[4])):
        if value is not None and value != stored:
            raise ConflictError(f"run {run!r} was recorded with {key} {stored}, not "
                                f"{value}: a restart segment cannot change it")


def _new_records(log: StepLog, stored: dict[int, str]) -> list[Record]:
    follows = max(stored, default=-1) + 1
    if log.records and log.records[0].step > follows:
        first = log.records[0]
        raise InputError(log.path, f"step {first.step}: the run's chain so far stops before "
                         f"step {follows} (a run starts at step 0, and its logs are ingested "
                         "in order)", where=f"line {first.line}")
    new = []
    for record in log.records:
        before = stored.get(record.step)
        if before is None:
            new.append(record)
        elif before != record.text:
            raise InputError(log.path, f"step {record.step} disagrees with the record an "
                             "earlier segment stored (restarts must reproduce overlapping "
                             "steps)", where=f"line {record.line}")
    if log.full and new and new[0] is log.records[0] and new[0].step > 0:
        link = stored.get(new[0].step - 1)  # a restart segment joins the stored chain here
        if link is not None and json.loads(link).get("state_hash") != \
                new[0].fields.get("prev_hash"):
            raise InputError(log.path, f"step {new[0].step}: prev_hash is not the stored "
                             f"step {new[0].step - 1}'s state_hash", where=f"line {new[0].line}")
    return new


def _check_end(log: StepLog, stored_end: str | None, stored: dict[int, str],
               new: list[Record]) -> bool:
    """Whether this log closes the run; refuses steps after a stored end."""
    if stored_end is not None:
        steps = json.loads(stored_end)["steps"]
        beyond = [r for r in new if r.step >= steps]
        if beyond:
            raise InputError(log.path, f"step {beyond[0].step}: the run was closed after "
                             f"{steps} steps", where=f"line {beyond[0].line}")
        if log.end_text is not None and log.end_text != stored_end:
            raise InputError(log.path, "the run was closed by another end record")
        return False
    if log.end is None:
        return False
    after = [s for s in stored if s >= log.end["steps"]]
    if after:
        raise InputError(log.path, f"the end record closes the run after {log.end['steps']} "
                         f"steps, but step {min(after)} is stored", where=f"line {log.end_line}")
    if not log.records:  # a log that only closes the run: it must follow the stored chain
        last = max(stored, default=-1)
        if log.end["steps"] != last + 1:
            raise InputError(log.path, f"cut: the end record says {log.end['steps']} steps, "
                             f"the stored chain stops after step {last}",
                             where=f"line {log.end_line}")
        if log.end["last_state_hash"] != (json.loads(stored[last]).get("state_hash")
                                          if stored else log.header.get("genesis")):
            raise InputError(log.path, f"the end record's last_state_hash is not the stored "
                             f"step {last}'s state_hash", where=f"line {log.end_line}")
    return True


def _already_logged(con: Any, run: str, log_hash: str) -> bool:
    row = con.execute("SELECT 1 FROM run_segments WHERE run = ? AND log_hash = ?",
                      [run, log_hash]).fetchone()
    return row is not None


def _add_segment(con: Any, run: str, path: Path, log_hash: str, records: list[Record],
                 new_steps: int) -> int:
    row = con.execute("SELECT coalesce(max(segment), -1) + 1 FROM run_segments WHERE run = ?",
                      [run]).fetchone()
    segment = int(row[0]) if row else 0
    steps = [r.step for r in records]
    con.execute("INSERT INTO run_segments VALUES (?, ?, ?, ?, ?, ?, ?, ?, now()::TIMESTAMP)",
                [run, segment, str(path.resolve()), log_hash, min(steps, default=-1),
                 max(steps, default=-1), len(records), new_steps])
    return segment


def _insert_steps(con: Any, run: str, segment: int, records: list[Record]) -> None:
    """The new steps, by INSERTs of an Arrow table of up to _INSERT_ROWS steps each: a
    statement per step took 1-3 ms, 87 s for an 80,957-step run on a busy machine."""
    import pyarrow as pa

    kinds = _step_types()
    names = [f"c{i}" for i in range(len(kinds))]
    for first in range(0, len(records), _INSERT_ROWS):
        rows = [[run, r.step, segment, *_columns(r.fields), r.text]
                for r in records[first:first + _INSERT_ROWS]]
        table = pa.table([pa.array(column, type=kind) for column, kind in
                          zip(zip(*rows, strict=True), kinds, strict=True)], names=names)
        con.register("lineage_new_steps", table)
        try:
            con.execute("INSERT INTO steps SELECT * FROM lineage_new_steps")
        finally:
            con.unregister("lineage_new_steps")


def _step_types() -> list[Any]:
    import pyarrow as pa

    text, number, flag = pa.string(), pa.float64(), pa.bool_()
    # run, step, segment, then _columns' eight, then the record as logged
    return [text, pa.int64(), pa.int64(), text, text, number, number, number, flag, flag,
            text, text]


def _columns(fields: dict[str, Any]) -> list[Any]:
    def text(key: str) -> str | None:
        value = fields.get(key)
        return value if isinstance(value, str) else None

    def flag(key: str) -> bool | None:
        value = fields.get(key)
        return value if isinstance(value, bool) else None

    return [text("state_hash"), text("prev_hash"), float_or_none(fields.get("loss")),
            float_or_none(fields.get("grad_norm")), float_or_none(fields.get("lr")),
            flag("clipped"), flag("skipped"), text("weights_digest")]
