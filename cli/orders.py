"""`lineage ingest order FRAMEWORK ...`: a trainer's own data order, stored as a stream."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from lineage.cli import orders_olmo, output
from lineage.cli.common import JsonOption, current_store
from lineage.cli.order_summary import order_summary
from lineage.errors import UsageError

app = typer.Typer(help="Import the data order a trainer recorded, as a stream every query "
                  "reads (docs/importers.md).", no_args_is_help=True)


@app.command("megatron")
def megatron(
    ctx: typer.Context,
    data: Annotated[list[Path], typer.Option(help="An indexed dataset's PREFIX (PREFIX.idx "
                                             "and PREFIX.bin); one per dataset of the blend.")],
    docs: Annotated[list[Path], typer.Option(help="Per --data, in the same order: the JSONL "
                                             "given to Megatron's preprocessing, or a file "
                                             "of doc_ids, line i = document i.")],
    cache: Annotated[Path, typer.Option(help="The run's path_to_cache: the folder of the "
                                        "cached GPTDataset/BlendedDataset indices.")],
    corpus: Annotated[str, typer.Option(help="The corpus the datasets were tokenized from.")],
    stream: Annotated[str, typer.Option(help="Name of the stream to record.")],
    global_batch_size: Annotated[int, typer.Option(help="--global-batch-size of the run.",
                                                   min=1)],
    micro_batch_size: Annotated[int, typer.Option(help="--micro-batch-size of the run.",
                                                  min=1)],
    data_parallel_size: Annotated[int, typer.Option(help="Data-parallel ranks of the run.",
                                                    min=1)] = 1,
    rampup_batch_size: Annotated[
        tuple[int, int, int] | None,
        typer.Option(help="--rampup-batch-size START INCREMENT SAMPLES of the run."),
    ] = None,
    decrease_batch_size_if_needed: Annotated[
        bool, typer.Option(help="The run's --decrease-batch-size-if-needed.")] = False,
    train_iters: Annotated[int | None, typer.Option(
        help="Steps the run took (default: every whole step the cached samples fill).",
        min=1)] = None,
    split: Annotated[str, typer.Option(help="The split the run trained on.")] = "train",
    resumed_at: Annotated[list[str] | None, typer.Option(
        metavar="STEP:GLOBAL_BATCH",
        help="The run was resumed from a checkpoint at STEP with --global-batch-size "
        "GLOBAL_BATCH (repeat the option for each resume, in order).")] = None,
    dataloader_type: Annotated[str, typer.Option(
        help="The run's --dataloader-type: single (samples in order) or cyclic (shuffled "
        "anew each epoch by MegatronPretrainingRandomSampler).")] = "single",
    data_sharding: Annotated[bool, typer.Option(
        help="cyclic: the run's --data-sharding (each rank shuffles a bucket of its own; "
        "Megatron-LM's default) or --no-data-sharding.")] = True,
    add_extra_token_to_sequence: Annotated[bool, typer.Option(
        help="The GPTDatasetConfig's add_extra_token_to_sequence: a sample is "
        "sequence_length + 1 tokens (the default), or sequence_length without it.")] = True,
    index_hash: Annotated[str | None, typer.Option(
        help="The MD5 in the cached files' names, when several runs share --cache.")] = None,
    tokenizer: Annotated[Path | None, typer.Option(
        help="The corpus's tokenizer.json, to re-read sampled windows of a corpus not "
        "counted in bytes.")] = None,
    sample_windows: Annotated[int, typer.Option(
        help="Windows re-read from the .bin and compared with the corpus (first and last "
        "included).", min=0)] = 16,
    verify: Annotated[str, typer.Option(
        help="sample: re-read --sample-windows windows; all: every window (every document "
        "the windows read, once and whole) against the corpus.")] = "sample",
    rebuild_cache: Annotated[bool, typer.Option(
        help="The cache is lost: write it anew into --cache (an empty folder) with "
        "megatron-core's own builder, from the config recorded with --stream (imported "
        "before), and check every file against the recorded hash. Needs torch and "
        "megatron-core.")] = False,
    json: JsonOption = False,
) -> None:
    """Import a Megatron-LM run's GPTDataset order (blends and batch ramp-up included),
    checked against its indexed datasets and the corpus.

    Every sample is one window of sequence_length + 1 tokens (sequence_length with
    --no-add-extra-token-to-sequence); steps follow the run's
    batch ramp-up, ranks its micro-batches. A broken rule exits 2 naming the file;
    nothing is stored (docs/importers.md lists the rules)."""
    from lineage.ingest.orders.megatron import MegatronRun, import_megatron
    from lineage.ingest.orders.megatron_schedule import Rampup

    run = MegatronRun(
        global_batch_size, micro_batch_size, data_parallel_size,
        Rampup(*rampup_batch_size) if rampup_batch_size else None,
        decrease_batch_size_if_needed, train_iters, split, add_extra_token_to_sequence,
        dataloader_type, data_sharding, tuple(_resume(text) for text in resumed_at or ()))
    result = import_megatron(
        current_store(ctx), data=data, docs=docs, cache=cache, corpus=corpus, stream=stream,
        run=run, index_hash=index_hash, tokenizer=tokenizer, sample_windows=sample_windows,
        rebuild=rebuild_cache, verify=verify)
    if json:
        output.emit_json(result)
        return
    output.emit_lines(_summary(result))


@app.command("open-transformers")
def open_transformers(
    ctx: typer.Context,
    doc_map: Annotated[Path, typer.Argument(help="The run's doc_map Parquet (one row per "
                                            "segment of a window).")],
    manifest: Annotated[Path, typer.Option(help="The run's data manifest JSON.")],
    shards: Annotated[Path, typer.Option(help="The folder of the .bin/.idx token shards "
                                         "the manifest names.")],
    corpus: Annotated[str, typer.Option(help="The corpus the shards were tokenized from.")],
    stream: Annotated[str, typer.Option(help="Name of the stream to record.")],
    tokenizer: Annotated[
        Path | None,
        typer.Option(help="The corpus's tokenizer.json, to re-read sampled windows of a "
                     "corpus not counted in bytes."),
    ] = None,
    sample_windows: Annotated[
        int, typer.Option(help="Windows re-read from the .bin and compared with the "
                          "corpus (first and last included).", min=0)
    ] = 16,
    verify: Annotated[str, typer.Option(
        help="sample: re-read --sample-windows windows; all: every window (every document "
        "the windows read, once and whole) against the corpus.")] = "sample",
    json: JsonOption = False,
) -> None:
    """Import an Open-1B harness run's order, checked against its shards and the corpus.

    A broken rule exits 2 naming the file and the first rows that break it; nothing is
    stored (docs/importers.md lists the rules)."""
    from lineage.ingest.orders.open_transformers import ingest_open_transformers

    result = ingest_open_transformers(
        current_store(ctx), doc_map, manifest=manifest, shards=shards, corpus=corpus,
        stream=stream, tokenizer=tokenizer, sample_windows=sample_windows, verify=verify)
    if json:
        output.emit_json(result)
        return
    output.emit_lines(_summary(result))


def _summary(result: dict[str, Any]) -> list[str]:
    checked = result.get("checked", {})
    reread = checked.get("windows") or []
    what = (f"every window ({checked.get('documents', 0):,} documents, "
            f"{checked.get('tokens', 0):,} tokens)" if reread == "all"
            else f"{len(reread)} windows")
    return order_summary(result, f"re-read {what}: {checked.get('status', 'not re-read')}")


app.command("olmo-core")(orders_olmo.olmo_core)


def _resume(text: str) -> tuple[int, int]:
    step, _, batch = text.partition(":")
    if not (step.strip().isdigit() and batch.strip().isdigit()):
        raise UsageError(f"--resumed-at {text!r}: give STEP:GLOBAL_BATCH, e.g. 1000:512")
    return int(step), int(batch)
