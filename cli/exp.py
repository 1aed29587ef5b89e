"""`lineage exp run|list|show|diff|export|import|providers`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lineage.cli import output
from lineage.cli.common import JsonOption, current_store, require_folder
from lineage.errors import EXIT_NO, UsageError

app = typer.Typer(help="Experiment records that travel across rented machines.",
                  no_args_is_help=True)


@app.command("run", context_settings={"allow_extra_args": True,
                                      "ignore_unknown_options": True})
def run(
    ctx: typer.Context,
    weights: Annotated[Path, typer.Option(help="The frozen weights folder.",
                                          callback=require_folder)],
    revision: Annotated[str, typer.Option(help="The model revision id actually obtained.")],
    sums: Annotated[Path | None, typer.Option(help="Trusted SHA256SUMS list.")] = None,
    quantization: Annotated[str | None, typer.Option(help="Quantization setting.")] = None,
    source: Annotated[str | None, typer.Option(help="Where the weights came from.")] = None,
    name: Annotated[str | None, typer.Option(help="A name for the record.")] = None,
    allow_fallback: Annotated[
        bool, typer.Option(help="Accept a provider fallback reported by the command.")
    ] = False,
    allow_risk: Annotated[
        list[str] | None,
        typer.Option("--allow-risk", metavar="KIND", help="Accept risks of this kind; repeatable."),
    ] = None,
    json: JsonOption = False,
) -> None:
    """Checks, then `-- CMD ARGS...`: stop at the first failure and record everything."""
    from lineage.exp.gate import run_experiment
    from lineage.exp.records import save_record

    command = list(ctx.args)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError("give the command after `--`, e.g. -- python run.py")
    store = current_store(ctx)
    record = run_experiment(weights=weights, revision=revision, command=command, sums=sums,
                            quantization=quantization, source=source, name=name,
                            allow_fallback=allow_fallback, allow_risks=allow_risk or ())
    exp_id, _ = save_record(store, record)
    if json:
        output.emit_json({"id": exp_id, **record})
    else:
        lines = [f"experiment {exp_id}: {record['outcome']}"]
        lines += [f"  {c['name']}: exit {c['exit_code']}" for c in record["checks"]]
        if record["command"]:
            lines.append(f"  command: exit {record['command']['exit_code']} in "
                         f"{record['command']['duration_s']} s")
        if record["failure"]:
            failure = record["failure"]
            files = f" ({', '.join(failure['files'])})" if failure.get("files") else ""
            lines.append(f"stopped: {failure['type']}{files}: {failure['action']}")
        output.emit_lines(lines)
    if record["outcome"] != "passed":
        raise typer.Exit(EXIT_NO)


@app.command("list")
def list_(ctx: typer.Context, json: JsonOption = False) -> None:
    """Every experiment record, oldest first."""
    from lineage.exp.records import list_records

    rows = list_records(current_store(ctx))
    if json:
        output.emit_json(rows)
        return
    columns = ("id", "name", "outcome", "revision", "exit_code", "created_at")
    output.emit_table(columns, [[r[c] for c in columns] for r in rows])


@app.command("show")
def show(
    ctx: typer.Context,
    exp_id: Annotated[str, typer.Argument(metavar="ID", help="Id, id prefix or name.")],
    json: JsonOption = False,
) -> None:
    """One record in full."""
    from lineage.exp.records import get_record

    record = get_record(current_store(ctx), exp_id)
    if json:
        output.emit_json(record)
        return
    cmd = record.get("command") or {}
    report = record.get("report") or {}
    providers = report.get("providers") or {}
    output.emit_lines([
        f"experiment  {record['id']} ({record['outcome']})",
        f"revision    {record['revision']}  quantization {record.get('quantization') or '-'}",
        f"weights     {record['weights']['path']} ({len(record['weights']['files'])} files)",
        "checks      " + ", ".join(f"{c['name']} exit {c['exit_code']}"
                                     for c in record["checks"]),
        f"command     {' '.join(cmd.get('argv', [])) or '(not run)'} -> exit "
        f"{cmd.get('exit_code', '-')}",
        f"providers   requested {providers.get('requested', '-')} obtained "
        f"{providers.get('obtained', '-')}",
        f"output      {report.get('output_digest', '-')}  first load "
        f"{report.get('first_load', '-')}",
        f"host        {record['host']['os']} {record['host']['machine']}, "
        f"{record['host']['cpu']}, {record['host']['cores']} cores",
        f"python      {record['runtime']['python']}; "
        + ", ".join(f"{k} {v}" for k, v in record["runtime"]["packages"].items()),
    ])


@app.command("diff")
def diff(
    ctx: typer.Context,
    a: Annotated[str, typer.Argument(help="First record.")],
    b: Annotated[str, typer.Argument(help="Second record.")],
    json: JsonOption = False,
) -> None:
    """What changed between two records, most consequential first (exit 1 when any)."""
    from lineage.exp.records import diff_records, get_record

    store = current_store(ctx)
    result = diff_records(get_record(store, a), get_record(store, b))
    if json:
        output.emit_json(result)
    elif result["same"]:
        output.emit_lines(["no differences"])
    else:
        output.emit_table(("field", "key", "a", "b"),
                          [[c["field"], c.get("key", ""), c["a"], c["b"]]
                           for c in result["changes"]])
    if not result["same"]:
        raise typer.Exit(EXIT_NO)


@app.command("export")
def export(
    ctx: typer.Context,
    ids: Annotated[list[str], typer.Argument(metavar="ID...", help="Records to export.")],
    out: Annotated[Path, typer.Option("-o", "--output", help="The bundle file to write.")],
    json: JsonOption = False,
) -> None:
    """Write a self-verifying bundle of records and their checksum lists."""
    from lineage.exp.bundle import export_bundle

    result = export_bundle(current_store(ctx), ids, out)
    if json:
        output.emit_json(result)
    else:
        output.emit_lines([f"wrote {result['bundle']}: {result['records']} records, "
                           f"digest {result['digest']}"])


@app.command("import")
def import_(
    ctx: typer.Context,
    bundle: Annotated[Path, typer.Argument(help="A bundle written by `exp export`.")],
    json: JsonOption = False,
) -> None:
    """Check a bundle against its digest and add its records (idempotent)."""
    from lineage.exp.bundle import import_bundle

    result = import_bundle(current_store(ctx), bundle)
    if json:
        output.emit_json(result)
    else:
        output.emit_lines([f"imported {len(result['added'])} records, "
                           f"{len(result['already_present'])} already present"])


@app.command("providers")
def providers(
    model: Annotated[Path, typer.Argument(help="An ONNX model.")],
    request: Annotated[str, typer.Option(help="Providers in order, comma-separated.")],
    require: Annotated[
        bool, typer.Option(help="Fail (exit 1) when a requested provider was not obtained.")
    ] = False,
    json: JsonOption = False,
) -> None:
    """Requested vs obtained ONNX Runtime execution providers."""
    from lineage.exp.providers import check_providers

    report = check_providers(str(model), [p.strip() for p in request.split(",") if p.strip()])
    if json:
        output.emit_json(report)
    else:
        output.emit_lines([f"requested  {', '.join(report['requested'])}",
                           f"obtained   {', '.join(report['obtained'])}",
                           f"available  {', '.join(report['available'])}",
                           "fallback   " + ("yes: " + ", ".join(report["missing"])
                                              if report["fallback"] else "no")])
    if require and report["fallback"]:
        raise typer.Exit(EXIT_NO)
