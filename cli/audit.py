"""`lineage audit …`: the audit ledger of a run (docs/audit-spec.md, `lineage-audit/1`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from lineage.cli import output
from lineage.cli.common import JsonOption, current_store
from lineage.errors import EXIT_NO

app = typer.Typer(help="The audit ledger: replays of a run's steps by many people.",
                  no_args_is_help=True)


# -- replay ---------------------------------------------------------------------------------


@app.command("replay")
def replay(
    ctx: typer.Context,
    run: Annotated[str, typer.Argument(help="The run whose step to replay.")],
    step: Annotated[int, typer.Option("--step", help="The step to replay.", min=0)],
    replayer: Annotated[
        str,
        typer.Option("--replayer", metavar="MODULE:FUNCTION",
                     help="YOUR replay function, imported and run: a module on the Python "
                     "path or path/to/file.py, then :FUNCTION (docs/audit-spec.md, "
                     "\"Replay protocol\"). Give only code you trust."),
    ],
    from_: Annotated[
        Path | None,
        typer.Option("--from", metavar="CHECKPOINT_DIR",
                     help="Start from a relay checkpoint of step N-1 another auditor saved "
                     "(its digests are checked against the chain first), instead of the "
                     "run's checkpoint at step N-1."),
    ] = None,
    save: Annotated[
        Path | None,
        typer.Option("--save", metavar="DIR",
                     help="After a match, write the state after step N to this new folder "
                     "as a relay checkpoint, with its records (audit-records.jsonl)."),
    ] = None,
    auditor: Annotated[
        str | None, typer.Option(help="Your display name (default: your user name).")
    ] = None,
    no_record: Annotated[
        bool, typer.Option("--no-record", help="Print the records; do not add them to "
                           "the ledger.")
    ] = False,
    json: JsonOption = False,
) -> None:
    """Replay one step with your replay function and attest whether it reaches the
    chain's state hash; exit 0 on a match, 1 on a mismatch (recorded either way)."""
    from lineage.audit.replay import load_replayer, replay_step

    store = current_store(ctx)
    function, source = load_replayer(replayer)
    result = replay_step(store, run, step, function, replayer_name=replayer,
                         replayer_source=source, start=from_, save=save,
                         auditor=auditor or _user_name())
    records = [r for r in (result["attestation"], result["checkpoint"]) if r is not None]
    if not no_record:
        from lineage.audit.ledger import add_records

        add_records(store, records, source="replay")
    if json:
        output.emit_json(result)
    else:
        output.emit_lines(_replay_lines(result, recorded=not no_record, save=save))
    if result["attestation"]["result"] != "match":
        raise typer.Exit(EXIT_NO)


def _user_name() -> str:
    import getpass

    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no user name in the environment or password database
        return "anonymous"


def _replay_lines(result: dict[str, Any], *, recorded: bool, save: Path | None) -> list[str]:
    from lineage.audit.replay import record_id

    att, ckpt = result["attestation"], result["checkpoint"]
    start, machine = att["start"], att["machine"]
    began = {"published": f"published checkpoint of step {start.get('step')}",
             "intermediate": f"relay checkpoint of step {start.get('step')} "
                             f"({start.get('checkpoint')})",
             "initial": "the run's initial state"}[start["kind"]]
    lines = [f"step {att['step']} of {att['run']}: {att['result'].upper()}",
             f"state hash  {att['state_hash']}",
             f"expected    {att['expected']}",
             f"start       {began}",
             f"machine     {machine['backend']}, {machine['device']}, "
             f"{machine['memory_bytes'] / 2**30:.1f} GiB, "
             + ("SWAPPED during the replay" if machine["swapped"] else "no swap"),
             f"duration    {att['duration_s']:.3f} s",
             f"record      {record_id(att)}"]
    if save is not None:
        lines.append(f"saved       {save} (relay checkpoint {record_id(ckpt)})" if ckpt
                     else "saved       nothing: a mismatched state is no relay point")
    lines.append("ledger      " + ("recorded" if recorded else "not recorded (--no-record)"))
    if att["result"] != "match" and machine["swapped"]:
        lines.append("note        the machine swapped: re-run with more memory before "
                     "judging this mismatch")
    return lines
