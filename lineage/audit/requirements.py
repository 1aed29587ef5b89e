"""What replaying a step of a run needs, as the run declares it, against this machine.

A run declares its replay requirements in a `requirements` object: a lineage chain in its
header's `config` (committed by the genesis), a foreign chain at its header's top level,
or a JSON file its publishers ship beside it (`--requirements FILE`). docs/audit-spec.md,
"Replay requirements", gives the fields. A replay below a minimum is refused before it
starts unless forced, and a forced one records the shortfall in its attestation.
"""

from __future__ import annotations

import json
import platform
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from lineage.audit import machine
from lineage.audit.answers import AuditRequirements, RequirementCheck
from lineage.errors import InputError, UnknownObjectError
from lineage.store.base import BaseStore
from lineage.userfiles import read_regular

# field -> what it means; every value is a positive integer (bytes or seconds)
FIELDS = {
    "memory_bytes": "memory a replay of one step needs",
    "unified_memory_bytes": "the same on a machine whose GPU shares its memory (Apple silicon)",
    "initial_memory_bytes": "memory the initial-state check (step 0) needs",
    "disk_bytes": "free disk for the checkpoint a replay starts from",
    "download_bytes": "what a replay downloads (the checkpoint)",
    "step_seconds": "time one step takes to replay on a machine that meets the memory figure",
}
SWAP_SLOWDOWN = 3  # a replay that swaps takes about three times as long (and may mismatch)
_MAX_FILE = 1 << 20


def declared_requirements(header: Mapping[str, Any], source: Path | None = None,
                          ) -> dict[str, int] | None:
    """The run's requirements: from `source` (a JSON file) when given, else its header's;
    None when neither declares any. InputError names a bad field."""
    if source is not None:
        text = read_regular(source, what="--requirements", max_bytes=_MAX_FILE)
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            raise InputError(source, "requirements: not a JSON object") from None
        return _checked(value, source, "requirements")
    config = header.get("config")
    in_config = str(header.get("chain", "")).startswith("lineage-chain/")
    holder = config if in_config and isinstance(config, Mapping) else header
    if holder.get("requirements") is None:
        return None
    return _checked(holder["requirements"], "run header",
                    "config.requirements" if in_config else "requirements")


def _checked(value: Any, where: str | Path, label: str) -> dict[str, int]:
    if not isinstance(value, Mapping):
        raise InputError(where, f"{label}: must be an object")
    unknown = sorted(set(value) - set(FIELDS))
    if unknown:
        raise InputError(where, f"{label}: unknown field {unknown[0]!r} (known: "
                         f"{', '.join(FIELDS)})")
    for key, number in value.items():
        if not isinstance(number, int) or isinstance(number, bool) or not 0 < number < 2**63:
            raise InputError(where, f"{label}.{key}: must be a positive integer")
    return dict(value)


def unified_memory() -> bool:
    """Whether this machine's GPU shares its memory (Apple silicon)."""
    return platform.system() == "Darwin" and platform.machine() == "arm64"


def check(declared: Mapping[str, int], *, step: int,
          folder: Path) -> tuple[RequirementCheck, ...]:
    """Each minimum the run declares against this machine. `folder` is where the
    checkpoint would go."""
    rows = []
    memory_key = "initial_memory_bytes" if step == 0 and "initial_memory_bytes" in declared \
        else "unified_memory_bytes" if unified_memory() and "unified_memory_bytes" in declared \
        else "memory_bytes"
    if memory_key in declared:
        rows.append(_against(memory_key, declared[memory_key], machine.memory_bytes()))
    if "disk_bytes" in declared:
        free = shutil.disk_usage(_existing(folder)).free
        rows.append(_against("disk_bytes", declared["disk_bytes"], free))
    return tuple(rows)


def _against(requirement: str, required: int, available: int) -> RequirementCheck:
    return RequirementCheck(requirement=requirement, required=required, available=available,
                            ok=available >= required)


def _existing(folder: Path) -> Path:
    """The folder, or its nearest existing parent (a --save folder is made later)."""
    for candidate in (folder, *folder.parents):
        if candidate.exists():
            return candidate
    return Path.cwd()


def requirements_answer(store: BaseStore, run: str, *, step: int, folder: Path,
                        source: Path | None = None) -> AuditRequirements:
    """The `lineage audit requirements RUN` answer."""
    with store.reader(views=False) as con:
        row = con.execute("SELECT header FROM runs WHERE name = ?", [run]).fetchone()
    if row is None:
        raise UnknownObjectError(f"no run named {run!r}")
    declared = declared_requirements(json.loads(row[0]), source)
    checks = check(declared or {}, step=step, folder=folder)
    seconds = (declared or {}).get("step_seconds")
    return AuditRequirements(
        run=run, step=step, declared=declared,
        source=str(source) if source is not None else "header" if declared else None,
        unified_memory=unified_memory(), checks=checks, expected_seconds=seconds,
        expected_seconds_swapping=seconds * SWAP_SLOWDOWN if seconds else None,
        ok=all(c.ok for c in checks))


def shortfalls(checks: Iterable[RequirementCheck]) -> list[str]:
    """The checks that failed, in words: "memory_bytes: 16.0 GiB of 24.0 GiB"."""
    return [f"{c.requirement}: {c.available / 2**30:.1f} GiB of "
            f"{c.required / 2**30:.1f} GiB" for c in checks if not c.ok]
