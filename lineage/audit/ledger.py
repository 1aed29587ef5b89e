"""The ledger: audit records kept in the catalog's `audit_records` table.

Records are immutable and named by their id, so adding a record twice is a no-op and
ledgers from many machines merge by union. A record is one record whatever its versions:
a version of a record the ledger holds (the same identity, records.record_identity) is
kept only when it brings a signature, and then reported as newly signed, not added.
Every record is checked before any is written: its form (records.validate), its run and
chain head, an attestation's `expected` against the chain, and its signature when it
carries one; then the new ones are written in one writer transaction, so a batch is
added whole or not at all.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lineage.audit.records import parse_time, record_id, validate
from lineage.audit.versions import Version, sort_out
from lineage.errors import InputError, UnknownObjectError, UsageError
from lineage.runs.chain import canonical_json
from lineage.store.base import BaseStore
from lineage.store.durable import guarded_write

if TYPE_CHECKING:
    from lineage.audit.log import LogCopy

SIGNATURE_MODULE = "lineage.audit.sshsig"
COLUMNS = ("id", "kind", "run", "chain_head", "step", "last_step", "auditor", "public_key",
           "signed", "result", "unit", "start_kind", "start_ref", "swapped", "duration_s",
           "expires_at", "created_at", "record")


@dataclass
class AddedRecords:
    """What add_records did, by the ids given: records new to the ledger; records it held
    (as given, or as another version that adds nothing); versions that brought a
    signature to a record it held."""

    added: list[str] = field(default_factory=list)
    present: list[str] = field(default_factory=list)
    newly_signed: list[str] = field(default_factory=list)


def run_head(store: BaseStore, run: str) -> str:
    """The run's chain head: the state_hash of its last step (the end record aside)."""
    with store.reader(views=False) as con:
        return chain_head_of(con, run)


def chain_head_of(con: Any, run: str) -> str:
    if not con.execute("SELECT 1 FROM runs WHERE name = ?", [run]).fetchall():
        known = [r[0] for r in con.execute("SELECT name FROM runs ORDER BY name").fetchall()]
        raise UnknownObjectError(f"no run named {run!r} (runs: {', '.join(known) or 'none yet'})")
    rows = con.execute("SELECT state_hash FROM steps WHERE run = ? ORDER BY step DESC LIMIT 1",
                       [run]).fetchall()
    if not rows or rows[0][0] is None:
        raise UsageError(f"run {run!r} has no recorded step with a state hash to audit")
    return str(rows[0][0])


@guarded_write
def add_records(store: BaseStore, records: Iterable[Mapping[str, Any]], *,
                source: str, log_copy: LogCopy | None = None) -> AddedRecords:
    """Check every record, then write the new ones in one transaction; `source` (a file
    or a label) and the record's 1-based place name any record that breaks a rule.

    What the write adds is appended to the store's own log, whose new head it signs; a
    bundle's `log_copy` is first checked against the copy of that log held (lineage.audit.
    log.keep_copy), in the same transaction."""
    checked = [validate(record, label=source, where=f"record {place}")
               for place, record in enumerate(records, start=1)]
    rows = [_row(record, _signed(record, source, place))
            for place, record in enumerate(checked, start=1)]
    with store.reader(views=False) as con:
        _check_runs(con, checked, source)
        _check_expected(con, checked, source)
    from lineage.audit.log import append_records, keep_copy

    with store.writer() as con:
        versions = [_version(row) for row in rows]
        held = _held(con, [v.id for v in versions])
        sorting = sort_out(versions, held, _sharing(con, [v.key for v in versions]))
        if log_copy is not None:
            keep_copy(con, source, log_copy)
        if sorting.fresh:
            _insert(con, [rows[i] for i in sorting.fresh])
        for i in sorting.to_sign:  # the same record (same id), now with its signature
            con.execute("UPDATE audit_records SET signed = true, record = ? "
                        "WHERE id = ? AND NOT signed", [versions[i].record, versions[i].id])
        append_records(con, store.root, [*sorting.added, *sorting.newly_signed])
    return AddedRecords(sorting.added, sorting.present, sorting.newly_signed)


def _signed(record: dict[str, Any], source: str, place: int) -> bool:
    """True for a valid signature, False for none; a bad one raises InputError "signature".

    Signatures are checked by `lineage.audit.sshsig.verify_record`; a lineage without that
    module refuses signed records rather than keeping them as unchecked."""
    if "signature" not in record:
        return False
    verify = _signature_verifier()
    if verify is None:
        raise InputError(source, "signature: a signed record needs lineage.audit.sshsig to "
                         "check its signature, and this lineage does not have it",
                         where=f"record {place}")
    try:
        return bool(verify(record))
    except InputError as exc:
        raise InputError(source, exc.rule, where=f"record {place}") from None


