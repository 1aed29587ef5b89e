"""`lineage run list|show|checkpoints` and `lineage chain verify`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from lineage.cli import output
from lineage.cli.common import (
    CascadeOption,
    CsvOption,
    JsonOption,
    NlOption,
    TsvOption,
    current_store,
    remove_and_report,
    rows_format,
)
from lineage.errors import EXIT_NO
from lineage.store.lookup_reads import with_kept_reads

if TYPE_CHECKING:
    from collections.abc import Sequence

    from lineage.runs.answers import ChainVerification, SkipRuleVerdict

app = typer.Typer(help="Training runs and their step logs.", no_args_is_help=True)
chain_app = typer.Typer(help="The step hash chain (lineage-chain/2).", no_args_is_help=True)


@app.command("list")
def list_(ctx: typer.Context, json: JsonOption = False, csv: CsvOption = False,
        tsv: TsvOption = False, nl: NlOption = False) -> None:
    """Every run with its stream, progress and clipped/skipped counts."""
    fmt = rows_format(json=json, csv=csv, tsv=tsv, nl=nl)
    rows = current_store(ctx).runs()
    if fmt:
        output.emit_rows(fmt, rows)
        return
    if json:
        output.emit_json(rows.to_list())
        return
    columns = ("name", "stream", "world_size", "steps_recorded", "last_step", "closed",
               "progress", "clipped_count", "skipped_count")
    output.emit_table(columns, [
        [row.name, row.stream, row.world_size, row.steps_recorded, row.last_step,
         "yes" if row.closed else "no", _share(row.progress), row.clipped_count,
         row.skipped_count] for row in rows])


def _share(progress: float | None) -> str:
    """A run's progress as `run show` says it (25.6%); '-' for a run bound to no stream."""
    return "-" if progress is None else f"{progress:.1%}"


@app.command("show")
def show(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The run name.")],
    json: JsonOption = False,
) -> None:
    """Progress, last step, clipped and skipped steps, restart segments, checkpoints."""
    store = current_store(ctx)
    run = with_kept_reads(store, lambda: store.run(name))
    if json:
        output.emit_json(run.to_dict())
        return
    rule = run.skip_rule
    output.emit_lines([
        f"run         {run.name} (stream {run.stream or 'none'}, world size "
        f"{run.world_size})",
        f"chain       {run.chain} ({run.algorithm}), genesis {run.genesis}, "
        f"{'closed' if run.closed else 'open'}",
        "skip rule   " + (f"grad norm > {rule.grad_norm_above:g} skips the step and the "
                          f"next {rule.skip_following}" if rule else "no rule declared"),
        f"progress    steps {run.first_step}..{run.last_step} recorded, "
        + (f"{_share(run.progress)} of {run.stream_steps} stream steps" if run.stream
           else "bound to no stream"),
        f"clipped     {_short(run.clipped_steps)}",
        f"skipped     {_short(run.skipped_steps)}",
        f"segments    {len(run.segments)} log(s)",
        f"checkpoints {', '.join(str(c.step) for c in run.checkpoints) or '-'}"
        + (f" (every {run.checkpoint_every} steps)" if run.checkpoint_every else ""),
    ])


@app.command("checkpoints")
def checkpoints(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The run name.")],
    nearest: Annotated[
        int | None,
        typer.Option(help="Find the nearest good checkpoint at or before this step (where "
                     "a replay of it starts from); exit 1 when there is none.", min=0),
    ] = None,
    json: JsonOption = False,
    csv: CsvOption = False,
    tsv: TsvOption = False,
    nl: NlOption = False,
) -> None:
    """A run's checkpoints with their verdicts, and the ones its declared interval lacks."""
    fmt = rows_format(json=json, csv=csv, tsv=tsv, nl=nl)
    result = current_store(ctx).checkpoints(name, nearest=nearest)
    if fmt:
        output.emit_rows(fmt, result)
        return
    if json:
        output.emit_json(result.to_dict())
        return
    said = {True: "yes", False: "NO", None: "-"}
    rows = [[c.step, *(said[v] for v in (c.ok, c.matches_chain, c.matches_state, c.risks_ok))]
            for c in result.checkpoints]
    output.emit_table(("step", "ok", "matches_chain", "matches_state", "risks_ok"), rows)
    every = result.checkpoint_every
    lines = [f"interval    every {every} steps: {len(result.missing)} of "
             f"{result.expected} expected missing: {_short(result.missing)}" if every
             else "interval    no checkpoint interval declared"]
    if result.nearest is not None:
        near = result.nearest
        lines.append(f"nearest     step {near.step}: replay {near.replays} step(s) to "
                     f"reach step {result.nearest_to}")
    output.emit_lines(lines)


