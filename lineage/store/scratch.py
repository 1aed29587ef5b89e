"""Scratch folders for long writes, inside the store so a full disk shows up early.

A folder is named after its process, so a later run removes the ones whose process died.
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

from lineage.store.durable import pid_alive, remove_quietly


def new_staging_dir(staging_root: Path) -> Path:
    """A fresh folder for one write; also clears folders of writers that died."""
    staging_root.mkdir(parents=True, exist_ok=True)
    clear_abandoned(staging_root)
    folder = staging_root / f"{os.getpid()}-{int(time.time())}-{secrets.token_hex(4)}"
    folder.mkdir()
    return folder


def clear_abandoned(staging_root: Path) -> list[Path]:
    """Remove staging folders whose owning process is gone."""
    removed: list[Path] = []
    if not staging_root.is_dir():
        return removed
    for folder in sorted(staging_root.iterdir()):
        head = folder.name.split("-", 1)[0]
        if head.isdigit() and not pid_alive(int(head)):
            remove_quietly(folder)
            removed.append(folder)
    return removed