def _signature_verifier() -> Callable[[dict[str, Any]], bool] | None:
    try:
        module = importlib.import_module(SIGNATURE_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name != SIGNATURE_MODULE:
            raise
        return None
    verify: Callable[[dict[str, Any]], bool] = module.verify_record
    return verify


def _check_runs(con: Any, records: list[dict[str, Any]], source: str) -> None:
    heads: dict[str, str] = {}
    for place, record in enumerate(records, start=1):
        run = record["run"]
        if run not in heads:
            try:
                heads[run] = chain_head_of(con, run)
            except (UnknownObjectError, UsageError) as exc:
                raise InputError(source, f"run: {exc}", where=f"record {place}") from None
        if record["chain_head"] != heads[run]:
            raise InputError(source, f"chain-head: the record is about chain head "
                             f"{record['chain_head']}, but run {run!r} ends at {heads[run]}",
                             where=f"record {place}")


def _check_expected(con: Any, records: list[dict[str, Any]], source: str) -> None:
    """An attestation's `expected` is the chain's state_hash of its step, and every
    step a record names is a step of the run."""
    wanted = sorted({(r["run"], s) for r in records for s in _steps_named(r)})
    if not wanted:
        return
    import pyarrow as pa

    con.register("audit_wanted", pa.table({"run": [w[0] for w in wanted],
                                           "step": [w[1] for w in wanted]}))
    try:
        chain = {(run, step): state for run, step, state in con.execute(
            "SELECT w.run, w.step, s.state_hash FROM audit_wanted w JOIN steps s "
            "ON s.run = w.run AND s.step = w.step").fetchall()}
    finally:
        con.unregister("audit_wanted")
    for place, record in enumerate(records, start=1):
        for step in _steps_named(record):
            if (record["run"], step) not in chain:
                raise InputError(source, f"step: run {record['run']!r} has no step {step}",
                                 where=f"record {place}")
        if record["kind"] == "attestation" and \
                record["expected"] != chain[(record["run"], record["step"])]:
            raise InputError(source, f"expected: {record['expected']} is not the chain's "
                             f"state_hash of step {record['step']}", where=f"record {place}")


def _steps_named(record: dict[str, Any]) -> tuple[int, ...]:
    if record["kind"] == "claim":
        return (record["first_step"], record["last_step"])
    return (record["step"],)


def _row(record: dict[str, Any], signed: bool) -> tuple[Any, ...]:
    kind, start = record["kind"], record.get("start") or {}
    first = record["first_step"] if kind == "claim" else record["step"]
    last = record["last_step"] if kind == "claim" else record["step"]
    attested = kind == "attestation"
    return (record_id(record), kind, record["run"], record["chain_head"], first, last,
            record["auditor"]["name"], record["auditor"]["public_key"], signed,
            record.get("result"), record.get("unit"), start.get("kind"),
            start.get("checkpoint"), record["machine"]["swapped"] if attested else None,
            float(record["duration_s"]) if attested else None,
            parse_time(record["expires_at"]) if kind == "claim" else None,
            parse_time(record["created_at"]), canonical_json(record))


_KEY_COLUMNS = ("kind", "run", "step", "last_step", "auditor", "created_at")


def _version(row: tuple[Any, ...]) -> Version:
    at = {name: row[COLUMNS.index(name)] for name in ("id", "signed", "record", *_KEY_COLUMNS)}
    return Version(at["id"], at["signed"], tuple(at[name] for name in _KEY_COLUMNS),
                   at["record"])


def _held(con: Any, ids: list[str]) -> dict[str, bool]:
    """Which of `ids` the ledger holds, and whether each copy is signed."""
    if not ids:
        return {}
    import pyarrow as pa

    con.register("audit_incoming_ids", pa.table({"id": ids}))
    try:
        return {r[0]: bool(r[1]) for r in con.execute(
            "SELECT a.id, a.signed FROM audit_records a JOIN audit_incoming_ids i "
            "ON a.id = i.id").fetchall()}
    finally:
        con.unregister("audit_incoming_ids")


def _sharing(con: Any, keys: list[tuple[Any, ...]]) -> list[tuple[tuple[Any, ...], str]]:
    """(version key, record JSON) of the held records whose version key is among `keys`:
    the only ones a record of the batch could be another version of."""
    if not keys:
        return []
    import pyarrow as pa

    names = _KEY_COLUMNS
    types = _arrow_types()
    con.register("audit_incoming_keys", pa.table(
        {name: pa.array([key[i] for key in keys], type=types[name])
         for i, name in enumerate(names)}))
    try:
        rows = con.execute(
            f"SELECT {', '.join('a.' + n for n in names)}, a.record FROM audit_records a "
            f"SEMI JOIN audit_incoming_keys k ON "
            + " AND ".join(f"a.{n} = k.{n}" for n in names)).fetchall()
    finally:
        con.unregister("audit_incoming_keys")
    return [(tuple(row[:-1]), row[-1]) for row in rows]


def _insert(con: Any, rows: list[tuple[Any, ...]]) -> None:
    import pyarrow as pa

    columns = {name: [row[i] for row in rows] for i, name in enumerate(COLUMNS)}
    types = _arrow_types()
    table = pa.table({name: pa.array(values, type=types[name])
                      for name, values in columns.items()})
    con.register("audit_incoming", table)
    try:
        # OR IGNORE: a record another process added meanwhile is the same record (same id).
        con.execute(f"INSERT OR IGNORE INTO audit_records ({', '.join(COLUMNS)}) "
                    f"SELECT {', '.join(COLUMNS)} FROM audit_incoming")
    finally:
        con.unregister("audit_incoming")


def _arrow_types() -> dict[str, Any]:
    import pyarrow as pa

    return {"step": pa.int64(), "last_step": pa.int64(), "signed": pa.bool_(),
            "swapped": pa.bool_(), "duration_s": pa.float64(),
            "expires_at": pa.timestamp("us"), "created_at": pa.timestamp("us"),
            **{name: pa.string() for name in ("id", "kind", "run", "chain_head", "auditor",
                                               "public_key", "result", "unit", "start_kind",
                                               "start_ref", "record")}}


def iter_records(store: BaseStore, run: str, *, kind: str | None = None) -> list[dict[str, Any]]:
    """The run's records as JSON objects (signatures included), in (created_at, id) order."""
    with store.reader(views=False) as con:
        chain_head_of(con, run)
        sql = "SELECT record FROM audit_records WHERE run = ?"
        params: list[Any] = [run]
        if kind is not None:
            sql += " AND kind = ?"
            params.append(kind)
        rows = con.execute(sql + " ORDER BY created_at, id", params).fetchall()
    return [json.loads(row[0]) for row in rows]
