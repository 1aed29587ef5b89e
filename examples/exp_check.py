"""A first-load check for `lineage exp run`: load the weights, run a fixed input, report.

    lineage exp run --weights demo-run/checkpoint-199 --revision tiny@199 \
        -- python examples/exp_check.py

Reads the safetensors weights the gate just checked ($LINEAGE_EXP_WEIGHTS), runs the tiny
bigram model of tiny_run.py on a fixed byte string, and reports the first-load result and
a digest of the output logits into the experiment record.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file

from lineage.exp.providers import record_facts

FIXED_INPUT = b"Shall I compare thee to a summer's day?"


def main() -> None:
    weights = load_file(str(Path(os.environ["LINEAGE_EXP_WEIGHTS"]) / "model.safetensors"))
    tokens = np.frombuffer(FIXED_INPUT, dtype=np.uint8).astype(np.int64)
    logits = weights["embed"][tokens] @ weights["out"]
    digest = "sha256:" + hashlib.sha256(logits.astype("<f4").tobytes()).hexdigest()
    record_facts(first_load="ok", output_digest=digest, fixed_input=FIXED_INPUT.decode())
    print(f"logits {logits.shape}, digest {digest}")


if __name__ == "__main__":
    main()
