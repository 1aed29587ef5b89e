"""Model name anatomy, table-driven over names published on model hubs."""

from __future__ import annotations

from typing import Any

import pytest

from lineage.formats.names import parse_model_name

BLANK: dict[str, Any] = {
    "model": None,
    "size": None,
    "variant": None,
    "quant": None,
    "format": None,
    "shard": None,
    "mmproj": False,
    "adapter": False,
    "version": None,
    "extra": [],
}

# name -> the fields that differ from BLANK
CASES: list[tuple[str, dict[str, Any]]] = [
    ("Qwen3-8B-Instruct-Q4_K_M.gguf",
     {"model": "Qwen3", "size": "8B", "variant": "Instruct", "quant": "Q4_K_M", "format": "gguf"}),
    ("model-00001-of-00004.safetensors", {"format": "safetensors", "shard": (1, 4)}),
    ("Meta-Llama-3.1-70B-Instruct-IQ2_XXS-00001-of-00003.gguf",
     {"model": "Meta-Llama-3.1", "size": "70B", "variant": "Instruct", "quant": "IQ2_XXS",
      "format": "gguf", "shard": (1, 3)}),
    ("mmproj-model-f16.gguf", {"mmproj": True, "quant": "F16", "format": "gguf"}),
    ("mmproj-Qwen2.5-VL-7B-Instruct-f16.gguf",
     {"mmproj": True, "model": "Qwen2.5-VL", "size": "7B", "variant": "Instruct", "quant": "F16",
      "format": "gguf"}),
    ("Mixtral-8x7B-Instruct-v0.1-GPTQ-Int4",
     {"model": "Mixtral", "size": "8x7B", "variant": "Instruct", "version": "v0.1",
      "quant": "GPTQ-Int4"}),
    ("Qwen3-30B-A3B-MLX-4bit",
     {"model": "Qwen3", "size": "30B-A3B", "quant": "MLX-4bit", "format": "mlx"}),
    ("adapter_model.safetensors", {"adapter": True, "format": "safetensors"}),
    ("gemma-2-9b-it-bnb-4bit",
     {"model": "gemma-2", "size": "9B", "variant": "it", "quant": "bnb-4bit"}),
    ("unsloth/gemma-2-9b-it-bnb-4bit",  # a repository id: the organisation is not the model
     {"model": "gemma-2", "size": "9B", "variant": "it", "quant": "bnb-4bit"}),
    ("tinyllama-1.1b-chat-v1.0.Q4_K_M.gguf",  # TheBloke style: the quant after a dot
     {"model": "tinyllama", "size": "1.1B", "variant": "chat", "version": "v1.0",
      "quant": "Q4_K_M", "format": "gguf"}),
    ("Mistral-7B-Instruct-v0.3.Q8_0.gguf",
     {"model": "Mistral", "size": "7B", "variant": "Instruct", "version": "v0.3", "quant": "Q8_0",
      "format": "gguf"}),
    ("Phi-3-mini-4k-instruct-q4.gguf",  # "4k" is a context length, not a size
     {"model": "Phi-3-mini-4k", "variant": "instruct", "quant": "Q4", "format": "gguf"}),
    ("Mistral-Small-3.2-24B-Instruct-2506-UD-Q4_K_XL.gguf",
     {"model": "Mistral-Small-3.2", "size": "24B", "variant": "Instruct", "quant": "UD-Q4_K_XL",
      "format": "gguf", "extra": ["2506"]}),
    ("Qwen3-235B-A22B-Instruct-2507-FP8",
     {"model": "Qwen3", "size": "235B-A22B", "variant": "Instruct", "quant": "FP8",
      "extra": ["2507"]}),
    ("Llama-4-Scout-17B-16E-Instruct-Q4_K_M.gguf",
     {"model": "Llama-4-Scout", "size": "17B-16E", "variant": "Instruct", "quant": "Q4_K_M",
      "format": "gguf"}),
    ("gemma-3n-E4B-it-GGUF",
     {"model": "gemma-3n", "size": "E4B", "variant": "it", "format": "gguf"}),
    ("gpt-oss-20b-MXFP4.gguf",
     {"model": "gpt-oss", "size": "20B", "quant": "MXFP4", "format": "gguf"}),
    ("SmolLM2-135M-Instruct-Q8_0.gguf",
     {"model": "SmolLM2", "size": "135M", "variant": "Instruct", "quant": "Q8_0",
      "format": "gguf"}),
    ("Qwen2.5-7B-Instruct-AWQ",
     {"model": "Qwen2.5", "size": "7B", "variant": "Instruct", "quant": "AWQ"}),
    ("Qwen2.5-Coder-32B-Instruct-GPTQ-Int8",
     {"model": "Qwen2.5-Coder", "size": "32B", "variant": "Instruct", "quant": "GPTQ-Int8"}),
    ("Llama-3.1-8B-Instruct-quantized.w4a16",  # llm-compressor naming
     {"model": "Llama-3.1", "size": "8B", "variant": "Instruct", "quant": "W4A16",
      "extra": ["quantized"]}),
    ("Qwen3-8B-BF16.gguf", {"model": "Qwen3", "size": "8B", "quant": "BF16", "format": "gguf"}),
    ("DeepSeek-R1-Distill-Qwen-7B-Q4_K_M.gguf",
     {"model": "DeepSeek-R1-Distill-Qwen", "size": "7B", "quant": "Q4_K_M", "format": "gguf"}),
    ("pytorch_model-00001-of-00002.bin", {"format": "bin", "shard": (1, 2)}),
    ("model_fp16.onnx", {"quant": "FP16", "format": "onnx"}),  # transformers.js export
    ("model.onnx", {"format": "onnx"}),
    ("Llama-2-7b-chat-hf",
     {"model": "Llama-2", "size": "7B", "variant": "chat", "extra": ["hf"]}),
    ("Meta-Llama-3-8B-Instruct-GGUF",
     {"model": "Meta-Llama-3", "size": "8B", "variant": "Instruct", "format": "gguf"}),
    ("llama-3-8b-lora.gguf",
     {"model": "llama-3", "size": "8B", "adapter": True, "format": "gguf"}),
    ("Falcon3-10B-Instruct-1.58bit",
     {"model": "Falcon3", "size": "10B", "variant": "Instruct", "quant": "1.58bit"}),
    ("Mistral-Large-Instruct-2407-exl2-4.0bpw",
     {"model": "Mistral-Large", "variant": "Instruct", "extra": ["2407"],
      "quant": "EXL2-4.0bpw"}),
    ("Qwen3-8B-Q4_0-00002-of-00002.GGUF",  # upper-case extension
     {"model": "Qwen3", "size": "8B", "quant": "Q4_0", "format": "gguf", "shard": (2, 2)}),
    ("C:\\models\\Qwen3-8B-Q6_K.gguf",
     {"model": "Qwen3", "size": "8B", "quant": "Q6_K", "format": "gguf"}),
    ("consolidated.safetensors", {"format": "safetensors"}),
    ("", {}),
]  # fmt: skip


@pytest.mark.parametrize(("name", "fields"), CASES, ids=[name or "<empty>" for name, _ in CASES])
def test_name_anatomy(name: str, fields: dict[str, Any]) -> None:
    assert parse_model_name(name) == {**BLANK, **fields}


def test_always_the_same_keys() -> None:
    for name, _ in CASES:
        assert set(parse_model_name(name)) == set(BLANK)


def test_a_second_quant_is_kept_visible() -> None:
    parsed = parse_model_name("Qwen3-8B-AWQ-Q4_K_M")
    assert (parsed["quant"], parsed["extra"]) == ("AWQ", ["Q4_K_M"])


def test_does_not_read_the_file(tmp_path: Any) -> None:
    # only the name matters: a path that does not exist parses the same
    assert parse_model_name(str(tmp_path / "nope" / "Qwen3-8B-Q4_K_M.gguf"))["quant"] == "Q4_K_M"
