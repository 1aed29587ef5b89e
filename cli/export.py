"""`lineage export`: what the store records, in the forms other tools read."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from lineage.cli import output
from lineage.cli.common import JsonOption, current_store, output_path

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
        Path | None, typer.Option("-o", "--output", callback=output_path,
                                  help="Write the card here (atomically) "
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


class SummaryFormat(StrEnum):
    md = "md"
    json = "json"
    html = "html"


@app.command("ai-act-summary")
def ai_act_summary(
    ctx: typer.Context,
    run: Annotated[str | None, typer.Option("--run", help="Summarise the corpus this "
                                            "run's stream orders.")] = None,
    corpus: Annotated[str | None, typer.Option("--corpus", help="Summarise this corpus.")]
    = None,
    fmt: Annotated[SummaryFormat, typer.Option("--format", help="md, json (the typed "
                                               "answer) or html (one self-contained page).")]
    = SummaryFormat.md,
    out: Annotated[
        Path | None, typer.Option("-o", "--output", callback=output_path,
                                  help="Write the summary here "
                                  "(atomically) instead of printing it.")] = None,
    json: Annotated[bool, typer.Option("--json", help="The same as --format json.")] = False,
) -> None:
    """A draft of the EU AI Act public summary of training content (Art. 53(1)(d), the
    Commission's template of 24 July 2025): what the store records is filled in, every
    other field says "to be completed by the provider"."""
    from lineage.exports.ai_act_text import summary_html, summary_markdown

    summary = current_store(ctx).ai_act_summary(run=run, corpus=corpus)
    fmt = SummaryFormat.json if json else fmt
    if fmt is SummaryFormat.json:
        text = summary.to_json() + "\n"
    elif fmt is SummaryFormat.html:
        text = summary_html(summary)
    else:
        text = summary_markdown(summary)
    if out is not None:
        output.write_file(out, text)
    elif fmt is SummaryFormat.json:
        output.emit_json(summary.to_dict())
    else:
        output.emit_document(text)


@app.command("openlineage")
def openlineage(
    ctx: typer.Context,
    run: Annotated[str | None, typer.Option("--run", help="The run, with the ingest of its "
                                            "corpus and the build of its stream.")] = None,
    corpus: Annotated[str | None, typer.Option("--corpus", help="The corpus, with every "
                                               "stream built from it and every run over "
                                               "those.")] = None,
    exp: Annotated[str | None, typer.Option("--exp", metavar="NAME",
                                            help="The experiment (a name: every attempt; "
                                            "or an id).")] = None,
    out: Annotated[
        Path | None, typer.Option("-o", "--output", callback=output_path,
                                  help="Write the events to this file, one "
                                  "JSON event per line (replaced atomically).")] = None,
    url: Annotated[str | None, typer.Option("--url", help="POST each event to this "
                                            "OpenLineage endpoint (e.g. Marquez).")] = None,
    endpoint: Annotated[str, typer.Option("--endpoint", help="The path under --url.")]
    = "api/v1/lineage",
    api_key_file: Annotated[
        Path | None, typer.Option("--api-key-file", help="A file holding the bearer token "
                                  "--url wants.")] = None,
    console: Annotated[bool, typer.Option("--console", help="Print the events, one JSON "
                                          "event per line (the default).")] = False,
    namespace: Annotated[str, typer.Option("--namespace", help="The OpenLineage namespace "
                                           "of the jobs and datasets.")] = "lineage",
    json: JsonOption = False,
) -> None:
    """OpenLineage RunEvents (START, then COMPLETE, RUNNING, FAIL or ABORT) for corpus
    ingests, stream builds, training runs and experiments, with facets carrying lineage's
    evidence, sent through the official openlineage-python client; without --run, --corpus
    or --exp, everything the store records."""
    if console and (out is not None or url is not None):
        raise typer.BadParameter("--console cannot go with -o or --url")
    api_key = _read_api_key(api_key_file) if api_key_file is not None else None
    if out is None and url is None:
        _console_to_stdout()
    answer = current_store(ctx).export_openlineage(
        run=run, corpus=corpus, exp=exp, namespace=namespace, output=out, url=url,
        endpoint=endpoint, api_key=api_key)
    if json and (out is not None or url is not None):
        output.emit_json(answer.to_dict())
    elif out is not None or url is not None:
        output.info(f"sent {answer.events} events of {len(answer.runs)} runs to "
                    f"{answer.destination}")


def _read_api_key(path: Path) -> str:
    from lineage.errors import InputError
    from lineage.userfiles import read_regular

    data = read_regular(path, what="API key file", max_bytes=64 * 1024)
    try:
        key = data.decode("utf-8").strip()
    except UnicodeDecodeError as exc:
        raise InputError(path, "the API key file is not UTF-8") from exc
    if not key or "\n" in key:
        raise InputError(path, "the API key file must hold one non-empty line")
    return key


def _console_to_stdout() -> None:
    """The client's console transport logs each event at INFO: print those, and only
    those, to stdout, one per line (a closed pipe stops the export as for any output)."""
    import logging

    class _Stdout(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            output.emit_raw(record.getMessage() + "\n")

    logger = logging.getLogger("openlineage.client.transport.console")
    logger.handlers = [_Stdout()]
    logger.setLevel(logging.INFO)
    logger.propagate = False


@app.command("croissant")
def croissant(
    ctx: typer.Context,
    corpus: Annotated[str, typer.Option("--corpus", help="The corpus to describe.")],
    out: Annotated[
        Path | None, typer.Option("-o", "--output", callback=output_path,
                                  help="Write the JSON-LD here "
                                  "(atomically) instead of printing it.")] = None,
    json: Annotated[bool, typer.Option("--json", help="Print the JSON-LD (also with -o); "
                                       "it is JSON already.")] = False,
) -> None:
    """Croissant 1.1 JSON-LD of a corpus: the store's Parquet parts of its manifest (with
    SHA-256 and sizes), a record set of its documents, its sources and licences, and the
    manifest hash; mlcroissant reads the records from it."""
    from lineage.exports.croissant import croissant as croissant_jsonld
    from lineage.jsonout import json_text

    document = croissant_jsonld(current_store(ctx), corpus)
    if out is not None:
        output.write_file(out, json_text(document) + "\n")
    if out is None or json:
        output.emit_json(document)
