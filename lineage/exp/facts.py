"""What a record keeps about the machine and the command's surroundings: host facts,
the git state of the working directory, and the environment variables that change results.

Runtime versions are asked of the command's own interpreter (lineage.exp.probe), never
taken from lineage's process.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

# The packages whose versions explain why two machines give different numbers.
RUNTIME_PACKAGES = (
    "torch", "transformers", "accelerate", "safetensors", "tokenizers", "huggingface-hub",
    "onnx", "onnxruntime", "onnxruntime-gpu", "llama-cpp-python", "gguf", "vllm", "mlx",
    "mlx-lm", "bitsandbytes", "auto-gptq", "autoawq", "optimum", "numpy", "jax", "jaxlib",
    "sentence-transformers", "lineage",
)  # fmt: skip

# Recorded on every run (unset ones as null): they change what a run computes or where.
ENV_ALLOWLIST = (
    "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
    "PYTORCH_CUDA_ALLOC_CONF", "HF_HUB_OFFLINE",
)  # fmt: skip
NOT_A_REPOSITORY = "not a git repository"
_GIT_TIMEOUT_S = 10.0


def lineage_version() -> str:
    from lineage.version import __version__

    return __version__


def env_facts(names: tuple[str, ...] | list[str], env: dict[str, str]) -> dict[str, Any]:
    """The allowlisted variables and those the user named: value, or None when unset."""
    return {name: env.get(name) for name in sorted({*ENV_ALLOWLIST, *names})}


def git_facts(cwd: Path) -> dict[str, Any] | str:
    """Commit, dirty state and remote of the repository `cwd` is in, asked of `git`."""
    if shutil.which("git") is None:
        return NOT_A_REPOSITORY + " (git is not installed)"
    commit = _git(cwd, "rev-parse", "HEAD")
    if commit is None:
        return NOT_A_REPOSITORY
    status = (_git(cwd, "status", "--porcelain") or "").splitlines()
    untracked = [line for line in status if line.startswith("??")]
    remotes = (_git(cwd, "remote") or "").split()
    remote_name = "origin" if "origin" in remotes else (remotes[0] if remotes else None)
    remote = _git(cwd, "remote", "get-url", remote_name) if remote_name else None
    return {"commit": commit, "dirty": len(status) > len(untracked),
            "changed_files": len(status) - len(untracked), "untracked_files": len(untracked),
            "remote": _without_credentials(remote) if remote else None,
            "root": _git(cwd, "rev-parse", "--show-toplevel")}


def _git(cwd: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True,
                              timeout=_GIT_TIMEOUT_S, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _without_credentials(url: str) -> str:
    """A remote as shared in a bundle: `https://user:token@host/x` loses `user:token@`."""
    parts = urlsplit(url)
    if parts.scheme and "@" in parts.netloc:
        return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))
    return url


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
