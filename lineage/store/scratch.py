"""Scratch folders for long writes, inside the store so a full disk shows up early.

A folder is named after its process, so a later run removes the ones whose process died.
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path
from typing import TYPE_CHECKING

from lineage.store.durable import pid_alive, remove_quietly

if TYPE_CHECKING:
    import duckdb


def new_staging_dir(staging_root: Path) -> Path:
    """A fresh folder for one write; also clears folders of writers that died."""
    staging_root.mkdir(parents=True, exist_ok=True)
    clear_abandoned(staging_root)
    folder = staging_root / f"{os.getpid()}-{int(time.time())}-{secrets.token_hex(4)}"
    folder.mkdir()
    return folder


def spilling_connection(folder: Path, memory_limit: str | None = None,
                        ) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB of one write's (or one large question's) own, which spills to
    `folder`/spill (a staging folder) past `memory_limit`, if given. The caller closes it."""
    import duckdb

    con = duckdb.connect(":memory:")
    try:
        if memory_limit is not None:
            con.execute("SET memory_limit = ?", [memory_limit])
        con.execute("SET temp_directory = ?", [str(folder / "spill")])
    except BaseException:
        con.close()
        raise
    return con


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
