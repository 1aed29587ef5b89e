"""`lineage ingest corpus` (and, later, the other kinds of record)."""

from __future__ import annotations

import json as _json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from lineage.cli import orders, output
from lineage.cli.common import EngineOption, JsonOption, RayAddressOption, current_store
from lineage.cli.stream import RankRuleOption, ScheduleOption, ScheduleTokensOption
from lineage.errors import EXIT_NO, UsageError

if TYPE_CHECKING:
    from lineage.runs.skip_rule import SkipRule

app = typer.Typer(help="Record inputs in the store.", no_args_is_help=True)
app.add_typer(orders.app, name="order")


@app.command("corpus")
def corpus(
    ctx: typer.Context,
    paths: Annotated[list[Path], typer.Argument(help="Directories of files, shards, manifests, "
                                                "Croissant files.")],
    corpus: Annotated[str, typer.Option("--corpus", help="Name of the corpus to record.")],
    source: Annotated[
        str | None, typer.Option(help="Put every document in this source.")
    ] = None,
    license: Annotated[
        list[str] | None,
        typer.Option(help="SPDX licence for documents that name none; SOURCE=SPDX for one "
                     "source. Repeatable."),
    ] = None,
    tokenizer: Annotated[
        str,
        typer.Option(help="'bytes' (1 token per UTF-8 byte), 'input' (each record's "
                     "token_count, JSONL or Parquet), or a tokenizer.json path."),
    ] = "bytes",
    fmt: Annotated[
        str,
        typer.Option("--format", help="auto, files, jsonl, parquet or manifest."),
    ] = "auto",
    workers: Annotated[
        int | None, typer.Option(help="Parallel workers (default: all cores).", min=1)
    ] = None,
    fingerprints: Annotated[
        bool | None,
        typer.Option("--fingerprints/--no-fingerprints",
                     help="Build the text index (normalized-text hashes and fingerprints). "
                     "Default: on for documents with text, off for ready manifests, which "
                     "opt in by reading each document from its local uri.",
                     show_default=False),
    ] = None,
    links: Annotated[
        str,
        typer.Option("--links", help="A symbolic link in a folder: skip (the default: not "
                     "read, counted), follow (read as the file or folder it leads to, named "
                     "by its own path), or refuse (a link leading out of the folder is an "
                     "error). A hub cache snapshot's links to its own blobs are read in "
                     "every mode (docs/manifest-spec.md, Links)."),
    ] = "skip",
    engine: EngineOption = "local",
    ray_address: RayAddressOption = None,
    json: JsonOption = False,
) -> None:
    """Hash and record a corpus: a directory of files, JSONL/Parquet shards, or manifests,
    or the local files a Croissant file's distribution names (docs/exports.md).

    Refused with exit 2, naming the file and rule, nothing written: special files
    (special-file), files or folders that cannot be read (unreadable), links that dangle
    or loop (unreadable, symlink-loop) or, with --links refuse, lead out of a folder
    (symlink-outside), files changing while read
    (changed-while-read), damaged .gz/.zst (compressed-integrity), values of the wrong
    type (value-type), NaN (not-a-number), deep nesting (nesting-depth), out-of-range
    integers (integer-range), manifest sizes differing from the files read
    (manifest-size). See docs/manifest-spec.md."""
    from lineage.ingest import ingest_corpus
    from lineage.ingest.engine import open_executor

    store = current_store(ctx)
    with (output.progress_bar(not json) as progress,
          open_executor(engine, ray_address, progress) as executor):
        result = ingest_corpus(
            store, list(paths), corpus=corpus, source=source, license=license,
            tokenizer=tokenizer, fmt=fmt, workers=workers, progress=progress,
            fingerprints=fingerprints, links=links, executor=executor,
        )
    if json:
        output.emit_json(result.to_dict())
        return
    if result.status == "unchanged":
        output.emit_lines([
            f"corpus {result.corpus}: unchanged, the store already holds this content "
            f"({result.manifest_hash})"
        ])
        return
    output.emit_lines([
        f"corpus {result.corpus}: added {result.documents:,} documents, {result.tokens:,} "
        f"tokens ({result.tokenizer}) in {len(result.sources)} sources, {result.seconds:.1f} s",
        f"manifest {result.manifest_hash}",
        f"dropped {result.dropped_empty:,} empty documents" + _left_out(result),
    ])
    if result.text_index:
        index = result.text_index
        share = index["index_bytes"] / index["text_bytes"] if index["text_bytes"] else 0.0
        output.emit_lines([
            f"text index: {index['documents']:,} documents, {index['words']:,} words, "
            f"{index['fingerprints']:,} fingerprints ({share:.0%} of the text's size); "
            f"{index['not_text']:,} documents are not text"])


