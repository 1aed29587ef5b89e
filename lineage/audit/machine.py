"""The facts of the machine a replay ran on, as an attestation records them (self-reported:
nothing here can be proven to a reader, only stated plainly).

Swap is what makes a replay's hash worthless without making it wrong on purpose: the
kernel's swap-in and swap-out counters are read before and after the replay, and any
growth marks it `swapped`. Linux gives them in /proc/vmstat (pswpin, pswpout), macOS in
the output of `vm_stat` ("Swapins", "Swapouts"). The counters are machine-wide, so another
program's paging counts too: a mismatch is then judged only after a re-run. Where no
counter can be read (another system, or a probe that failed) the replay records
`swapped: null`, unknown, which the status treats as swapped: an Apple-silicon Mac with
too little unified memory is the machine that rule exists for.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
from pathlib import Path
from typing import Any


def swap_counters() -> tuple[int, int] | None:
    """(pages swapped in, pages swapped out) since boot, or None where unknown."""
    system = _system()
    if system == "darwin":
        return _vm_stat_counters(_vm_stat())
    if not system.startswith("linux"):
        return None
    try:
        text = Path("/proc/vmstat").read_text(encoding="ascii")
    except OSError:
        return None
    values = dict(line.split(" ", 1) for line in text.splitlines() if " " in line)
    try:
        return int(values["pswpin"]), int(values["pswpout"])
    except (KeyError, ValueError):
        return None


def _system() -> str:
    return sys.platform


def _vm_stat() -> str | None:
    """What macOS's `vm_stat` prints, or None when it cannot be run."""
    try:
        done = subprocess.run(["/usr/bin/vm_stat"], capture_output=True, timeout=10,
                              check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.decode("ascii", "replace")


_VM_STAT_LINE = re.compile(r"^(Swapins|Swapouts):\s+(\d+)\.?\s*$", re.MULTILINE)


def _vm_stat_counters(text: str | None) -> tuple[int, int] | None:
    """The swap-in and swap-out counts of `vm_stat`'s output ("Swapins:  1234."), or None
    when either line is missing."""
    found = {name: int(value) for name, value in _VM_STAT_LINE.findall(text or "")}
    if set(found) != {"Swapins", "Swapouts"}:
        return None
    return found["Swapins"], found["Swapouts"]


def swapped_between(before: tuple[int, int] | None,
                    after: tuple[int, int] | None) -> bool | None:
    """Whether the counters grew; None (unknown) when either reading is missing."""
    if before is None or after is None:
        return None
    return after != before


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


def machine_facts(*, swapped: bool | None, backend: str | None = None,
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
