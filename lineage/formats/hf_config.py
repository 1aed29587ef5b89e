"""Read a Hugging Face model folder's JSON files: architecture, quantization, tokenizer, adapter.

Reads only: every JSON file goes through `loads_strict` (no duplicate keys, no NaN), no
template is rendered, no `.py` file is imported. `auto_map` in config.json means loading the
model needs `trust_remote_code=True`, which runs the folder's Python files: `python_files`
lists them. A JSON file is read only when it is a regular file of at most `max_bytes` that
stays inside the folder (a symbolic link may point elsewhere in the folder, not out of it).

Multimodal configs nest the language model under `text_config`; its values win over the
top level, where they are often stale defaults. A few older key spellings are read too
(`n_layer`, `n_embd`, `n_head`, `n_positions`, ...), and `dtype` (transformers >= 4.56) as
well as `torch_dtype`.

Every failure names one rule id:

    unreadable  the folder or a file cannot be read, is not a regular file, is larger than
                `max_bytes`, or is a symbolic link leading out of the folder
    json        the file is not strict JSON (the message is loads_strict's)
    config      the document is not an object, or a key has the wrong type

The readers raise `HfConfigInputError` (an `InputError` carrying `rule_id`); the message
names the file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, TypeGuard

from lineage.errors import InputError, RuleError
from lineage.formats.messages import json_type as _json_type
from lineage.formats.messages import show_value
from lineage.formats.strict_json import loads_strict
from lineage.userfiles import read_regular

_VALUE_LIMIT = 60  # characters of an offending value quoted in a message

__all__ = [
    "ADAPTER_CONFIG_NAME",
    "CONFIG_NAME",
    "DEFAULT_MAX_BYTES",
    "RULES",
    "TOKENIZER_FILES",
    "AdapterConfig",
    "HfConfigInputError",
    "ModelConfig",
    "Quantization",
    "TokenizerFiles",
    "python_files",
    "read_adapter_config",
    "read_config",
    "read_tokenizer_files",
]

DEFAULT_MAX_BYTES = 16 * 2**20  # configs are kilobytes; tokenizer.json is never read
CONFIG_NAME = "config.json"
ADAPTER_CONFIG_NAME = "adapter_config.json"
TOKENIZER_CONFIG_NAME = "tokenizer_config.json"
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "chat_template.json",  # processors of multimodal models keep their template here
    "generation_config.json",
)
ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")
EXTRA_TEMPLATES_DIR = "additional_chat_templates"  # transformers >= 4.54: <name>.jinja files

RULES = ("unreadable", "json", "config")

# Canonical field -> the spellings read, in order of preference.
FIELD_ALIASES: dict[str, tuple[str, ...]] = {
    "num_hidden_layers": ("num_hidden_layers", "n_layer", "n_layers", "num_layers"),
    "hidden_size": ("hidden_size", "n_embd", "d_model"),
    "num_attention_heads": ("num_attention_heads", "n_head", "n_heads", "num_heads"),
    "num_key_value_heads": ("num_key_value_heads", "num_kv_heads", "n_head_kv"),
    "head_dim": ("head_dim",),
    "max_position_embeddings": ("max_position_embeddings", "n_positions", "max_seq_len"),
    "vocab_size": ("vocab_size",),
    # a mixture of experts: experts per layer, and how many each token uses
    "num_experts": ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"),
    "num_experts_per_tok": ("num_experts_per_tok", "moe_k", "num_selected_experts"),
}


class HfConfigInputError(RuleError):
    """A rule broken by a model folder's JSON files."""


def _fail(path: Path, rule_id: str, message: str) -> NoReturn:
    raise HfConfigInputError(path, rule_id, message)


# ---------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class Quantization:
    method: str  # gptq, awq, bitsandbytes, fp8, mxfp4, compressed-tensors, ... or "unknown"
    bits: int | None
    detail: str | None  # nf4/fp4/int8 (bitsandbytes), gemm (awq), e4m3 (fp8), a format, ...
    group_size: int | None  # -1: one group per output channel (GPTQ)
    raw: dict[str, Any]  # quantization_config as written


