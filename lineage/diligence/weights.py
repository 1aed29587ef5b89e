"""What the weights are: tensors, parameters, buffers, dtype shares, bits per weight.

Read from headers only: safetensors headers, GGUF tensor infos, ONNX initializers. Pickle
archives are never loaded, so their parameters are not counted (the report says so).

A tensor is a weight (a parameter) when it holds floats or quantized values; any other
tensor is a buffer: integer position ids, token type ids, BatchNorm's int64
`num_batches_tracked`, shape constants. An integer tensor counts as quantized weights only
where the folder says it is quantized (config.json `quantization_config`) or a scale tensor
sits next to it (`*.scales`, `*.weight_scale`, `*.absmax`, `*_scale`: GPTQ, AWQ,
bitsandbytes, MLX, compressed-tensors, ONNX QDQ). 64-bit integers and booleans are always
buffers. Bits per weight counts weights only: their bytes x 8 / their elements.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lineage.errors import InputError
from lineage.formats import gguf, onnx_reader
from lineage.formats import safetensors as st
from lineage.formats.hf_config import ModelConfig

FLOAT_DTYPES = frozenset({
    # safetensors
    "F64", "F32", "F16", "BF16", "F8_E5M2", "F8_E4M3", "F8_E8M0", "F8_E4M3FNUZ",
    "F8_E5M2FNUZ", "F4", "F6_E2M3", "F6_E3M2", "C64",
    # ONNX
    "FLOAT", "FLOAT16", "DOUBLE", "BFLOAT16", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2",
    "FLOAT8E5M2FNUZ", "FLOAT4E2M1", "FLOAT8E8M0", "FLOAT6E2M3", "FLOAT6E3M2", "COMPLEX64",
    "COMPLEX128",
})  # fmt: skip
INTEGER_DTYPES = frozenset({
    "BOOL", "U8", "I8", "I16", "U16", "I32", "U32", "I64", "U64",  # safetensors, GGUF
    "UINT8", "INT8", "UINT16", "INT16", "INT32", "INT64", "UINT32", "UINT64", "STRING",
    "UINT4", "INT4", "UINT2", "INT2",  # ONNX
})  # fmt: skip
ALWAYS_BUFFER_DTYPES = frozenset({"I64", "U64", "BOOL", "INT64", "UINT64", "STRING"})
BUFFER_NAMES = ("position_ids", "token_type_ids", "num_batches_tracked")
_SCALE_MARKERS = ("scale", "absmax", "SCB")
_LISTED_BUFFERS = 20
# HF Trainer's pickles that hold no weights (arguments, optimizer and RNG state).
NOT_WEIGHT_PICKLES = ("training_args.bin", "optimizer.pt", "scheduler.pt", "rng_state")


@dataclass(frozen=True)
class _Tensor:
    name: str
    dtype: str
    elements: int
    nbytes: int


def weights_summary(folder: Path, files: list[dict[str, Any]],
                    config: ModelConfig | None = None) -> dict[str, Any]:
    tensors: list[_Tensor] = []
    gguf_files: list[dict[str, Any]] = []
    errors: list[dict[str, str]] = []
    uncounted: list[str] = []
    for entry in files:
        try:
            tensors += _read_tensors(folder / entry["path"], entry, gguf_files, uncounted)
        except InputError as exc:
            errors.append({"file": entry["path"], "rule": getattr(exc, "rule_id", exc.rule),
                           "message": str(exc)})
    summary = _split(tensors, declared_quantized=bool(config and config.quantization))
    present = summary["parameters"] > 0 or bool(uncounted)
    return {**summary, "uncounted_pickles": uncounted, "errors": errors,
            "gguf": _main_gguf(gguf_files), "gguf_files": gguf_files,
            "present": present, "absent_reason": None if present else _absence(files, tensors)}


def _read_tensors(path: Path, entry: dict[str, Any], gguf_files: list[dict[str, Any]],
                  uncounted: list[str]) -> list[_Tensor]:
    kind = entry["format"]
    if kind == "safetensors":
        header = st.read_header(path)
        return [_Tensor(t.name, t.dtype, t.elements, t.end - t.start) for t in header.tensors]
    if kind == "gguf":
        model = gguf.read_gguf(path)
        found = [_Tensor(t.name, t.type_name, t.elements, t.nbytes) for t in model.tensors]
        types: Counter[str] = Counter()
        for t in found:
            types[t.dtype] += t.elements
        gguf_files.append({"file": entry["path"], **_gguf_facts(model),
                           "tensor_types": dict(types.most_common())})
        return found
    if kind == "onnx":
        onnx_model = onnx_reader.read_onnx(path)
        return [_Tensor(t.name, t.data_type, t.elements, t.nbytes)
                for t in onnx_model.initializers]
    if kind == "pickle" and not Path(entry["path"]).name.startswith(NOT_WEIGHT_PICKLES):
        uncounted.append(entry["path"])
    return []


# The routed experts of a mixture of experts: transformers' `...experts.<n>...` (shared
# experts are `shared_expert(s)`: always active) and llama.cpp's `ffn_*_exps` tensors.
_EXPERT = re.compile(r"(^|\.)experts\.|_exps(\.|$)")


def _split(tensors: list[_Tensor], *, declared_quantized: bool) -> dict[str, Any]:
    """Weights and buffers apart: counts, dtypes, bytes, bits per weight."""
    scaled = _scaled_stems(tensors)
    params: Counter[str] = Counter()
    buffers: Counter[str] = Counter()
    weight_bytes = buffer_bytes = 0
    buffer_names: list[str] = []
    for t in tensors:
        if _is_buffer(t, declared_quantized=declared_quantized, scaled=scaled):
            buffers[t.dtype] += t.elements
            buffer_bytes += t.nbytes
            buffer_names.append(t.name)
        else:
            params[t.dtype] += t.elements
            weight_bytes += t.nbytes
    total = sum(params.values())
    experts = sum(t.elements for t in tensors if _EXPERT.search(t.name)
                  and t.name not in buffer_names)
    return {
        "tensors": len(tensors) - len(buffer_names), "parameters": total,
        "expert_parameters": experts,
        "dtypes": dict(params.most_common()), "weights_bytes": weight_bytes,
        "bits_per_weight": round(8 * weight_bytes / total, 3) if total else None,
        "buffers": {"tensors": len(buffer_names), "elements": sum(buffers.values()),
                    "bytes": buffer_bytes, "dtypes": dict(buffers.most_common()),
                    "names": sorted(buffer_names)[:_LISTED_BUFFERS]},
    }


def _is_buffer(t: _Tensor, *, declared_quantized: bool, scaled: set[str]) -> bool:
    if t.dtype in FLOAT_DTYPES or t.dtype not in INTEGER_DTYPES:
        return False  # floats, and GGUF's block-quantized types (Q8_0, Q4_K, IQ2_XS, ...)
    if t.dtype in ALWAYS_BUFFER_DTYPES or t.name.endswith(BUFFER_NAMES):
        return True
    return not (declared_quantized or t.name in scaled or _stem(t.name) in scaled)


def _scaled_stems(tensors: list[_Tensor]) -> set[str]:
    """Stems that a scale tensor hangs off: `x.scales` -> `x`, `x.weight.absmax` -> `x.weight`."""
    stems = set()
    for t in tensors:
        if t.dtype in FLOAT_DTYPES or t.dtype in ("U8", "UINT8", "I8", "INT8"):
            last = t.name.replace("_", ".").rsplit(".", 1)[-1]
            if any(marker in last for marker in _SCALE_MARKERS) or last.endswith("SCB"):
                stems.add(_stem(t.name))
    return stems


def _stem(name: str) -> str:
    cut = max(name.rfind("."), name.rfind("_"))
    return name[:cut] if cut > 0 else name


def _absence(files: list[dict[str, Any]], tensors: list[_Tensor]) -> str:
    """Why a folder has no weights, said plainly."""
    counts = Counter(f["format"] for f in files)
    if not files:
        return "the folder is empty"
    if tensors:
        return f"{len(tensors)} tensors, all buffers (integer ids or constants), no weights"
    if counts["gguf"]:
        what = "a GGUF file" if counts["gguf"] == 1 else f"{counts['gguf']} GGUF files"
        return f"{what} with 0 tensors: vocabulary and metadata only (a tokenizer file)"
    weightish = counts["safetensors"] + counts["onnx"]
    if weightish:
        return f"{weightish} weights file{'s' if weightish > 1 else ''} with 0 tensors"
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    return f"no weights file (safetensors, GGUF, ONNX or pickle) among the files ({kinds})"


def _gguf_facts(model: gguf.GGUFFile) -> dict[str, Any]:
    heads = _as_int(model.head_count)
    kv_heads = _as_int(model.head_count_kv)
    head_dim = None
    if model.embedding_length and heads:
        head_dim = model.embedding_length // heads
    vocab = model.vocab_size or model.arch_value("vocab_size")
    causal = model.arch_value("attention.causal")
    return {"architecture": model.architecture, "file_type": model.file_type,
            "layers": model.block_count, "hidden": model.embedding_length,
            "heads": heads, "kv_heads": kv_heads or heads,
            "head_dim": head_dim, "context_length": model.context_length,
            "vocab": vocab if isinstance(vocab, int) else None,
            "causal": causal if isinstance(causal, bool) else None,
            "tensor_count": len(model.tensors), "chat_template": bool(model.chat_template),
            "chat_template_sha256": hashlib.sha256(model.chat_template.encode()).hexdigest()
            if model.chat_template else None,
            "license": model.metadata.get("general.license"),
            "experts": _as_int(_int_value(model.arch_value("expert_count"))),
            "experts_used": _as_int(_int_value(model.arch_value("expert_used_count"))),
            "quantized_by": _str_value(model.metadata.get("general.quantized_by")),
            "imatrix": _imatrix(model.metadata)}


def _imatrix(metadata: dict[str, Any]) -> dict[str, Any] | None:
    """llama-quantize's record of the importance matrix it used (`quantize.imatrix.*`)."""
    found = {key: metadata.get(f"quantize.imatrix.{key}")
             for key in ("file", "dataset", "entries_count", "chunks_count")}
    if all(value is None for value in found.values()):
        return None
    return {"file": _str_value(found["file"]), "dataset": _str_value(found["dataset"]),
            "entries": _int_value(found["entries_count"]),
            "chunks": _int_value(found["chunks_count"])}


def _str_value(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _int_value(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _as_int(count: int | list[int] | None) -> int | None:
    """A head count; some architectures store one per layer: then the largest."""
    return max(count) if isinstance(count, list) else count


def _main_gguf(gguf_files: list[dict[str, Any]]) -> dict[str, Any]:
    """The language model's facts: not a vision projector, the most tensors first."""
    if not gguf_files:
        return {}
    ranked = sorted(gguf_files, key=lambda g: (Path(g["file"]).name.startswith("mmproj"),
                                               -g["tensor_count"]))
    main = ranked[0]
    return {k: v for k, v in main.items() if k != "tensor_types"}
