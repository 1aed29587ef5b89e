"""What a report says beside its sections: facts of the model that change how it is run or
judged, each read from the files and named with its evidence.

- a mixture of experts: how many of its parameters a token uses (the routed experts'
  tensors, found by name, scaled by experts used / experts);
- how a GGUF was quantized: llama-quantize's importance-matrix record
  (`quantize.imatrix.*`) and `general.quantized_by`;
- whether a GGUF's chat template is the one `tokenizer_config.json` (or
  `chat_template.jinja`) holds, compared byte for byte (a template is never rendered);
- a vision-language model in GGUF without its `mmproj` projector.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from lineage.errors import InputError
from lineage.formats.hf_config import ModelConfig
from lineage.userfiles import read_regular

_MAX_TOKENIZER_CONFIG = 16 << 20


def model_notes(folder: Path, files: list[dict[str, Any]], weights: dict[str, Any],
                config: ModelConfig | None) -> list[dict[str, Any]]:
    """Each note: {topic, text, evidence}."""
    return [*_experts(weights, config), *_quantized_with(weights),
            *_chat_templates(folder, weights), *_projector(files, weights, config)]


def _note(topic: str, text: str, *evidence: str) -> dict[str, Any]:
    return {"topic": topic, "text": text, "evidence": list(evidence)}


def _experts(weights: dict[str, Any], config: ModelConfig | None) -> list[dict[str, Any]]:
    gguf = weights["gguf"]
    experts = (config.num_experts if config else None) or gguf.get("experts")
    used = (config.num_experts_per_tok if config else None) or gguf.get("experts_used")
    source = "config.json" if config and config.num_experts else "GGUF metadata"
    if not experts or experts < 2:
        return []
    routed, total = weights["expert_parameters"], weights["parameters"]
    if not used or not routed or not total:
        why = "no routed expert tensor found by name" if not routed else \
            "the experts used per token are not declared"
        return [_note("experts", f"a mixture of {experts} experts: active parameters per "
                      f"token unknown ({why})", f"{source}: {experts} experts")]
    active = total - routed + routed * min(used, experts) // experts
    return [_note("experts", f"a mixture of experts: {experts} experts a layer, {used} used "
                  f"per token: about {active:,} of {total:,} parameters active per token "
                  f"({active / total:.1%})",
                  f"{source}: {experts} experts, {used} per token",
                  f"routed expert tensors: {routed:,} parameters")]


def _quantized_with(weights: dict[str, Any]) -> list[dict[str, Any]]:
    notes = []
    for g in weights["gguf_files"]:
        matrix, by = g.get("imatrix"), g.get("quantized_by")
        if matrix:
            parts = [f"file {matrix['file']}" if matrix["file"] else None,
                     f"dataset {matrix['dataset']}" if matrix["dataset"] else None,
                     f"{matrix['entries']:,} entries" if matrix["entries"] is not None
                     else None,
                     f"{matrix['chunks']:,} chunks" if matrix["chunks"] is not None else None]
            notes.append(_note("quantization", f"{g['file']} was quantized with an importance "
                               f"matrix ({', '.join(p for p in parts if p) or 'no details'})",
                               "GGUF quantize.imatrix.*"))
        if by:
            notes.append(_note("quantization", f"{g['file']} says it was quantized by {by}",
                               "GGUF general.quantized_by"))
    return notes


def _chat_templates(folder: Path, weights: dict[str, Any]) -> list[dict[str, Any]]:
    gguf_digest = weights["gguf"].get("chat_template_sha256")
    if not gguf_digest:
        return []
    found = _folder_template(folder)
    if found is None:
        return []
    source, text = found
    digest = hashlib.sha256(text.encode()).hexdigest()
    same = digest == gguf_digest
    gguf_file = weights["gguf"].get("file", "the GGUF")
    return [_note("chat template", f"the chat template in {gguf_file} is "
                  + ("the same as" if same else "NOT the same as") + f" {source}'s"
                  + ("" if same else ": the model will be prompted differently by runtimes "
                     "reading one or the other"),
                  f"{gguf_file} tokenizer.chat_template sha256 {gguf_digest}",
                  f"{source} sha256 {digest}")]


def _folder_template(folder: Path) -> tuple[str, str] | None:
    """The folder's default chat template, as text: chat_template.jinja, else
    tokenizer_config.json's `chat_template` (a string, or the one named "default")."""
    jinja = folder / "chat_template.jinja"
    try:
        if jinja.is_file():
            raw = read_regular(jinja, what="chat template", max_bytes=_MAX_TOKENIZER_CONFIG)
            return "chat_template.jinja", raw.decode("utf-8", "replace")
        config = folder / "tokenizer_config.json"
        if not config.is_file():
            return None
        document = json.loads(read_regular(config, what="tokenizer config",
                                           max_bytes=_MAX_TOKENIZER_CONFIG))
    except (InputError, OSError, ValueError, RecursionError):
        return None  # the folder's checks name a broken file; a note needs none
    template = document.get("chat_template") if isinstance(document, dict) else None
    if isinstance(template, list):
        template = next((t.get("template") for t in template if isinstance(t, dict)
                         and t.get("name") == "default"), None)
    return ("tokenizer_config.json", template) if isinstance(template, str) else None


def _projector(files: list[dict[str, Any]], weights: dict[str, Any],
               config: ModelConfig | None) -> list[dict[str, Any]]:
    ggufs = weights["gguf_files"]
    if not ggufs or not (config and config.has_vision_config):
        return []
    if any(Path(g["file"]).name.startswith("mmproj") or g.get("architecture") == "clip"
           for g in ggufs):
        return []
    return [_note("vision", "a vision-language model (config.json has a vision_config) whose "
                  "GGUF files include no mmproj projector: runtimes can use it for text only "
                  "until the projector is added", "config.json vision_config",
                  "GGUF files: " + ", ".join(g["file"] for g in ggufs))]