@dataclass(frozen=True)
class ModelConfig:
    path: str
    model_type: str | None
    text_model_type: str | None  # text_config.model_type of a multimodal config
    architectures: tuple[str, ...]
    num_hidden_layers: int | None
    hidden_size: int | None
    num_attention_heads: int | None
    num_key_value_heads: int | None  # defaults to num_attention_heads (no GQA)
    head_dim: int | None  # defaults to hidden_size // num_attention_heads
    max_position_embeddings: int | None
    vocab_size: int | None
    torch_dtype: str | None
    quantization: Quantization | None
    auto_map: dict[str, Any] | None
    has_vision_config: bool
    # transformers' flags, None when not written: a decoder-mode BERT, a T5, ...
    is_decoder: bool | None = None
    is_encoder_decoder: bool | None = None
    num_experts: int | None = None  # a mixture of experts' experts per layer
    num_experts_per_tok: int | None = None  # and how many each token is routed to

    @property
    def context_length(self) -> int | None:
        return self.max_position_embeddings

    @property
    def needs_remote_code(self) -> bool:
        """auto_map points transformers at the folder's own .py files (trust_remote_code)."""
        return bool(self.auto_map)


@dataclass(frozen=True)
class TokenizerFiles:
    present: tuple[str, ...]  # which of TOKENIZER_FILES exist, in that order
    chat_template_sources: tuple[str, ...]  # files holding a chat template (never rendered)
    chat_template_names: tuple[str, ...]  # named templates ("default", "tool_use", ...)
    tokenizer_class: str | None
    auto_map: dict[str, Any] | None  # a custom tokenizer class: remote code again

    @property
    def has_chat_template(self) -> bool:
        return bool(self.chat_template_sources)


@dataclass(frozen=True)
class AdapterConfig:
    path: str
    peft_type: str | None
    base_model_name_or_path: str | None
    r: int | None
    lora_alpha: float | None
    target_modules: tuple[str, ...] | str | None  # a string is a regular expression
    task_type: str | None
    weights: tuple[str, ...]  # adapter_model.safetensors / .bin present next to it


# ---------------------------------------------------------------------------------------------
# Reading JSON files


def _read_json(folder: Path, name: str, max_bytes: int) -> tuple[Path, object] | None:
    """(path, document) of folder/name, or None when the file does not exist."""
    path = folder / name
    if not os.path.lexists(path):
        return None
    _check_inside(folder, path)
    raw = _read_bounded(path, max_bytes)
    try:
        return path, loads_strict(raw, source=str(path))
    except InputError as exc:
        raise HfConfigInputError(path, "json", exc.rule, where=exc.where) from None


def _check_folder(folder: Path) -> None:
    if not folder.is_dir():
        problem = "not a directory" if os.path.lexists(folder) else "no such directory"
        _fail(folder, "unreadable", problem)


def _check_inside(folder: Path, path: Path) -> None:
    if not path.is_symlink() or _is_vetted_cache_link(path):
        return
    try:
        real = path.resolve()
    except (OSError, RuntimeError):  # a symlink loop
        _fail(path, "unreadable", "symbolic link cannot be resolved (a loop?)")
    if not real.is_relative_to(folder.resolve()):
        _fail(path, "unreadable", "symbolic link leading out of the folder (a hub cache?)")


def _is_vetted_cache_link(path: Path) -> bool:
    """A hub cache snapshot's link into its own repository's blobs (see `hf_cache`)."""
    from lineage.formats.hf_cache import vetted_blob

    return vetted_blob(path) is not None


def _read_bounded(path: Path, max_bytes: int) -> bytes:
    try:  # never waits on a FIFO; refused past the cap, even if it grows while read
        return read_regular(path, what="JSON file", max_bytes=max_bytes)
    except InputError as exc:
        _fail(path, "unreadable", exc.rule)
    except OSError as exc:
        _fail(path, "unreadable", f"cannot read ({exc.strerror or exc})")


def _object(path: Path, document: object, what: str = "the document") -> dict[str, Any]:
    if not isinstance(document, dict):
        _fail(path, "config", f"{what} is a JSON {_json_type(document)}, not an object")
    return document


# ---------------------------------------------------------------------------------------------
# Typed getters: null counts as absent (configs write `"head_dim": null` freely)


