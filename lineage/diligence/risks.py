"""Is it safe to open? Code paths and unverifiable content, found without running anything.

dangerous  a pickle importing a known code-execution path; a symlink leaving the folder
           (a hub cache snapshot's links into its own repository's blobs are not risks)
unknown    pickle globals outside the allowlist, unverifiable archives, Python files and
           `auto_map` (loading needs trust_remote_code, which runs them)
info       Jinja chat templates (template engines have had vulnerabilities; lineage never
           renders them), pickle files that only rebuild tensors

`find_risks` lists findings; `folder_risks` lists them for a `FolderModel`, reusing its pickle
scans; `risk_verdict` turns them into the `risks` verdict of `verify` and the `exp run` gate:
ok only when no finding is dangerous or unknown, except the kinds the user allowed by name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lineage.errors import InputError, UsageError
from lineage.formats.files import PICKLE_BEARING
from lineage.formats.hf_config import ModelConfig, TokenizerFiles
from lineage.formats.pickle_scan import FINDING_KINDS

if TYPE_CHECKING:
    from lineage.formats.folder import FolderModel
    from lineage.formats.pickle_scan import PickleScan

RISK_KINDS = ("symlink-outside", "python-code", "auto-map", "chat-template", "pickle",
              "unreadable", *(f"pickle-{kind}" for kind in FINDING_KINDS))
NOT_OK = ("dangerous", "unknown")


def find_risks(
    folder: Path, files: list[dict[str, Any]], links: list[dict[str, Any]],
    config: ModelConfig | None, tokenizer: TokenizerFiles | None, python: list[str],
    gguf_template: bool, *, scans: Mapping[str, PickleScan | InputError] | None = None,
) -> list[dict[str, Any]]:
    risks = []
    for link in links:
        if not link["inside"] and not link.get("cache_blob"):  # a vetted hub cache link is safe
            risks.append(_risk(link["path"], "symlink-outside", "dangerous",
                               f"symbolic link leaves the folder to {link['target']}"))
    for entry in files:
        if entry["format"] in PICKLE_BEARING:
            risks += _pickle_risks(folder, entry["path"], (scans or {}).get(entry["path"]))
    for name in python:
        risks.append(_risk(name, "python-code", "unknown",
                           "Python file: runs only with trust_remote_code; review it first"))
    if config and config.needs_remote_code:
        risks.append(_risk("config.json", "auto-map", "unknown",
                           f"auto_map {', '.join(sorted(config.auto_map or {}))}: loading needs "
                           "trust_remote_code"))
    if tokenizer and tokenizer.auto_map:
        risks.append(_risk("tokenizer_config.json", "auto-map", "unknown",
                           "custom tokenizer class: loading needs trust_remote_code"))
    for source in (tokenizer.chat_template_sources if tokenizer else ()):
        risks.append(_risk(source, "chat-template", "info",
                           "Jinja chat template (never rendered here)"))
    if gguf_template:
        risks.append(_risk("*.gguf", "chat-template", "info",
                           "GGUF tokenizer.chat_template is Jinja (never rendered here)"))
    order = {"dangerous": 0, "unknown": 1, "unverifiable": 1, "info": 2}
    return sorted(risks, key=lambda r: (order[r["severity"]], r["file"]))


def folder_risks(model: FolderModel) -> list[dict[str, Any]]:
    """The risks of a folder model, from the scans and configs it already read."""
    return find_risks(model.root, model.files, model.links, model.config, model.tokenizer,
                      model.python, model.gguf_chat_template, scans=model.scans)


def risk_verdict(findings: list[dict[str, Any]], *, allow: Iterable[str] = ()
                 ) -> dict[str, Any]:
    """{ok, findings, allowed}: not ok while a dangerous or unknown finding is not allowed.

    Each finding says whether its kind was allowed by name (`allowed`).
    """
    allowed = check_risk_kinds(allow)
    marked = [{**f, "allowed": f["kind"] in allowed} for f in findings]
    blocking = [f for f in marked if f["severity"] in NOT_OK and not f["allowed"]]
    return {"ok": not blocking, "findings": marked, "allowed": allowed}


def check_risk_kinds(kinds: Iterable[str]) -> list[str]:
    """The kinds named with --allow-risk, sorted; an unknown name is a usage error."""
    chosen = sorted(set(kinds))
    for kind in chosen:
        if kind not in RISK_KINDS:
            raise UsageError(f"--allow-risk {kind}: not a risk kind; one of "
                             f"{', '.join(RISK_KINDS)}")
    return chosen


def _pickle_risks(folder: Path, rel: str, scan: PickleScan | InputError | None
                  ) -> list[dict[str, Any]]:
    from lineage.formats.pickle_scan import scan_pickle_file

    if scan is None:
        try:
            scan = scan_pickle_file(folder / rel)
        except InputError as exc:
            scan = exc
    if isinstance(scan, InputError):
        return [_risk(rel, "unreadable", "unknown", str(scan))]
    risks = []
    for finding in scan.findings:
        if finding.severity in ("dangerous", "unknown", "unverifiable"):
            severity = "unknown" if finding.severity == "unverifiable" else finding.severity
            where = f" ({finding.member})" if finding.member else ""
            risks.append(_risk(rel, f"pickle-{finding.kind}", severity,
                               f"{finding.detail}{where}"))
    if not risks:
        risks.append(_risk(rel, "pickle", "info", f"pickle archive ({scan.format}); globals "
                           "all on the allowlist; never loaded here"))
    return risks


def _risk(file: str, kind: str, severity: str, detail: str) -> dict[str, Any]:
    return {"file": file, "kind": kind, "severity": severity, "detail": detail}
