"""How the weights are stored: read from the weights, cross-checked with what is declared.

The answer comes from the weights themselves: safetensors dtypes, GGUF tensor types, ONNX
initializer types. Declared values are cross-checked against them, and each disagreement
is reported: config.json `quantization_config` and `torch_dtype`, GGUF `general.file_type`.
A weights file's own name (`-Q4_K_M.gguf`, `-GPTQ-Int4`) is shown as a hint only, and a
hint the weights contradict is a disagreement too. The names of other files (chat templates,
tokenizers, READMEs) say nothing about the weights and are never read for this.
"""

from __future__ import annotations

import re
from typing import Any

from lineage.diligence.weights import FLOAT_DTYPES
from lineage.formats.hf_config import ModelConfig

_TORCH_DTYPES = {"float32": "F32", "float16": "F16", "bfloat16": "BF16", "float64": "F64"}
_FLOAT_ALIASES = {"FLOAT": "F32", "FLOAT16": "F16", "BFLOAT16": "BF16", "DOUBLE": "F64",
                  "FP32": "F32", "FP16": "F16", "FP64": "F64"}
# general.file_type names whose tensors carry another type name (llama.cpp's ftype mixes)
_FILE_TYPE_TENSORS = {"ALL_F32": "F32", "MOSTLY_IQ3_XS": "IQ3_S", "MOSTLY_IQ3_M": "IQ3_S",
                      "MOSTLY_IQ2_M": "IQ2_S", "MOSTLY_MXFP4_MOE": "MXFP4",
                      "MOSTLY_Q2_K_S": "Q2_K"}
_K_MIX = re.compile(r"^(Q\d_K)_(S|M|L|XL)$")
_WEIGHT_SUFFIXES = (".gguf", ".safetensors", ".onnx", ".bin", ".pt", ".pth", ".ckpt")
_FAMILIES = {"GPTQ": "gptq", "AWQ": "awq", "BNB": "bitsandbytes", "FP8": "fp8",
             "MXFP4": "mxfp4", "EXL2": "exl2", "EXL3": "exl3", "MLX": "mlx"}


def quantization(weights: dict[str, Any], config: ModelConfig | None,
                 files: list[dict[str, Any]]) -> dict[str, Any]:
    """method, stored precision, declared values, the name hint and every disagreement."""
    dtypes: dict[str, int] = weights["dtypes"]
    declared = _declared(weights, config)
    hint = _name_hint(files, dtypes, declared)
    disagreements = [d["detail"] for d in declared if d["agrees"] is False]
    if hint and hint["agrees"] is False:
        disagreements.append(f"the weights file name says {hint['value']}, the weights are "
                             f"{_stored(dtypes)}")
    evidence = [f"weights: {_stored(dtypes)}"] if dtypes else []
    evidence += [f"{d['source']}: {d['value']}" for d in declared]
    return {"method": _method(weights, config, declared),
            "stored": _stored(dtypes) if dtypes else None,
            "bits_per_weight": weights["bits_per_weight"],
            "declared": declared, "name_hint": hint, "disagreements": disagreements,
            "evidence": evidence,
            "reason": _reason(weights)}


def _reason(weights: dict[str, Any]) -> str | None:
    """Why there is no answer, when there is none."""
    if not weights["present"]:
        return "no weights in this folder"
    if not weights["parameters"]:
        return "the weights are in pickle files, never loaded here, so not counted"
    return None


def _method(weights: dict[str, Any], config: ModelConfig | None,
            declared: list[dict[str, Any]]) -> str | None:
    dtypes = set(weights["dtypes"])
    if not dtypes:
        return None
    configured = next((d for d in declared
                       if d["source"] == "config.json quantization_config"), None)
    if config and config.quantization and configured and configured["agrees"] is not False:
        return config.quantization.method  # the weights do not contradict it
    quantized = dtypes - FLOAT_DTYPES
    gguf_types = {t for g in weights["gguf_files"] for t in g["tensor_types"]}
    if quantized & gguf_types:
        file_type = next((d["value"] for d in declared
                          if d["source"].startswith("GGUF") and d["agrees"]), None)
        return f"gguf {file_type or _dominant(weights['dtypes'], quantized)}"
    if dtypes & {"F8_E4M3", "F8_E5M2", "FLOAT8E4M3FN", "FLOAT8E5M2"}:
        return "fp8"
    if quantized:
        return "integer"
    return "none"


def _declared(weights: dict[str, Any], config: ModelConfig | None) -> list[dict[str, Any]]:
    """Each declared value, and whether the weights agree (None: nothing to check against)."""
    out = []
    for g in weights["gguf_files"]:
        if g["file_type"]:
            agrees = _file_type_agrees(g["file_type"], g["tensor_types"])
            out.append(_decl(f"GGUF general.file_type ({g['file']})", g["file_type"], agrees,
                             f"{g['file']} declares {g['file_type']} but its tensors are "
                             f"{_stored(g['tensor_types'])}"))
    if config and config.quantization:
        q = config.quantization
        value = q.method + (f" {q.bits}-bit" if q.bits else "") + (f" {q.detail}" if q.detail
                                                                    else "")
        agrees = _config_method_agrees(q.method, weights["dtypes"])
        out.append(_decl("config.json quantization_config", value, agrees,
                         f"config.json declares {q.method} quantization but the weights are "
                         f"{_stored(weights['dtypes'])}"))
    if config and config.torch_dtype and not config.quantization:
        agrees = _torch_dtype_agrees(config.torch_dtype, weights["dtypes"])
        out.append(_decl("config.json torch_dtype", config.torch_dtype, agrees,
                         f"config.json says torch_dtype {config.torch_dtype} but the weights "
                         f"are {_stored(weights['dtypes'])}"))
    return out


