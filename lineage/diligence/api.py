"""Due diligence from Python: `inspect`, `verify` and `report` of a model file or folder.

Each function is its command: the same parameters (the command's options in snake_case,
keyword-only after the path) and the same answer, typed (lineage.diligence.answers):

    lineage.inspect("models/minilm")            # Inspection: `lineage inspect --json`
    lineage.verify("models/minilm", sums="SHA256SUMS")   # FolderVerification
    verify_cache("~/.cache/huggingface")                 # `lineage verify --cache`
    lineage.report("models/minilm", format="html")       # the text `lineage report` writes

Files are read, never loaded or executed. Bad input (no such folder, a malformed list, an
unknown risk kind) raises a lineage.errors class; a failed verdict is an answer, not an
error. The answer modules are imported on first call, so importing this one is cheap.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lineage.diligence.answers import CacheVerification, FolderVerification, Inspection
    from lineage.store.base import BaseStore

PathLike = str | os.PathLike[str]
REPORT_FORMATS = ("md", "html", "json")


def inspect(path: PathLike, *, sums: PathLike | None = None, context: int = 4096,
            batch: int = 1, hash_files: bool | None = None,
            store: BaseStore | None = None, sums_key: PathLike | None = None,
            supported_ops: PathLike | None = None, provider: str | None = None) -> Inspection:
    """`lineage inspect PATH`: what a model file or folder holds, whether it is safe to
    open (`risks`, worst first), whether it is intact (`integrity`), what it costs to run
    at `context` tokens and `batch` (`memory`), how open its provenance is (looked up in
    `store` when given) and which licence it claims.

    `sums`: a trusted SHA256SUMS list to check the files against. `hash_files`: SHA-256
    every file (True), none (False), or only when they add up to at most 1 GiB (None).
    `sums_key`: the key the list must be signed by (`integrity.authenticity`, as `verify`).
    `supported_ops` (a file of op types, one a line) or `provider` (a provider with a
    built-in list: CPUExecutionProvider): add `partition`, the pieces each ONNX graph
    splits into between that provider and the CPU, and the tensors handed between them.
    """
    from lineage.diligence.answers import Inspection
    from lineage.diligence.inspect import inspect_model

    return Inspection.from_dict(inspect_model(
        os.fspath(path), sums=_fspath(sums), context=context, batch=batch, store=store,
        hash_files=hash_files, sums_key=_fspath(sums_key), supported_ops=_fspath(supported_ops),
        provider=provider))


def verify(path: PathLike, *, sums: PathLike | None = None, strict: bool = False,
           allow_risk: Iterable[str] = (), max_header_mib: float = 16.0,
           workers: int | None = None,
           sums_key: PathLike | None = None) -> FolderVerification:
    """`lineage verify DIR`: five verdicts never merged (`structure`, `risks`,
    `checksums`, `authenticity`, `load`); `ok` is True when every verdict that ran passed.

    `sums`: a trusted SHA256SUMS list (without it, a Hugging Face cache snapshot is
    checked against its blob names, any other folder's checksums are not checked);
    `strict`: files the list does not name fail the check; `allow_risk`: risk kinds
    accepted by name (e.g. "python-code"); `max_header_mib`: the largest safetensors
    header accepted; `workers`: hashing threads (None: one per core); `sums_key`: an SSH
    allowed_signers file, a minisign public key or an OpenPGP public key that the list's
    signature (LIST.sig, LIST.minisig or LIST.asc, by the key's format) must verify
    against (the `authenticity` verdict; not checked without it).
    """
    from lineage.diligence.answers import FolderVerification
    from lineage.diligence.verify import verify_folder

    return FolderVerification.from_dict(verify_folder(
        os.fspath(path), sums=_fspath(sums), max_header_mib=max_header_mib, workers=workers,
        strict=strict, allow_risks=tuple(allow_risk), sums_key=_fspath(sums_key)))


def verify_cache(cache: PathLike | None = None, *,
                 workers: int | None = None) -> CacheVerification:
    """`lineage verify --cache [DIR]`: every snapshot of every repository of a Hugging Face
    hub cache against its blob names, each distinct blob hashed once. `cache`: a hub cache
    or HF_HOME holding one as `hub/`; None: the cache huggingface_hub uses (HF_HUB_CACHE,
    HF_HOME, ~/.cache/huggingface/hub). `ok` when every snapshot passed."""
    from lineage.diligence.cache import verify_cache as check

    return check(_fspath(cache), workers=workers)


def report(path: PathLike, *, format: str = "md", sums: PathLike | None = None,
           context: int = 4096, batch: int = 1, hash_files: bool | None = None,
           store: BaseStore | None = None, sums_key: PathLike | None = None) -> str:
    """`lineage report DIR --format F`: the due-diligence report as the text the command
    writes: Markdown ("md"), one self-contained HTML page ("html") or the inspection as
    JSON ("json"). The other parameters are `inspect`'s."""
    from lineage.errors import UsageError

    if format not in REPORT_FORMATS:
        raise UsageError(f"--format must be md, html or json, not {format!r}")
    inspection = inspect(path, sums=sums, context=context, batch=batch,
                         hash_files=hash_files, store=store, sums_key=sums_key).to_dict()
    if format == "json":
        import json

        from lineage.jsonout import to_jsonable

        return json.dumps(to_jsonable(inspection), indent=2, ensure_ascii=False) + "\n"
    from lineage.diligence.render import render_html, render_markdown

    return render_html(inspection) if format == "html" else render_markdown(inspection)


def _fspath(path: PathLike | None) -> str | None:
    return None if path is None else os.fspath(path)
