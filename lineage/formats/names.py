"""Read what a model file or repository name says: model, size, variant, quantization, format.

Name anatomy: `Qwen3-8B-Instruct-Q4_K_M.gguf` is model Qwen3, size 8B, variant
Instruct, quantization Q4_K_M, format GGUF. A name is a claim, not evidence: the same name can
hold other bytes, so these fields describe what a file calls itself and nothing more.

The name is cut at `-` (and at `.` except inside numbers like 3.1 or v0.1); each piece is then
classified left to right. Pieces before the first recognised one form the model name; the
unrecognised ones after it are kept in `extra` (dates like 2507, `hf`, `dynamic`, ...).

    size     8B, 0.5B, 135M, 8x7B (experts x size), 30B-A3B (MoE: total, active),
             17B-16E (Llama 4: experts), E4B (Gemma 3n: effective)
    variant  Instruct, Chat, Base, it, pt, Thinking, SFT, DPO (as written)
    quant    GGUF types upper-cased (Q4_K_M, IQ2_XXS, Q8_0, F16, BF16, TQ1_0, MXFP4, ...),
             family-bits pairs (GPTQ-Int4, MLX-4bit, bnb-4bit, EXL2-4.0bpw), lone families
             (AWQ, GPTQ), FP8, W4A16, INT8, and UD-/i1- prefixes kept (UD-Q4_K_XL)
    format   from the extension (gguf, safetensors, bin, onnx, pt, pth, ckpt) or a repository
             suffix (-GGUF, -ONNX, -MLX)
    shard    (n, of) from -00001-of-00004
    mmproj   a vision projector for a GGUF language model (mmproj-*.gguf)
    adapter  a LoRA / PEFT adapter (adapter_model.safetensors, -lora)
    version  v0.1, v1.0
"""

from __future__ import annotations

import re
from typing import TypedDict

__all__ = ["ModelName", "parse_model_name"]


class ModelName(TypedDict):
    model: str | None
    size: str | None
    variant: str | None
    quant: str | None
    format: str | None
    shard: tuple[int, int] | None
    mmproj: bool
    adapter: bool
    version: str | None
    extra: list[str]


EXTENSIONS = {
    ".gguf": "gguf",
    ".safetensors": "safetensors",
    ".bin": "bin",
    ".onnx": "onnx",
    ".pt": "pt",
    ".pth": "pth",
    ".ckpt": "ckpt",
}
FORMAT_TOKENS = {"gguf": "gguf", "onnx": "onnx", "mlx": "mlx"}
# File stems that name a role, not a model (transformers, diffusers, PEFT, llama.cpp exports).
GENERIC_STEMS = {"model", "pytorch_model", "adapter_model", "diffusion_pytorch_model",
                 "consolidated", "tf_model", "flax_model", "ggml-model"}  # fmt: skip
VARIANTS = {"instruct", "chat", "base", "it", "pt", "thinking", "sft", "dpo"}
ADAPTER_TOKENS = {"lora", "qlora", "adapter", "adapter_model"}
# Quantization families that take a bits piece after them; canonical spelling.
FAMILIES = {"gptq": "GPTQ", "awq": "AWQ", "mlx": "MLX", "bnb": "bnb", "exl2": "EXL2",
            "exl3": "EXL3", "hqq": "HQQ", "aqlm": "AQLM"}  # fmt: skip
QUANT_PREFIXES = {"ud": "UD", "i1": "i1"}  # unsloth dynamic, mradermacher imatrix

_SHARD = re.compile(r"-(\d{1,6})-of-(\d{1,6})$")
# Split at '-' and at '.' unless the dot sits between two digits (3.1, v0.1, 2.5).
_SPLIT = re.compile(r"-|\.(?!\d)|(?<!\d)\.")
_SIZE = re.compile(r"(?:\d+x)?\d+(?:\.\d+)?[bm]|e\d+(?:\.\d+)?b", re.IGNORECASE)
_ACTIVE = re.compile(r"a\d+(?:\.\d+)?b", re.IGNORECASE)
_EXPERTS = re.compile(r"\d+e", re.IGNORECASE)
_GGUF_QUANT = re.compile(
    r"i?q\d+(?:_[0-9a-z]+)*|tq\d_\d|b?f16|f32|f64|fp(?:4|8|16|32)|mxfp4|nvfp4"
    r"|u?int[248]|w\d+a\d+|q4f16|bnb4",
    re.IGNORECASE,
)
_BITS = re.compile(r"int\d+|\d+(?:\.\d+)?bits?|\d+(?:\.\d+)?bpw|w\d+a\d+", re.IGNORECASE)
_VERSION = re.compile(r"v\d+(?:\.\d+)*", re.IGNORECASE)
_GENERIC_SUFFIX = re.compile(
    r"(pytorch_model|adapter_model|diffusion_pytorch_model|model|consolidated)_(.+)",
    re.IGNORECASE,
)


