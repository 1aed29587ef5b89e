"""`lineage verify DIR` and `lineage sums DIR`: folder checks that need no store."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from lineage.cli import output
from lineage.cli.common import JsonOption
from lineage.errors import EXIT_NO, UsageError
from lineage.userfiles import check_output_path, write_output

if TYPE_CHECKING:
    from lineage.diligence.answers import CacheVerification

AllowRiskOption = Annotated[
    list[str] | None,
    typer.Option("--allow-risk", metavar="KIND",
                 help="Accept risks of this kind (e.g. python-code); repeatable."),
]


def require_model_path(path: Path) -> Path:
    """The folder or model file a command was given, or an error (exit 2) before any
    work: a missing path, a device or FIFO, a hub cache's own folders (pointed at their
    snapshots). A parameter callback."""
    from lineage.diligence.verify import require_model_path as check

    check(path)
    return path


def verify(
    folder: Annotated[Path | None, typer.Argument(
        help="A model or checkpoint folder, or one model file (a GGUF file, ...); with "
             "--cache, the hub cache (or HF_HOME).", show_default=False)] = None,
    sums: Annotated[
        Path | None, typer.Option(help="A trusted SHA256SUMS list (GNU or BSD lines).")
    ] = None,
    sums_key: Annotated[Path | None, typer.Option(
        help="With --sums: the list's signer must be this key (an SSH allowed_signers file, "
             "a minisign public key or an OpenPGP public key); the signature is LIST.sig, "
             "LIST.minisig or LIST.asc by the key's format.", show_default=False)] = None,
    strict: Annotated[
        bool, typer.Option(help="With --sums: files the list does not name fail the check.")
    ] = False,
    max_header_mib: Annotated[
        float, typer.Option(help="Largest safetensors header accepted (a local policy).")
    ] = 16.0,
    allow_risk: AllowRiskOption = None,
    cache: Annotated[bool, typer.Option(
        "--cache", help="Check every snapshot of every repository of a Hugging Face hub "
                        "cache against its blob names (default: the cache huggingface_hub "
                        "uses).")] = False,
    json: JsonOption = False,
) -> None:
    """Separate verdicts: structure, risks, checksums, authenticity, load; exit 1 on a fail.

    A model file is checked with its split parts (`x-00001-of-00003.gguf`): against --sums,
    only the list's lines for those files count, and each must be listed. A hub cache or
    one of its repository folders is refused with the snapshot to verify instead.
    Checksums come from --sums when given. Without it, a Hugging Face cache snapshot
    (`models--ORG--NAME/snapshots/REV/`) is checked against its blob names: LFS blobs are
    named by their SHA-256, other files by their Git blob SHA-1. Any other folder's
    checksums are not checked. With --sums, files on disk that the list does not name are
    a warning (a failure with --strict); the list and its signatures are not counted.
    With --sums-key, the list's signature is checked against that key, a separate
    authenticity verdict (checksums say the files match the list, authenticity who wrote
    the list): an allowed_signers file checks LIST.sig (`ssh-keygen -Y sign -n file`), a
    minisign public key LIST.minisig, an OpenPGP public key LIST.asc (through gpg, in a
    keyring of its own). Without --sums-key authenticity is not checked.

    With --cache: every snapshot `hf cache scan` lists (HF_HUB_CACHE, HF_HOME/hub or
    ~/.cache/huggingface/hub unless FOLDER is given) against its blob names, each blob
    hashed once; a table of snapshots, exit 1 when one fails.
    """
    if cache:
        if sums is not None or sums_key is not None or strict or allow_risk:
            raise UsageError("--cache checks blob names only: it takes no --sums, "
                             "--sums-key, --strict or --allow-risk")
        _verify_cache(folder, json=json)
        return
    if folder is None:
        raise UsageError("verify needs a FOLDER (or a model file), or --cache")
    from lineage.diligence.verify import verify_folder

    require_model_path(folder)
    # The answer's JSON object as it is built (lineage.verify() types the same object: a
    # round trip through the typed answer cost 1.6 s of 9 for a 300,000-line list).
    report = verify_folder(folder, sums=sums, strict=strict, allow_risks=allow_risk or (),
                           max_header_mib=max_header_mib, sums_key=sums_key)
    if json:
        output.emit_json(report)
    else:
        output.emit_lines(_snapshot_lines(report["snapshot"])
                          + _structure_lines(report["structure"]) + _risk_lines(report["risks"])
                          + _checksum_lines(report["checksums"])
                          + authenticity_lines(report["authenticity"])
                          + [f"load: {report['load']}"])
    if not report["ok"]:
        raise typer.Exit(EXIT_NO)


def _verify_cache(folder: Path | None, *, json: bool) -> None:
    from lineage.diligence.api import verify_cache

    answer = verify_cache(folder)
    if json:
        output.emit_json(answer.to_dict())
    else:
        _cache_table(answer)
    if not answer.ok:
        raise typer.Exit(EXIT_NO)


def _cache_table(report: CacheVerification) -> None:
    rows = report.snapshots
    failed = [r for r in rows if not r.ok]
    output.emit_table(
        ["repository", "kind", "revision", "refs", "files", "checksums"],
        [[r.repo_id, r.kind, r.revision[:12], ", ".join(r.refs) or "-",
          f"{r.matched}/{r.files}", "ok" if r.ok else "FAILED"] for r in rows],
        title=f"{report.cache}: {_count(report.repositories, 'repository')}, "
              f"{_count(len(rows), 'snapshot')}")
    lines = [f"  {r.repo_id} {r.revision[:12]}: {p.path or '.'}: {p.rule}: {p.message}"
             for r in failed for p in r.problems]
    lines += [f"  {p.repository}: {p.rule}: {p.message}" for p in report.problems]
    verdict = "ok" if report.ok else "FAILED"
    output.emit_lines([f"checksums: {verdict} ({len(rows) - len(failed)}/{len(rows)} snapshots "
                       f"match their blob names; {report.bytes_hashed:,} bytes hashed)",
                       *lines])


def _count(n: int, noun: str) -> str:
    plural = noun[:-1] + "ies" if noun.endswith("y") else noun + "s"
    return f"{n} {noun if n == 1 else plural}"


def _snapshot_lines(snap: dict[str, Any] | None) -> list[str]:
    if not snap:
        return []
    refs = f" ({', '.join(snap['refs'])})" if snap["refs"] else ""
    return [f"snapshot: {snap['repo_id']} revision {snap['revision']}{refs}"]


def _structure_lines(structure: dict[str, Any]) -> list[str]:
    formats = ", ".join(f"{k} {v}" for k, v in structure["formats"].items()) or "no weights"
    if structure["ok"] is None:
        lines = ["structure: not checked (no weights file; the checksums are the verdict)"]
        return lines + [f"  {w['file']}: {w['rule']}: {w['message']}"
                        for w in structure["warnings"]]
    lines = [f"structure: {'ok' if structure['ok'] else 'FAILED'} ({formats}; "
             f"{structure['tensors']} tensors, {structure['parameters']:,} parameters)"]
    for e in structure["errors"]:
        lines += [f"  {e['file']}: {e['rule']}: {e['message']}", f"    action: {e['action']}"]
    for w in structure["warnings"]:
        lines += [f"  warning: {w['file']}: {w['rule']}: {w['message']}",
                  f"    action: {w['action']}"]
    return lines


def _risk_lines(risks: dict[str, Any]) -> list[str]:
    counts = Counter(f["severity"] for f in risks["findings"])
    summary = ", ".join(f"{n} {severity}" for severity, n in sorted(counts.items()))
    allowed = f"; allowed: {', '.join(risks['allowed'])}" if risks["allowed"] else ""
    lines = [f"risks: {'ok' if risks['ok'] else 'FAILED'} ({summary or 'no findings'}{allowed})"]
    lines += [f"  {f['file']}: {f['kind']} ({f['severity']}): {f['detail']}"
              for f in risks["findings"] if f["severity"] != "info"]
    return lines


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


def authenticity_lines(verdict: dict[str, Any]) -> list[str]:
    """The authenticity verdict in lines; nothing when no key was given."""
    if verdict["ok"] is None:
        return []
    if verdict["ok"]:
        who = f"{verdict['signer']}, " if verdict["signer"] else ""
        return [f"authenticity: ok ({verdict['method']}: {verdict['signature']} signed by "
                f"{who}{verdict['key_id']})"]
    lines = [f"authenticity: FAILED ({verdict['method']}: {verdict['signature']})"]
    return lines + [f"  {p['rule']}: {p['message']}" for p in verdict["problems"]]


def sums(
    folder: Annotated[Path, typer.Argument(
        help="The folder to list, or one model file (listed with its split parts).",
        callback=require_model_path)],
    out: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write here instead of stdout.")
    ] = None,
) -> None:
    """Write a SHA256SUMS list of every file in the folder that `sha256sum -c` accepts.

    A Hugging Face cache snapshot is listed with the names it shows, each file hashed
    through its vetted link into the repository's blobs.
    """
    from lineage.diligence.verify import folder_sums

    if out is not None:
        check_output_path(out)  # a device, FIFO or folder is refused before any hashing
    text = folder_sums(folder, sums_name=out.name if out else "SHA256SUMS")
    if out is None:
        output.emit_raw(text)
    else:
        output.info(f"wrote {write_output(out, text)}")
