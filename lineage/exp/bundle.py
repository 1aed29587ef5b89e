"""Portable, self-verifying bundles of experiment records (take them along before a
rental ends).

A bundle is a zip archive with `records/<id>.json` (canonical JSON), `sums/<id>.SHA256SUMS`
(the checksum list each record used, verbatim), `logs/<hex>.zst` (each command output the
store kept, zstd, named by the BLAKE3 of the bytes the command wrote) and `MANIFEST.json`:
every member's BLAKE3 and a digest over the manifest's member list. Import checks every
member against the manifest and the manifest against its digest, and each log against
the digest its record gives, before storing anything; it is idempotent. Bundles written
before logs were kept (`lineage-experiment-bundle/1`) import as they are.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any, BinaryIO

from lineage.errors import InputError, StoreError
from lineage.exp.answers import ExportedBundle, ImportedBundle
from lineage.exp.gate import EXPERIMENT_SPEC
from lineage.exp.log_files import find_log, log_name, store_log_file, stored_content
from lineage.exp.metrics import Refused, parse_json
from lineage.exp.records import record_id, save_record, stored_record
from lineage.exp.runner import STREAMS
from lineage.runs.chain import blake3_hex, canonical_json
from lineage.store.base import BaseStore
from lineage.store.durable import blake3_file, remove_quietly
from lineage.store.scratch import new_staging_dir
from lineage.userfiles import check_output_path, open_regular, write_output

BUNDLE_SPEC = "lineage-experiment-bundle/2"
_READABLE_SPECS = ("lineage-experiment-bundle/1", BUNDLE_SPEC)
RECORD_SPECS = ("lineage-experiment/1", "lineage-experiment/2", EXPERIMENT_SPEC)
_MAX_MEMBER = 64 * 2**20  # records and checksum lists; logs are streamed
_CHUNK = 1 << 20


def export_bundle(store: BaseStore, ids: list[str], output: str | Path) -> ExportedBundle:
    """Write the bundle to `output` (a new path or a regular file, replaced by temp file
    and rename: lineage.userfiles.write_output, checked before anything is read)."""
    check_output_path(output)
    members: dict[str, bytes] = {}
    logs: dict[str, Path] = {}
    for exp_id in ids:
        record = stored_record(store, exp_id)  # as stored: its id comes from these bytes
        real_id = record.pop("id")
        members[f"records/{real_id}.json"] = canonical_json(record).encode("utf-8")
        sums = (record.get("sums") or {}).get("text")
        if sums:
            members[f"sums/{real_id}.SHA256SUMS"] = sums.encode("utf-8")
        for stream in STREAMS:
            found = find_log(store, real_id, stream)
            if found and not (store.root / found["path"]).is_file():
                raise StoreError(f"{store.root / found['path']}: the {stream} log of "
                                 f"{real_id} is missing; run `lineage store verify`")
            if found:
                logs[found["path"]] = store.root / found["path"]
    listed = {name: blake3_hex(data) for name, data in members.items()}
    listed |= {name: "blake3:" + blake3_file(path) for name, path in logs.items()}
    manifest = _manifest(listed)

    def write(handle: BinaryIO) -> None:
        with zipfile.ZipFile(handle, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for name in sorted(members):
                archive.writestr(_entry(name), members[name])
            for name in sorted(logs):
                _write_file(archive, name, logs[name])
            archive.writestr(_entry("MANIFEST.json"), canonical_json(manifest))

    write_output(output, write)
    return ExportedBundle(bundle=str(output), records=len(ids), logs=len(logs),
                          digest=manifest["digest"])


def import_bundle(store: BaseStore, bundle: str | Path) -> ImportedBundle:
    bundle = Path(bundle)
    staging = new_staging_dir(store.staging_dir)
    try:
        members, logs = _read_verified(bundle, staging)
        records = []
        for name in sorted(n for n in members if n.startswith("records/")):
            record = _record(bundle, name, members[name])
            if f"records/{record_id(record)}.json" != name:
                raise InputError(bundle, f"{name}: its content does not give its id")
            records.append(record)
        rows = _store_logs(store, bundle, records, logs)
        added: list[str] = []
        present: list[str] = []
        for record in records:
            exp_id, is_new = save_record(store, record, rows.get(record_id(record), []))
            (added if is_new else present).append(exp_id)
    finally:
        remove_quietly(staging)
    return ImportedBundle(bundle=str(bundle), added=tuple(added), already_present=tuple(present),
                          logs=len({r["path"] for found in rows.values() for r in found}))


def _store_logs(store: BaseStore, bundle: Path, records: list[dict[str, Any]],
                logs: dict[str, Path]) -> dict[str, list[dict[str, Any]]]:
    """Each record's logs, checked against the record's digests and moved into the store."""
    rows: dict[str, list[dict[str, Any]]] = {}
    stored: dict[str, dict[str, Any]] = {}
    for record in records:
        command = record.get("command") or {}
        for stream in STREAMS:
            summary = command.get(stream) or {}
            content, n_bytes = stored_content(summary) if summary.get("blake3") else ("", 0)
            name = log_name(content) if content else None
            if name not in logs and name not in stored:
                continue
            if name not in stored:
                try:
                    stored[name] = store_log_file(store, logs[name], content, n_bytes)
                except StoreError as exc:
                    raise InputError(bundle, f"{name} does not match its record: refused"
                                     ) from exc
            rows.setdefault(record_id(record), []).append({**stored[name], "stream": stream})
    return rows


def _manifest(listed: dict[str, str]) -> dict[str, Any]:
    listed = dict(sorted(listed.items()))
    return {"spec": BUNDLE_SPEC, "members": listed,
            "digest": blake3_hex(canonical_json(listed).encode("utf-8"))}


def _write_file(archive: zipfile.ZipFile, name: str, path: Path) -> None:
    """A log, already compressed: stored as is, copied in chunks."""
    info = _entry(name)
    info.compress_type = zipfile.ZIP_STORED
    with open(path, "rb") as source, archive.open(info, "w", force_zip64=True) as target:
        while chunk := source.read(_CHUNK):
            target.write(chunk)


def _entry(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))  # reproducible bytes
    info.compress_type = zipfile.ZIP_DEFLATED
    return info


def _read_verified(bundle: Path, staging: Path) -> tuple[dict[str, bytes], dict[str, Path]]:
    """Small members in memory, logs copied to `staging`; all checked against the
    manifest, and the manifest against its digest."""
    handle = open_regular(bundle, what="bundle")  # a FIFO would block, a device not end
    try:
        archive = zipfile.ZipFile(handle)
    except (OSError, zipfile.BadZipFile) as exc:
        handle.close()
        raise InputError(bundle, f"not a readable bundle ({exc})") from exc
    with handle, archive:
        names = archive.namelist()
        for info in archive.infolist():
            is_log = info.filename.startswith("logs/")
            if (info.file_size > _MAX_MEMBER and not is_log) or ".." in \
                    info.filename.split("/") or info.filename.startswith("/"):
                raise InputError(bundle, f"{info.filename}: refused (size or path)")
        if "MANIFEST.json" not in names:
            raise InputError(bundle, "no MANIFEST.json: not a lineage bundle")
        manifest = _object(bundle, "MANIFEST.json", archive.read("MANIFEST.json"))
        if manifest.get("spec") not in _READABLE_SPECS:
            raise InputError(bundle, f"unknown bundle spec {manifest.get('spec')!r}")
        listed = manifest.get("members", {})
        if blake3_hex(canonical_json(listed).encode("utf-8")) != manifest.get("digest"):
            raise InputError(bundle, "the manifest does not match its digest: refused")
        if set(listed) != set(names) - {"MANIFEST.json"}:
            raise InputError(bundle, "members differ from the manifest: refused")
        members = {n: archive.read(n) for n in listed if not n.startswith("logs/")}
        logs = {n: _copy_member(archive, n, staging) for n in listed if n.startswith("logs/")}
    for name, data in members.items():
        if blake3_hex(data) != listed[name]:
            raise InputError(bundle, f"{name} does not match the manifest: refused")
    for name, path in logs.items():
        if "blake3:" + blake3_file(path) != listed[name]:
            raise InputError(bundle, f"{name} does not match the manifest: refused")
    return members, logs


def _object(bundle: Path, name: str, data: bytes) -> dict[str, Any]:
    """A member that is one JSON object, read with the bounds every JSON lineage reads
    has (lineage.exp.metrics.parse_json: nesting, text); InputError otherwise."""
    try:
        value = parse_json(data)
    except Refused as exc:
        raise InputError(bundle, f"{name}: {exc.rule}: {exc}") from None
    if not isinstance(value, dict):
        raise InputError(bundle, f"{name}: not-an-object: a {type(value).__name__}, not a "
                         "JSON object")
    return value


def _record(bundle: Path, name: str, data: bytes) -> dict[str, Any]:
    """A record of a spec lineage reads, with the parts every reader relies on."""
    record = _object(bundle, name, data)
    weights, created = record.get("weights"), record.get("created_at")
    if record.get("spec") not in RECORD_SPECS:
        raise InputError(bundle, f"{name}: unknown record spec {str(record.get('spec'))[:40]!r}")
    shaped = (isinstance(weights, dict) and isinstance(weights.get("files"), list)
              and isinstance(record.get("host"), dict) and isinstance(record.get("outcome"), str)
              and isinstance(created, str) and _timestamp(created))
    if not shaped:
        raise InputError(bundle, f"{name}: not an experiment record (weights, host, outcome "
                         "or created_at missing or of the wrong type)")
    return record


def _timestamp(text: str) -> bool:
    from datetime import datetime

    try:
        datetime.fromisoformat(text)
    except ValueError:
        return False
    return True


def _copy_member(archive: zipfile.ZipFile, name: str, staging: Path) -> Path:
    target = staging / name.replace("/", "-")
    with archive.open(name) as source, open(target, "wb") as sink:
        while chunk := source.read(_CHUNK):
            sink.write(chunk)
    return target
