"""The ledger as a transparency log (docs/audit-spec.md, "The ledger as a transparency log").

Every record the ledger accepts (a new record, or a held record's newly signed version)
is appended, as its canonical JSON, to the store's own log: an RFC 6962 Merkle tree kept
as tlog-tiles in the catalog (`audit_log_entries`; full tiles in `audit_log_tiles`, each
level's partial edge tile in `audit_log_edges`), whose head the
store signs as a C2SP checkpoint with its own key (`keys/ledger.key`, a signed-note signer
key made at the first append). The append and the signature happen in the transaction that
adds the records, so the log and the ledger never disagree.

The store also keeps a copy of the head and tiles of every other log it has imported a
bundle from: a later bundle from the same log must extend that copy (a consistency proof),
or it is refused, naming the first leaf where the two differ.
"""

from __future__ import annotations

import base64
import os
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lineage.audit.merkle import (
    HASH_BYTES,
    TILE_HEIGHT,
    TILE_WIDTH,
    TileAppender,
    TiledTree,
    leaf_hash,
    tile_path,
    verify_consistency,
    verify_inclusion,
)
from lineage.audit.note import Checkpoint, NoteError, Signer, Verifier, open_note
from lineage.errors import EXIT_NO, InputError, StoreError
from lineage.store.durable import publish, remove_quietly

KEY_FILE = Path("keys") / "ledger.key"
# Full tiles never change and are only ever added; the partial tile at each level's edge is
# rewritten by every append, in a table of a few rows: rewriting a row of the big table made
# each commit of a catalog with a million records 0.6 s slower (DuckDB rewrote its blobs).
TILES = ("(SELECT origin, level, idx, width, data FROM audit_log_tiles UNION ALL "
         "SELECT origin, level, idx, width, data FROM audit_log_edges)")
ORIGIN_PREFIX = "lineage.ledger/"  # the store's log is named <prefix><32 hex of its own>


class ForkedLedgerError(InputError):
    """A copy of a log that the one held is not a prefix of, nor it of the held one: the
    log's operator showed two parties two different histories (exit 1)."""

    exit_code = EXIT_NO


@dataclass(frozen=True)
class LogHead:
    """A log's signed head as the store holds it."""

    origin: str
    own: bool
    verifier_key: str
    size: int
    root: bytes
    checkpoint: str  # the signed note


@dataclass(frozen=True)
class InclusionProof:
    origin: str
    index: int
    size: int
    leaf_hash: bytes
    proof: tuple[bytes, ...]
    root: bytes
    checkpoint: str
    verifier_key: str

    def to_dict(self) -> dict[str, Any]:
        return {"origin": self.origin, "index": self.index, "size": self.size,
                "leaf_hash": self.leaf_hash.hex(), "proof": [p.hex() for p in self.proof],
                "root": self.root.hex(), "checkpoint": self.checkpoint,
                "verifier_key": self.verifier_key}


# -- reading what the catalog holds ---------------------------------------------------


def heads(con: Any) -> dict[str, LogHead]:
    return {row[0]: LogHead(row[0], bool(row[1]), row[2], int(row[3]), bytes.fromhex(row[4]),
                            row[5])
            for row in con.execute("SELECT origin, own, verifier_key, size, root, checkpoint "
                                   "FROM audit_logs ORDER BY origin").fetchall()}


def own_head(con: Any) -> LogHead | None:
    return next((head for head in heads(con).values() if head.own), None)


def stored_tree(con: Any, origin: str, size: int, *, near: Iterable[int] = ()) -> TiledTree:
    """The tree of the log `origin` at `size`, reading its tiles from the catalog: the edge
    tiles (a few rows) and, in one query by key, the full tiles that a proof for each leaf
    in `near` needs; any other full tile when it is asked for."""
    held = _read_edges(con, origin)
    if near:
        held.update(_read_full_tiles(con, origin, tiles_near(size, near) - held.keys()))

    def read(level: int, index: int, width: int) -> bytes:
        data = held.get((level, index))
        if data is None:
            data = _read_full_tiles(con, origin, {(level, index)}).get((level, index), b"")
        if len(data) < width * HASH_BYTES:
            raise StoreError(f"the catalog's log {origin}: {tile_path(level, index, width)} "
                             "is missing or short; run lineage store verify")
        return data[:width * HASH_BYTES]

    return TiledTree(size, read)


