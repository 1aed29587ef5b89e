"""Audit bundles: one run's ledger records in a zip that checks itself (`lineage audit
export` / `import`; docs/audit-spec.md, "Bundles and signatures").

A bundle holds `records.jsonl` (one record per line, canonical JSON, signature included)
and `MANIFEST.json`: the spec, the run, the id of each record in line order, each member's
BLAKE3 and a digest over all of that. A `lineage-audit-bundle/2` bundle also carries the
exporting store's log: its signed checkpoint (`log/checkpoint`), its tiles (`log/tile/...`,
the tlog-tiles layout) and, in the manifest's `log`, the key that signs it and the leaf
holding each record; reading checks the checkpoint's signature, the tiles against its root
and each record's inclusion (lineage.audit.log.check_copy). `/1` bundles (no log) still
read. Reading recomputes every
record's id and checks it against the manifest before anything else, so an altered record
is refused by the id it was listed under; then the members against the manifest, the
manifest against its digest, and each signed record's signature. The digests catch damage
and partial edits; who wrote a record is shown only by its signature, and whose keys
count is the reader's `allowed_signers` file.
"""

from __future__ import annotations

import json
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from lineage.audit.record_files import (
    MAX_RECORDS_BYTES,
    depth_error,
    read_records_file,
    too_deep,
)
from lineage.audit.records import SPEC as RECORD_SPEC
from lineage.audit.records import record_id
from lineage.audit.sshsig import (
    AllowedSigner,
    is_allowed,
    parse_allowed_signers,
    verify_record,
)
from lineage.errors import InputError, RuleError, UsageError
from lineage.runs.chain import MAX_DEPTH, blake3_hex, canonical_json
from lineage.userfiles import open_regular, write_output

if TYPE_CHECKING:
    from lineage.audit.log import LogCopy

BUNDLE_SPEC = "lineage-audit-bundle/2"
SPECS_READ = ("lineage-audit-bundle/1", BUNDLE_SPEC)
RECORDS_MEMBER = "records.jsonl"
MANIFEST_MEMBER = "MANIFEST.json"
CHECKPOINT_MEMBER = "log/checkpoint"
TILES_FOLDER = "log/"


@dataclass(frozen=True)
class LogExport:
    """What a bundle carries of the store's log: the signed head, its key, the tiles by
    their tlog-tiles path and the leaf of each record, by record id."""

    checkpoint: str
    verifier_key: str
    size: int
    tiles: dict[str, bytes]
    positions: dict[str, int]


def write_bundle(records: list[dict[str, Any]], path: str | Path, *, run: str,
                 log: LogExport | None = None) -> dict[str, Any]:
    """Write the records of `run` as a bundle at `path` (atomically: all of it or nothing);
    a record listed twice is written once. With `log`, the bundle carries the log too."""
    lines: dict[str, str] = {}
    for record in records:
        if record.get("run") != run:
            raise UsageError(f"a record of run {record.get('run')!r} in the bundle of {run!r}")
        lines.setdefault(record_id(record), canonical_json(record))
    data = "".join(line + "\n" for line in lines.values()).encode("utf-8")
    if len(data) > MAX_RECORDS_BYTES:  # a bundle no lineage would import
        raise UsageError(f"the ledger of {run!r} is {len(data):,} bytes of records, over the "
                         f"{_size(MAX_RECORDS_BYTES)} a bundle may hold")
    members = {RECORDS_MEMBER: data}
    extra: dict[str, Any] = {}
    if log is not None:
        members[CHECKPOINT_MEMBER] = log.checkpoint.encode()
        members.update({TILES_FOLDER + name: tile for name, tile in sorted(log.tiles.items())})
        extra["log"] = {"verifier_key": log.verifier_key, "size": log.size,
                        "positions": [log.positions[i] for i in lines]}
    manifest = _manifest(run, list(lines), {name: blake3_hex(member)
                                            for name, member in members.items()}, extra)

    def write(handle: BinaryIO) -> None:
        with zipfile.ZipFile(handle, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for name, member in members.items():
                archive.writestr(_entry(name), member)
            archive.writestr(_entry(MANIFEST_MEMBER), canonical_json(manifest))

    write_output(path, write)
    return {"bundle": str(path), "spec": manifest["spec"], "run": run, "records": len(lines),
            "digest": manifest["digest"]}


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n % (1 << 20) == 0 else f"{n:,} bytes"


def _manifest(run: str, ids: list[str], members: dict[str, str],
              extra: dict[str, Any]) -> dict[str, Any]:
    spec = BUNDLE_SPEC if extra else SPECS_READ[0]
    body = {"spec": spec, "run": run, "records": ids, "members": members, **extra}
    return {**body, "digest": blake3_hex(canonical_json(body).encode("utf-8"))}


def _entry(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))  # reproducible bytes
    info.compress_type = zipfile.ZIP_DEFLATED
    return info


