"""Portable, self-verifying bundles of experiment records (take them along before a
rental ends).

A bundle is a zip archive with `records/<id>.json` (canonical JSON), `sums/<id>.SHA256SUMS`
(the checksum list each record used, verbatim) and `MANIFEST.json`: every member's BLAKE3
and a digest over the manifest's member list. Import checks every member against the
manifest and the manifest against its digest before storing anything, and is idempotent.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

from lineage.chain import blake3_hex, canonical_json
from lineage.durable import publish, temp_path_for
from lineage.errors import InputError
from lineage.exp.records import get_record, record_id, save_record
from lineage.store import Store

BUNDLE_SPEC = "lineage-experiment-bundle/1"
_MAX_MEMBER = 64 * 2**20


def export_bundle(store: Store, ids: list[str], output: str | Path) -> dict[str, Any]:
    members: dict[str, bytes] = {}
    for exp_id in ids:
        record = get_record(store, exp_id)
        real_id = record.pop("id")
        members[f"records/{real_id}.json"] = canonical_json(record).encode("utf-8")
        sums = (record.get("sums") or {}).get("text")
        if sums:
            members[f"sums/{real_id}.SHA256SUMS"] = sums.encode("utf-8")
    manifest = _manifest(members)
    output = Path(output)
    temp = temp_path_for(output.resolve())
    with zipfile.ZipFile(temp, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(members):
            archive.writestr(_entry(name), members[name])
        archive.writestr(_entry("MANIFEST.json"), canonical_json(manifest))
    publish(temp, output.resolve())
    return {"bundle": str(output), "records": len(ids), "digest": manifest["digest"]}


def import_bundle(store: Store, bundle: str | Path) -> dict[str, Any]:
    bundle = Path(bundle)
    members = _read_verified(bundle)
    added, present = [], []
    for name in sorted(n for n in members if n.startswith("records/")):
        record = json.loads(members[name])
        if f"records/{record_id(record)}.json" != name:
            raise InputError(bundle, f"{name}: its content does not give its id")
        exp_id, is_new = save_record(store, record)
        (added if is_new else present).append(exp_id)
    return {"bundle": str(bundle), "added": added, "already_present": present}


def _manifest(members: dict[str, bytes]) -> dict[str, Any]:
    listed = {name: blake3_hex(data) for name, data in sorted(members.items())}
    return {"spec": BUNDLE_SPEC, "members": listed,
            "digest": blake3_hex(canonical_json(listed).encode("utf-8"))}


def _entry(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))  # reproducible bytes
    info.compress_type = zipfile.ZIP_DEFLATED
    return info


def _read_verified(bundle: Path) -> dict[str, bytes]:
    try:
        archive = zipfile.ZipFile(bundle)
    except (OSError, zipfile.BadZipFile) as exc:
        raise InputError(bundle, f"not a readable bundle ({exc})") from exc
    with archive:
        names = archive.namelist()
        for info in archive.infolist():
            if info.file_size > _MAX_MEMBER or ".." in info.filename.split("/") \
                    or info.filename.startswith("/"):
                raise InputError(bundle, f"{info.filename}: refused (size or path)")
        if "MANIFEST.json" not in names:
            raise InputError(bundle, "no MANIFEST.json: not a lineage bundle")
        manifest = json.loads(archive.read("MANIFEST.json"))
        members = {n: archive.read(n) for n in names if n != "MANIFEST.json"}
    listed = manifest.get("members", {})
    if blake3_hex(canonical_json(listed).encode("utf-8")) != manifest.get("digest"):
        raise InputError(bundle, "the manifest does not match its digest: refused")
    if set(listed) != set(members):
        raise InputError(bundle, "members differ from the manifest: refused")
    for name, data in members.items():
        if blake3_hex(data) != listed[name]:
            raise InputError(bundle, f"{name} does not match the manifest: refused")
    return members