def _short(steps: Sequence[int], limit: int = 20) -> str:
    shown = ", ".join(str(s) for s in steps[:limit])
    more = f" … ({len(steps)} in all)" if len(steps) > limit else ""
    return (shown + more) or "-"


@chain_app.command("verify")
def verify(
    ctx: typer.Context,
    run: Annotated[str, typer.Argument(help="The run whose chain to check.")],
    batches: Annotated[
        bool, typer.Option(help="Also recompute every batch digest from the stream.")
    ] = True,
    expect_steps: Annotated[
        int | None,
        typer.Option(help="The number of steps the run had: an open chain that stops "
                     "short is cut.", min=0),
    ] = None,
    accept_continuity: Annotated[
        bool,
        typer.Option(help="Exit 0 for a foreign chain whose continuity holds (its state "
                     "hashes cannot be recomputed)."),
    ] = False,
    json: JsonOption = False,
) -> None:
    """Recompute the chain and check the declared skip rule; exit 0 when fully verified,
    1 at the first broken step, a skip-rule violation, or a continuity-only check."""
    report = current_store(ctx).verify_chain(run, batches=batches, expect_steps=expect_steps)
    if json:
        output.emit_json(report.to_dict())
    else:
        output.emit_lines(_verify_lines(report))
    passed = report.ok or (accept_continuity and report.verdict == "continuity-only")
    if not passed:
        raise typer.Exit(EXIT_NO)


def _verify_lines(report: ChainVerification) -> list[str]:
    state = "closed" if report.closed else \
        "open (no end record; --expect-steps N checks its length)"
    verdict, run = report.verdict, report.run
    if verdict == "broken":
        lines = [f"BROKEN at step {report.first_broken_step}: {report.reason} "
                 f"({report.steps_checked:,} steps verified before it)"]
    elif verdict == "continuity-only":
        lines = [f"continuity-only: {report.steps_checked:,} steps of run {run} link up "
                 f"({report.chain}, {report.algorithm}: state hashes not recomputable)"
                 + (f", batch digests checked against stream {report.stream}"
                    if report.batches_checked else ", bound to no stream") + f", {state}"]
    else:
        lines = [f"{'ok' if verdict == 'ok' else 'chain intact'}: {report.steps_checked:,} "
                 f"steps of run {run} verified ({report.checked}, {report.chain}), "
                 f"last state {report.last_state_hash}, {state}"]
    return lines + _skip_rule_lines(report.skip_rule, report.steps_checked)


def _skip_rule_lines(rule: SkipRuleVerdict, steps_checked: int) -> list[str]:
    if rule.verdict == "no rule declared":
        return [f"skip rule: no rule declared ({rule.skipped_steps} steps say skipped)"]
    if rule.verdict == "invalid":
        return [f"skip rule: INVALID: {rule.reason}"]
    if rule.verdict == "ok":
        return [f"skip rule: {rule.description}: every step agrees "
                f"({rule.skipped_steps} skipped)"]
    if rule.verdict == "not-checked":
        return [f"skip rule: {rule.description}: not checked, the chain is broken "
                f"(no violation in the {steps_checked:,} steps before the break)"]
    return [f"skip rule VIOLATED at step {v.step}: {v.reason}" for v in rule.violations]


@app.command("remove")
def remove(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The run name.")],
    cascade: CascadeOption = False,
    json: JsonOption = False,
) -> None:
    """Remove the run record in one commit (exit 2 when something depends on it, unless
    --cascade); `lineage store gc` then deletes its files. Removing it twice does nothing."""
    remove_and_report(ctx, "run", name, cascade=cascade, json=json)
