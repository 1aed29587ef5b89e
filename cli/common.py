"""Options and helpers shared by the command modules."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lineage.api import Store, open_store, resolve_store_path

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for programs.")]

# True when the command line is its own process (the console script, `python -m
# lineage.cli`), not a call inside another program such as a test's runner: a command
# may then bound this process and end it (`lineage sql`).
WHOLE_PROCESS = False


def store_root(ctx: typer.Context) -> str:
    root = ctx.find_root()
    value = (root.obj or {}).get("store") if root else None
    return str(resolve_store_path(value))


def current_store(ctx: typer.Context) -> Store:
    return open_store(store_root(ctx))


def output_path(value: Path | None) -> Path | None:
    """A `-o` path, checked before the command does any work: a regular file or a new
    path in an existing folder (never a device, FIFO, socket or folder). A parameter
    callback."""
    from lineage.userfiles import check_output_path

    return None if value is None else check_output_path(value)


def require_folder(path: Path) -> Path:
    """The folder a command was given, or an error (exit 2) when there is none to check:
    a missing path is a mistake in the question, not a failed check. A parameter callback,
    so the check runs before the command does anything."""
    from lineage.diligence.verify import require_folder as check

    check(path)
    return path

# Where the per-shard work runs (lineage.ingest.engine); Ray only with the `ray` extra.
EngineOption = Annotated[
    str, typer.Option("--engine", help="local (this machine's cores) or ray (each shard, "
                      "part and key range a Ray task; pip install 'lineage[ray]'). The "
                      "store is the same byte for byte.")
]
RayAddressOption = Annotated[
    str | None, typer.Option("--ray-address", help="With --engine ray: the cluster to join "
                             "(HOST:PORT, or auto for the running one); default: start a "
                             "local one with this machine's cores. The store must be on "
                             "storage every node sees at the same path.")
]


CsvOption = Annotated[bool, typer.Option("--csv", help="Print the rows as CSV.")]
TsvOption = Annotated[bool, typer.Option("--tsv", help="Print the rows as TSV.")]
NlOption = Annotated[bool, typer.Option(
    "--nl", help="Print the rows as newline-delimited JSON (an object a line).")]


def rows_format(*, json: bool, csv: bool, tsv: bool, nl: bool) -> str | None:
    """`csv`, `tsv` or `nl` when one was asked for; a usage error when several outputs were."""
    asked = [name for name, on in (("json", json), ("csv", csv), ("tsv", tsv), ("nl", nl)) if on]
    if len(asked) > 1:
        raise typer.BadParameter(f"give one of --{', --'.join(asked)}, not several",
                                 param_hint="--" + asked[1])
    return asked[0] if asked and asked[0] != "json" else None


CascadeOption = Annotated[bool, typer.Option(
    "--cascade", help="Remove what depends on it too (streams of a corpus, runs of a stream, "
    "the audit records of a run).")]


def remove_and_report(ctx: typer.Context, kind: str, name: str, *, cascade: bool,
                      json: bool) -> None:
    """The `remove` commands: one library call, then the answer."""
    from lineage.cli import output

    answer = current_store(ctx).remove(kind, name, cascade=cascade)
    if json:
        output.emit_json(answer.to_dict())
        return
    if answer.status == "absent":
        output.emit_lines([f"no {kind} {name!r}: nothing to remove"])
        return
    kinds = (("corpus", "corpora", answer.corpora), ("stream", "streams", answer.streams),
             ("run", "runs", answer.runs), ("experiment", "experiments", answer.experiments))
    taken = [f"{len(names)} {one if len(names) == 1 else many} ({', '.join(names)})"
             for one, many, names in kinds if names]
    if answer.audit_records:
        taken.append(f"{answer.audit_records} audit records")
    output.emit_lines([f"removed {', '.join(taken)}",
                       f"{answer.parts} files ({answer.part_bytes:,} bytes) are no longer "
                       "registered: `lineage store gc` deletes them"])
