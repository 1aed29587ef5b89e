"""`lineage stream build|list|show`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from lineage.cli import output
from lineage.cli.common import (
    CascadeOption,
    CsvOption,
    EngineOption,
    JsonOption,
    NlOption,
    RayAddressOption,
    TsvOption,
    current_store,
    remove_and_report,
    rows_format,
)
from lineage.store.lookup_reads import with_kept_reads

if TYPE_CHECKING:
    from lineage.stream.answers import StreamCut

app = typer.Typer(help="Canonical data streams (lineage-stream/1).", no_args_is_help=True)

# How a stream's windows are cut into steps and ranks (docs/stream-spec.md §4); `ingest
# windows` takes the same options.
ScheduleOption = Annotated[
    str | None, typer.Option(help="Windows per step by step ranges, FIRST_STEP:WINDOWS,... "
                             "(e.g. 0:4,100:8); instead of --batch.")
]
ScheduleTokensOption = Annotated[
    str | None, typer.Option(help="Windows per step by tokens consumed, TOKENS:WINDOWS,... "
                             "(e.g. 0:4,1000000:8): a step takes the last segment whose "
                             "tokens were consumed before it.")
]
RankRuleOption = Annotated[
    str | None, typer.Option(help="How ranks split a step: contiguous (default), strided "
                             "(rank::world), or micro-batches:M (micro-batch m of M windows "
                             "to rank m mod W).")
]


@app.command("build")
def build(
    ctx: typer.Context,
    corpus: Annotated[str, typer.Option(help="The corpus to order.")],
    name: Annotated[str, typer.Option(help="Name of the stream to record.")],
    seed: Annotated[int, typer.Option(help="Training seed, 0 to 2^64-1.", min=0)],
    seq_len: Annotated[int, typer.Option(help="Tokens per window (L).", min=1)],
    batch: Annotated[
        int | None, typer.Option(help="Windows per step (B); or give a schedule.", min=1)
    ] = None,
    schedule: ScheduleOption = None,
    schedule_tokens: ScheduleTokensOption = None,
    rank_rule: RankRuleOption = None,
    separator_tokens: Annotated[
        int, typer.Option(help="Tokens between documents (K).", min=0)
    ] = 1,
    epochs: Annotated[
        list[str] | None,
        typer.Option(help="SOURCE=X epochs of one source (default 1; fractions truncate). "
                     "Repeatable."),
    ] = None,
    token_budget: Annotated[
        int | None, typer.Option(help="Stop the stream after this many tokens.", min=1)
    ] = None,
    memory_limit: Annotated[
        str, typer.Option(help="Memory budget, such as 1GB: DuckDB's, and the in-memory "
                          "order's (about 100 bytes per occurrence) when it fits; a larger "
                          "corpus is ordered out of core, through files in the store's "
                          "staging folder (about 200 bytes per occurrence).")
    ] = "1GB",
    engine: EngineOption = "local",
    ray_address: RayAddressOption = None,
    json: JsonOption = False,
) -> None:
    """Compute the canonical order of a corpus and record its occurrence table."""
    from lineage.ingest.engine import open_executor
    from lineage.stream.build import build_stream, memory_bytes
    from lineage.stream.schedule import RankRule, schedule_option

    memory_bytes(memory_limit)  # a bad size fails before any work
    steps = schedule_option(schedule, schedule_tokens, seq_len)
    rule = None if rank_rule is None else RankRule.parse(rank_rule)
    store = current_store(ctx)
    with (output.progress_bar(not json) as progress,
          open_executor(engine, ray_address, progress) as executor):
        result = build_stream(
            store, corpus=corpus, name=name, seed=seed, seq_len=seq_len, batch=batch,
            schedule=steps, rank_rule=rule, separator_tokens=separator_tokens,
            epochs=epochs, token_budget=token_budget, memory_limit=memory_limit,
            progress=progress, executor=executor,
        )
    if json:
        output.emit_json(result.to_dict())
        return
    verb = "unchanged (already built)" if result.status == "unchanged" else "built"
    shape = f"{result.batch} x {result.seq_len} tokens" if result.schedule is None else \
        f"{result.seq_len} tokens x windows by schedule {_text(result.to_dict()['schedule'])}"
    output.emit_lines([
        f"stream {result.name}: {verb}: {result.steps:,} steps of {shape}, "
        f"{result.occurrences:,} occurrences, {result.seconds:.1f} s",
        f"spec {result.spec} {result.spec_hash}",
        f"occurrences {result.occurrences_digest}",
        *([_cut_line(result.cut, result.token_budget)] if result.cut is not None else []),
    ])


def _cut_line(cut: StreamCut, budget: int | None) -> str:
    """What the end of the stream left out of the corpus, said even when it is nothing."""
    if not cut.tokens:
        return "cut: nothing, the corpus fills whole steps exactly"
    end = "the last whole step" + (" within --token-budget" if budget is not None else "")
    short = ", 1 cut short" if cut.short else ""
    documents = f"{cut.documents:,} document{'' if cut.documents == 1 else 's'}"
    return f"cut: {cut.tokens:,} packed tokens past {end}: {documents} left out{short}"


@app.command("list")
def list_(ctx: typer.Context, json: JsonOption = False, csv: CsvOption = False,
        tsv: TsvOption = False, nl: NlOption = False) -> None:
    """Every stream with its corpus, shape and digest."""
    fmt = rows_format(json=json, csv=csv, tsv=tsv, nl=nl)
    rows = current_store(ctx).streams()
    if fmt:
        output.emit_rows(fmt, rows)
        return
    if json:
        output.emit_json(rows.to_list())
        return
    output.emit_table(
        ("name", "corpus", "spec", "steps", "seq_len", "batch", "occurrences_digest"),
        [[row.name, row.corpus, row.spec, row.steps, row.seq_len, row.batch,
          row.occurrences_digest] for row in rows])


@app.command("show")
def show(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The stream name.")],
    json: JsonOption = False,
) -> None:
    """One stream's parameters, spec hash, size and occurrence digest."""
    store = current_store(ctx)
    info = with_kept_reads(store, lambda: store.stream(name))
    if json:
        output.emit_json(info.to_dict())
        return
    width = max(len(k) for k in info)
    output.emit_lines([f"{k.ljust(width)}  {_text(v)}" for k, v in info.items()])


def _text(value: object) -> str:
    if isinstance(value, list) and all(isinstance(v, list) for v in value):
        return ",".join(":".join(str(x) for x in v) for v in value)  # a schedule
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return "-" if value is None else str(value)


@app.command("remove")
def remove(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The stream name.")],
    cascade: CascadeOption = False,
    json: JsonOption = False,
) -> None:
    """Remove the stream record in one commit (exit 2 when something depends on it, unless
    --cascade); `lineage store gc` then deletes its files. Removing it twice does nothing."""
    remove_and_report(ctx, "stream", name, cascade=cascade, json=json)
