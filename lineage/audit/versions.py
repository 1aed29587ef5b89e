"""Versions of one record in a ledger (docs/audit-spec.md, "Identity and versions").

Signing writes the key into `auditor.public_key`, so the same attestation arrives under a
new id each time someone signs it (or under the id of a key's version once unsigned). The
ledger keeps each version that adds a signature, since a version is what a signature and
a reference (`start.checkpoint`, `checkpoint.attestation`) name; everything that counts
reads one version per identity (records.record_identity):

- `audit_hidden(id)`: the versions not counted, every version but one per identity (the
  signed one with the lowest id, else the lowest id, whatever order they came in);
- `audit_refs(ref, id)`: where a reference does not name the counted version, the counted
  version it means: a hidden version's id, or a record's identity when no version of it
  is held under that id (a record signed after a relay named it unsigned; the status
  looks these up only for the relays whose references found nothing).

Versions are told apart only among rows that could be versions of one record: rows that
agree on kind, steps, auditor name and creation time (an ordinary ledger has none; a
GROUP BY finds them), and identities are computed in Python only for the records a
dangling reference could mean. An ordinary ledger costs a GROUP BY more than it did.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from lineage.audit.records import record_identity

HIDDEN = "audit_hidden"
REFS = "audit_refs"

# The rows that could be versions of one record: they agree on kind, steps, auditor name and
# creation time (an ordinary ledger has none). Among them, versions of one record are
# the rows whose canonical JSON is the same once the signature and auditor.public_key
# are taken out (a JSON merge patch, in DuckDB), which is their identity being the same:
# the column holds the canonical JSON the identity hashes. Each row with the counted
# version of its record: the signed one with the lowest id, else the lowest id.
def unsigned_body(column: str) -> str:
    """SQL for the canonical JSON in `column` without its signature and auditor.public_key:
    two records have the same one exactly when they have the same identity."""
    return (f"CAST(json_merge_patch({column}, "
            """'{"signature": null, "auditor": {"public_key": null}}') AS VARCHAR)""")


_SHARED = f"""
WITH shared AS (
    SELECT a.id, a.signed, {unsigned_body("a.record")} AS body
    FROM audit_records a
    JOIN (SELECT kind, step, last_step, auditor, created_at FROM audit_records
          WHERE run = $run GROUP BY ALL HAVING count(*) > 1) d
      ON a.kind = d.kind AND a.step = d.step AND a.last_step = d.last_step
         AND a.auditor = d.auditor AND a.created_at = d.created_at
    WHERE a.run = $run
)
SELECT id, first_value(id) OVER (PARTITION BY body ORDER BY signed DESC, id) FROM shared
"""


@dataclass
class Counted:
    """The run's versions as the readers count them, registered on a connection."""

    con: Any
    run: str
    hidden: set[str]
    refs: dict[str, str]
    missed: set[tuple[str, str, int]] = field(default_factory=set)  # looked up, not found

    def where(self, column: str = "id") -> str:
        """A SQL condition that holds for the versions that count (TRUE when every
        version counts, so an ordinary ledger pays nothing)."""
        return f"{column} NOT IN (SELECT id FROM {HIDDEN})" if self.hidden else "TRUE"

    def resolve(self, dangling: Iterable[tuple[str, str, int]]) -> bool:
        """Map references that name no held version, (ref, kind, step of the record
        meant), to the record whose identity they are; True when one was found."""
        found = False
        for ref, kind, step in set(dangling):
            if ref in self.refs or (ref, kind, step) in self.missed:
                continue
            match = _by_identity(self.con, self.run, ref, kind, step)
            if match is None:
                self.missed.add((ref, kind, step))
            else:
                self.refs[ref] = self.refs.get(match, match)
                found = True
        if found:
            self._register()
        return found

    def _register(self) -> None:
        import pyarrow as pa

        self.con.register(HIDDEN, pa.table({"id": pa.array(sorted(self.hidden), pa.string())}))
        self.con.register(REFS, pa.table({
            "ref": pa.array(list(self.refs), pa.string()),
            "id": pa.array(list(self.refs.values()), pa.string())}))


