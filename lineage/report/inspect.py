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
from lineage.formats import hf_config
from lineage.report.files import WEIGHT_FORMATS, list_files
from lineage.report.license import find_license
from lineage.report.memory import estimate_memory
from lineage.report.provenance import provenance
from lineage.report.risks import find_risks
from lineage.report.weights import quantization, weights_summary
from lineage.store import Store
from lineage.verify import verify_folder

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
    folder = path if path.is_dir() else path.parent
    files, links = list_files(folder)
    if path.is_file():
        files = [f for f in files if f["path"] == path.name]
    weights = weights_summary(folder, files)
    config, tokenizer, adapter, problems = _configs(folder)
    python = hf_config.python_files(folder) if path.is_dir() else []
    risks = find_risks(folder, files, links, config, tokenizer, python,
                       bool(weights["gguf"].get("chat_template")))
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
        "integrity": _integrity(folder, files, weights, problems, sums),
        "provenance": provenance(folder, has_weights=has_weights, store=store),
        "license": find_license(folder, weights["gguf"].get("license")),
        "config": _config_dict(config), "tokenizer": _tokenizer_dict(tokenizer),
        "adapter": adapter.__dict__ if adapter else None,
        "architecture": (config.model_type if config else None)
        or weights["gguf"].get("architecture"),
    }


def _configs(folder: Path) -> tuple[Any, Any, Any, list[dict[str, str]]]:
    problems: list[dict[str, str]] = []
    results = []
    for reader in (hf_config.read_config, hf_config.read_tokenizer_files,
                   hf_config.read_adapter_config):
        try:
            results.append(reader(folder))
        except InputError as exc:
            results.append(None)
            problems.append({"file": exc.path, "rule": getattr(exc, "rule_id", "json"),
                             "message": str(exc)})
    return results[0], results[1], results[2], problems


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


def _integrity(folder: Path, files: list[dict[str, Any]], weights: dict[str, Any],
               problems: list[dict[str, str]], sums: str | Path | None) -> dict[str, Any]:
    has_safetensors = any(f["format"] == "safetensors" for f in files)
    verdict = verify_folder(folder, sums=sums) if (has_safetensors or sums) else None
    errors = list(weights["errors"]) + problems
    structure_ok = not errors
    if verdict is not None and has_safetensors:
        errors = verdict["structure"]["errors"] + [
            e for e in errors if not e["file"].endswith(".safetensors")]
        structure_ok = verdict["structure"]["ok"] and not problems and not [
            e for e in weights["errors"] if not e["file"].endswith(".safetensors")]
    checksums = verdict["checksums"] if verdict is not None else {"ok": None, "files": []}
    return {"structure": {"ok": structure_ok, "errors": errors},
            "checksums": {"ok": checksums["ok"], "files": checksums.get("files", [])},
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