def tiles_near(size: int, leaves: Iterable[int]) -> set[tuple[int, int]]:
    """The tiles (level, index) that the root of a tree of `size` and the inclusion proofs
    of `leaves` read: at each level, the tile above each leaf and the last two tiles (the
    right edge's subtrees start in one of them)."""
    keys: set[tuple[int, int]] = set()
    leaves = list(leaves)
    level = 0
    while size >> (TILE_HEIGHT * level):
        last = size >> (TILE_HEIGHT * (level + 1))
        keys.update({(level, last), (level, max(last - 1, 0))})
        keys.update((level, leaf >> (TILE_HEIGHT * (level + 1))) for leaf in leaves)
        level += 1
    return keys


def tile_key(origin: str, level: int, index: int) -> str:
    """A full tile's key in `audit_log_tiles`: one value, so that DuckDB finds the tile
    through the primary key's index instead of scanning every tile's row."""
    return f"{origin}#{level}/{index}"


def _read_full_tiles(con: Any, origin: str,
                     keys: Iterable[tuple[int, int]]) -> dict[tuple[int, int], bytes]:
    wanted = [tile_key(origin, level, index) for level, index in sorted(keys)]
    if not wanted:
        return {}
    return {(level, index): bytes(data) for level, index, data in con.execute(
        "SELECT level, idx, data FROM audit_log_tiles WHERE tile_key IN "
        f"({', '.join('?' * len(wanted))})", wanted).fetchall()}


def _read_edges(con: Any, origin: str) -> dict[tuple[int, int], bytes]:
    return {(level, index): bytes(data) for level, index, data in con.execute(
        "SELECT level, idx, data FROM audit_log_edges WHERE origin = ?", [origin]).fetchall()}


def all_tiles(con: Any, origin: str) -> dict[str, bytes]:
    """Every tile of the log as held, by its tlog-tiles path."""
    return {tile_path(level, index, width): bytes(data)
            for level, index, width, data in con.execute(
                f"SELECT level, idx, width, data FROM {TILES} WHERE origin = ? "
                "ORDER BY level, idx", [origin]).fetchall()}


def inclusion_proofs(con: Any, ids: list[str]) -> dict[str, InclusionProof]:
    """For each record id, the inclusion of its current version in the store's own log at
    the head it holds (records held before the log existed, not yet appended, have none)."""
    if not ids:
        return {}
    # four short queries, each from one table: a join costs more than another query
    head = own_head(con)
    if head is None:
        return {}
    positions = latest_positions(con, head.origin, ids)
    tree = stored_tree(con, head.origin, head.size, near=positions.values())
    return {record_id: InclusionProof(
                head.origin, index, head.size, tree.subtree_hash(0, index),
                tuple(tree.inclusion_proof(index)), head.root, head.checkpoint,
                head.verifier_key)
            for record_id, index in positions.items()}


def latest_positions(con: Any, origin: str, ids: list[str]) -> dict[str, int]:
    """The leaf of each record's current version in the store's own log (`origin`), read
    from `audit_records.log_position` through its primary key."""
    if not ids:
        return {}
    marks = ", ".join("?" * len(ids))
    return {row[0]: int(row[1]) for row in con.execute(
        f"SELECT id, log_position FROM audit_records WHERE id IN ({marks}) "
        "AND log_position IS NOT NULL", ids).fetchall()}


# -- appending ---------------------------------------------------------------------------


def append_records(con: Any, root: Path, ids: list[str]) -> LogHead:
    """Append the current version of each record in `ids` (the ones a write added or newly
    signed) to the store's own log, in (created_at, id) order, and sign the new head;
    inside the caller's transaction.

    The first append also takes in every record held before the log existed."""
    head = own_head(con)
    if head is None:
        signer = _signer(root, create=True)
        head = LogHead(signer.name, True, str(signer.verifier), 0, b"", "")
        con.execute("INSERT INTO audit_logs VALUES (?, true, ?, 0, '', '')",
                    [head.origin, head.verifier_key])
        rows = con.execute("SELECT id, record FROM audit_records ORDER BY created_at, id"
                           ).fetchall()
    else:
        signer = _signer(root, create=False)
        if str(signer.verifier) != head.verifier_key:
            raise StoreError(f"{root / KEY_FILE} is not the key that signs this store's log "
                             f"({head.verifier_key}); put the right key back")
        rows = _records(con, ids)
    if not rows and head.checkpoint:
        return head
    tree = stored_tree(con, head.origin, head.size)
    appender = TileAppender.over(tree)
    appender.append(leaf_hash(record.encode()) for _, record in rows)
    positions = list(range(head.size, head.size + len(rows)))
    _insert(con, "audit_log_entries", {
        "origin": [head.origin] * len(rows), "position": positions,
        "record_id": [row[0] for row in rows], "entry": [row[1] for row in rows]})
    _set_positions(con, [row[0] for row in rows], positions)
    _write_tiles(con, head.origin, appender.written)
    size = appender.size
    new_root = stored_tree(con, head.origin, size).root()
    note = signer.sign(Checkpoint(head.origin, size, new_root).text)
    con.execute("UPDATE audit_logs SET size = ?, root = ?, checkpoint = ? WHERE origin = ?",
                [size, new_root.hex(), note, head.origin])
    return LogHead(head.origin, True, head.verifier_key, size, new_root, note)