def _decl(source: str, value: str, agrees: bool | None, detail: str) -> dict[str, Any]:
    return {"source": source, "value": value, "agrees": agrees,
            "detail": detail if agrees is False else ""}


def _config_method_agrees(method: str, dtypes: dict[str, int]) -> bool | None:
    """Does a quantization_config method match the stored dtypes? None: cannot tell."""
    if not dtypes:
        return None
    stored = set(dtypes)
    if method in ("gptq", "awq", "bitsandbytes", "mxfp4", "hqq", "exl2", "exl3", "eetq", "mlx"):
        return bool(stored & {"I32", "U32", "I8", "U8", "I16", "U16", "F4"})
    if method == "fp8":
        return any(d.startswith("F8_") for d in stored)
    return None


def _file_type_agrees(file_type: str, tensor_types: dict[str, int]) -> bool | None:
    if not tensor_types or file_type.startswith(("UNKNOWN_", "GUESSED")):
        return None  # a vocabulary-only file, or a type llama.cpp did not name
    if file_type == "ALL_F32":
        return set(tensor_types) == {"F32"}
    return _tensor_type(file_type.removeprefix("MOSTLY_")) in tensor_types


def _tensor_type(name: str) -> str:
    """The ggml tensor type a llama.cpp quantization name stores most weights in."""
    name = _FILE_TYPE_TENSORS.get(f"MOSTLY_{name}", name)
    match = _K_MIX.match(name)
    return match.group(1) if match else name


def _torch_dtype_agrees(torch_dtype: str, dtypes: dict[str, int]) -> bool | None:
    expected = _TORCH_DTYPES.get(torch_dtype.removeprefix("torch."))
    if expected is None or not dtypes or set(dtypes) - FLOAT_DTYPES:
        return None  # quantized weights keep some tensors in a float of their own choosing
    floats = {_FLOAT_ALIASES.get(d, d) for d in dtypes if d in FLOAT_DTYPES}
    return expected == _dominant({_FLOAT_ALIASES.get(d, d): n for d, n in dtypes.items()},
                                 floats) if floats else None


def _name_hint(files: list[dict[str, Any]], dtypes: dict[str, int],
               declared: list[dict[str, Any]]) -> dict[str, Any] | None:
    """What the weights files' own names say: a hint, never the answer."""
    named = sorted({(f["name"]["quant"], f["path"]) for f in files
                    if f["name"].get("quant") and f["path"].lower().endswith(_WEIGHT_SUFFIXES)})
    if not named:
        return None
    values = sorted({q for q, _ in named})
    value = ", ".join(values)
    agree = [_hint_agrees(v, dtypes, declared) for v in values]
    agrees = False if False in agree else (True if agree and all(agree) else None)
    return {"value": value, "files": [p for _, p in named], "agrees": agrees,
            "note": "from the weights files' names: a hint, not evidence"}


def _hint_agrees(hint: str, dtypes: dict[str, int],
                 declared: list[dict[str, Any]]) -> bool | None:
    if not dtypes:
        return None
    upper = hint.upper().removeprefix("UD-").removeprefix("I1-")
    stored = {_FLOAT_ALIASES.get(d, d) for d in dtypes}
    upper = _FLOAT_ALIASES.get(upper, upper)
    if re.fullmatch(r"(B?F\d+|Q\d.*|IQ\d.*|TQ\d.*|MXFP4|NVFP4)", upper):
        return _tensor_type(upper) in stored
    family = next((m for k, m in _FAMILIES.items() if upper.startswith(k)), None)
    if family == "fp8":
        return any(d.startswith(("F8_", "FLOAT8")) for d in dtypes)
    configured = [d["value"].split()[0] for d in declared
                  if d["source"] == "config.json quantization_config"]
    if family is None or (configured and family != configured[0]):
        return None if family is None else False
    return _config_method_agrees(family, dtypes)


def _stored(dtypes: dict[str, int]) -> str:
    """e.g. "Q8_0 98.5%, F32 1.5%" (shares of the weights' elements)."""
    total = sum(dtypes.values())
    if not total:
        return "no tensors"
    if len(dtypes) == 1:
        return f"all {next(iter(dtypes))}"
    return ", ".join(f"{d} {n / total:.1%}" for d, n in dtypes.items())


def _dominant(dtypes: dict[str, int], among: set[str]) -> str:
    return max(sorted(among), key=lambda d: dtypes.get(d, 0))