def _left_out(result: Any) -> str:
    """What the folder walks skipped or followed, when they did."""
    said = []
    if result.skipped_hidden:
        said.append(f"skipped {result.skipped_hidden:,} hidden files")
    if result.skipped_links:
        said.append(f"skipped {result.skipped_links:,} links (--links follow reads them)")
    if result.followed_links:
        said.append(f"followed {result.followed_links:,} links")
    return "".join(f"; {part}" for part in said)


@app.command("windows")
def windows(
    ctx: typer.Context,
    path: Annotated[Path, typer.Argument(help="Parquet or JSONL log: step, rank, window, "
                                         "doc_id, token_start, token_end.")],
    stream: Annotated[str, typer.Option(help="Name of the recorded stream.")],
    corpus: Annotated[str, typer.Option(help="The corpus the doc_ids belong to.")],
    seq_len: Annotated[int, typer.Option(help="Tokens per window.", min=1)],
    batch: Annotated[
        int | None, typer.Option(help="Windows per step; or give a schedule.", min=1)
    ] = None,
    schedule: ScheduleOption = None,
    schedule_tokens: ScheduleTokensOption = None,
    rank_rule: RankRuleOption = None,
    separator_tokens: Annotated[
        int, typer.Option(help="Tokens after each document's end.", min=0)
    ] = 0,
    json: JsonOption = False,
) -> None:
    """Record the windows a run logged, so every stream query works on that run too.

    Values are not coerced (value-type, integer-range) and each rank must be below
    --batch (rank-range); see docs/manifest-spec.md."""
    from lineage.ingest.windows import ingest_windows
    from lineage.stream.schedule import RankRule, schedule_option

    result = ingest_windows(
        current_store(ctx), path, stream=stream, corpus=corpus, seq_len=seq_len, batch=batch,
        schedule=schedule_option(schedule, schedule_tokens, seq_len),
        rank_rule=None if rank_rule is None else RankRule.parse(rank_rule),
        separator_tokens=separator_tokens,
    )
    if json:
        output.emit_json(result)
        return
    output.emit_lines([
        f"stream {result['name']}: {result['status']}: {result['windows']:,} recorded windows, "
        f"{result['occurrences']:,} segments",
        f"occurrences {result['occurrences_digest']}",
    ])


@app.command("steps")
def steps(
    ctx: typer.Context,
    path: Annotated[Path, typer.Argument(help="The run's step log (JSONL, header first).")],
    run: Annotated[str, typer.Option(help="The run name.")],
    world_size: Annotated[int, typer.Option(help="Ranks in the run.", min=1)],
    stream: Annotated[
        str | None,
        typer.Option(help="The stream the run read (required for lineage-chain logs; a "
                     "foreign chain is bound to it only through its batch digests)."),
    ] = None,
    checkpoint_every: Annotated[
        int | None,
        typer.Option(help="A foreign chain's checkpoint interval in steps, as its harness "
                     "documents it (a lineage chain's header declares its own).", min=1),
    ] = None,
    skip_rule: Annotated[
        str | None,
        typer.Option(metavar="ABOVE:FOLLOWING",
                     help="A foreign chain's skip rule, as its harness documents it: a step "
                     "whose pre-clip grad norm is above ABOVE is skipped with the next "
                     "FOLLOWING steps (Open-1B: 5:4, five steps in all)."),
    ] = None,
    json: JsonOption = False,
) -> None:
    """Record a step log (or a restart segment of one), refusing any line that breaks the
    chain spec (order, canonical bytes, state hashes, bounds): exit 2, nothing stored."""
    from lineage.ingest.steps import ingest_steps

    result = ingest_steps(current_store(ctx), path, run=run, stream=stream,
                          world_size=world_size, checkpoint_every=checkpoint_every,
                          skip_rule=_skip_rule(skip_rule))
    if json:
        output.emit_json(result)
        return
    closed = ", closed" if result["closed"] else ""
    lines = [f"run {result['run']}: {result['status']}: {result['new_steps']:,} new "
             f"steps of {result['records']:,} records (steps {result['first_step']}"
             f"..{result['last_step']}){closed}"]
    if not str(result["chain"]).startswith("lineage-chain/"):  # a lineage header says them
        lines += [f"declared {key}: {_json.dumps(item['value'], sort_keys=True)} (from the "
                  f"{'header' if item['from'] == 'header' else 'import'})"
                  for key, item in result["declared"].items()]
    output.emit_lines(lines)


