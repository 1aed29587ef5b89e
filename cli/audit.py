"""`lineage audit ...`: the audit ledger of a run (docs/audit-spec.md, lineage-audit/1)."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from lineage.cli import output
from lineage.cli.common import (
    CsvOption,
    JsonOption,
    NlOption,
    TsvOption,
    current_store,
    rows_format,
)
from lineage.errors import EXIT_NO, UsageError

if TYPE_CHECKING:
    from lineage.audit.answers import AuditRequirements, AuditStatus, AuditStep, ReplayOutcome

app = typer.Typer(help="The audit ledger: who verified which steps of a run, and how far "
                  "it is covered.", no_args_is_help=True)

RunArgument = Annotated[str, typer.Argument(help="The run name.")]
SignKeyOption = Annotated[Path | None, typer.Option(
    "--sign-key", metavar="KEY", help="Sign the records with this ed25519 private key "
    "(OpenSSH format, as ssh-keygen writes it; `ssh-keygen -Y verify` checks them).")]
RequirementsOption = Annotated[Path | None, typer.Option(
    "--requirements", metavar="FILE", help="The run's replay requirements as its publishers "
    "ship them (JSON, docs/audit-spec.md), when its chain header declares none.")]
PayoutOption = Annotated[str | None, typer.Option(
    "--payout", metavar="TEXT", help="Where rewards for this work go (an address or a "
    "handle, as the run's organisers ask), kept in the records and shown by `audit who`.")]

# -- ledger: status, show, who, claim, record -------------------------------------------


@app.command("status")
def status(ctx: typer.Context, run: RunArgument, json: JsonOption = False, csv: CsvOption = False,
        tsv: TsvOption = False, nl: NlOption = False) -> None:
    """Intervals by status, steps verified, participants, replay hours, the longest
    contiguous verified run, relay chains and the next unclaimed steps."""
    fmt = rows_format(json=json, csv=csv, tsv=tsv, nl=nl)
    answer = current_store(ctx).audit_status(run)
    if fmt:
        output.emit_rows(fmt, answer)
        return
    if json:
        output.emit_json(answer.to_dict())
        return
    output.emit_lines(_status_lines(answer))


def _swap_note(swapped: bool | None) -> str:
    return {True: ", swapped", False: "", None: ", swap unknown"}[swapped]


def _status_lines(answer: AuditStatus) -> list[str]:
    counts = answer.intervals
    total = sum(counts.to_dict().values())
    lines = [
        f"run          {answer.run} ({answer.steps:,} steps, {total:,} intervals of "
        f"{answer.interval}), chain head {answer.chain_head}",
        "intervals    " + ", ".join(f"{n:,} {name}" for name, n in counts.items()),
        f"verified     {answer.steps_verified:,} steps by {answer.participants} "
        f"participant(s), {answer.replay_hours:g} hours of replay; longest contiguous run "
        f"{answer.longest_contiguous} step(s)",
    ]
    for chain in answer.relays:
        lines.append("relay        " + " -> ".join(f"step {link.step} ({link.auditor})"
                                                  for link in chain))
    if answer.inconclusive and answer.chain.reduction == "non-deterministic":
        lines.append("inconclusive steps " + _short(answer.inconclusive)
                     + ": only mismatches, and the run declares a non-deterministic "
                     "reduction, so a mismatch proves nothing")
    elif answer.inconclusive:
        lines.append("inconclusive steps " + _short(answer.inconclusive)
                     + ": only mismatches from machines that swapped or could not tell "
                     "whether they swapped; re-run with more memory")
    if answer.chain.verdict == "broken":
        lines.append(f"chain        BROKEN at step {answer.chain.first_broken_step}: "
                     f"{answer.chain.reason}; {answer.chain.attestations_past_break:,} "
                     "attestation(s) on steps from there on do not count")
    lines.append("next         " + (_short(answer.next_unclaimed) or "-")
                 + " (neither verified nor claimed)")
    width = len(f"{answer.steps - 1}") * 2 + 1
    lines += [f"interval {p.interval:>5}  steps {f'{p.first_step}-{p.last_step}':<{width}}  "
              f"{p.status:<11} {p.verified} of {p.last_step - p.first_step + 1} verified"
              for p in answer.per_interval]
    return lines


@app.command("show")
def show(
    ctx: typer.Context, run: RunArgument,
    step: Annotated[int, typer.Option("--step", help="The step.", min=0)],
    json: JsonOption = False,
) -> None:
    """The records of one step (attestations, intermediate checkpoints, claims) and what
    they add up to."""
    answer = current_store(ctx).audit_step(run, step)
    if json:
        output.emit_json(answer.to_dict())
        return
    lines = [f"step {answer.step} of {answer.run}: {answer.status}, expected "
             f"{answer.expected}", "claimed by   " + (", ".join(answer.claimed_by) or "-")]
    for record in answer.attestations:
        machine, start = record["machine"], record["start"]
        lines.append(f"attestation  {record['result']} by {record['auditor']['name']} "
                     f"({record['unit']}, from {start['kind']}, {machine['backend']} "
                     f"{machine['device']}{_swap_note(machine['swapped'])}, "
                     f"{record['duration_s']:g} s, {record['created_at']})"
                     + _signatures(answer, record))
    lines += [f"checkpoint   by {r['auditor']['name']} at {r['location']} ({r['state_hash']})"
              + _signatures(answer, r) for r in answer.checkpoints]
    lines += [f"claim        steps {r['first_step']}-{r['last_step']} by "
              f"{r['auditor']['name']} until {r['expires_at']}" + _signatures(answer, r)
              for r in answer.claims]
    proofs = list(answer.log_inclusion.values())
    if proofs:
        head = proofs[0]
        lines.append(f"log          {len(proofs)} of these records proved in {head['origin']} "
                     f"at size {head['size']} (leaves "
                     + ", ".join(str(p["index"]) for p in proofs) + f"), root {head['root']}")
    output.emit_lines(lines)


def _signatures(answer: AuditStep, record: dict[str, Any]) -> str:
    from lineage.audit.records import record_id

    keys = answer.signed_by.get(record_id(record), ())
    return f", signed by {len(keys)} key(s)" if keys else ""


@app.command("who")
def who(ctx: typer.Context, run: RunArgument, json: JsonOption = False, csv: CsvOption = False,
        tsv: TsvOption = False, nl: NlOption = False) -> None:
    """Everyone with a record of the run, alphabetically (a list, not a ranking)."""
    fmt = rows_format(json=json, csv=csv, tsv=tsv, nl=nl)
    answer = current_store(ctx).audit_who(run)
    if fmt:
        output.emit_rows(fmt, answer)
        return
    if json:
        output.emit_json(answer.to_dict())
        return
    columns = ("name", "attestations", "steps", "claims", "checkpoints", "replay_hours")
    output.emit_table((*columns, "payout"), [[*(p[c] for c in columns),
                                              ", ".join(p.payouts) or "-"]
                                             for p in answer.participants])


@app.command("requirements")
def requirements_(
    ctx: typer.Context, run: RunArgument,
    step: Annotated[int, typer.Option("--step", help="The step to replay (step 0 is the "
                                      "initial-state check).", min=0)] = 1,
    path: Annotated[Path, typer.Option("--path", metavar="DIR", help="Where the checkpoint "
                                       "would go (its free disk is checked).")] = Path("."),
    requirements: RequirementsOption = None,
    json: JsonOption = False,
) -> None:
    """What replaying a step of the run needs (memory, disk, download, time) against this
    machine; exit 1 when a minimum is not met."""
    answer = current_store(ctx).audit_requirements(run, step=step, folder=path,
                                                   requirements=requirements)
    if json:
        output.emit_json(answer.to_dict())
    else:
        output.emit_lines(_requirement_lines(answer))
    if not answer.ok:
        raise typer.Exit(EXIT_NO)


def _requirement_lines(answer: AuditRequirements) -> list[str]:
    if answer.declared is None:
        return [f"run {answer.run} declares no replay requirements (its chain header has "
                "none; --requirements FILE reads them from a file)"]
    gib = 2**30
    lines = [f"run {answer.run}, step {answer.step}: requirements from {answer.source}"
             + (" (Apple unified memory)" if answer.unified_memory else "")]
    lines += [f"{'ok   ' if c.ok else 'SHORT'}  {c.requirement:<22} needs "
              f"{c.required / gib:,.1f} GiB, this machine has {c.available / gib:,.1f} GiB"
              for c in answer.checks]
    if answer.declared.get("download_bytes"):
        lines.append(f"       download               {answer.declared['download_bytes'] / gib:,.1f}"
                     " GiB")
    seconds, swapping = answer.expected_seconds, answer.expected_seconds_swapping
    if seconds and swapping:
        lines.append(f"       time                   about {seconds / 3600:,.1f} h a step; "
                     f"about {swapping / 3600:,.1f} h if the machine swaps (and its hash "
                     "may not match)")
    return lines


@app.command("claim")
def claim(
    ctx: typer.Context, run: RunArgument,
    steps: Annotated[str, typer.Option("--steps", metavar="A-B",
                                       help="The steps to claim, e.g. 100-199 (or one step).")],
    auditor: Annotated[str, typer.Option("--auditor", metavar="NAME",
                                         help="Your display name.")],
    expires: Annotated[str, typer.Option(
        "--expires", metavar="DURATION", help="How long the claim lasts: 30m, 12h, 7d, 2w.")
    ] = "7d",
    sign_key: SignKeyOption = None,
    payout: PayoutOption = None,
    json: JsonOption = False,
) -> None:
    """Claim a step range for a while: claims are visible, expire, and block no one."""
    from lineage.audit.actions import make_claim

    first, last = _step_range(steps)
    answer = make_claim(current_store(ctx), run, first_step=first, last_step=last,
                        auditor=auditor, expires=_duration(expires), sign_key=sign_key,
                        payout=payout)
    if json:
        output.emit_json(answer.to_dict())
        return
    output.emit_lines([f"claimed steps {first}-{last} of {run} for {auditor} until "
                       f"{answer.record['expires_at']} ({answer.id})"])


@app.command("record")
def record(
    ctx: typer.Context,
    files: Annotated[list[Path], typer.Argument(
        help="JSON (a record or a list of them) or JSONL files of records made elsewhere.")],
    json: JsonOption = False,
) -> None:
    """Add records made elsewhere to the ledger; a record already held is left as it is."""
    from lineage.audit.actions import add_record_files

    answer = add_record_files(current_store(ctx), files)
    if json:
        output.emit_json(answer.to_dict())
        return
    output.emit_lines([f"added {len(answer.added)} record(s); {len(answer.present)} already "
                       "in the ledger" + _newly_signed(answer.newly_signed)])


def _newly_signed(ids: tuple[str, ...]) -> str:
    return f"; signatures added to {len(ids)} record(s) it held (each counted once)" \
        if ids else ""


def _step_range(text: str) -> tuple[int, int]:
    match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", text)
    if not match:
        raise UsageError(f"--steps {text!r}: give a step range like 100-199, or one step")
    first = int(match.group(1))
    last = int(match.group(2)) if match.group(2) else first
    if last < first:
        raise UsageError(f"--steps {text!r}: the range ends before it starts")
    return first, last


_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def _duration(text: str) -> timedelta:
    match = re.fullmatch(r"(\d+)([mhdw])", text.strip())
    if not match or int(match.group(1)) == 0:
        raise UsageError(f"--expires {text!r}: give a duration like 30m, 12h, 7d or 2w")
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})


def _short(steps: tuple[int, ...], limit: int = 20) -> str:
    shown = ", ".join(str(s) for s in steps[:limit])
    return shown + (f" … ({len(steps)} in all)" if len(steps) > limit else "")


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
    sign_key: SignKeyOption = None,
    payout: PayoutOption = None,
    requirements: RequirementsOption = None,
    force: Annotated[
        bool, typer.Option("--force", help="Replay on a machine below the run's declared "
                           "requirements; the attestation records the shortfall.")
    ] = False,
    json: JsonOption = False,
) -> None:
    """Replay one step with your replay function and attest whether it reaches the
    chain's state hash; exit 0 on a match, 1 on a mismatch (recorded either way)."""
    from lineage.audit.actions import replay_and_record

    result = replay_and_record(current_store(ctx), run, step, replayer=replayer, start=from_,
                               save=save, auditor=auditor, sign_key=sign_key,
                               record=not no_record, payout=payout,
                               requirements=requirements, force=force)
    if json:
        output.emit_json(result.to_dict())
    else:
        output.emit_lines(_replay_lines(result, recorded=not no_record, save=save))
    if result.attestation["result"] != "match":
        raise typer.Exit(EXIT_NO)


