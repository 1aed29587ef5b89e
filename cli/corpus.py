"""`lineage corpus list|show`."""

from __future__ import annotations

from typing import Annotated

import typer

from lineage.cli import output
from lineage.cli.common import JsonOption, current_store

app = typer.Typer(help="Recorded corpora.", no_args_is_help=True)


@app.command("list")
def list_(ctx: typer.Context, json: JsonOption = False) -> None:
    """Every corpus with its totals and manifest hash."""
    rows = current_store(ctx).corpora()
    if json:
        output.emit_json(rows.to_list())
        return
    columns = ("name", "documents", "tokens", "bytes", "manifest_hash")
    output.emit_table(columns, [[row[c] for c in columns] for row in rows])


@app.command("show")
def show(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The corpus name.")],
    json: JsonOption = False,
) -> None:
    """Sources with document and token counts, shares, licences, and the manifest hash."""
    info = current_store(ctx).corpus(name)
    if json:
        output.emit_json(info.to_dict())
        return
    output.emit_lines([
        f"corpus      {info['name']}",
        f"manifest    {info['manifest_hash']} ({info['manifest_spec']})",
        f"documents   {info['documents']:,} ({info['dropped_empty']:,} empty dropped)",
        f"tokens      {info['tokens']:,} ({info['tokenizer']})",
        f"bytes       {info['bytes']:,}",
        f"licenses    {', '.join(info['licenses']) or '(none recorded)'}",
    ])
    index = info["text_index"]
    if index:
        share = index["index_bytes"] / index["text_bytes"] if index["text_bytes"] else 0.0
        output.emit_lines([
            f"text index  {index['fingerprints']:,} fingerprints of {index['documents']:,} "
            f"documents ({index['words']:,} words, {share:.0%} of their size), "
            f"{index['text_spec']}, {index['fingerprint_spec']} k={index['k']} w={index['w']}"])
    output.emit_table(
        ("source", "documents", "tokens", "share", "licenses"),
        [[s["source"], s["documents"], s["tokens"], f"{s['share']:.2%}", s["licenses"]]
         for s in info["sources"]],
    )
