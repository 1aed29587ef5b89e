"""`lineage audit ...`: the audit ledger of a run (docs/audit-spec.md, lineage-audit/1)."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from lineage.cli import output
from lineage.cli.common import JsonOption, current_store
from lineage.errors import InputError, UsageError

if TYPE_CHECKING:
    from lineage.audit.answers import AuditStatus

app = typer.Typer(help="The audit ledger: who verified which steps of a run, and how far "
                  "it is covered.", no_args_is_help=True)

RunArgument = Annotated[str, typer.Argument(help="The run name.")]

# -- ledger: status, show, who, claim, record -------------------------------------------


@app.command("status")
def status(ctx: typer.Context, run: RunArgument, json: JsonOption = False) -> None:
    """Intervals by status, steps verified, participants, replay hours, the longest
    contiguous verified run, relay chains and the next unclaimed steps."""
    answer = current_store(ctx).audit_status(run)
    if json:
        output.emit_json(answer.to_dict())
        return
    output.emit_lines(_status_lines(answer))


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
    if answer.inconclusive:
        lines.append("inconclusive steps " + _short(answer.inconclusive)
                     + ": only mismatches from machines that swapped; re-run with more memory")
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
                     f"{machine['device']}{', swapped' if machine['swapped'] else ''}, "
                     f"{record['duration_s']:g} s, {record['created_at']})")
    lines += [f"checkpoint   by {r['auditor']['name']} at {r['location']} ({r['state_hash']})"
              for r in answer.checkpoints]
    lines += [f"claim        steps {r['first_step']}-{r['last_step']} by "
              f"{r['auditor']['name']} until {r['expires_at']}" for r in answer.claims]
    output.emit_lines(lines)


@app.command("who")
def who(ctx: typer.Context, run: RunArgument, json: JsonOption = False) -> None:
    """Everyone with a record of the run, alphabetically (a list, not a ranking)."""
    answer = current_store(ctx).audit_who(run)
    if json:
        output.emit_json(answer.to_dict())
        return
    columns = ("name", "attestations", "steps", "claims", "checkpoints", "replay_hours")
    output.emit_table(columns, [[p[c] for c in columns] for p in answer.participants])


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
    json: JsonOption = False,
) -> None:
    """Claim a step range for a while: claims are visible, expire, and block no one."""
    from lineage.audit.answers import ClaimMade
    from lineage.audit.ledger import add_records, run_head
    from lineage.audit.records import auditor as auditor_of
    from lineage.audit.records import claim as claim_record
    from lineage.audit.records import record_id

    store = current_store(ctx)
    first, last = _step_range(steps)
    record = claim_record(run=run, chain_head=run_head(store, run), first_step=first,
                          last_step=last, auditor=auditor_of(auditor),
                          expires=_duration(expires))
    added = add_records(store, [record], source="claim")
    answer = ClaimMade(id=record_id(record), added=bool(added.added), record=record)
    if json:
        output.emit_json(answer.to_dict())
        return
    output.emit_lines([f"claimed steps {first}-{last} of {run} for {auditor} until "
                       f"{record['expires_at']} ({answer.id})"])


@app.command("record")
def record(
    ctx: typer.Context,
    files: Annotated[list[Path], typer.Argument(
        help="JSON (a record or a list of them) or JSONL files of records made elsewhere.")],
    json: JsonOption = False,
) -> None:
    """Add records made elsewhere to the ledger; a record already held is left as it is."""
    from lineage.audit.answers import RecordsAdded
    from lineage.audit.ledger import add_records

    store = current_store(ctx)
    batches = [(path, _read_records(path)) for path in files]
    added: list[str] = []
    present: list[str] = []
    for path, records in batches:
        result = add_records(store, records, source=str(path))
        added += result.added
        present += result.present
    answer = RecordsAdded(added=tuple(added), present=tuple(present))
    if json:
        output.emit_json(answer.to_dict())
        return
    output.emit_lines([f"added {len(added)} record(s); {len(present)} already in the ledger"])


def _read_records(path: Path) -> list[Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(path, "no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, f"unreadable: {exc}") from None
    try:  # a JSON file: one record, or a list of them
        value = json.loads(text)
        return value if isinstance(value, list) else [value]
    except json.JSONDecodeError:
        pass  # JSONL: one record a line
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise InputError(path, f"json: not JSON ({exc.msg})",
                                 where=f"line {number}") from None
    return records


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
