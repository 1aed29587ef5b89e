"""Model report benchmarks: `report` on a 100-shard folder (headers only), `report` on a
1 GiB safetensors folder with and without file hashes, the pickle scan of a 1 GiB
torch-layout archive (only the pickle members are read), and sniffing every file of the
Python standard library's folder (what each file is, pickles by content).

    .venv/bin/python bench/model_report.py [--runs 5] [--workdir DIR]

Results go to bench/out/model_report.json.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import zipfile
from collections import OrderedDict
from pathlib import Path

import numpy as np
from runs import timed  # bench/ is on sys.path when these scripts run
from safetensors.numpy import save_file

REPO = Path(__file__).resolve().parents[1]


def sharded_folder(root: Path, shards: int = 100) -> Path:
    folder = root / f"model-{shards}-shards"
    if folder.exists():
        return folder
    folder.mkdir(parents=True)
    weight_map = {}
    for i in range(shards):
        name = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        tensors = {f"model.layers.{i}.{p}.weight": np.zeros((256, 256), np.float16)
                   for p in ("q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj")}
        save_file(tensors, str(folder / name))
        weight_map |= {t: name for t in tensors}
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map}))
    (folder / "config.json").write_text(json.dumps({
        "model_type": "llama", "num_hidden_layers": shards, "hidden_size": 256,
        "num_attention_heads": 8, "num_key_value_heads": 2, "max_position_embeddings": 4096,
        "vocab_size": 32000, "torch_dtype": "float16"}))
    return folder


def one_gib_folder(root: Path) -> Path:
    """One safetensors file of 1023 MiB of F16 zeros, just under the 1 GiB hashed by default
    (written sparse: hashing is the cost measured, not the disk)."""
    folder = root / "model-1gib"
    path = folder / "model.safetensors"
    if path.exists():
        return folder
    folder.mkdir(parents=True)
    data = 2**30 - 2**20
    header = json.dumps({"w": {"dtype": "F16", "shape": [data // 8192, 4096],
                               "data_offsets": [0, data]}}).encode()
    header += b" " * (-len(header) % 8)
    with open(path, "wb") as handle:
        handle.write(len(header).to_bytes(8, "little") + header)
        handle.truncate(8 + len(header) + data)
    return folder


def torch_layout_archive(root: Path, gib: float = 1.0) -> Path:
    """A zip laid out as torch.save writes one: data.pkl plus big stored storage blobs."""
    path = root / "big-checkpoint.pt"
    if path.exists():
        return path
    blobs = 8
    blob = bytes(int(gib * 2**30 / blobs))
    state = OrderedDict((f"layer{i}", i) for i in range(blobs))
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr("big-checkpoint/data.pkl", pickle.dumps(state, protocol=2))
        archive.writestr("big-checkpoint/version", "3\n")
        for i in range(blobs):
            archive.writestr(f"big-checkpoint/data/{i}", blob)
    return path


def main() -> None:
    from lineage.diligence.inspect import inspect_model
    from lineage.formats.files import list_files
    from lineage.formats.pickle_scan import scan_pickle_file

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/lineage-bench-report"))
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    folder = sharded_folder(args.workdir)
    report = inspect_model(folder)
    assert report["integrity"]["structure"]["ok"] and len(report["files"]) == 102
    big = one_gib_folder(args.workdir)
    hashed = inspect_model(big)["hashes"]
    assert hashed["computed"] and not inspect_model(big, hash_files=False)["hashes"]["computed"]
    archive = torch_layout_archive(args.workdir)
    scan = scan_pickle_file(archive)
    stdlib = Path(os.__file__).parent
    stdlib_files, _ = list_files(stdlib)
    results = {
        "report_100_shards": {**timed(lambda: inspect_model(folder), args.runs),
                              "parameters": report["parameters"], "target_s": 2.0},
        "report_100_shards_no_hash": timed(lambda: inspect_model(folder, hash_files=False),
                                           args.runs),
        "report_1gib_hashed": {**timed(lambda: inspect_model(big), args.runs),
                               "bytes": (big / "model.safetensors").stat().st_size},
        "report_1gib_no_hash": timed(lambda: inspect_model(big, hash_files=False), args.runs),
        "pickle_scan_1gib": {**timed(lambda: scan_pickle_file(archive), args.runs),
                             "archive_bytes": archive.stat().st_size,
                             "bytes_read": scan.bytes_read, "verdict": scan.verdict,
                             "members_scanned": scan.members_scanned},
        "sniff_stdlib": {**timed(lambda: list_files(stdlib), args.runs),
                         "files": len(stdlib_files),
                         "bytes": sum(f["size"] for f in stdlib_files),
                         "pickles": sorted(f["path"] for f in stdlib_files
                                           if f["format"] in ("pickle", "npy", "npz"))},
    }
    out = REPO / "bench" / "out" / "model_report.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