def read_bundle(path: str | Path, *, allowed_signers: str | Path | None = None,
                require_signed: bool = False) -> list[dict[str, Any]]:
    """The records of a bundle, every check passed (see the module docstring). With
    `allowed_signers`, a signed record counts only when its key may sign as its auditor's
    name; with `require_signed`, an unsigned record is refused."""
    return read_bundle_log(path, allowed_signers=allowed_signers,
                           require_signed=require_signed)[0]


def read_bundle_log(path: str | Path, *, allowed_signers: str | Path | None = None,
                    require_signed: bool = False
                    ) -> tuple[list[dict[str, Any]], LogCopy | None]:
    """`read_bundle`, and the copy of the exporting store's log the bundle carries, checked
    (None for a bundle without one)."""
    allowed = parse_allowed_signers(allowed_signers) if allowed_signers is not None else None
    manifest, members = _read_members(Path(path))
    records = _parse_records(path, members.get(RECORDS_MEMBER, b""), manifest)
    for name, digest in manifest["members"].items():
        if blake3_hex(members[name]) != digest or not _known_member(name, manifest):
            raise InputError(path, f"{name} does not match the manifest: refused")
    body = {key: value for key, value in manifest.items() if key != "digest"}
    if blake3_hex(canonical_json(body).encode("utf-8")) != manifest["digest"]:
        raise InputError(path, "the manifest does not match its digest: refused")
    for record in records:
        _check_signature(path, record, allowed, allowed_signers, require_signed)
    return records, _log_copy(path, manifest, members, records)


def _known_member(name: str, manifest: dict[str, Any]) -> bool:
    return name == RECORDS_MEMBER or (manifest["spec"] == BUNDLE_SPEC and "log" in manifest and (
        name == CHECKPOINT_MEMBER or name.startswith(TILES_FOLDER + "tile/")))


def _log_copy(path: str | Path, manifest: dict[str, Any], members: dict[str, bytes],
              records: list[dict[str, Any]]) -> LogCopy | None:
    log = manifest.get("log")
    if log is None:
        return None
    from lineage.audit.log import check_copy

    positions = log.get("positions") if isinstance(log, dict) else None
    if (not isinstance(log, dict) or not isinstance(log.get("verifier_key"), str)
            or not isinstance(positions, list) or len(positions) != len(records)
            or not all(isinstance(p, int) and not isinstance(p, bool) for p in positions)
            or CHECKPOINT_MEMBER not in members):
        raise InputError(path, "MANIFEST.json: log needs verifier_key, a position for each "
                         "record and the member log/checkpoint")
    try:
        checkpoint = members[CHECKPOINT_MEMBER].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(path, f"{CHECKPOINT_MEMBER} is not UTF-8") from exc
    tiles = {name[len(TILES_FOLDER):]: data for name, data in members.items()
             if name.startswith(TILES_FOLDER + "tile/")}
    return check_copy(str(path), checkpoint, log["verifier_key"], tiles, positions,
                      [canonical_json(record).encode("utf-8") for record in records])


def _read_members(path: Path) -> tuple[dict[str, Any], dict[str, bytes]]:
    with open_regular(path, what="bundle", max_bytes=MAX_RECORDS_BYTES) as handle:
        try:
            with zipfile.ZipFile(handle) as archive:
                return _read_archive(path, archive)
        except (OSError, zipfile.BadZipFile, zlib.error) as exc:
            raise InputError(path, f"not a readable bundle ({exc})") from exc


def _read_archive(path: Path, archive: zipfile.ZipFile
                  ) -> tuple[dict[str, Any], dict[str, bytes]]:
    names = archive.namelist()
    if len(set(names)) != len(names):
        raise InputError(path, "a member name appears twice: refused")
    if MANIFEST_MEMBER not in names:
        raise InputError(path, "no MANIFEST.json: not an audit bundle")
    for info in archive.infolist():
        if info.file_size > MAX_RECORDS_BYTES:
            raise InputError(path, f"{info.filename}: refused ({info.file_size:,} bytes, over "
                             f"the {_size(MAX_RECORDS_BYTES)} a member may hold)")
    manifest = _parse_manifest(path, archive.read(MANIFEST_MEMBER))
    for name in names:
        if name != MANIFEST_MEMBER and name not in manifest["members"]:
            raise InputError(path, f"{name}: a member the manifest does not list: refused")
    for name in manifest["members"]:
        if name not in names:
            raise InputError(path, f"{name}: listed in the manifest but missing: refused")
    return manifest, {name: archive.read(name) for name in manifest["members"]}


