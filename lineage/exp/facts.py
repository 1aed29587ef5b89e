"""What a record keeps about the machine: host facts and the runtime versions that matter.

Versions come from installed distribution metadata (nothing is imported), so asking about
torch or vllm costs nothing and cannot fail because of a broken install.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from importlib import metadata
from typing import Any

# The packages whose versions explain why two machines give different numbers.
RUNTIME_PACKAGES = (
    "torch", "transformers", "accelerate", "safetensors", "tokenizers", "huggingface-hub",
    "onnx", "onnxruntime", "onnxruntime-gpu", "llama-cpp-python", "gguf", "vllm", "mlx",
    "mlx-lm", "bitsandbytes", "auto-gptq", "autoawq", "optimum", "numpy", "jax", "jaxlib",
    "sentence-transformers", "lineage",
)  # fmt: skip


def runtime_versions() -> dict[str, Any]:
    packages = {}
    for name in RUNTIME_PACKAGES:
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return {"python": platform.python_version(), "implementation": sys.implementation.name,
            "packages": packages}


def host_facts() -> dict[str, Any]:
    return {
        "os": platform.system(), "release": platform.release(), "machine": platform.machine(),
        "cpu": _cpu_model(), "cores": os.cpu_count(), "memory_bytes": _memory_bytes(),
        "accelerators": _accelerators(), "hostname_hash": _hostname_hash(),
    }


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _accelerators() -> list[str]:
    """Visible accelerators, asked of the driver tools when present (never required)."""
    found: list[str] = []
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True,
                                 timeout=10, check=False).stdout
            found += [line.strip() for line in out.splitlines() if line.strip()]
        except (OSError, subprocess.TimeoutExpired):
            pass
    if platform.system() == "Darwin" and platform.machine() == "arm64":
        found.append("Apple silicon GPU (Metal)")
    return found


def _hostname_hash() -> str:
    """Tells machines apart without publishing their names in a shared bundle."""
    import blake3

    return "blake3:" + blake3.blake3(platform.node().encode()).hexdigest()[:16]
