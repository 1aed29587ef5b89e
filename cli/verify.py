"""`lineage verify DIR` and `lineage sums DIR`: folder checks that need no store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from lineage.cli import output
from lineage.cli.common import JsonOption
from lineage.errors import EXIT_NO


def verify(
    folder: Annotated[Path, typer.Argument(help="A model or checkpoint folder.")],
    sums: Annotated[
        Path | None, typer.Option(help="A trusted SHA256SUMS list (GNU or BSD lines).")
    ] = None,
    strict: Annotated[
        bool, typer.Option(help="With --sums: files the list does not name fail the check.")
    ] = False,
    max_header_mib: Annotated[
        float, typer.Option(help="Largest safetensors header accepted (a local policy).")
    ] = 16.0,
    json: JsonOption = False,
) -> None:
    """Three separate verdicts: structure, checksums, load (not tested); exit 1 on a fail.

    Checksums come from --sums when given. Without it, a Hugging Face cache snapshot
    (`models--ORG--NAME/snapshots/REV/`) is checked against its blob names: LFS blobs are
    named by their SHA-256, other files by their Git blob SHA-1. Any other folder's
    checksums are not checked. With --sums, files on disk that the list does not name are
    a warning (a failure with --strict); the list and its signatures are not counted.
    """
    from lineage.verify import verify_folder

    report = verify_folder(folder, sums=sums, max_header_mib=max_header_mib, strict=strict)
    if json:
        output.emit_json(report)
    else:
        output.emit_lines(_verify_lines(report))
    if not report["ok"]:
        raise typer.Exit(EXIT_NO)


def _verify_lines(report: dict[str, Any]) -> list[str]:
    structure = report["structure"]
    lines = []
    if report["snapshot"]:
        snap = report["snapshot"]
        refs = f" ({', '.join(snap['refs'])})" if snap["refs"] else ""
        lines.append(f"snapshot: {snap['repo_id']} revision {snap['revision']}{refs}")
    lines.append(f"structure: {'ok' if structure['ok'] else 'FAILED'} ({structure['files']} "
                 f"files, {structure['tensors']} tensors, {structure['parameters']:,} "
                 "parameters)")
    lines += [f"  {e['file']}: {e['rule']}: {e['message']}" for e in structure["errors"]]
    return lines + _checksum_lines(report["checksums"]) + [f"load: {report['load']}"]


def _checksum_lines(checksums: dict[str, Any]) -> list[str]:
    if checksums["ok"] is None:
        return ["checksums: not checked (no --sums list, not a hub cache snapshot)"]
    source = {"sums-list": checksums["list"], "hf-cache-blobs": "the cache's blob names"}
    files = checksums["files"]
    good = sum(1 for f in files if f["status"] == "ok")
    lines = [f"checksums: {'ok' if checksums['ok'] else 'FAILED'} ({good}/{len(files)} "
             f"files match {source[checksums['source']]})"]
    mark = "warning: " if checksums["ok"] else ""  # when the verdict holds, all are warnings
    for problem in checksums["problems"]:
        where = f"line {problem['line']}: " if problem["line"] else ""
        lines.append(f"  {mark}{where}{problem['path'] or ''}: {problem['rule']}: "
                     f"{problem['message']}")
    return lines


def sums(
    folder: Annotated[Path, typer.Argument(help="The folder to list.")],
    out: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write here instead of stdout.")
    ] = None,
) -> None:
    """Write a SHA256SUMS list of every file in the folder that `sha256sum -c` accepts.

    A Hugging Face cache snapshot is listed with the names it shows, each file hashed
    through its vetted link into the repository's blobs.
    """
    from lineage.verify import folder_sums

    text = folder_sums(folder, sums_name=out.name if out else "SHA256SUMS")
    if out is None:
        output.emit_raw(text)
    else:
        output.write_file(out, text)
