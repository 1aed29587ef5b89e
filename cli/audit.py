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
# -- bundles and signatures: export, import, sign ---------------------------------------


@app.command("export")
def export(
    ctx: typer.Context,
    run: Annotated[str, typer.Argument(help="The run whose ledger to export.")],
    out: Annotated[Path, typer.Option("-o", "--output", help="The bundle file to write.")],
    json: JsonOption = False,
) -> None:
    """Write the run's audit records as a self-verifying bundle (signatures kept)."""
    from lineage.audit.bundle import write_bundle
    from lineage.runs.query import get_run

    store = current_store(ctx)
    get_run(store, run)  # an unknown run is an error, not an empty bundle
    from lineage.audit.ledger import iter_records

    result = write_bundle(iter_records(store, run), out, run=run)
    if json:
        output.emit_json(result)
    else:
        output.emit_lines([f"wrote {result['bundle']}: {result['records']} records of "
                           f"{run}, digest {result['digest']}"])


@app.command("import")
def import_(
    ctx: typer.Context,
    bundle: Annotated[Path, typer.Argument(help="A bundle written by `audit export`.")],
    allowed_signers: Annotated[
        Path | None,
        typer.Option("--allowed-signers", metavar="FILE", help="ssh-keygen's allowed_signers "
                     "file: a signed record counts only when its key may sign as its auditor."),
    ] = None,
    require_signed: Annotated[
        bool, typer.Option("--require-signed", help="Refuse the bundle if a record is unsigned.")
    ] = False,
    json: JsonOption = False,
) -> None:
    """Check a bundle (ids, digests, signatures) and add its records (idempotent)."""
    from lineage.audit.bundle import read_bundle

    records = read_bundle(bundle, allowed_signers=allowed_signers,
                          require_signed=require_signed)  # all checked before the store
    from lineage.audit.ledger import add_records

    added = add_records(current_store(ctx), records, source=f"bundle {bundle.name}")
    result: dict[str, Any] = {
        "bundle": str(bundle), "records": len(records),
        "signed": sum(1 for record in records if record.get("signature") is not None),
        "added": list(added.added), "already_present": list(added.already_present)}
    if json:
        output.emit_json(result)
    else:
        output.emit_lines([f"imported {len(result['added'])} records, "
                           f"{len(result['already_present'])} already present "
                           f"({result['signed']} of {result['records']} signed)"])


@app.command("sign")
def sign(
    file: Annotated[Path, typer.Argument(help="Records: a JSON object, a JSON list or JSON "
                                         "lines.")],
    key: Annotated[Path, typer.Option("--key", metavar="KEY", help="An unencrypted OpenSSH "
                                      "ed25519 private key (ssh-keygen -t ed25519).")],
    out: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write the signed records here "
                                  "(default: stdout).")
    ] = None,
    json: JsonOption = False,
) -> None:
    """Sign records with an SSH key: the key's public line becomes auditor.public_key and
    the signature (SSHSIG, namespace lineage-audit) covers the rest."""
    from lineage.audit.bundle import record_id, records_text, sign_records_file

    signed, form = sign_records_file(file, key)
    text = records_text(signed, form)
    summary = {"file": str(file), "output": str(out) if out else None,
               "ids": [record_id(record) for record in signed],
               "public_key": signed[0]["auditor"]["public_key"] if signed else None}
    if out is not None:
        output.write_file(out, text)
    if json:
        output.emit_json(summary if out else {**summary, "records": signed})
    elif out is None:
        output.emit_raw(text)
    else:
        output.emit_lines([f"signed {len(signed)} records with {summary['public_key']}"])
