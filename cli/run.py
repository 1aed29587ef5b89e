"""`lineage run list|show` and `lineage chain verify`."""

from __future__ import annotations

from typing import Annotated

import typer

from lineage.cli import output
from lineage.cli.common import JsonOption, current_store
from lineage.errors import EXIT_NO

app = typer.Typer(help="Training runs and their step logs.", no_args_is_help=True)
chain_app = typer.Typer(help="The step hash chain (lineage-chain/1).", no_args_is_help=True)


@app.command("list")
def list_(ctx: typer.Context, json: JsonOption = False) -> None:
    """Every run with its stream, progress and clipped/skipped counts."""
    from lineage.runs import list_runs

    rows = list_runs(current_store(ctx))
    if json:
        output.emit_json(rows)
        return
    columns = ("name", "stream", "world_size", "steps_recorded", "last_step", "progress",
               "clipped_count", "skipped_count")
    output.emit_table(columns, [[row[c] for c in columns] for row in rows])


@app.command("show")
def show(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The run name.")],
    json: JsonOption = False,
) -> None:
    """Progress, last step, clipped and skipped steps, restart segments, checkpoints."""
    from lineage.runs import get_run

    run = get_run(current_store(ctx), name)
    if json:
        output.emit_json(run)
        return
    output.emit_lines([
        f"run         {run['name']} (stream {run['stream']}, world size {run['world_size']})",
        f"chain       {run['chain']} ({run['algorithm']}), genesis {run['genesis']}",
        f"progress    steps {run['first_step']}..{run['last_step']} recorded, "
        f"{run['progress']:.1%} of {run['stream_steps']} stream steps",
        f"clipped     {_short(run['clipped_steps'])}",
        f"skipped     {_short(run['skipped_steps'])}",
        f"segments    {len(run['segments'])} log(s)",
        f"checkpoints {', '.join(str(c['step']) for c in run['checkpoints']) or '-'}",
    ])


def _short(steps: list[int], limit: int = 20) -> str:
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
    json: JsonOption = False,
) -> None:
    """Recompute the chain; exit 0 when intact, 1 at the first broken step."""
    from lineage.chain_verify import verify_chain

    report = verify_chain(current_store(ctx), run, batches=batches)
    if json:
        output.emit_json(report)
    elif report["ok"]:
        output.emit_lines([f"ok: {report['steps_checked']:,} steps of run {run} verified "
                           f"({report['checked']}), last state {report['last_state_hash']}"])
    else:
        output.emit_lines([f"BROKEN at step {report['first_broken_step']}: {report['reason']} "
                           f"({report['steps_checked']:,} steps verified before it)"])
    if not report["ok"]:
        raise typer.Exit(EXIT_NO)
