"""Model folder inspection and reports: real writers' files, a real model from PyPI, risks,
provenance tiers, and the HTML page rendered in headless Chromium."""

from __future__ import annotations

import json
import os
import pickle
import re
import shutil
import struct
import subprocess
import zlib
from datetime import UTC, datetime
from pathlib import Path

import gguf
import numpy as np
import pytest
from safetensors.numpy import save_file

import lineage
from lineage.api import Store
from lineage.diligence.inspect import inspect_model
from lineage.diligence.render import render_html, render_markdown
from lineage.ingest.checkpoint import ingest_checkpoint
from lineage.ingest.steps import ingest_steps

from .conftest import Cli
from .test_chain import WORLD, write_log

LLAMA_CONFIG = {"model_type": "llama", "architectures": ["LlamaForCausalLM"],
                "num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 8,
                "num_key_value_heads": 2, "max_position_embeddings": 8192, "vocab_size": 1000,
                "torch_dtype": "bfloat16"}


def _llama(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    save_file({"embed": np.zeros((1000, 256), np.float16),
               "layers.0.q": np.zeros((256, 256), np.float16)},
              str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(LLAMA_CONFIG))
    (folder / "README.md").write_text("---\nlicense: apache-2.0\n---\n# tiny\n")
    return folder


def test_safetensors_folder_report(tmp_path: Path) -> None:
    report = inspect_model(_llama(tmp_path / "m"), context=4096, batch=2)
    assert report["parameters"] == 1000 * 256 + 256 * 256
    assert report["dtypes"] == {"F16": report["parameters"]}
    assert report["quantization"]["method"] == "none"
    assert report["quantization"]["bits_per_weight"] == 16.0
    # config.json says bfloat16, the weights are F16: reported, and warned about
    assert report["quantization"]["disagreements"] == [
        "config.json says torch_dtype bfloat16 but the weights are all F16"]
    assert report["model"]["kind"] == "decoder" and report["model"]["summary"] == (
        "Llama decoder, 4 layers, hidden 256, 8 heads (2 KV heads), 8,192 positions, "
        "vocab 1,000")
    # GQA aware: 2 (K, V) x 4 layers x 2 KV heads x 32 head dim x 4096 x batch 2 x 2 bytes
    assert report["memory"]["kv_cache_bytes"] == 2 * 4 * 2 * 32 * 4096 * 2 * 2
    assert not report["memory"]["context_clamped"] and report["memory"]["context"] == 4096
    assert report["memory"]["total_bytes"] > report["memory"]["weights_bytes"]
    assert any("BF16" in w for w in report["precision_warnings"])
    assert report["license"]["license"] == "apache-2.0"
    assert report["integrity"]["structure"]["ok"] and report["integrity"]["load"] == "not-tested"
    assert report["provenance"]["tier"] == "open weights"
    assert report["risks"] == []


def test_gguf_quantization_and_metadata(tmp_path: Path) -> None:
    path = tmp_path / "tiny-1B-Instruct-Q8_0.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(2)
    writer.add_context_length(2048)
    writer.add_embedding_length(64)
    writer.add_head_count(4)
    writer.add_head_count_kv(1)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    writer.add_chat_template("{% for m in messages %}{{ m.content }}{% endfor %}")
    data = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    q8 = gguf.quants.quantize(data, gguf.GGMLQuantizationType.Q8_0)
    writer.add_tensor("blk.0.attn_q.weight", q8, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    writer.add_tensor("output_norm.weight", np.ones(64, np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    report = inspect_model(path, context=1024)
    assert report["parameters"] == 64 * 64 + 64
    assert report["dtypes"] == {"Q8_0": 4096, "F32": 64}
    q = report["quantization"]
    assert q["method"] == "gguf MOSTLY_Q8_0" and q["disagreements"] == []
    assert [(d["value"], d["agrees"]) for d in q["declared"]] == [("MOSTLY_Q8_0", True)]
    assert q["name_hint"]["value"] == "Q8_0" and q["name_hint"]["agrees"] is True
    # 64 x 64 Q8_0 (34 bytes per 32 weights) and 64 F32
    assert q["bits_per_weight"] == round(8 * (4096 // 32 * 34 + 64 * 4) / 4160, 3)
    assert report["memory"]["kv_cache_bytes"] == 2 * 2 * 1 * 16 * 1024 * 1 * 2
    assert [r["kind"] for r in report["risks"]] == ["chat-template"]
    assert report["files"][0]["name"]["quant"] == "Q8_0"


class _Payload:
    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (os.system, ("touch /tmp/lineage-report-marker-never",))


def test_risks_dangerous_pickles_remote_code_and_links(tmp_path: Path) -> None:
    folder = _llama(tmp_path / "m")
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps(_Payload(), protocol=4))
    (folder / "modeling_tiny.py").write_text("print('would run with trust_remote_code')\n")
    config = dict(LLAMA_CONFIG, auto_map={"AutoModel": "modeling_tiny.TinyModel"})
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "leak").symlink_to("/etc/hostname")
    report = inspect_model(folder)
    kinds = {(r["kind"], r["severity"]) for r in report["risks"]}
    assert ("symlink-outside", "dangerous") in kinds
    assert ("python-code", "unknown") in kinds and ("auto-map", "unknown") in kinds
    auto_map = next(r["detail"] for r in report["risks"] if r["kind"] == "auto-map")
    assert auto_map.startswith("auto_map AutoModel: ")  # named, not a Python list
    assert any(r["severity"] == "dangerous" and r["file"] == "pytorch_model.bin"
               for r in report["risks"])
    assert report["risks"][0]["severity"] == "dangerous"  # risks come first, worst first
    assert report["uncounted_pickles"] == ["pytorch_model.bin"]
    cli = Cli(tmp_path / "no-store")
    out = cli("inspect", str(folder), "--json", code=1)
    assert json.loads(out.stdout)["risks"][0]["severity"] == "dangerous"
    assert not Path("/tmp/lineage-report-marker-never").exists()


def _run_and_step_2_weights(run_store: Store, tmp_path: Path) -> Path:  # noqa: F811
    """Run r of the chain tests, ingested, and a folder with its weights after step 2."""
    log = write_log(run_store, tmp_path / "steps.jsonl", range(4))
    ingest_steps(run_store, log, run="r", stream="s", world_size=WORLD)
    rng = np.random.Generator(np.random.Philox(1))
    w = rng.standard_normal((4, 3)).astype(np.float32)
    for _ in range(3):
        w = (w * 0.99).astype(np.float32)
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    save_file({"w": w}, str(ckpt / "model.safetensors"))
    return ckpt


def test_provenance_tiers(run_store: Store, tmp_path: Path) -> None:  # noqa: F811
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "config.json").write_text("{}")
    closed = inspect_model(empty)["provenance"]
    assert closed["tier"] == "closed" and closed["missing"] == ["weights"]
    ckpt = _run_and_step_2_weights(run_store, tmp_path)
    assert inspect_model(ckpt, store=run_store)["provenance"]["tier"] == "open weights"
    ingest_checkpoint(run_store, ckpt, run="r", step=2)
    audited = inspect_model(ckpt, store=run_store)["provenance"]
    assert audited["tier"] == "fully auditable" and audited["missing"] == []
    assert any("checkpoint r@2" in e for e in audited["evidence"])


def test_a_checkpoint_that_fails_its_risk_checks_is_no_evidence(
        run_store: Store, tmp_path: Path) -> None:  # noqa: F811
    ckpt = _run_and_step_2_weights(run_store, tmp_path)
    malicious = Path(__file__).parent / "fixtures" / "pickles" / "torch"
    shutil.copy(malicious / "torch_malicious_reduce.pt", ckpt / "training_args.bin")
    stored = ingest_checkpoint(run_store, ckpt, run="r", step=2)
    assert stored["matches_chain"] is True and stored["risks"]["ok"] is False
    tier = inspect_model(ckpt, store=run_store)["provenance"]
    assert tier["tier"] == "open source"  # weights match, but the folder is not safe evidence
    assert tier["missing"] == ["checkpoint r@2 passing its risk checks"]


def test_markdown_and_json_reports_through_the_cli(tmp_path: Path) -> None:
    folder = _llama(tmp_path / "m")
    cli = Cli(tmp_path / "no-store")
    md = cli("report", str(folder)).stdout
    assert md.startswith("# Model report") and md.index("## Risks") < md.index("## Weights")
    data = json.loads(cli("report", str(folder), "--format", "json").stdout)
    for key in ("files", "parameters", "dtypes", "quantization", "memory", "risks",
                "integrity", "provenance", "license"):
        assert key in data
    assert set(data["memory"]) >= {"weights_bytes", "kv_cache_bytes", "total_bytes",
                                   "assumptions"}
    assert set(data["integrity"]) == {"structure", "checksums", "authenticity", "load"}
    assert data["generated"]["lineage"] == lineage.__version__
    assert datetime.fromisoformat(data["generated"]["at"]).tzinfo == UTC
    out = tmp_path / "r.html"
    cli("report", str(folder), "--format", "html", "-o", str(out))
    assert out.read_text().startswith("<!doctype html>")
    # the two runs differ only in the time they were written at
    written = f"at {data['generated']['at']} (UTC)"
    assert render_markdown(data) == re.sub(r"at \S+Z \(UTC\)", written, md)


def test_a_real_model_folder_end_to_end(minilm_folder: Path) -> None:
    report = inspect_model(minilm_folder)
    # 103 F32 weights; position_ids is an int64 buffer, not a parameter
    assert report["parameters"] == 22_713_216 and report["tensors"] == 103
    assert report["dtypes"] == {"F32": 22_713_216}
    assert report["buffers"] == {"tensors": 1, "elements": 512, "bytes": 4096,
                                 "dtypes": {"I64": 512}, "names": ["embeddings.position_ids"]}
    assert report["parameters"] + report["buffers"]["elements"] == _header_elements(
        minilm_folder / "model.safetensors") == 22_713_728
    assert report["quantization"]["bits_per_weight"] == 32.0
    assert report["architecture"] == "bert" and report["license"]["license"] == "apache-2.0"
    assert report["integrity"]["structure"]["ok"] and report["risks"] == []
    assert report["config"]["hidden_size"] == 384
    assert "model.safetensors" in {f["path"] for f in report["files"]}


def _header_elements(path: Path) -> int:
    """Tensor elements as the safetensors package itself reads the header."""
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as handle:
        return sum(int(np.prod(handle.get_slice(k).get_shape())) for k in handle.keys())


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:  # the test set-up installs Debian's package, as root in CI
        subprocess.run(["apt-get", "update", "-qq"], check=False, capture_output=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", "chromium"], check=True,
                       capture_output=True)
        found = shutil.which("chromium")
    assert found, "chromium could not be installed"
    return found


def _png_is_blank(png: bytes) -> bool:
    """True when every pixel byte of the PNG is the same value."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    data, offset = b"", 8
    while offset < len(png):
        length = struct.unpack(">I", png[offset:offset + 4])[0]
        kind = png[offset + 4:offset + 8]
        if kind == b"IDAT":
            data += png[offset + 8:offset + 8 + length]
        offset += 12 + length
    raw = zlib.decompress(data)
    return len(set(raw[1:4096])) <= 2


@pytest.mark.slow
def test_html_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    folder = _llama(tmp_path / "m")
    (folder / "modeling_tiny.py").write_text("x = 1\n")
    report = inspect_model(folder)
    page = tmp_path / "report.html"
    page.write_text(render_html(report), encoding="utf-8")
    chromium = _chromium()
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run",
             f"--user-data-dir={tmp_path / 'profile'}"]
    shot = tmp_path / "shot.png"
    subprocess.run([chromium, *flags, f"--screenshot={shot}", "--window-size=1100,1400",
                    page.as_uri()], check=True, capture_output=True, timeout=120)
    assert shot.stat().st_size > 5000 and not _png_is_blank(shot.read_bytes())
    dom = subprocess.run([chromium, *flags, "--dump-dom", page.as_uri()], check=True,
                         capture_output=True, text=True, timeout=120).stdout
    assert f"{report['parameters']:,}" in dom and "python-code" in dom
    assert "open weights" in dom and "<svg" in dom
    assert report["model"]["summary"] in dom and f"lineage {lineage.__version__}" in dom
    assert report["hashes"]["files"]["model.safetensors"] in dom


def test_the_estimate_is_set_beside_gpus_and_macs_unified_memory(tmp_path: Path) -> None:
    from lineage.diligence.memory import GIB, usable_by_gpu

    assert usable_by_gpu(36 * GIB) == 24 * GIB and usable_by_gpu(48 * GIB) == 36 * GIB
    report = inspect_model(_llama(tmp_path / "m"), context=8192, batch=3600)
    total = report["memory"]["total_bytes"]
    assert 29 * GIB < total < 30 * GIB  # a KV cache of about 30 GB at that batch
    fits = {row["machine"]: row["fits"] for row in report["memory"]["fits"]}
    assert [m for m, ok in fits.items() if ok and m.startswith("GPU")] == ["GPU 48 GB",
                                                                          "GPU 80 GB"]
    # a 36 GB Mac's GPU may use 24 GiB: too little; a 48 GB Mac's 36 GiB holds it
    assert fits["Mac 36 GB unified"] is False and fits["Mac 48 GB unified"] is True
    md = render_markdown(report)
    assert "fits: GPU 48 GB; Mac 48 GB unified (its GPU may use about 36.00 GiB)" in md
    assert inspect_model(_llama(tmp_path / "n"), context=8192, batch=20_000)["memory"][
        "fits"][-1]["fits"] is False


def test_a_file_name_is_text_in_both_renderings(tmp_path: Path) -> None:
    """The one rule (lineage.markup): a file name's `_`, `|` and `<` are escaped in the
    Markdown table (today's report escaped only `|`), and its bidi override is spelled
    out in both renderings, so `gnp.exe` cannot pass for `exe.png`."""
    folder = _llama(tmp_path / "m")
    name = "__x|<b>\u202egnp.exe"
    (folder / name).write_bytes(b"not a model")
    report = inspect_model(folder)
    md, page = render_markdown(report), render_html(report)
    assert "\u202e" not in md and "\u202e" not in page
    row = next(line for line in md.splitlines() if line.startswith("| \\_\\_x"))
    assert row.startswith("| \\_\\_x\\|\\<b\\>\\u202egnp.exe | ")
    assert len(re.split(r"(?<!\\)\|", row)) == 7  # five cells
    assert "<td>__x|&lt;b&gt;\\u202egnp.exe</td>" in page
    # the size chart labels the file by its name, as text, whole on hover
    assert "<title>__x|&lt;b&gt;\\u202egnp.exe</title>" in page
