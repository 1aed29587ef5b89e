"""Is it safe to open? Code paths and unverifiable content, found without running anything.

dangerous  a pickle importing a known code-execution path; a symlink leaving the folder
unknown    pickle globals outside the allowlist, unverifiable archives, Python files and
           `auto_map` (loading needs trust_remote_code, which runs them)
info       Jinja chat templates (template engines have had vulnerabilities; lineage never
           renders them), pickle files that only rebuild tensors
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lineage.errors import InputError
from lineage.formats.hf_config import ModelConfig, TokenizerFiles
from lineage.report.files import PICKLE_BEARING


def find_risks(
    folder: Path, files: list[dict[str, Any]], links: list[dict[str, Any]],
    config: ModelConfig | None, tokenizer: TokenizerFiles | None, python: list[str],
    gguf_template: bool,
) -> list[dict[str, Any]]:
    risks = []
    for link in links:
        if not link["inside"]:
            risks.append(_risk(link["path"], "symlink-outside", "dangerous",
                               f"symbolic link leaves the folder to {link['target']}"))
    for entry in files:
        if entry["format"] in PICKLE_BEARING:
            risks += _pickle_risks(folder, entry["path"])
    for name in python:
        risks.append(_risk(name, "python-code", "unknown",
                           "Python file: runs only with trust_remote_code; review it first"))
    if config and config.needs_remote_code:
        risks.append(_risk("config.json", "auto-map", "unknown",
                           f"auto_map {sorted(config.auto_map or {})}: loading needs "
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


def _pickle_risks(folder: Path, rel: str) -> list[dict[str, Any]]:
    from lineage.formats.pickle_scan import scan_pickle_file

    try:
        scan = scan_pickle_file(folder / rel)
    except InputError as exc:
        return [_risk(rel, "unreadable", "unknown", str(exc))]
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
