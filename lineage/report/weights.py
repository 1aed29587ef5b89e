"""What the weights are: tensors, parameters, dtype shares, bits per weight, quantization.

Read from headers only: safetensors headers, GGUF tensor infos, ONNX initializers. Pickle
archives are never loaded, so their parameters are not counted (the report says so).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from lineage.errors import InputError
from lineage.formats import gguf, onnx_reader
from lineage.formats import safetensors as st
from lineage.formats.hf_config import ModelConfig


def weights_summary(folder: Path, files: list[dict[str, Any]]) -> dict[str, Any]:
    params: Counter[str] = Counter()
    data_bytes = 0
    tensors = 0
    gguf_facts: dict[str, Any] = {}
    errors: list[dict[str, str]] = []
    uncounted: list[str] = []
    for entry in files:
        path = folder / entry["path"]
        kind = entry["format"]
        try:
            if kind == "safetensors":
                header = st.read_header(path)
                for t in header.tensors:
                    params[t.dtype] += t.elements
                data_bytes += header.data_size
                tensors += len(header.tensors)
            elif kind == "gguf":
                model = gguf.read_gguf(path)
                for t in model.tensors:
                    params[t.type_name] += t.elements
                data_bytes += model.data_size
                tensors += len(model.tensors)
                gguf_facts = gguf_facts or _gguf_facts(model)
            elif kind == "onnx":
                model = onnx_reader.read_onnx(path)
                for t in model.initializers:
                    params[t.data_type] += t.elements
                data_bytes += sum(t.nbytes for t in model.initializers)
                tensors += len(model.initializers)
            elif kind == "pickle":
                uncounted.append(entry["path"])
        except InputError as exc:
            errors.append({"file": entry["path"], "rule": getattr(exc, "rule_id", exc.rule),
                           "message": str(exc)})
    total = sum(params.values())
    return {
        "tensors": tensors, "parameters": total, "dtypes": dict(params.most_common()),
        "weights_bytes": data_bytes,
        "bits_per_weight": round(8 * data_bytes / total, 3) if total else None,
        "uncounted_pickles": uncounted, "errors": errors, "gguf": gguf_facts,
    }


def _gguf_facts(model: gguf.GGUFFile) -> dict[str, Any]:
    heads = model.head_count
    kv_heads = model.head_count_kv
    as_int = lambda v: max(v) if isinstance(v, list) else v  # noqa: E731 - per-layer lists
    head_dim = None
    if model.embedding_length and as_int(heads):
        head_dim = model.embedding_length // as_int(heads)
    return {"architecture": model.architecture, "file_type": model.file_type,
            "layers": model.block_count, "heads": as_int(heads),
            "kv_heads": as_int(kv_heads) or as_int(heads), "head_dim": head_dim,
            "context_length": model.context_length, "chat_template": bool(model.chat_template),
            "license": model.metadata.get("general.license")}


def quantization(weights: dict[str, Any], config: ModelConfig | None,
                 names: list[dict[str, Any]]) -> dict[str, Any]:
    """The quantization method, and the evidence it was read from."""
    evidence = []
    method = None
    if config and config.quantization:
        method = config.quantization.method
        evidence.append(f"config.json quantization_config: {config.quantization.method}"
                        + (f" {config.quantization.bits}-bit" if config.quantization.bits else ""))
    if weights["gguf"].get("file_type"):
        method = method or f"gguf {weights['gguf']['file_type']}"
        evidence.append(f"GGUF general.file_type {weights['gguf']['file_type']}")
    dtypes = set(weights["dtypes"])
    low = dtypes & {"F8_E4M3", "F8_E5M2", "F4", "F8_E8M0", "I8", "U8"}
    if low:
        evidence.append(f"tensor dtypes {', '.join(sorted(low))}")
        method = method or ("fp8" if {"F8_E4M3", "F8_E5M2"} & low else "integer")
    claimed = sorted({n["name"]["quant"] for n in names if n["name"].get("quant")})
    if claimed:
        evidence.append(f"file names say {', '.join(claimed)}")
        method = method or claimed[0]
    if method is None and dtypes:
        method = "none" if dtypes <= {"F32", "F16", "BF16", "F64", "I64", "I32", "BOOL"} \
            else "unknown"
    return {"method": method, "bits_per_weight": weights["bits_per_weight"],
            "evidence": evidence}
