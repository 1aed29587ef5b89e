"""The demo's training run gives the same bits whatever the CPU: its step log (every
state hash, loss and norm) is the same when numpy may use only part of this machine's
SIMD, as on an older CPU. numpy's own `exp` and a BLAS matmul round differently from one
instruction set to another; the README's chain head would then hold on one machine only.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lineage.api import init_store, open_store
from lineage.ingest import ingest_corpus
from lineage.stream.build import build_stream

from .conftest import EXAMPLES

TRAIN = """
import importlib.util, sys
from pathlib import Path
import lineage
spec = importlib.util.spec_from_file_location("tiny_run", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
module.train(lineage.open_store(sys.argv[2]), "s", steps=12, out=Path(sys.argv[3]))
"""
# Features numpy dispatches to on newer x86 CPUs; a machine without them ignores this.
OLDER_CPU = "AVX512_ICL AVX512_SPR X86_V4 X86_V3"


def _train(store: Path, out: Path, env: dict[str, str]) -> bytes:
    done = subprocess.run([sys.executable, "-c", TRAIN, str(EXAMPLES / "tiny_run.py"),
                           str(store), str(out)], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=300)
    assert done.returncode == 0, done.stderr
    return (out / "steps.jsonl").read_bytes()


@pytest.mark.slow
def test_the_step_log_is_the_same_with_fewer_cpu_features(tmp_path: Path) -> None:
    init_store(tmp_path / "store")
    store = open_store(tmp_path / "store")
    ingest_corpus(store, [EXAMPLES / "shards" / "sonnets.jsonl.gz"], corpus="sonnets")
    build_stream(store, corpus="sonnets", name="s", seed=3, seq_len=512, batch=4)
    full = _train(tmp_path / "store", tmp_path / "full", {})
    older = _train(tmp_path / "store", tmp_path / "older",
                   {"NPY_DISABLE_CPU_FEATURES": OLDER_CPU, "OPENBLAS_CORETYPE": "Prescott"})
    assert full.count(b"\n") == 14  # the header, 12 steps and the close
    assert full == older