@contextmanager
def counted_versions(con: Any, run: str) -> Iterator[Counted]:
    """The run's hidden versions and references (`audit_hidden`, `audit_refs`),
    registered on `con` while in use."""
    hidden, refs = _versions(con, run)
    counted = Counted(con, run, hidden, refs)
    counted._register()
    try:
        yield counted
    finally:
        con.unregister(HIDDEN)
        con.unregister(REFS)


def _versions(con: Any, run: str) -> tuple[set[str], dict[str, str]]:
    """The versions not counted, and each one's counted version (see the docstring)."""
    refs = {id_: counted for id_, counted in con.execute(_SHARED, {"run": run}).fetchall()
            if id_ != counted}
    return set(refs), refs


def _by_identity(con: Any, run: str, identity: str, kind: str, step: int) -> str | None:
    """The id of a held version of the record of `kind` at `step` whose identity is
    `identity`, preferring a signed version."""
    rows = con.execute("SELECT id, signed, record FROM audit_records WHERE run = ? AND kind = ?"
                       " AND step = ? ORDER BY signed DESC, id", [run, kind, step]).fetchall()
    for id_, _, record in rows:
        if record_identity(json.loads(record)) == identity:
            return str(id_)
    return None


# -- adding: what a record of a batch is to the ledger ---------------------------------


class Version(NamedTuple):
    """A record as add_records is about to write it."""

    id: str
    signed: bool  # carries a signature that verified
    key: tuple[Any, ...]  # kind, run, steps, auditor name, creation time: all versions share it
    record: str  # its canonical JSON, signature included


@dataclass
class Sorting:
    """What each version of a batch is: ids by what they are to the ledger, and places
    in the batch of the rows to insert and of the rows that sign a held unsigned copy."""

    added: list[str] = field(default_factory=list)
    present: list[str] = field(default_factory=list)
    newly_signed: list[str] = field(default_factory=list)
    fresh: list[int] = field(default_factory=list)
    to_sign: list[int] = field(default_factory=list)


def sort_out(versions: list[Version], held: dict[str, bool],
             shared: list[tuple[tuple[Any, ...], str]]) -> Sorting:
    """Sort a batch out against the ledger: `held` maps the ids it holds to whether their
    copy is signed; `shared` is (key, JSON) of the held records whose key a version has.

    A version whose id is held (or came earlier in the batch) adds nothing, unless it is
    signed and that copy is not: then it signs it. A version of a record held under
    another id (same identity) is kept only when it is signed, by a key no held version
    has (one that had it would have its id). Anything else is a new record."""
    sorting = Sorting()
    keys_needing = _keys_needing(versions, shared)
    known = {record_identity(json.loads(record)) for key, record in shared}
    pending: dict[str, int] = {}  # id -> place in sorting.fresh
    for place, version in enumerate(versions):
        if version.id in held or version.id in pending:
            _again(sorting, versions, place, held, pending)
            continue
        identity = record_identity(json.loads(version.record)) \
            if version.key in keys_needing else None
        if identity is not None and identity in known and not version.signed:
            sorting.present.append(version.id)
            continue
        if identity is not None and identity in known:
            sorting.newly_signed.append(version.id)
        else:
            sorting.added.append(version.id)
            if identity is not None:
                known.add(identity)
        pending[version.id] = len(sorting.fresh)
        sorting.fresh.append(place)
    return sorting


def _keys_needing(versions: list[Version],
                  shared: list[tuple[tuple[Any, ...], str]]) -> set[tuple[Any, ...]]:
    """The keys of the batch another version has (held, or in the batch): only versions
    with such a key need their identity computed."""
    seen: set[tuple[Any, ...]] = set()
    twice = {key for key, _ in shared}
    for version in versions:
        if version.key in seen:
            twice.add(version.key)
        seen.add(version.key)
    return twice


def _again(sorting: Sorting, versions: list[Version], place: int, held: dict[str, bool],
           pending: dict[str, int]) -> None:
    """A version whose id is held or came earlier in the batch."""
    version = versions[place]
    if version.id in held:
        if version.signed and not held[version.id]:
            held[version.id] = True
            sorting.to_sign.append(place)
            sorting.newly_signed.append(version.id)
        else:
            sorting.present.append(version.id)
        return
    at = pending[version.id]
    if version.signed and not versions[sorting.fresh[at]].signed:
        sorting.fresh[at] = place  # the signed copy is the one written
    sorting.present.append(version.id)