def _parse_manifest(path: Path, data: bytes) -> dict[str, Any]:
    try:
        text = data.decode("utf-8")
        if too_deep(text, MAX_DEPTH):
            raise depth_error(path, MANIFEST_MEMBER)
        manifest = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(path, f"MANIFEST.json is not JSON ({exc})") from exc
    if not isinstance(manifest, dict) or manifest.get("spec") not in SPECS_READ:
        spec = manifest.get("spec") if isinstance(manifest, dict) else None
        raise InputError(path, f"unknown bundle spec {spec!r} (this lineage reads "
                         f"{' and '.join(SPECS_READ)})")
    shapes = {"run": str, "records": list, "members": dict, "digest": str}
    for key, kind in shapes.items():
        if not isinstance(manifest.get(key), kind):
            raise InputError(path, f"MANIFEST.json: {key} is missing or not a {kind.__name__}")
    return manifest


def _parse_records(path: str | Path, data: bytes,
                   manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """Each line a record of the bundle's run whose id is the one the manifest lists for
    it: an edited record is named by the id it was listed under."""
    # split on newline bytes only: a record's strings may hold U+2028 and other characters
    # str.splitlines() would also break at
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    listed: list[Any] = manifest["records"]
    if len(lines) != len(listed) or len(set(map(str, listed))) != len(listed):
        raise InputError(path, f"{RECORDS_MEMBER} has {len(lines)} records, the manifest "
                         f"lists {len(set(map(str, listed)))} distinct ids: refused")
    records = []
    for number, (line, expected) in enumerate(zip(lines, listed, strict=True), start=1):
        where = f"{RECORDS_MEMBER}:{number}"
        try:
            text = line.decode("utf-8")
            if too_deep(text, MAX_DEPTH):
                raise depth_error(path, where)
            record = json.loads(text)
        except (ValueError, UnicodeDecodeError) as exc:
            raise InputError(path, f"record {expected} is not JSON: refused", where=where
                             ) from exc
        if not isinstance(record, dict) or record_id(record) != expected:
            raise InputError(path, f"record {expected} was altered (its content no longer "
                             "gives its id): refused", where=where)
        if record.get("spec") != RECORD_SPEC or record.get("run") != manifest["run"]:
            raise InputError(path, f"record {expected}: not a {RECORD_SPEC} record of run "
                             f"{manifest['run']!r}: refused", where=where)
        records.append(record)
    return records


def _check_signature(path: str | Path, record: dict[str, Any],
                     allowed: list[AllowedSigner] | None,
                     allowed_path: str | Path | None, require_signed: bool) -> None:
    try:
        signed = verify_record(record)
    except RuleError as exc:
        raise InputError(path, f"record {exc.path}: {exc.rule}: forged or altered, refused"
                         ) from exc
    auditor = record.get("auditor")
    name = auditor.get("name") if isinstance(auditor, dict) else None
    if not signed and require_signed:
        raise InputError(path, f"record {record_id(record)} (auditor {name!r}) is unsigned, "
                         "and signatures are required: refused")
    if signed and allowed is not None and not is_allowed(
            record["auditor"]["public_key"], str(name), allowed):
        raise InputError(path, f"record {record_id(record)}: not-allowed: its key may not sign "
                         f"as {name!r} in {allowed_path}: refused")


def records_text(records: list[dict[str, Any]], form: str) -> str:
    """Records written back in the form `read_records_file` found them in."""
    if form == "object" and len(records) == 1:
        return canonical_json(records[0]) + "\n"
    if form == "list":
        return canonical_json(records) + "\n"
    return "".join(canonical_json(record) + "\n" for record in records)


def sign_records_file(path: str | Path, key_path: str | Path
                      ) -> tuple[list[dict[str, Any]], str]:
    """The records of a JSON or JSONL file, each signed with the key (see `sign_record`),
    and the file's form, to write them back the same way."""
    from lineage.audit.sshsig import public_key_line, sign_record

    public_key_line(key_path)  # a key that cannot sign is refused before the records are read
    records, form = read_records_file(path)
    for number, record in enumerate(records, start=1):
        if not isinstance(record, dict) or record.get("spec") != RECORD_SPEC:
            spec = record.get("spec") if isinstance(record, dict) else None
            raise InputError(path, f"record {number} is not a {RECORD_SPEC} record "
                             f"(spec {spec!r})")
    return [sign_record(record, key_path) for record in records], form
