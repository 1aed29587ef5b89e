"""Keys made and signatures checked by the real ssh-keygen, and audit records made by hand
in the three lineage-audit/1 shapes (attestation, claim, checkpoint)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

CHAIN_HEAD = "blake3:" + "ab" * 32
RUN = "tiny"


def make_key(folder: Path, name: str, *, kind: str = "ed25519", passphrase: str = "") -> Path:
    """A new key pair written by `ssh-keygen -t KIND`; returns the private key's path."""
    path = folder / name
    extra = ["-b", "2048"] if kind == "rsa" else []
    subprocess.run(["ssh-keygen", "-q", "-t", kind, *extra, "-N", passphrase, "-C",
                    f"{name}@example", "-f", str(path)], check=True, capture_output=True)
    return path


def public_line(key: Path) -> str:
    """The key's "type base64" public line, as ssh-keygen wrote it (comment dropped)."""
    kind, blob, *_ = Path(f"{key}.pub").read_text().split()
    return f"{kind} {blob}"


def ssh_sign(key: Path, data: bytes, folder: Path, *, namespace: str = "lineage-audit") -> str:
    """`ssh-keygen -Y sign` over `data`: the armored signature it writes."""
    message = folder / "message"
    message.write_bytes(data)
    Path(f"{message}.sig").unlink(missing_ok=True)
    subprocess.run(["ssh-keygen", "-Y", "sign", "-f", str(key), "-n", namespace, str(message)],
                   check=True, capture_output=True)
    return Path(f"{message}.sig").read_text()


def ssh_verify(allowed: str, name: str, signature: str, data: bytes, folder: Path, *,
               namespace: str = "lineage-audit") -> subprocess.CompletedProcess[bytes]:
    """`ssh-keygen -Y verify` of `signature` over `data` with an allowed_signers text."""
    (folder / "allowed_signers").write_text(allowed)
    (folder / "signature").write_text(signature)
    return subprocess.run(["ssh-keygen", "-Y", "verify", "-f", str(folder / "allowed_signers"),
                           "-I", name, "-n", namespace, "-s", str(folder / "signature")],
                          input=data, capture_output=True)


def auditor(name: str, public_key: str | None = None) -> dict[str, Any]:
    return {"name": name, "public_key": public_key, "payout": None}


def attestation(step: int, name: str = "alice", *, result: str = "match",
                swapped: bool = False) -> dict[str, Any]:
    state = "blake3:" + f"{step:064x}"
    return {
        "spec": "lineage-audit/1", "kind": "attestation", "run": RUN, "chain_head": CHAIN_HEAD,
        "step": step, "unit": "step-replay",
        "start": {"kind": "published", "step": step - 1, "weights_digest": "blake3:" + "cd" * 32},
        "state_hash": state if result == "match" else "blake3:" + "ee" * 32,
        "expected": state, "result": result,
        "machine": {"backend": "cpu", "device": "x86_64", "memory_bytes": 16 * 2**30,
                    "swapped": swapped, "os": "Linux", "cpu": "x86_64"},
        "duration_s": 12.5, "tools": {"lineage": "0.1.0", "python": "3.11.9"},
        "auditor": auditor(name), "created_at": "2026-12-01T15:04:05Z",
    }


def claim(first: int, last: int, name: str = "bob") -> dict[str, Any]:
    return {"spec": "lineage-audit/1", "kind": "claim", "run": RUN, "chain_head": CHAIN_HEAD,
            "first_step": first, "last_step": last, "auditor": auditor(name),
            "created_at": "2026-12-01T15:04:05Z", "expires_at": "2026-12-08T15:04:05Z"}


def checkpoint(step: int, attestation_id: str, name: str = "alice") -> dict[str, Any]:
    return {"spec": "lineage-audit/1", "kind": "checkpoint", "run": RUN,
            "chain_head": CHAIN_HEAD, "step": step, "weights_digest": "blake3:" + "12" * 32,
            "state_digest": "blake3:" + "34" * 32, "loss": 2.375,
            "state_hash": "blake3:" + f"{step:064x}", "attestation": attestation_id,
            "location": "https://example.org/ckpt/step-101 — relay ✓", "auditor": auditor(name),
            "created_at": "2026-12-01T16:00:00Z"}