def _records(con: Any, ids: list[str]) -> list[tuple[str, str]]:
    """(id, record) of the records in `ids`, in (created_at, id) order."""
    if not ids:
        return []
    import pyarrow as pa

    con.register("audit_log_ids", pa.table({"id": sorted(set(ids))}))
    try:
        return [(row[0], row[1]) for row in con.execute(
            "SELECT id, record FROM audit_records SEMI JOIN audit_log_ids USING (id) "
            "ORDER BY created_at, id").fetchall()]
    finally:
        con.unregister("audit_log_ids")


def _set_positions(con: Any, ids: list[str], positions: list[int]) -> None:
    if not ids:
        return
    import pyarrow as pa

    con.register("audit_log_leaves", pa.table({"id": ids, "position": positions}))
    try:
        con.execute("UPDATE audit_records SET log_position = l.position "
                    "FROM audit_log_leaves l WHERE audit_records.id = l.id")
    finally:
        con.unregister("audit_log_leaves")


def _write_tiles(con: Any, origin: str, tiles: Mapping[tuple[int, int, int], bytes]) -> None:
    """Add the new full tiles; the partial tile of each level written replaces that
    level's edge (a level whose edge tile filled up has none until its next hash)."""
    if not tiles:
        return
    full = sorted(key for key in tiles if key[2] == TILE_WIDTH)
    edges = sorted(key for key in tiles if key[2] != TILE_WIDTH)
    levels = sorted({key[0] for key in tiles})
    con.execute(f"DELETE FROM audit_log_edges WHERE origin = ? AND level IN "
                f"({', '.join('?' * len(levels))})", [origin, *levels])
    for table, keys in (("audit_log_tiles", full), ("audit_log_edges", edges)):
        columns: dict[str, list[Any]] = {
            "origin": [origin] * len(keys), "level": [key[0] for key in keys],
            "idx": [key[1] for key in keys], "width": [key[2] for key in keys],
            "data": [tiles[key] for key in keys]}
        if table == "audit_log_tiles":
            columns["tile_key"] = [tile_key(origin, key[0], key[1]) for key in keys]
        _insert(con, table, columns)


def _insert(con: Any, table: str, columns: dict[str, list[Any]]) -> None:
    """Insert rows given by column, in one statement (executemany runs one a row)."""
    if not next(iter(columns.values())):
        return
    import pyarrow as pa

    con.register("audit_log_incoming", pa.table(columns))
    try:
        con.execute(f"INSERT INTO {table} ({', '.join(columns)}) "
                    f"SELECT {', '.join(columns)} FROM audit_log_incoming")
    finally:
        con.unregister("audit_log_incoming")


