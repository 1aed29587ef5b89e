"""Options and helpers shared by the command modules."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lineage.api import Store, open_store, resolve_store_path

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for programs.")]


def store_root(ctx: typer.Context) -> str:
    root = ctx.find_root()
    value = (root.obj or {}).get("store") if root else None
    return str(resolve_store_path(value))


def current_store(ctx: typer.Context) -> Store:
    return open_store(store_root(ctx))


def require_folder(path: Path) -> Path:
    """The folder a command was given, or an error (exit 2) when there is none to check:
    a missing path is a mistake in the question, not a failed check. A parameter callback,
    so the check runs before the command does anything."""
    from lineage.diligence.verify import require_folder as check

    check(path)
    return path
