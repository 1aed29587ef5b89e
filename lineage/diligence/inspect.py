"""`lineage inspect` and `lineage report`: one look at a model folder, from its files only.

What is in it (formats, shards, name anatomy), what the weights are (parameters, dtypes,
bits per weight, quantization), what it costs to run (memory at a context and batch),
whether it is safe to open (risks), whether it is intact (three separate verdicts), how
open its provenance is, which licence it claims, and what its model card declares.
Nothing is loaded or executed.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lineage.diligence.architecture import describe_architecture
from lineage.diligence.authenticity import authenticity_verdict, not_checked
from lineage.diligence.card import model_card
from lineage.diligence.hashes import file_hashes, hashes_from_sums
from lineage.diligence.license import find_license
from lineage.diligence.memory import estimate_memory
from lineage.diligence.notes import model_notes
from lineage.diligence.partition import graph_partition
from lineage.diligence.provenance import provenance
from lineage.diligence.quantization import quantization
from lineage.diligence.risks import folder_risks
from lineage.diligence.verify import checksums_verdict, chosen_files, require_model_path
from lineage.diligence.weights import weights_summary
from lineage.errors import UsageError
from lineage.formats.folder import FolderModel, read_folder
from lineage.store.base import BaseStore

REPORT_SPEC = "lineage-report/1"


def inspect_model(
    path: str | Path, *, sums: str | Path | None = None, context: int = 4096, batch: int = 1,
    store: BaseStore | None = None, hash_files: bool | None = None,
    sums_key: str | Path | None = None, supported_ops: str | Path | None = None,
    provider: str | None = None,
) -> dict[str, Any]:
    """The inspection as a dict (docs/reports.md lists its keys).

    `hash_files`: SHA-256 every file (True), none (False), or only when the files add up
    to at most 1 GiB (None, the default; lineage.diligence.hashes). `supported_ops` (a file
    of op types) or `provider` (a name with a built-in list): add `partition`, how each
    ONNX graph splits between that provider and the CPU.
    """
    path = Path(path)
    require_model_path(path)  # a device or FIFO is refused unopened; a cache is pointed
    if context < 1 or batch < 1:
        raise UsageError("--context and --batch must be at least 1")
    if sums_key is not None and sums is None:
        raise UsageError("--sums-key checks the signature of a --sums list: give the list")
    # Before any hashing: a key file of no known format is an error at once.
    authenticity = (not_checked() if sums_key is None or sums is None
                    else authenticity_verdict(sums, sums_key))
    model = read_folder(path)  # the folder model verify and the exp gate use too
    folder, files, links = model.root, model.files, model.links
    partition = (None if supported_ops is None and provider is None else
                 graph_partition(folder, files, supported_ops=supported_ops, provider=provider))
    config, tokenizer, adapter = model.config, model.tokenizer, model.adapter
    weights = weights_summary(folder, files, config)
    architecture = describe_architecture(config, weights["gguf"])
    risks = folder_risks(model)
    card = model_card(folder)
    report = {
        "spec": REPORT_SPEC, "path": str(path.resolve()), "generated": _generated(),
        "files": files, "links": links,
        "weights": {"present": weights["present"], "reason": weights["absent_reason"]},
        "parameters": weights["parameters"], "tensors": weights["tensors"],
        "dtypes": weights["dtypes"], "buffers": weights["buffers"],
        "uncounted_pickles": weights["uncounted_pickles"],
        "quantization": quantization(weights, config, files),
        "model": architecture,
        "memory": _memory(weights, architecture, context, batch),
        "precision_warnings": _precision_warnings(weights, config),
        "notes": model_notes(folder, files, weights, config),
        "risks": risks,
        "integrity": _integrity(model, sums, authenticity),
        "provenance": provenance(folder, has_weights=weights["present"], store=store,
                                 absent_reason=weights["absent_reason"],
                                 declared=card["datasets"] if card else None),
        "license": find_license(folder, weights["gguf"].get("license"), card),
        **({"card": card} if card is not None else {}),  # no README.md: no key
        "config": _config_dict(config), "tokenizer": _tokenizer_dict(tokenizer),
        "adapter": adapter.__dict__ if adapter else None,
        "architecture": architecture["family"],
    }
    report["hashes"] = file_hashes(folder, files, hash_files=hash_files,
                                   known=hashes_from_sums(report["integrity"]),
                                   vetted=model.snapshot.blobs if model.snapshot else None)
    if partition is not None:  # asked for only: no key otherwise
        report["partition"] = partition
    return report


def _generated() -> dict[str, str]:
    """Which lineage wrote the report, and when (UTC, to the second)."""
    from lineage.version import __version__

    now = datetime.now(UTC).replace(microsecond=0)
    return {"lineage": __version__, "at": now.isoformat().replace("+00:00", "Z")}


def _memory(weights: dict[str, Any], architecture: dict[str, Any], context: int,
            batch: int) -> dict[str, Any]:
    return estimate_memory(
        weights_bytes=weights["weights_bytes"] + weights["buffers"]["bytes"],
        architecture=architecture, context=context, batch=batch,
        weights_present=weights["present"], absent_reason=weights["absent_reason"],
        uncounted=weights["uncounted_pickles"])


def _precision_warnings(weights: dict[str, Any], config: Any) -> list[str]:
    dtypes = set(weights["dtypes"])
    warnings = []
    if dtypes & {"BF16", "BFLOAT16"}:
        warnings.append("BF16 weights run as FP16 can overflow to inf/NaN (FP16 max 65504): "
                        "keep BF16 or FP32 where the runtime allows")
    elif config and config.torch_dtype == "bfloat16" and dtypes & {"F16", "FLOAT16"}:
        warnings.append("config.json says bfloat16 but the weights are stored as F16: a BF16 "
                        "to FP16 conversion can have overflowed to inf/NaN (FP16 max 65504)")
    if dtypes & {"F8_E4M3", "F8_E5M2", "FLOAT8E4M3FN", "FLOAT8E5M2"}:
        warnings.append("FP8 weights need a runtime with FP8 support (or dequantization)")
    return warnings


def _integrity(model: FolderModel, sums: str | Path | None,
               authenticity: dict[str, Any]) -> dict[str, Any]:
    """Verdicts never merged; the structure one is the folder model's (as in verify)."""
    checksums = checksums_verdict(model.root, sums, snapshot=model.snapshot,
                                  only=chosen_files(model))
    return {"structure": model.structure,
            "checksums": {"ok": checksums["ok"], "source": checksums["source"],
                          "files": checksums["files"]},
            "authenticity": authenticity, "load": "not-tested"}


def _config_dict(config: Any) -> dict[str, Any] | None:
    if config is None:
        return None
    fields = ("model_type", "architectures", "num_hidden_layers", "hidden_size",
              "num_attention_heads", "num_key_value_heads", "head_dim", "vocab_size",
              "torch_dtype")
    out = {k: getattr(config, k) for k in fields}
    out["context_length"] = config.context_length
    out["needs_remote_code"] = config.needs_remote_code
    out["quantization"] = config.quantization.__dict__ if config.quantization else None
    return out


def _tokenizer_dict(tokenizer: Any) -> dict[str, Any] | None:
    if tokenizer is None:
        return None
    return {"files": list(tokenizer.present), "chat_template": tokenizer.has_chat_template,
            "chat_template_sources": list(tokenizer.chat_template_sources),
            "tokenizer_class": tokenizer.tokenizer_class}
