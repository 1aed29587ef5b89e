"""`lineage init`, `lineage sql`, and `lineage store verify|gc|repair|migrate`."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from lineage.cli import common, output
from lineage.cli.common import (
    CsvOption,
    JsonOption,
    NlOption,
    TsvOption,
    current_store,
    rows_format,
    store_root,
)
from lineage.errors import EXIT_ERROR, EXIT_NO
from lineage.store.sql_guard import DEFAULT_MAX_ROWS, DEFAULT_TIMEOUT

app = typer.Typer(help="Check and maintain the store.", no_args_is_help=True)


def init(ctx: typer.Context, json: JsonOption = False) -> None:
    """Create a store (or bring an existing one to the current schema)."""
    from lineage.api import init_store

    result = init_store(store_root(ctx))
    if json:
        output.emit_json(result.to_dict())
        return
    if result.created:
        message = f"store created {result.path} (schema v{result.schema_version})"
    elif result.migrated_from is not None:
        message = (f"store {result.path} migrated from schema v{result.migrated_from} "
                   f"to v{result.schema_version}")
    else:
        message = f"store already exists at {result.path} (schema v{result.schema_version})"
    output.emit_lines([message])


def sql(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="SELECT statements over the catalog and views.")],
    timeout: Annotated[float, typer.Option(
        min=0, help="Stop the query after this many seconds (0: no limit).")] = DEFAULT_TIMEOUT,
    max_rows: Annotated[int, typer.Option(
        min=0, help="Print at most this many rows (0: no limit).")] = DEFAULT_MAX_ROWS,
    max_memory: Annotated[str, typer.Option(
        help="Stop the query when it needs more memory than this, such as 512MiB or 2GB "
             "(0: no limit).")] = "1GiB",
    json: JsonOption = False,
    csv: CsvOption = False,
    tsv: TsvOption = False,
    nl: NlOption = False,
) -> None:
    """Run read-only SQL over the catalog; Parquet tables appear as views (documents, ...).

    The session cannot write, load extensions, change settings or read files outside
    the store (docs/store.md, "SQL").
    """
    from contextlib import nullcontext

    from lineage.store.sql_guard import process_bounds
    from lineage.stream.build import memory_bytes

    fmt = rows_format(json=json, csv=csv, tsv=tsv, nl=nl)
    memory = memory_bytes(max_memory)
    store = current_store(ctx)
    # Only a process of its own can be bounded inside a function call, and ended.
    bounds = process_bounds(max_memory=memory, timeout=timeout, on_overrun=_end_now) \
        if common.WHOLE_PROCESS else nullcontext()
    writer: list[output.RowWriter] = []

    def write(columns: list[str], rows: list[tuple[Any, ...]]) -> None:
        if not writer:  # the header, once the columns are known
            writer.append(output.RowWriter(fmt or "", columns))
        writer[0].write(rows)

    with bounds:
        result = store.sql(query, timeout=timeout, max_rows=max_rows, max_memory=memory,
                           on_rows=write if fmt else None)
    cut = (f"only the first {result.max_rows:,} rows are shown; "
           "--max-rows raises the limit") if result.truncated else None
    if fmt:  # streamed as they came: the cut is said on stderr, as with --json
        if cut:
            output.warning(cut)
        return
    if json:
        output.emit_json(result.to_list())
        if cut:
            output.warning(cut)
    else:
        output.emit_table(result.columns, result.rows)
        if cut:
            output.emit_lines([f"({cut})"])


def _end_now(message: str) -> None:
    """The query ran past its time limit and the interrupt did not stop it (it is inside
    one function call): say so as any error is said, and end the process."""
    import os
    import sys

    output.error(message)
    sys.stderr.flush()
    os._exit(EXIT_ERROR)


@app.command("verify")
def verify(ctx: typer.Context, json: JsonOption = False, csv: CsvOption = False,
        tsv: TsvOption = False, nl: NlOption = False) -> None:
    """Re-hash every registered Parquet file against the catalog and check the ledger's
    log (exit 1 on a mismatch)."""
    fmt = rows_format(json=json, csv=csv, tsv=tsv, nl=nl)
    report = current_store(ctx).verify()
    if fmt:
        output.emit_rows(fmt, report)
        return
    if json:
        output.emit_json(report.to_dict())
    else:
        lines = [f"{p.path}: {p.status} ({p.owner}): {p.message}" for p in report.problems]
        lines += [f"{path}: unregistered (garbage; `lineage store gc` removes it)"
                  for path in report.unregistered]
        if report.pending_log:
            lines.append("catalog.duckdb.wal: holds commits not yet moved into catalog.duckdb "
                         "(every open replays them; `lineage store repair` moves them)")
        verdict = "ok" if report.ok else "FAILED"
        lines.append(f"{verdict}: {report.files_checked} files, "
                     f"{report.bytes_checked:,} bytes checked"
                     + ("" if report.ok else
                        "; `lineage store repair` rebuilds lost parts from their inputs"))
        output.emit_lines(lines)
    if not report.ok:
        raise typer.Exit(EXIT_NO)


@app.command("gc")
def gc(
    ctx: typer.Context,
    min_age: Annotated[
        float, typer.Option(help="Keep unregistered files younger than this many seconds.")
    ] = 3600.0,
    json: JsonOption = False,
) -> None:
    """Remove files an interrupted write left behind (never a registered file)."""
    from lineage.store.integrity import gc_store

    report = gc_store(current_store(ctx), min_age=min_age)
    if json:
        output.emit_json(report)
    else:
        output.emit_lines([f"removed {path}" for path in report["removed"]]
                          + [f"{len(report['removed'])} leftovers removed"])


@app.command("repair")
def repair(
    ctx: typer.Context,
    drop_lost: Annotated[bool, typer.Option(
        "--drop-lost", help="Unregister a corpus or stream whose lost parts cannot be "
        "rebuilt, so it can be ingested or built again.")] = False,
    json: JsonOption = False,
) -> None:
    """Bring a store found half-way back to a consistent state, saying what was done.

    Moves commits left in the catalog's log into the catalog, rebuilds lost or damaged
    parts from the inputs their records name (put back only when their SHA-256 is the
    recorded one), and removes files no commit registered. Exit 1 when a lost part
    could not be rebuilt (and --drop-lost was not given)."""
    from lineage.ingest.repair import repair_store

    report = repair_store(current_store(ctx), drop_lost=drop_lost)
    if json:
        output.emit_json(report.to_dict())
    else:
        lines = [f"{a.action}: {a.target}: {a.detail}" for a in report.actions]
        lines += [f"{p.path}: {p.status} ({p.owner}): {p.message}" for p in report.remaining]
        lines.append("ok: the store is consistent" if report.ok else
                     f"FAILED: {len(report.remaining)} lost files remain; "
                     "--drop-lost unregisters their records")
        output.emit_lines(lines)
    if not report.ok:
        raise typer.Exit(EXIT_NO)


@app.command("migrate")
def migrate(ctx: typer.Context, json: JsonOption = False) -> None:
    """Bring the store's catalog to this version's schema."""
    from lineage.api import init_store

    current_store(ctx)  # an existing store: migrating a missing one is an error, not a new one
    result = init_store(store_root(ctx))
    if json:
        output.emit_json(result.to_dict())
    elif result.migrated_from is not None:
        output.emit_lines([f"store {result.path} migrated from schema v{result.migrated_from} "
                           f"to v{result.schema_version}"])
    else:
        output.emit_lines([f"store {result.path} is at schema v{result.schema_version} "
                           "already: nothing to migrate"])
