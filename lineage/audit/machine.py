"""The facts of the machine a replay ran on, as an attestation records them (self-reported:
nothing here can be proven to a reader, only stated plainly).

Swap is what makes a replay's hash worthless without making it wrong on purpose: the
kernel's swap-in and swap-out counters (/proc/vmstat pswpin, pswpout) are read before and
after the replay, and any growth marks it `swapped`. The counters are machine-wide, so
another program's paging counts too: a mismatch is then judged only after a re-run. Where
there are no such counters (not Linux) a replay reports `swapped: false`.
"""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path
from typing import Any


def swap_counters() -> tuple[int, int] | None:
    """(pages swapped in, pages swapped out) since boot, or None where unknown."""
    try:
        text = Path("/proc/vmstat").read_text(encoding="ascii")
    except OSError:
        return None
    values = dict(line.split(" ", 1) for line in text.splitlines() if " " in line)
    try:
        return int(values["pswpin"]), int(values["pswpout"])
    except (KeyError, ValueError):
        return None


def swapped_between(before: tuple[int, int] | None, after: tuple[int, int] | None) -> bool:
    return before is not None and after is not None and after != before


def memory_bytes() -> int:
    """The machine's physical memory."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return _meminfo_total()


def _meminfo_total() -> int:
    try:
        for line in Path("/proc/meminfo").read_text(encoding="ascii").splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith(("model name", "Hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def accelerator() -> tuple[str, str] | None:
    """(backend, device) of torch's accelerator, when the replay itself imported torch:
    torch is looked at only if it is already loaded, never imported here."""
    torch: Any = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        if torch.cuda.is_available():
            return "cuda", str(torch.cuda.get_device_name(0))
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            return "mps", platform.machine()
    except Exception:  # a broken torch install says nothing about this machine
        return None
    return None


def machine_facts(*, swapped: bool, backend: str | None = None,
                  device: str | None = None) -> dict[str, Any]:
    """The attestation's `machine` object; `backend`/`device` as the replayer named
    them, else torch's accelerator when loaded, else the CPU."""
    cpu = cpu_model()
    found = accelerator() if backend is None else None
    if backend is None:
        backend, device = found or ("cpu", device or cpu)
    return {"backend": backend, "device": device or cpu, "memory_bytes": memory_bytes(),
            "swapped": swapped, "os": f"{platform.system()} {platform.release()}",
            "cpu": f"{cpu} ({platform.machine()}, {os.cpu_count() or 0} cores)"}
