"""`lineage export model-card`: what the store records, in the forms other tools read."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lineage.cli import output
from lineage.cli.common import JsonOption, current_store

app = typer.Typer(help="Export records in the forms other tools read (docs/exports.md).",
                  no_args_is_help=True)


@app.command("model-card")
def model_card(
    ctx: typer.Context,
    run: Annotated[str, typer.Option("--run", help="The run the model was trained by.")],
    checkpoint: Annotated[
        int, typer.Option("--checkpoint", metavar="STEP", min=0,
                          help="The step an ingested checkpoint was saved after.")],
    out: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write the card here (atomically) "
                                  "instead of printing it.")] = None,
    json: JsonOption = False,
) -> None:
    """A model card (README.md) for a run's checkpoint: the metadata block and a training
    data section with the corpus, sources, stream, chain and checkpoint evidence."""
    card = current_store(ctx).model_card(run, checkpoint=checkpoint)
    if out is not None:
        output.write_file(out, card.text)
    if json:
        output.emit_json(card.to_dict())
    elif out is None:
        output.emit_document(card.text)