def _get_int(path: Path, doc: Mapping[str, Any], key: str, *, positive: bool = True) -> int | None:
    value = doc.get(key)
    if value is None:
        return None
    if not _is_int(value) or (positive and value <= 0):
        kind = "a positive integer" if positive else "an integer"
        _fail(path, "config", f"`{key}` is {show_value(value, limit=_VALUE_LIMIT)}, not {kind}")
    return value


def _get_str(path: Path, doc: Mapping[str, Any], key: str) -> str | None:
    value = doc.get(key)
    if value is not None and not isinstance(value, str):
        _fail(path, "config", f"`{key}` is {show_value(value, limit=_VALUE_LIMIT)}, not a string")
    return value


def _get_bool(path: Path, doc: Mapping[str, Any], key: str) -> bool | None:
    value = doc.get(key)
    if value is not None and not isinstance(value, bool):
        _fail(path, "config", f"`{key}` is {show_value(value, limit=_VALUE_LIMIT)}, not a boolean")
    return value


def _get_object(path: Path, doc: Mapping[str, Any], key: str) -> dict[str, Any] | None:
    value = doc.get(key)
    if value is None:
        return None
    return _object(path, value, f"`{key}`")


def _get_str_list(path: Path, doc: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = doc.get(key)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        shown = show_value(value, limit=_VALUE_LIMIT)
        _fail(path, "config", f"`{key}` is {shown}, not a list of strings")
    return tuple(value)


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)  # JSON true is not 1


# ---------------------------------------------------------------------------------------------
# config.json


def read_config(folder: Path | str, *, max_bytes: int = DEFAULT_MAX_BYTES) -> ModelConfig | None:
    """The architecture facts of folder/config.json, or None when there is no config.json."""
    folder = Path(folder)
    _check_folder(folder)
    found = _read_json(folder, CONFIG_NAME, max_bytes)
    if found is None:
        return None
    path, document = found
    top = _object(path, document)
    text = _get_object(path, top, "text_config")
    values = {name: _aliased_int(path, top, text, name) for name in FIELD_ALIASES}
    heads, hidden = values["num_attention_heads"], values["hidden_size"]
    if values["num_key_value_heads"] is None:
        values["num_key_value_heads"] = heads
    if values["head_dim"] is None and heads and hidden:
        values["head_dim"] = hidden // heads  # what transformers computes
    return ModelConfig(
        path=str(path),
        model_type=_get_str(path, top, "model_type"),
        text_model_type=_get_str(path, text, "model_type") if text else None,
        architectures=_get_str_list(path, top, "architectures"),
        torch_dtype=_dtype(path, top, text),
        quantization=_quantization(path, top),
        auto_map=_get_object(path, top, "auto_map"),
        has_vision_config=_get_object(path, top, "vision_config") is not None,
        is_decoder=_get_bool(path, top, "is_decoder"),
        is_encoder_decoder=_get_bool(path, top, "is_encoder_decoder"),
        **values,
    )


def _aliased_int(
    path: Path, top: dict[str, Any], text: dict[str, Any] | None, name: str
) -> int | None:
    # text_config first: a multimodal top level may hold stale defaults for these
    for doc in (text, top):
        if doc is None:
            continue
        for key in FIELD_ALIASES[name]:
            value = _get_int(path, doc, key)
            if value is not None:
                return value
    return None


def _dtype(path: Path, top: dict[str, Any], text: dict[str, Any] | None) -> str | None:
    # the top level's dtype covers the whole model; "dtype" is the transformers >= 4.56 name
    for doc in (top, text):
        if doc is None:
            continue
        for key in ("torch_dtype", "dtype"):
            value = _get_str(path, doc, key)
            if value is not None:
                return value
    return None


# --- quantization_config

_METHOD_ALIASES = {
    "bitsandbytes_4bit": "bitsandbytes",
    "bitsandbytes_8bit": "bitsandbytes",
    "fbgemm_fp8": "fp8",
    "compressed_tensors": "compressed-tensors",
    "auto_round": "auto-round",
}


