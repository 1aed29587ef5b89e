"""`lineage verify DIR` and `lineage sums DIR`: folder checks that need no store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lineage.cli import output
from lineage.cli.common import JsonOption, require_folder
from lineage.errors import EXIT_NO


def verify(
    folder: Annotated[Path, typer.Argument(help="A model or checkpoint folder.",
                                           callback=require_folder)],
    sums: Annotated[
        Path | None, typer.Option(help="A trusted SHA256SUMS list (GNU or BSD lines).")
    ] = None,
    max_header_mib: Annotated[
        float, typer.Option(help="Largest safetensors header accepted (a local policy).")
    ] = 16.0,
    json: JsonOption = False,
) -> None:
    """Three separate verdicts: structure, checksums, load (not tested); exit 1 on a fail."""
    from lineage.verify import verify_folder

    report = verify_folder(folder, sums=sums, max_header_mib=max_header_mib)
    if json:
        output.emit_json(report)
    else:
        structure, checksums = report["structure"], report["checksums"]
        lines = [f"structure: {'ok' if structure['ok'] else 'FAILED'} ({structure['files']} "
                 f"files, {structure['tensors']} tensors, {structure['parameters']:,} "
                 "parameters)"]
        lines += [f"  {e['file']}: {e['rule']}: {e['message']}" for e in structure["errors"]]
        if checksums["ok"] is None:
            lines.append("checksums: not checked (no --sums list)")
        else:
            bad = [f for f in checksums["files"] if f["status"] != "ok"]
            lines.append(f"checksums: {'ok' if checksums['ok'] else 'FAILED'} "
                         f"({len(checksums['files']) - len(bad)}/{len(checksums['files'])} "
                         "files match)")
            lines += [f"  {f['path']}: {f['status']}" for f in bad]
            lines += [f"  line {p['line']}: {p['rule']}: {p['message']}"
                      for p in checksums["problems"]]
        lines.append(f"load: {report['load']}")
        output.emit_lines(lines)
    if not report["ok"]:
        raise typer.Exit(EXIT_NO)


def sums(
    folder: Annotated[Path, typer.Argument(help="The folder to list.", callback=require_folder)],
    out: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write here instead of stdout.")
    ] = None,
) -> None:
    """Write a SHA256SUMS list of every file in the folder that `sha256sum -c` accepts."""
    from lineage.formats.sha256sums import write_sums

    text = write_sums(folder, sums_name=out.name if out else "SHA256SUMS")
    if out is None:
        output.emit_raw(text)
    else:
        output.write_file(out, text)
