"""`lineage inspect PATH` and `lineage report DIR`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from lineage.cli import output
from lineage.cli.common import JsonOption, store_root
from lineage.errors import EXIT_NO
from lineage.userfiles import check_output_path, write_output

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
    sums_key: Annotated[Path | None, typer.Option(
        help="With --sums: the key the list must be signed by (as `lineage verify "
             "--sums-key`).", show_default=False)] = None,
    context: ContextOption = 4096,
    batch: BatchOption = 1,
    hash_files: HashOption = None,
    supported_ops: Annotated[Path | None, typer.Option(
        help="A file of the op types a provider supports, one a line (# comments): count "
             "the pieces each ONNX graph splits into and the tensors handed between them.",
        show_default=False)] = None,
    provider: Annotated[str | None, typer.Option(
        help="As --supported-ops, from a built-in list: CPUExecutionProvider (every op).",
        show_default=False)] = None,
    json: JsonOption = False,
) -> None:
    """What is in a model file or folder; is it safe to open? Exit 1 on a dangerous risk."""
    from lineage.diligence.api import inspect as inspect_path

    answer = inspect_path(path, sums=sums, context=context, batch=batch, store=_store(ctx),
                          hash_files=hash_files, sums_key=sums_key,
                          supported_ops=supported_ops, provider=provider)
    if json:
        output.emit_json(answer.to_dict())
    else:
        from lineage.diligence.render import render_markdown

        output.emit_document(render_markdown(output.shown_values(answer.to_dict())))
        if answer.partition is not None:
            output.emit_lines(partition_lines(answer.partition))
    if any(risk.severity == "dangerous" for risk in answer.risks):
        raise typer.Exit(EXIT_NO)


def partition_lines(partition: dict[str, Any]) -> list[str]:
    """The partition section after the report (pieces, transfers: docs/reports.md)."""
    support = (f"provider {partition['provider']}" if "provider" in partition else
               f"{len(partition['ops'])} op type{'s' * (len(partition['ops']) != 1)} from "
               f"{partition['supported_ops']}")
    lines = ["", "## Graph partition", "", f"Supported: {support}.", ""]
    for graph in partition["graphs"]:
        unsupported = ", ".join(f"{op} x{n}" for op, n in graph["unsupported_ops"].items())
        lines += [f"- {graph['file']}: {graph['pieces']} pieces ({graph['supported_pieces']} "
                  f"on the provider, {graph['unsupported_pieces']} unsupported nodes on the "
                  f"CPU), {graph['transfers']} transfers ({graph['crossings']} crossing "
                  f"between provider and CPU); {graph['supported_nodes']} of "
                  f"{graph['nodes']} nodes supported"
                  + (f"; unsupported: {unsupported}" if unsupported else "")]
    return lines


def report(
    ctx: typer.Context,
    folder: Annotated[Path, typer.Argument(help="The model folder.")],
    fmt: Annotated[str, typer.Option("--format", help="md, html or json.")] = "md",
    out: Annotated[Path | None, typer.Option("-o", "--output", help="Write here.")] = None,
    sums: Annotated[Path | None, typer.Option(help="A trusted SHA256SUMS list.")] = None,
    sums_key: Annotated[Path | None, typer.Option(
        help="With --sums: the key the list must be signed by (as `lineage verify "
             "--sums-key`).", show_default=False)] = None,
    context: ContextOption = 4096,
    batch: BatchOption = 1,
    hash_files: HashOption = None,
) -> None:
    """A due-diligence report: risks, integrity, weights, cost, provenance, licence."""
    from lineage.diligence.api import report as report_text

    if out is not None:
        check_output_path(out)  # a device, FIFO or folder is refused before any work
    text = report_text(folder, format=fmt, sums=sums, context=context, batch=batch,
                       store=_store(ctx), hash_files=hash_files, sums_key=sums_key)
    if out is None:
        output.emit_raw(text)
    else:
        output.info(f"wrote {write_output(out, text)}")
