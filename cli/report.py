"""`lineage inspect PATH` and `lineage report DIR`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lineage.cli import output
from lineage.cli.common import JsonOption, store_root
from lineage.errors import EXIT_NO, UsageError

ContextOption = Annotated[int, typer.Option(
    help="Context length for the memory estimate (clamped to the model's maximum positions).",
    min=1)]
BatchOption = Annotated[int, typer.Option(help="Batch size for the memory estimate.", min=1)]
HashOption = Annotated[bool | None, typer.Option(
    "--hash/--no-hash",
    help="SHA-256 every file (--hash) or none (--no-hash). Default: only when the files "
         "add up to at most 1 GiB.")]


def _store(ctx: typer.Context):  # type: ignore[no-untyped-def]
    """The store if one exists (provenance is looked up there), else None."""
    from lineage.api import Store

    store = Store(store_root(ctx))
    return store if store.catalog_path.is_file() else None


def inspect(
    ctx: typer.Context,
    path: Annotated[Path, typer.Argument(help="A model file or folder.")],
    sums: Annotated[Path | None, typer.Option(help="A trusted SHA256SUMS list.")] = None,
    context: ContextOption = 4096,
    batch: BatchOption = 1,
    hash_files: HashOption = None,
    json: JsonOption = False,
) -> None:
    """What is in a model file or folder; is it safe to open? Exit 1 on a dangerous risk."""
    from lineage.diligence.inspect import inspect_model

    report = inspect_model(path, sums=sums, context=context, batch=batch, store=_store(ctx),
                           hash_files=hash_files)
    if json:
        output.emit_json(report)
    else:
        from lineage.diligence.render import render_markdown

        output.emit_document(render_markdown(output.shown_values(report)))
    if any(r["severity"] == "dangerous" for r in report["risks"]):
        raise typer.Exit(EXIT_NO)


def report(
    ctx: typer.Context,
    folder: Annotated[Path, typer.Argument(help="The model folder.")],
    fmt: Annotated[str, typer.Option("--format", help="md, html or json.")] = "md",
    out: Annotated[Path | None, typer.Option("-o", "--output", help="Write here.")] = None,
    sums: Annotated[Path | None, typer.Option(help="A trusted SHA256SUMS list.")] = None,
    context: ContextOption = 4096,
    batch: BatchOption = 1,
    hash_files: HashOption = None,
) -> None:
    """A due-diligence report: risks, integrity, weights, cost, provenance, licence."""
    import json

    from lineage.diligence.inspect import inspect_model
    from lineage.diligence.render import render_html, render_markdown

    if fmt not in ("md", "html", "json"):
        raise UsageError(f"--format must be md, html or json, not {fmt!r}")
    result = inspect_model(folder, sums=sums, context=context, batch=batch, store=_store(ctx),
                           hash_files=hash_files)
    if fmt == "json":
        from lineage.answer import to_jsonable

        text = json.dumps(to_jsonable(result), indent=2, ensure_ascii=False) + "\n"
    else:
        text = render_html(result) if fmt == "html" else render_markdown(result)
    if out is None:
        output.emit_raw(text)
    else:
        output.write_file(out, text)