def _quantization(path: Path, top: dict[str, Any]) -> Quantization | None:
    qc = _get_object(path, top, "quantization_config")
    if qc is None:
        return None
    method = _method(path, qc)
    bits, detail, group = _BY_METHOD.get(method, _generic)(path, qc)
    return Quantization(method, bits, detail, group, qc)


def _method(path: Path, qc: dict[str, Any]) -> str:
    named = _get_str(path, qc, "quant_method")
    if named:
        lowered = named.strip().lower()
        return _METHOD_ALIASES.get(lowered, lowered.replace("_", "-"))
    # older configs say what they are only through their keys
    if "load_in_4bit" in qc or "load_in_8bit" in qc:
        return "bitsandbytes"
    if "w_bit" in qc:
        return "awq"
    return "unknown"


Details = tuple[int | None, str | None, int | None]  # bits, detail, group size


def _bitsandbytes(path: Path, qc: dict[str, Any]) -> Details:
    if qc.get("load_in_4bit") is True:
        return 4, _get_str(path, qc, "bnb_4bit_quant_type"), None  # nf4 or fp4
    if qc.get("load_in_8bit") is True:
        return 8, "int8", None  # LLM.int8()
    return None, None, None


def _gptq(path: Path, qc: dict[str, Any]) -> Details:
    group = _get_int(path, qc, "group_size", positive=False)
    return _get_int(path, qc, "bits"), _get_str(path, qc, "checkpoint_format"), group


def _awq(path: Path, qc: dict[str, Any]) -> Details:
    bits = _get_int(path, qc, "bits") or _get_int(path, qc, "w_bit")
    group = _get_int(path, qc, "group_size", positive=False)
    if group is None:
        group = _get_int(path, qc, "q_group_size", positive=False)
    version = _get_str(path, qc, "version")
    return bits, version.lower() if version else None, group


def _fp8(path: Path, qc: dict[str, Any]) -> Details:
    return 8, _get_str(path, qc, "fmt") or _get_str(path, qc, "activation_scheme"), None


def _mxfp4(path: Path, qc: dict[str, Any]) -> Details:
    return 4, None, 32  # E2M1 values, one E8M0 scale per 32 (MXFP4)


def _compressed_tensors(path: Path, qc: dict[str, Any]) -> Details:
    groups = _get_object(path, qc, "config_groups") or {}
    bits: set[int] = set()
    sizes: set[int] = set()
    for name, group in groups.items():
        weights = _get_object(path, _object(path, group, f"config_groups.{name}"), "weights")
        if not weights:
            continue
        found = _get_int(path, weights, "num_bits")
        size = _get_int(path, weights, "group_size", positive=False)
        if found is not None:
            bits.add(found)
        if size is not None:
            sizes.add(size)
    only_bits = bits.pop() if len(bits) == 1 else None  # mixed precision: no single answer
    only_size = sizes.pop() if len(sizes) == 1 else None
    return only_bits, _get_str(path, qc, "format"), only_size


def _generic(path: Path, qc: dict[str, Any]) -> Details:
    bits = qc.get("bits")
    return (bits if _is_int(bits) else None), None, None


_BY_METHOD = {
    "bitsandbytes": _bitsandbytes,
    "gptq": _gptq,
    "awq": _awq,
    "fp8": _fp8,
    "mxfp4": _mxfp4,
    "compressed-tensors": _compressed_tensors,
}


# ---------------------------------------------------------------------------------------------
# Tokenizer files


def read_tokenizer_files(
    folder: Path | str, *, max_bytes: int = DEFAULT_MAX_BYTES
) -> TokenizerFiles:
    """Which tokenizer files exist and where a chat template is; no template is rendered."""
    folder = Path(folder)
    _check_folder(folder)
    present = tuple(name for name in TOKENIZER_FILES if (folder / name).is_file())
    sources: list[str] = []
    names: list[str] = []
    tokenizer_class, auto_map = None, None
    found = _read_json(folder, TOKENIZER_CONFIG_NAME, max_bytes)
    if found is not None:
        path, document = found
        config = _object(path, document)
        if _template_names(path, config.get("chat_template"), names):
            sources.append(TOKENIZER_CONFIG_NAME)
        tokenizer_class = _get_str(path, config, "tokenizer_class")
        auto_map = _get_object(path, config, "auto_map")
    if "chat_template.jinja" in present:
        sources.append("chat_template.jinja")
    if _processor_template(folder, max_bytes):
        sources.append("chat_template.json")
    extra = _extra_templates(folder)
    if extra:
        sources.append(EXTRA_TEMPLATES_DIR)
        names.extend(name for name in extra if name not in names)
    return TokenizerFiles(present, tuple(sources), tuple(names), tokenizer_class, auto_map)