def _skip_rule(value: str | None) -> SkipRule | None:
    """`--skip-rule ABOVE:FOLLOWING` as a rule; UsageError naming the option."""
    from lineage.runs.skip_rule import SkipRule

    if value is None:
        return None
    above, _, following = value.partition(":")
    try:
        return SkipRule.from_json({"rule": "lineage-skip/1", "grad_norm_above": float(above),
                                   "skip_following": int(following)})
    except ValueError:
        pass
    raise UsageError(f"--skip-rule {value!r}: expected ABOVE:FOLLOWING, a finite grad norm "
                     ">= 0 and a step count >= 0 (e.g. 5:4)")


@app.command("checkpoint")
def checkpoint(
    ctx: typer.Context,
    folder: Annotated[Path, typer.Argument(help="The checkpoint folder (safetensors).")],
    run: Annotated[str, typer.Option(help="The run that wrote it.")],
    step: Annotated[int, typer.Option(help="The step it was saved after.", min=0)],
    sums: Annotated[Path | None, typer.Option(help="A trusted SHA256SUMS list.")] = None,
    sums_key: Annotated[Path | None, typer.Option(
        help="With --sums: the key the list must be signed by (as `lineage verify "
             "--sums-key`).", show_default=False)] = None,
    allow_risk: Annotated[
        list[str] | None,
        typer.Option("--allow-risk", help="Accept a dangerous finding of this kind (e.g. "
                     "pickle-dangerous-global). Repeatable."),
    ] = None,
    json: JsonOption = False,
) -> None:
    """Record a checkpoint as evidence: files, hashes, verdicts, risks, and whether its
    weights (and optimizer state) match the chain. Exit 1 when any of them fails; the
    record is kept either way."""
    from lineage.ingest.checkpoint import ingest_checkpoint

    result = ingest_checkpoint(current_store(ctx), folder, run=run, step=step, sums=sums,
                               allow_risks=tuple(allow_risk or ()), sums_key=sums_key)
    if json:
        output.emit_json(result)
    else:
        output.emit_lines(_checkpoint_lines(result))
    if not result["ok"]:
        raise typer.Exit(EXIT_NO)


def _checkpoint_lines(result: dict[str, Any]) -> list[str]:
    verdicts, risks = result["verdicts"], result["risks"]
    said = {True: "matches the chain", False: "DIFFERS from the chain",
            None: "no chain record to compare"}
    lines = [
        f"checkpoint {result['run']}@{result['step']}: {result['status']}: "
        f"{len(result['files'])} files, structure "
        f"{'ok' if verdicts['structure']['ok'] else 'FAILED'}, load {verdicts['load']}",
        f"weights {result['weights_digest']}: {said[result['matches_chain']]}",
    ]
    if result["state_digest"] is not None:
        lines.append(f"state   {result['state_digest']}: {said[result['matches_state']]}")
    lines += [f"optimizer state FAILED: {problem}" for problem in result["optimizer_errors"]]
    from lineage.cli.verify import authenticity_lines

    lines += authenticity_lines(verdicts["authenticity"])
    for finding in risks["findings"]:
        if finding["severity"] != "info":
            mark = "allowed" if finding["allowed"] else finding["severity"].upper()
            lines.append(f"risk    {finding['file']}: {finding['kind']} ({mark}): "
                         f"{finding['detail']}")
    lines.append("ok: the checkpoint is evidence for the chain" if result["ok"] else
                 "FAILED: the checkpoint is recorded, with the verdicts above")
    return lines


@app.command("openlineage")
def openlineage(
    ctx: typer.Context,
    path: Annotated[Path, typer.Argument(help="OpenLineage events: one JSON event per line "
                                         "(`lineage export openlineage -o`), or a JSON "
                                         "array.")],
    json: JsonOption = False,
) -> None:
    """Read OpenLineage RunEvents back: check each against the spec and lineage's facet
    schemas (exit 2 naming the line and the rule, nothing recorded), compare every
    lineage_ facet with this store (exit 1 when one differs), and record the events once."""
    from lineage.exports.openlineage_answers import OpenLineageIngest
    from lineage.ingest.openlineage import ingest_openlineage

    answer = OpenLineageIngest.from_dict(ingest_openlineage(current_store(ctx), path))
    if json:
        output.emit_json(answer.to_dict())
    else:
        output.emit_lines(_openlineage_lines(answer.to_dict()))
    if answer.differs:
        raise typer.Exit(EXIT_NO)


def _openlineage_lines(result: dict[str, Any]) -> list[str]:
    lines = [f"{result['file']}: {result['events']} events, {result['new']} new; "
             f"{result['matched']} objects match the store, {result['differs']} differ, "
             f"{result['unknown']} unknown"]
    for found in result["objects"]:
        lines.append(f"{found['status']:8} {found['kind']} {found['name']}")
        lines += [f"         {d['field']}: event {d['event']!r}, store {d['store']!r}"
                  for d in found["differences"]]
    return lines
