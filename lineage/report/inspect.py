"""`lineage inspect` and `lineage report`: one look at a model folder, from its files only.

What is in it (formats, shards, name anatomy), what the weights are (parameters, dtypes,
bits per weight, quantization), what it costs to run (memory at a context and batch),
whether it is safe to open (risks), whether it is intact (three separate verdicts), how
open its provenance is, and which licence it claims. Nothing is loaded or executed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lineage.errors import InputError, UsageError
from lineage.formats.folder import FolderModel, read_folder
from lineage.report.files import WEIGHT_FORMATS
from lineage.report.license import find_license
from lineage.report.memory import estimate_memory
from lineage.report.provenance import provenance
from lineage.report.risks import folder_risks
from lineage.report.weights import quantization, weights_summary
from lineage.store import Store
from lineage.verify import checksums_verdict

REPORT_SPEC = "lineage-report/1"


def inspect_model(
    path: str | Path, *, sums: str | Path | None = None, context: int = 4096, batch: int = 1,
    store: Store | None = None,
) -> dict[str, Any]:
    path = Path(path)
    if not path.exists():
        raise InputError(path, "no such file or folder")
    if context < 1 or batch < 1:
        raise UsageError("--context and --batch must be at least 1")
    model = read_folder(path)  # the folder model verify and the exp gate use too
    folder, files, links = model.root, model.files, model.links
    weights = weights_summary(folder, files)
    config, tokenizer, adapter = model.config, model.tokenizer, model.adapter
    risks = folder_risks(model)
    has_weights = any(f["format"] in WEIGHT_FORMATS for f in files)
    return {
        "spec": REPORT_SPEC, "path": str(path.resolve()),
        "files": files, "links": links,
        "parameters": weights["parameters"], "tensors": weights["tensors"],
        "dtypes": weights["dtypes"], "uncounted_pickles": weights["uncounted_pickles"],
        "quantization": quantization(weights, config, files),
        "memory": _memory(weights, config, context, batch),
        "precision_warnings": _precision_warnings(weights, config),
        "risks": risks,
        "integrity": _integrity(model, sums),
        "provenance": provenance(folder, has_weights=has_weights, store=store),
        "license": find_license(folder, weights["gguf"].get("license")),
        "config": _config_dict(config), "tokenizer": _tokenizer_dict(tokenizer),
        "adapter": adapter.__dict__ if adapter else None,
        "architecture": (config.model_type if config else None)
        or weights["gguf"].get("architecture"),
    }


def _memory(weights: dict[str, Any], config: Any, context: int, batch: int) -> dict[str, Any]:
    g = weights["gguf"]
    if config is not None and config.num_hidden_layers:
        shape = (config.num_hidden_layers, config.num_key_value_heads, config.head_dim,
                 "config.json")
    elif g:
        shape = (g.get("layers"), g.get("kv_heads"), g.get("head_dim"), "GGUF metadata")
    else:
        shape = (None, None, None, "neither config.json nor GGUF metadata")
    layers, kv_heads, head_dim, source = shape
    return estimate_memory(weights_bytes=weights["weights_bytes"], layers=layers,
                           kv_heads=kv_heads, head_dim=head_dim, context=context, batch=batch,
                           source=source)


def _precision_warnings(weights: dict[str, Any], config: Any) -> list[str]:
    warnings = []
    if "BF16" in weights["dtypes"] or (config and config.torch_dtype == "bfloat16"):
        warnings.append("BF16 weights run as FP16 can overflow to inf/NaN (FP16 max 65504): "
                        "keep BF16 or FP32 where the runtime allows")
    if set(weights["dtypes"]) & {"F8_E4M3", "F8_E5M2"}:
        warnings.append("FP8 weights need a runtime with FP8 support (or dequantization)")
    return warnings


def _integrity(model: FolderModel, sums: str | Path | None) -> dict[str, Any]:
    """Three verdicts never merged; the structure one is the folder model's (as in verify)."""
    checksums = checksums_verdict(model.root, sums, snapshot=model.snapshot)
    return {"structure": model.structure,
            "checksums": {"ok": checksums["ok"], "files": checksums["files"]},
            "load": "not-tested"}


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