def _signer(root: Path, *, create: bool) -> Signer:
    """The store's log key; made (readable by its owner only) when `create` and absent."""
    path = root / KEY_FILE
    try:
        return Signer.parse(path.read_text(encoding="ascii"))
    except FileNotFoundError:
        if not create:
            raise StoreError(f"{path} is missing: the store's log cannot be signed without "
                             "the key that signed it; put it back") from None
    except (OSError, UnicodeDecodeError, NoteError) as exc:
        raise StoreError(f"{path}: not a readable signer key ({exc})") from exc
    signer = Signer.generate(ORIGIN_PREFIX + secrets.token_hex(16))
    path.parent.mkdir(exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            handle.write(str(signer) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        publish(temporary, path)
    except BaseException:
        remove_quietly(temporary)  # the key of a write that did not commit is not kept
        raise
    return signer


# -- a copy of a log, as a bundle carries it -------------------------------------------


@dataclass(frozen=True)
class LogCopy:
    """A log's signed head and tiles, checked against each other, and where the bundle's
    records sit in it."""

    head: LogHead
    tiles: dict[str, bytes]  # by tlog-tiles path
    positions: tuple[int, ...]  # the leaf of each bundled record, in the bundle's order

    def tree(self) -> TiledTree:
        def read(level: int, index: int, width: int) -> bytes:
            for have in range(TILE_WIDTH, width - 1, -1):  # the tile, full or partial
                data = self.tiles.get(tile_path(level, index, have))
                if data is not None:
                    return data[:width * HASH_BYTES]
            raise KeyError(tile_path(level, index, width))

        return TiledTree(self.head.size, read)


def check_copy(source: str, checkpoint: str, verifier_key: str, tiles: dict[str, bytes],
               positions: list[int], entries: list[bytes]) -> LogCopy:
    """A log copy whose checkpoint verifies under its key, whose tiles give the
    checkpoint's root and which holds each of `entries` at its position."""
    try:
        verifier = Verifier.parse(verifier_key)
        checkpoint_ = Checkpoint.parse(open_note(checkpoint, verifier))
    except NoteError as exc:
        raise InputError(source, f"log checkpoint: {exc}") from None
    if checkpoint_.origin != verifier.name:
        raise InputError(source, f"log checkpoint: origin {checkpoint_.origin!r} is not "
                         f"its key's name {verifier.name!r}")
    head = LogHead(checkpoint_.origin, False, str(verifier), checkpoint_.size,
                   checkpoint_.root, checkpoint)
    copy = LogCopy(head, tiles, tuple(positions))
    tree = copy.tree()
    try:
        if tree.root() != head.root:
            raise InputError(source, "log tiles do not give the checkpoint's root: refused")
        for entry, index in zip(entries, positions, strict=True):
            proof = tree.inclusion_proof(index) if 0 <= index < head.size else []
            if not verify_inclusion(index, head.size, leaf_hash(entry), proof, head.root):
                raise InputError(source, f"a record is not leaf {index} of the log: refused")
    except (KeyError, ValueError) as exc:
        raise InputError(source, f"log tiles: {exc} is missing or malformed: refused"
                         ) from None
    return copy


def keep_copy(con: Any, source: str, copy: LogCopy) -> None:
    """Check `copy` against the copy of its log the store holds (its own log included) and
    keep the longer of the two; a copy that forks from the one held is refused."""
    held = heads(con).get(copy.head.origin)
    if held is None:
        con.execute("INSERT INTO audit_logs VALUES (?, false, ?, ?, ?, ?)",
                    [copy.head.origin, copy.head.verifier_key, copy.head.size,
                     copy.head.root.hex(), copy.head.checkpoint])
        _write_copy_tiles(con, copy)
        return
    if held.verifier_key != copy.head.verifier_key:
        raise ForkedLedgerError(source, f"log {held.origin} is signed by "
                                f"{copy.head.verifier_key}, not by the key held "
                                f"({held.verifier_key}): refused")
    theirs, ours = copy.tree(), stored_tree(con, held.origin, held.size)
    if copy.head.size >= held.size:
        old, new, longer = held, copy.head, theirs
    else:
        old, new, longer = copy.head, held, ours
    proof = longer.consistency_proof(old.size, new.size) if 0 < old.size < new.size else []
    if not verify_consistency(old.size, new.size, old.root, new.root, proof):
        first = _first_difference(ours, theirs, old.size)
        raise ForkedLedgerError(source, f"the log {held.origin} is not an extension of the "
                                f"copy held: leaf {first} differs (held: {held.size} leaves, "
                                f"this copy: {copy.head.size}): refused")
    if copy.head.size > held.size and not held.own:
        con.execute("UPDATE audit_logs SET size = ?, root = ?, checkpoint = ? WHERE origin = ?",
                    [copy.head.size, copy.head.root.hex(), copy.head.checkpoint, held.origin])
        _write_copy_tiles(con, copy)


def _first_difference(a: TiledTree, b: TiledTree, size: int) -> int:
    """The first leaf below `size` whose hash differs between two trees."""
    for start in range(0, size, TILE_WIDTH):
        width = min(TILE_WIDTH, size - start)
        left, right = a.stored_hashes(0, start, width), b.stored_hashes(0, start, width)
        for offset, (x, y) in enumerate(zip(left, right, strict=True)):
            if x != y:
                return start + offset
    return size


def _write_copy_tiles(con: Any, copy: LogCopy) -> None:
    con.execute("DELETE FROM audit_log_tiles WHERE origin = ?", [copy.head.origin])
    con.execute("DELETE FROM audit_log_edges WHERE origin = ?", [copy.head.origin])
    tree = copy.tree()
    written = {}
    level = 0
    while copy.head.size >> (TILE_HEIGHT * level):
        count = copy.head.size >> (TILE_HEIGHT * level)
        for index in range(0, (count + TILE_WIDTH - 1) // TILE_WIDTH):
            width = min(TILE_WIDTH, count - index * TILE_WIDTH)
            hashes = tree.stored_hashes(level, index * TILE_WIDTH, width)
            written[(level, index, width)] = b"".join(hashes)
        level += 1
    _write_tiles(con, copy.head.origin, written)


def root_text(root: bytes) -> str:
    return base64.b64encode(root).decode()


# -- checking what the catalog holds (store verify) ------------------------------------


@dataclass(frozen=True)
class LogProblem:
    origin: str
    table: str  # the catalog table where the log's bytes differ
    message: str


def check_logs(con: Any) -> list[LogProblem]:
    """Every log the store holds, checked from its own bytes: the checkpoint's signature,
    the tiles against the root, and for the store's own log, the tiles rebuilt from its
    entries and each record's leaf."""
    problems = []
    for head in heads(con).values():
        problems += [LogProblem(head.origin, table, message)
                     for table, message in _log_faults(con, head)]
    return problems


def _log_faults(con: Any, head: LogHead) -> list[tuple[str, str]]:
    try:
        said = Checkpoint.parse(open_note(head.checkpoint, Verifier.parse(head.verifier_key)))
    except NoteError as exc:
        return [("audit_logs", f"the checkpoint does not verify ({exc})")]
    if (said.origin, said.size, said.root) != (head.origin, head.size, head.root):
        return [("audit_logs", "the signed checkpoint is not the head the catalog records")]
    if head.own:
        return _own_log_faults(con, head)
    try:
        root = stored_tree(con, head.origin, head.size).root()
    except (StoreError, ValueError) as exc:
        return [("audit_log_tiles", str(exc))]
    return [] if root == head.root else [("audit_log_tiles", "the tiles do not give the "
                                          "checkpoint's root")]


def _own_log_faults(con: Any, head: LogHead) -> list[tuple[str, str]]:
    entries = con.execute("SELECT position, entry FROM audit_log_entries WHERE origin = ? "
                          "ORDER BY position", [head.origin]).fetchall()
    if [row[0] for row in entries] != list(range(head.size)):
        return [("audit_log_entries", f"the entries are not the positions 0..{head.size - 1}")]
    appender = TileAppender(0)
    appender.append(leaf_hash(entry.encode()) for _, entry in entries)
    rebuilt = {(level, index): data for (level, index, _), data in appender.written.items()}
    held = {(level, index): bytes(data) for level, index, data in con.execute(
        f"SELECT level, idx, data FROM {TILES} WHERE origin = ?", [head.origin]
    ).fetchall()}
    faults = []
    if held != rebuilt:
        wrong = sorted(set(held) ^ set(rebuilt) | {k for k in held if held[k] != rebuilt.get(k)})
        faults.append(("audit_log_tiles", "tiles differ from those the entries give: "
                       + ", ".join(tile_path(level, index) for level, index in wrong[:3])))
    elif TiledTree(head.size, lambda lv, ix, w: rebuilt[(lv, ix)][:w * HASH_BYTES]
                   ).root() != head.root:
        faults.append(("audit_log_entries", "the entries do not give the checkpoint's root"))
    stray = con.execute(
        "SELECT count(*) FROM audit_records r LEFT JOIN audit_log_entries e ON "
        "e.position = r.log_position AND e.origin = ? WHERE r.log_position IS NOT NULL AND "
        "(e.entry IS NULL OR e.entry <> r.record OR e.record_id <> r.id)", [head.origin]
    ).fetchall()[0][0]
    if stray:
        faults.append(("audit_records", f"{stray} record(s) not at the leaf log_position names"))
    return faults
