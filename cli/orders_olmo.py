"""`lineage ingest order olmo-core ...`: an OLMo-core run's order (docs/importers.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from lineage.cli import output
from lineage.cli.common import JsonOption, current_store
from lineage.cli.order_summary import order_summary


def olmo_core(
    ctx: typer.Context,
    tokens: Annotated[list[Path], typer.Argument(
        help="The dataset's token files (.npy), in the order of its paths.")],
    corpus: Annotated[str, typer.Option(help="The corpus the files were tokenized from.")],
    stream: Annotated[str, typer.Option(help="Name of the stream to record.")],
    sequence_length: Annotated[int, typer.Option(
        help="The dataset's sequence_length (tokens per instance).", min=1)],
    global_batch_size: Annotated[int, typer.Option(
        help="The data loader's global_batch_size, in tokens.", min=1)],
    eos_token_id: Annotated[int, typer.Option(help="The tokenizer's eos_token_id.",
                                              min=0)],
    bos_token_id: Annotated[int | None, typer.Option(
        help="The tokenizer's bos_token_id, when each document opens with it.", min=0)] = None,
    global_indices: Annotated[list[Path] | None, typer.Option(
        help="The loader's global_indices_*.npy of each epoch, epoch 1 first (repeat "
        "the option); without them, --seed and --epochs rebuild them.")] = None,
    dtype: Annotated[str, typer.Option(help="The token files' dtype: uint8, uint16, "
                                       "uint32 or uint64.")] = "uint16",
    mixture_index: Annotated[Path | None, typer.Option(
        help="A source mixture's path index: a JSON list of (path, tokens) pairs in "
        "dataset order.")] = None,
    doc_ids: Annotated[Path | None, typer.Option(
        help="One corpus doc_id per line, the documents of the token files in order "
        "(else Dolma's .csv.gz sidecars name them).")] = None,
    batch_size_schedule: Annotated[str | None, typer.Option(
        help="The BatchSizeSchedulerCallback's points, START:TOKENS,... "
        "(e.g. 0:2048,100:4096).")] = None,
    schedule_unit: Annotated[str, typer.Option(
        help="Unit of the schedule's starts: steps, tokens or epochs.")] = "steps",
    steps: Annotated[int | None, typer.Option(
        help="Steps the run trained (default: every whole step of the epochs given).",
        min=1)] = None,
    seed: Annotated[int | None, typer.Option(
        help="The data loader's seed (to rebuild lost global indices).", min=0)] = None,
    epochs: Annotated[int | None, typer.Option(
        help="Epochs the run began (to rebuild lost global indices).", min=1)] = None,
    tokenizer: Annotated[Path | None, typer.Option(
        help="The corpus's tokenizer.json, to re-read sampled documents of a corpus not "
        "counted in bytes.")] = None,
    dataset: Annotated[str, typer.Option(
        help="How the dataset cut the files into instances: fsl (NumpyFSLDataset, "
        "sequence_length tokens each, across documents), padded (NumpyPaddedFSLDataset, "
        "one document each, cut to sequence_length and padded), interleaved "
        "(NumpyInterleavedFSLDataset: chunks of several documents, interleaved) or packed "
        "(NumpyPackedFSLDataset: whole documents packed best-fit).")] = "fsl",
    long_doc_strategy: Annotated[str | None, typer.Option(
        help="packed: the config's long_doc_strategy, truncate (the default) or fragment.")
    ] = None,
    source_group_size: Annotated[int | None, typer.Option(
        help="packed: the config's source_group_size (files packed together; default 1).",
        min=1)] = None,
    docs_per_instance: Annotated[int | None, typer.Option(
        help="interleaved: the config's docs_per_instance.", min=1)] = None,
    chunks_per_doc: Annotated[int | None, typer.Option(
        help="interleaved: the config's chunks_per_doc.", min=1)] = None,
    interleaving_seed: Annotated[int | None, typer.Option(
        help="interleaved: the config's seed (which documents share an instance).",
        min=0)] = None,
    interleaving_exempt: Annotated[list[Path] | None, typer.Option(
        help="interleaved: a token file in interleaving_exempt_paths (repeat the "
        "option); its documents keep instances of their own.")] = None,
    pad_token_id: Annotated[int | None, typer.Option(
        help="interleaved, and packed with --instance-filter: the tokenizer's "
        "pad_token_id.", min=0)] = None,
    max_target_sequence_length: Annotated[int | None, typer.Option(
        help="The fixed-length dataset's max_target_sequence_length: a file holds the "
        "instances of its whole chunks of that many tokens.", min=1)] = None,
    instance_filter: Annotated[str | None, typer.Option(
        metavar="MAX_PERIOD:MIN_PERIOD:MAX_COUNT",
        help="The dataset's instance_filter_config (repetition_max_period, _min_period, "
        "_max_count; OLMo-core's defaults are 13:1:32): instances it masks are stored as "
        "windows holding no document.")] = None,
    verify: Annotated[str, typer.Option(
        help="sample: re-read 16 documents the windows read; all: every one, whole, "
        "against the corpus.")] = "sample",
    json: JsonOption = False,
) -> None:
    """Import an OLMo-core run's order (its dataset's instances: fixed-length, padded,
    interleaved or packed; its data loader's global indices, the batch-size warm-up),
    checked against the token files and the corpus.

    A broken rule exits 2 naming the file and what breaks it; nothing is stored."""
    from lineage.ingest.orders.olmo_core import OlmoRun, import_olmo_core
    from lineage.ingest.orders.olmo_filter import InstanceFilter
    from lineage.ingest.orders.olmo_order import Warmup

    warmup = (Warmup.parse(batch_size_schedule, schedule_unit)
              if batch_size_schedule is not None else None)
    run = OlmoRun(
        token_files=tuple(tokens), dtype=dtype, eos_token_id=eos_token_id,
        sequence_length=sequence_length, global_batch_size=global_batch_size,
        global_indices=tuple(global_indices or ()), mixture_index=mixture_index,
        doc_ids=doc_ids, warmup=warmup, max_steps=steps, tokenizer=tokenizer, seed=seed,
        epochs=epochs, dataset=dataset,
        instance_filter=InstanceFilter.parse(instance_filter) if instance_filter else None,
        max_target_sequence_length=max_target_sequence_length, bos_token_id=bos_token_id,
        interleaving=_interleaving(tokens, docs_per_instance, chunks_per_doc,
                                   interleaving_seed, interleaving_exempt),
        pad_token_id=pad_token_id, packing=_packing(dataset, long_doc_strategy,
                                                    source_group_size))
    result = import_olmo_core(current_store(ctx), corpus=corpus, stream=stream, run=run,
                              verify=verify)
    if json:
        output.emit_json(result)
        return
    output.emit_lines(_summary(result))


def _packing(dataset: str, strategy: str | None, group_size: int | None) -> Any:
    from lineage.errors import UsageError
    from lineage.ingest.orders.olmo_packed import Packing

    if dataset != "packed":
        if strategy is not None or group_size is not None:
            raise UsageError("--long-doc-strategy and --source-group-size are settings of "
                             "--dataset packed")
        return None
    return Packing(strategy or "truncate", group_size or 1)


def _interleaving(tokens: list[Path], docs: int | None, chunks: int | None, seed: int | None,
                  exempt: list[Path] | None) -> Any:
    """The interleaving settings, when any is given (all three are then needed)."""
    from lineage.errors import UsageError
    from lineage.ingest.orders.olmo_interleaved import Interleaving

    if docs is None and chunks is None and seed is None and not exempt:
        return None
    if docs is None or chunks is None or seed is None:
        raise UsageError("--dataset interleaved takes --docs-per-instance, --chunks-per-doc "
                         "and --interleaving-seed together")
    resolved = [path.resolve() for path in tokens]
    for path in exempt or ():
        if path.resolve() not in resolved:
            raise UsageError(f"--interleaving-exempt {path}: not one of the token files given")
    return Interleaving(docs, chunks, seed, tuple(sorted(
        resolved.index(path.resolve()) for path in exempt or ())))


def _summary(result: dict[str, Any]) -> list[str]:
    checked = result["checked"]
    every = "every one of the " if checked.get("verify") == "all" else ""
    reread = (f"re-read {every}{checked['re_read']} documents against the corpus text"
              if checked["re_read"] else f"not re-read: {checked['re_read_skipped']}")
    masked = (f"; {checked['masked_windows']:,} masked by the instance filter (windows "
              "holding no document)" if "masked_windows" in checked else "")
    return order_summary(result, f"{checked['documents']:,} documents, every token count "
                                 f"checked; {reread}{masked}")
