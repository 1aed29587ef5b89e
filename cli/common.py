"""Options and helpers shared by the command modules."""

from __future__ import annotations

from typing import Annotated

import typer

from lineage.store import Store, open_store, resolve_store_path

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for programs.")]


def store_root(ctx: typer.Context) -> str:
    root = ctx.find_root()
    value = (root.obj or {}).get("store") if root else None
    return str(resolve_store_path(value))


def current_store(ctx: typer.Context) -> Store:
    return open_store(store_root(ctx))