def parse_model_name(filename: str) -> ModelName:
    """Split a file or repository name into its parts; unknown parts land in `extra`."""
    name = filename.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    fmt, stem = _split_extension(name)
    shard, stem = _split_shard(stem)
    result: ModelName = {
        "model": None, "size": None, "variant": None, "quant": None, "format": fmt,
        "shard": shard, "mmproj": False, "adapter": False, "version": None, "extra": [],
    }  # fmt: skip
    tokens = [t for t in _SPLIT.split(_split_generic(stem)) if t]
    model: list[str] = []
    index = 0
    while index < len(tokens):
        used = _classify(tokens, index, result)
        if used:
            index += used
            continue
        target = model if _nothing_found_yet(result) else result["extra"]
        target.append(tokens[index])
        index += 1
    result["model"] = "-".join(model) or None
    return result


def _split_extension(name: str) -> tuple[str | None, str]:
    dot = name.rfind(".")
    if dot > 0 and name[dot:].lower() in EXTENSIONS:
        return EXTENSIONS[name[dot:].lower()], name[:dot]
    return None, name


def _split_shard(stem: str) -> tuple[tuple[int, int] | None, str]:
    match = _SHARD.search(stem)
    if not match:
        return None, stem
    return (int(match.group(1)), int(match.group(2))), stem[: match.start()]


def _split_generic(stem: str) -> str:
    # "model_fp16.onnx" (transformers.js exports): a generic stem, "_", then a quantization
    match = _GENERIC_SUFFIX.fullmatch(stem)
    return f"{match.group(1)}-{match.group(2)}" if match else stem


def _nothing_found_yet(result: ModelName) -> bool:
    # mmproj / adapter / generic pieces may come first ("mmproj-Qwen2.5-VL-7B-..."): they do
    # not end the model name, a size, variant, quantization or version does
    return not any(result[key] for key in ("size", "variant", "quant", "version"))


def _classify(tokens: list[str], index: int, result: ModelName) -> int:
    """Record tokens[index] (and maybe the next ones); return how many were used, or 0."""
    for rule in (_role, _quant_pair, _size, _quant_single, _format, _variant, _version):
        used = rule(tokens, index, result)
        if used:
            return used
    return 0


def _role(tokens: list[str], index: int, result: ModelName) -> int:
    lowered = tokens[index].lower()
    if lowered == "mmproj":
        result["mmproj"] = True
        return 1
    if lowered in ADAPTER_TOKENS:
        result["adapter"] = True
        return 1
    return 1 if lowered in GENERIC_STEMS else 0


def _quant_pair(tokens: list[str], index: int, result: ModelName) -> int:
    lowered = tokens[index].lower()
    following = tokens[index + 1] if index + 1 < len(tokens) else ""
    if lowered in FAMILIES:
        if lowered == "mlx":
            result["format"] = result["format"] or "mlx"
        if _BITS.fullmatch(following):
            _set_quant(result, f"{FAMILIES[lowered]}-{following}")
            return 2
        if lowered != "mlx":  # a lone "MLX" names the format only
            _set_quant(result, FAMILIES[lowered])
        return 1
    if lowered in QUANT_PREFIXES and _GGUF_QUANT.fullmatch(following):
        _set_quant(result, f"{QUANT_PREFIXES[lowered]}-{following.upper()}")
        return 2
    return 0


def _quant_single(tokens: list[str], index: int, result: ModelName) -> int:
    token = tokens[index]
    if _GGUF_QUANT.fullmatch(token):
        _set_quant(result, token.upper())
        return 1
    if _BITS.fullmatch(token):  # "4bit" alone (mlx-community names)
        _set_quant(result, token)
        return 1
    return 0


def _set_quant(result: ModelName, quant: str) -> None:
    if result["quant"] is None:
        result["quant"] = quant
    else:  # a second quantization-looking piece: keep it visible rather than drop it
        result["extra"].append(quant)


def _size(tokens: list[str], index: int, result: ModelName) -> int:
    if result["size"] is not None or not _SIZE.fullmatch(tokens[index]):
        return 0
    size = _normalise_size(tokens[index])
    following = tokens[index + 1] if index + 1 < len(tokens) else ""
    if _ACTIVE.fullmatch(following) or _EXPERTS.fullmatch(following):  # 30B-A3B, 17B-16E
        result["size"] = f"{size}-{following.upper()}"
        return 2
    result["size"] = size
    return 1


def _normalise_size(token: str) -> str:
    # 9b -> 9B, 8x7b -> 8x7B, e4b -> E4B: the unit and prefix upper-cased, "x" kept lower
    return token[:-1].upper().replace("X", "x") + token[-1].upper()


def _format(tokens: list[str], index: int, result: ModelName) -> int:
    lowered = tokens[index].lower()
    if lowered not in FORMAT_TOKENS:
        return 0
    result["format"] = result["format"] or FORMAT_TOKENS[lowered]
    return 1


def _variant(tokens: list[str], index: int, result: ModelName) -> int:
    if result["variant"] is not None or tokens[index].lower() not in VARIANTS:
        return 0
    result["variant"] = tokens[index]
    return 1


def _version(tokens: list[str], index: int, result: ModelName) -> int:
    if result["version"] is not None or not _VERSION.fullmatch(tokens[index]):
        return 0
    result["version"] = tokens[index]
    return 1