def _template_names(path: Path, value: object, names: list[str]) -> bool:
    """True when `chat_template` holds a template; named ones are added to `names`."""
    if value is None:
        return False
    if isinstance(value, str):
        return bool(value)
    # a list of {"name": ..., "template": ...}: several templates (default, tool_use, rag)
    if not isinstance(value, list):
        _fail(path, "config", f"`chat_template` is a JSON {_json_type(value)}, not a string")
    for index, entry in enumerate(value):
        entry = _object(path, entry, f"`chat_template[{index}]`")
        name = _get_str(path, entry, "name")
        if not isinstance(entry.get("template"), str):
            _fail(path, "config", f"`chat_template[{index}].template` is not a string")
        names.append(name if name is not None else f"#{index}")
    return bool(value)


def _processor_template(folder: Path, max_bytes: int) -> bool:
    found = _read_json(folder, "chat_template.json", max_bytes)
    if found is None:
        return False
    path, document = found
    template = _object(path, document).get("chat_template")
    if template is not None and not isinstance(template, str):
        _fail(path, "config", f"`chat_template` is a JSON {_json_type(template)}, not a string")
    return bool(template)


def _extra_templates(folder: Path) -> list[str]:
    directory = folder / EXTRA_TEMPLATES_DIR
    if not directory.is_dir() or directory.is_symlink():
        return []
    return sorted(p.stem for p in directory.iterdir() if p.suffix == ".jinja" and p.is_file())


# ---------------------------------------------------------------------------------------------
# Adapters and remote code


def read_adapter_config(
    folder: Path | str, *, max_bytes: int = DEFAULT_MAX_BYTES
) -> AdapterConfig | None:
    """folder/adapter_config.json (a PEFT adapter such as LoRA), or None when absent."""
    folder = Path(folder)
    _check_folder(folder)
    found = _read_json(folder, ADAPTER_CONFIG_NAME, max_bytes)
    if found is None:
        return None
    path, document = found
    config = _object(path, document)
    return AdapterConfig(
        path=str(path),
        peft_type=_get_str(path, config, "peft_type"),
        base_model_name_or_path=_get_str(path, config, "base_model_name_or_path"),
        r=_get_int(path, config, "r"),
        lora_alpha=_get_number(path, config, "lora_alpha"),
        target_modules=_target_modules(path, config),
        task_type=_get_str(path, config, "task_type"),
        weights=tuple(name for name in ADAPTER_WEIGHTS if (folder / name).is_file()),
    )


def _get_number(path: Path, doc: Mapping[str, Any], key: str) -> float | None:
    value = doc.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        _fail(path, "config", f"`{key}` is {show_value(value, limit=_VALUE_LIMIT)}, not a number")
    return value


def _target_modules(path: Path, config: dict[str, Any]) -> tuple[str, ...] | str | None:
    value = config.get("target_modules")
    if value is None or isinstance(value, str):  # PEFT reads a string as a regular expression
        return value
    return _get_str_list(path, config, "target_modules")


def python_files(folder: Path | str) -> list[str]:
    """Every *.py under the folder (relative, sorted): what trust_remote_code would run."""
    folder = Path(folder)
    _check_folder(folder)
    found: list[str] = []

    def _raise(exc: OSError) -> None:
        _fail(Path(exc.filename or folder), "unreadable", f"cannot list ({exc.strerror or exc})")

    # followlinks=False: a symlinked directory is not entered (it may lead anywhere)
    for root, _dirs, files in os.walk(folder, onerror=_raise, followlinks=False):
        for name in files:
            if name.endswith(".py"):
                found.append(Path(root, name).relative_to(folder).as_posix())
    return sorted(found)
