"""Folder model benchmark: `lineage verify` (structure and risks, no checksums) of a mixed
1,000-file folder, target under 1 s.

    .venv/bin/python bench/folder_verify.py [--runs 5] [--workdir DIR]

The folder, written by the real writers: 300 safetensors shards with their index, 100
torch-layout pickle archives (`data.pkl` plus storage blobs) with their index, a GGUF model
split into 20 parts by `gguf.GGUFWriter`, an ONNX graph with external data, and 577 small
files (configs, tokenizer, texts in sub-folders). Every run reads the folder afresh
(the page cache is warm after the first). Results go to bench/out/folder_verify.json.
"""

from __future__ import annotations

import argparse
import json
import pickle
import zipfile
from collections import OrderedDict
from pathlib import Path

import numpy as np
from runs import timed  # bench/ is on sys.path when these scripts run

REPO = Path(__file__).resolve().parents[1]
FILES = 1000


def mixed_folder(root: Path) -> Path:
    folder = root / f"mixed-{FILES}-files"
    if folder.exists():
        return folder
    folder.mkdir(parents=True)
    _safetensors_shards(folder, 300)
    _torch_shards(folder, 100)
    _gguf_split(folder, 20)
    _onnx_external(folder)
    (folder / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 64}))
    (folder / "tokenizer.json").write_text(json.dumps({"version": "1.0", "model": {}}))
    written = sum(1 for p in folder.rglob("*") if p.is_file())
    for i in range(FILES - written):
        sub = folder / "notes" / f"part-{i // 100}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"note-{i}.txt").write_text(f"evaluation note {i}\n" * (1 + i % 7))
    assert sum(1 for p in folder.rglob("*") if p.is_file()) == FILES
    return folder


def _safetensors_shards(folder: Path, shards: int) -> None:
    from safetensors.numpy import save_file

    weight_map = {}
    for i in range(shards):
        name = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        tensors = {f"layers.{i}.{p}": np.zeros((16, 16), np.float16) for p in ("q", "k", "v")}
        save_file(tensors, str(folder / name))
        weight_map |= dict.fromkeys(tensors, name)
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))


def _torch_shards(folder: Path, shards: int) -> None:
    weight_map = {}
    for i in range(shards):
        name = f"pytorch_model-{i + 1:05d}-of-{shards:05d}.bin"
        stem = name.removesuffix(".bin")
        state = OrderedDict((f"layer{i}.w{j}", j) for j in range(4))
        with zipfile.ZipFile(folder / name, "w", compression=zipfile.ZIP_STORED) as archive:
            archive.writestr(f"{stem}/data.pkl", pickle.dumps(state, protocol=2))
            archive.writestr(f"{stem}/version", "3\n")
            for j in range(4):
                archive.writestr(f"{stem}/data/{j}", bytes(1024))
        weight_map |= dict.fromkeys(state, name)
    (folder / "pytorch_model.bin.index.json").write_text(json.dumps({"weight_map": weight_map}))


def _gguf_split(folder: Path, parts: int) -> None:
    from gguf import GGUFWriter

    writer = GGUFWriter(folder / "tiny-F32.gguf", arch="llama", split_max_tensors=1)
    writer.add_block_count(parts)
    for i in range(parts):
        writer.add_tensor(f"blk.{i}.attn_q.weight", np.ones((8, 32), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _onnx_external(folder: Path) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.ones((64, 32), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "ext",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32])], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save_model(model, str(folder / "model.onnx"), save_as_external_data=True,
                    location="model.onnx.data", size_threshold=0)


def main() -> None:
    from lineage.diligence.verify import verify_folder

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/lineage-bench-folder"))
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    folder = mixed_folder(args.workdir)
    report = verify_folder(folder)
    structure = report["structure"]
    assert structure["ok"] and report["risks"]["ok"], (structure["errors"], report["risks"])
    results = {"verify_1000_files": {
        **timed(lambda: verify_folder(folder), args.runs), "target_s": 1.0,
        "files": FILES, "formats": structure["formats"], "tensors": structure["tensors"],
        "risk_findings": len(report["risks"]["findings"])}}
    out = REPO / "bench" / "out" / "folder_verify.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