def _replay_lines(result: ReplayOutcome, *, recorded: bool, save: Path | None) -> list[str]:
    from lineage.audit.records import record_id

    att, ckpt = result.attestation, result.checkpoint
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
             + {True: "SWAPPED during the replay", False: "no swap",
                None: "swap UNKNOWN (no swap counter on this system)"}[machine["swapped"]],
             f"duration    {att['duration_s']:.3f} s",
             f"record      {record_id(att)}"]
    if save is not None:
        lines.append(f"saved       {save} (relay checkpoint {record_id(ckpt)})" if ckpt
                     else "saved       nothing: a mismatched state is no relay point")
    lines.append("ledger      " + ("recorded" if recorded else "not recorded (--no-record)"))
    if att["result"] != "match" and machine["swapped"] is not False:
        lines.append("note        the machine swapped" if machine["swapped"] else
                     "note        whether the machine swapped is unknown")
        lines[-1] += ": re-run with more memory before judging this mismatch"
    return lines
# -- bundles and signatures: export, import, sign ---------------------------------------


@app.command("export")
def export(
    ctx: typer.Context,
    run: Annotated[str, typer.Argument(help="The run whose ledger to export.")],
    out: Annotated[Path, typer.Option("-o", "--output", help="The bundle file to write.")],
    json: JsonOption = False,
) -> None:
    """Write the run's audit records as a self-verifying bundle (signatures kept), with
    the store's signed log checkpoint and tiles."""
    from lineage.audit.actions import export_bundle

    result = export_bundle(current_store(ctx), run, out)
    if json:
        output.emit_json(result.to_dict())
    else:
        output.emit_lines([f"wrote {result.bundle}: {result.records} records of "
                           f"{run}, digest {result.digest}"])


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
    """Check a bundle (ids, digests, signatures, its log's checkpoint and proofs) and add
    its records (idempotent); a log that forks from the copy held is refused (exit 1)."""
    from lineage.audit.actions import import_bundle

    result = import_bundle(current_store(ctx), bundle, allowed_signers=allowed_signers,
                           require_signed=require_signed)
    if json:
        output.emit_json(result.to_dict())
    else:
        output.emit_lines([f"imported {len(result.added)} records, "
                           f"{len(result.already_present)} already present "
                           f"({result.signed} of {result.records} signed)"
                           + _newly_signed(result.newly_signed)])


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
    from lineage.audit.actions import sign_file

    answer, text = sign_file(file, key, out=out)
    if out is not None:
        output.info(f"wrote {out}")
    if json:
        output.emit_json(answer.to_dict())
    elif out is None:
        output.emit_raw(text)
    else:
        output.emit_lines([f"signed {len(answer.ids)} records with {answer.public_key}"])


# -- report ---------------------------------------------------------------------------------


@app.command("report")
def report(
    ctx: typer.Context,
    run: RunArgument,
    fmt: Annotated[str, typer.Option("--format", help="html, md (the default) or json.")] = "md",
    out: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write the page here (atomically) "
                                  "and print a one-line summary.")
    ] = None,
) -> None:
    """The run's audit coverage as one page: every interval coloured by status, relay
    chains, participants, machines, and what a match proves. The HTML is one
    self-contained file (no scripts, no network)."""
    from lineage.audit.actions import write_report

    answer, text = write_report(current_store(ctx), run, fmt, out=out)
    if out is None:
        output.emit_raw(text)
        return
    counts = answer.status.intervals
    output.emit_lines([f"wrote {out} ({fmt}): {run}, " + ", ".join(
        f"{n:,} {name}" for name, n in counts.items()) + f"; {answer.status.steps_verified:,}"
        f" steps verified by {answer.status.participants} participant(s)"])
