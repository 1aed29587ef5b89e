"""`lineage exp run|logs|list|show|diff|export|import|providers|compare-outputs|ort-sweep`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import click
import typer
from typer.core import TyperCommand

from lineage.cli import exp_render as render
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
from lineage.errors import EXIT_NO, UsageError

app = typer.Typer(help="Experiment records that travel across rented machines.",
                  no_args_is_help=True)


class _CommandAfterDashes(TyperCommand):
    """Options, then `--`, then the command: everything before `--` is parsed strictly
    (an unknown option or a stray word is a usage error), nothing after it is."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" in args:
            cut = args.index("--")
            args, ctx.meta["exp_command"] = args[:cut], args[cut + 1 :]
        return super().parse_args(ctx, args)


@app.command("run", cls=_CommandAfterDashes, options_metavar="[OPTIONS] -- COMMAND [ARGS]...")
def run(
    ctx: typer.Context,
    weights: Annotated[Path, typer.Option(
        help="The frozen weights: a folder, a Hugging Face cache snapshot "
             "(.../snapshots/REV) or one model file (a GGUF).", callback=_weights)],
    revision: Annotated[str, typer.Option(
        help="The model revision id actually obtained; on a cache snapshot it must name "
             "the snapshot (its commit, 7+ hex digits of it, or a ref naming it).")],
    sums: Annotated[Path | None, typer.Option(help="Trusted SHA256SUMS list.")] = None,
    quantization: Annotated[str | None, typer.Option(help="Quantization setting.")] = None,
    source: Annotated[str | None, typer.Option(help="Where the weights came from.")] = None,
    name: Annotated[str | None, typer.Option(help="A name for the record (unique).")] = None,
    attempt: Annotated[
        bool, typer.Option("--attempt", help="Record a new attempt of the experiment --name.")
    ] = False,
    allow_fallback: Annotated[
        bool, typer.Option(help="Accept a provider fallback reported by the command.")
    ] = False,
    allow_risk: Annotated[
        list[str] | None,
        typer.Option("--allow-risk", metavar="KIND", help="Accept a risk of this kind "
                     "(repeatable); recorded as allowed_risks."),
    ] = None,
    env: Annotated[
        list[str] | None,
        typer.Option("--env", metavar="NAME", help="Also record this environment variable "
                     "(repeatable)."),
    ] = None,
    param: Annotated[
        list[str] | None,
        typer.Option("--param", metavar="KEY=VALUE", help="A parameter to record "
                     "(repeatable)."),
    ] = None,
    metrics: Annotated[
        Path | None,
        typer.Option(help="A file the command writes, read after it exits: a JSON object "
                     "(final values), or JSON lines (.jsonl: rows with a step, the "
                     "metrics' history). At most 16 MiB."),
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(metavar="SECONDS", min=0.0, help="Stop the command's process group, "
                     "and the processes that left it, after this long (exit 124)."),
    ] = None,
    revision_override: Annotated[
        bool, typer.Option("--revision-override", help="Record a --revision that does not "
                           "name the cache snapshot given, with the snapshot's own.")
    ] = False,
    max_log: Annotated[
        str, typer.Option(metavar="SIZE", help="Keep at most this much of each output "
                          "stream: its first and last halves (e.g. 1MiB, 500KB; 'none' "
                          "keeps all). The whole stream's BLAKE3 and length are recorded.")
    ] = "64MiB",
    max_header_mib: Annotated[
        float, typer.Option(help="Largest safetensors header the checks accept (a local "
                            "policy, as `verify` has it).")
    ] = 16.0,
    json: JsonOption = False,
) -> None:
    """Checks, then the command after `--`: its output passes through live and is kept
    (up to --max-log); the record is committed whatever happens; lineage exits with the
    command's exit code (1 when a check stopped it, 124 on a timeout, 130/143 when
    interrupted, 2 when it succeeded but its metrics file was refused)."""
    from lineage.exp.api import env_names, run_experiment

    command = list(ctx.meta.get("exp_command") or [])
    if not command:
        raise UsageError("give the command after `--`, e.g. -- python run.py")
    answer = run_experiment(
        current_store(ctx), command, weights=weights, revision=revision, sums=sums,
        quantization=quantization, source=source, name=name, attempt=attempt,
        allow_fallback=allow_fallback, allow_risk=allow_risk or (), env=env_names(env or ()),
        param=_params(param or []), metrics=metrics, timeout=timeout,
        revision_override=revision_override, max_log=log_size(max_log),
        max_header_mib=max_header_mib,
        on_output=output.passthrough(stdout_to_stderr=json))
    record = answer.to_dict()
    for warning in answer.warnings or ():
        output.warning(warning)
    if json:
        output.emit_json(record)
    else:
        output.info_lines(render.run_summary(record.pop("id"), record))
    raise typer.Exit(answer.exit_code)


def _weights(path: Path) -> Path:
    """A parameter callback: the weights must exist before anything runs (exit 2)."""
    from lineage.exp.weights import weights_path

    return weights_path(path)


_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KIB": 1 << 10, "KB": 1000, "M": 1 << 20,
          "MIB": 1 << 20, "MB": 1000**2, "G": 1 << 30, "GIB": 1 << 30, "GB": 1000**3}


def log_size(text: str) -> int | None:
    """--max-log: bytes (1MiB, 500KB, 2G = 2 GiB, 4096) or 'none' for no cap."""
    import re

    if text.strip().lower() in ("none", "unlimited"):
        return None
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", text)
    unit = found.group(2).upper() if found else ""
    if not found or unit not in _UNITS:
        raise UsageError(f"--max-log {text!r}: give a size such as 64MiB, 500KB or 4096, "
                         "or 'none'")
    return int(float(found.group(1)) * _UNITS[unit])


def _params(pairs: list[str]) -> dict[str, str]:
    params: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--param {pair!r}: write it as KEY=VALUE")
        if key in params:
            raise UsageError(f"--param {key!r} is given twice")
        params[key] = value
    return params


@app.command("logs")
def logs(
    ctx: typer.Context,
    exp_id: Annotated[str, typer.Argument(metavar="ID", help="Id, id prefix, name or NAME#N.")],
    stderr: Annotated[bool, typer.Option("--stderr", help="The command's stderr.")] = False,
) -> None:
    """The command's stdout (or stderr) as it wrote it, checked against its BLAKE3 (the
    head and tail only when --max-log cut it: a warning on stderr says how much is left
    out)."""
    from lineage.exp.api import log_chunks, show_experiment

    store = current_store(ctx)
    output.emit_bytes(log_chunks(store, exp_id, stderr=stderr))
    command = show_experiment(store, exp_id).command
    stream = "stderr" if stderr else "stdout"
    summary = None if command is None else command.stderr if stderr else command.stdout
    kept = (summary or {}).get("kept")
    if kept:
        output.warning(render.cut_note(stream, kept))


@app.command("list")
def list_(ctx: typer.Context, json: JsonOption = False, csv: CsvOption = False,
        tsv: TsvOption = False, nl: NlOption = False) -> None:
    """Every experiment record, oldest first."""
    fmt = rows_format(json=json, csv=csv, tsv=tsv, nl=nl)
    from lineage.exp.api import list_experiments

    rows = list_experiments(current_store(ctx))
    if fmt:
        output.emit_rows(fmt, rows)
        return
    if json:
        output.emit_json(rows.to_list())
        return
    columns = ("id", "name", "attempt", "outcome", "revision", "exit_code", "created_at")
    output.emit_table(columns, [[r.id, r.name, r.attempt, r.outcome, r.revision, r.exit_code,
                                 r.created_at] for r in rows])


@app.command("show")
def show(
    ctx: typer.Context,
    exp_id: Annotated[str, typer.Argument(metavar="ID", help="Id, id prefix or name.")],
    json: JsonOption = False,
) -> None:
    """One record in full."""
    from lineage.exp.api import show_experiment

    record = show_experiment(current_store(ctx), exp_id).to_dict()
    if json:
        output.emit_json(record)
        return
    output.emit_lines(render.show_lines(record))


@app.command("diff")
def diff(
    ctx: typer.Context,
    a: Annotated[str, typer.Argument(help="First record.")],
    b: Annotated[str, typer.Argument(help="Second record.")],
    all_: Annotated[
        bool, typer.Option("--all", help="Every field, the same ones too (marked =).")
    ] = False,
    json: JsonOption = False,
) -> None:
    """Every field that differs between two records, most consequential first (exit 1
    when any)."""
    from lineage.exp.api import diff_experiments

    result = diff_experiments(current_store(ctx), a, b, all=all_)
    if json:
        output.emit_json(result.to_dict())
    elif result.same and not all_:
        output.emit_lines(["no differences"])
    else:
        rows = [("≠", c) for c in result.changes]
        rows += [("=", c) for c in result.unchanged or ()]
        columns = ("", "field", "key", "a", "b") if all_ else ("field", "key", "a", "b")
        output.emit_table(columns, [
            [mark] * all_ + [c.field, "" if c.key is None else c.key,
                             render.diff_cell(c.field, c.a), render.diff_cell(c.field, c.b)]
            for mark, c in rows])
    if not result.same:
        raise typer.Exit(EXIT_NO)


@app.command("export")
def export(
    ctx: typer.Context,
    ids: Annotated[list[str], typer.Argument(metavar="ID...", help="Records to export.")],
    out: Annotated[Path, typer.Option("-o", "--output", help="The bundle file to write.")],
    json: JsonOption = False,
) -> None:
    """Write a self-verifying bundle of records and their checksum lists."""
    from lineage.exp.api import export_bundle

    result = export_bundle(current_store(ctx), ids, out)
    if json:
        output.emit_json(result.to_dict())
    else:
        output.emit_lines([f"wrote {result.bundle}: {result.records} records, "
                           f"digest {result.digest}"])


@app.command("import")
def import_(
    ctx: typer.Context,
    bundle: Annotated[Path, typer.Argument(help="A bundle written by `exp export`.")],
    json: JsonOption = False,
) -> None:
    """Check a bundle against its digest and add its records (idempotent)."""
    from lineage.exp.api import import_bundle

    result = import_bundle(current_store(ctx), bundle)
    if json:
        output.emit_json(result.to_dict())
    else:
        output.emit_lines([f"imported {len(result.added)} records, "
                           f"{len(result.already_present)} already present"])


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
                                              if report["fallback"] else "no"),
                           f"session    {render.readable(report['session'])}"])
    if require and report["fallback"]:
        raise typer.Exit(EXIT_NO)


InputFileOption = Annotated[Path, typer.Option(
    "--input", help="The graph inputs: a .npy (a graph with one input) or a .npz keyed by "
    "input name; never unpickled.")]


@app.command("compare-outputs")
def compare_outputs(
    a: Annotated[Path, typer.Argument(help="The reference ONNX model.")],
    b: Annotated[Path, typer.Argument(help="The converted ONNX model.")],
    inputs: InputFileOption,
    jump_ratio: Annotated[float, typer.Option(
        min=1.0, help="Mark the first value whose relative error grows by more than this "
        "factor over the previous value's.")] = 10.0,
    json: JsonOption = False,
) -> None:
    """Per layer, the relative error of B against A (max|a-b| / max|a|) and its growth over
    the previous layer; marks where the error first jumps. Runs both with onnxruntime."""
    from lineage.exp.layer_errors import compare_outputs as compare

    result = compare(a, b, inputs, jump_ratio=jump_ratio)
    if json:
        output.emit_json(result)
        return
    output.emit_table(
        ("value", "op", "shape", "max |a-b|", "rel error", "growth", ""),
        [[r["value"], r["op"], "x".join(map(str, r["shape"])) or "scalar",
          render.number(r["max_abs_diff"]), render.number(r["rel_error"]),
          render.number(r["growth"]), _jump_mark(r, result["first_jump"])]
         for r in result["layers"]])
    output.emit_lines([
        "rel error = max|a-b| / max|a| over the value (a: A's); growth = rel error / the "
        "previous row's",
        f"first jump (growth above {result['jump_ratio']:g}, or error where there was none): "
        + (result["first_jump"] or "none")])


def _jump_mark(row: dict[str, object], first: str | None) -> str:
    if row["jump"]:
        return "first jump" if row["value"] == first else "jump"
    return str(row["note"] or "")


@app.command("ort-sweep")
def ort_sweep(
    model: Annotated[Path, typer.Argument(help="An ONNX model.")],
    inputs: InputFileOption,
    intra_threads: Annotated[str, typer.Option(
        help="Intra-op thread counts to sweep too, comma-separated (0: onnxruntime's "
        "default).")] = "0",
    json: JsonOption = False,
) -> None:
    """The same model under every graph optimisation level x execution mode: each
    setting's outputs against the first setting's (max abs and relative differences)."""
    from lineage.exp.ort_sweep import ort_sweep as sweep

    try:
        threads = tuple(int(t) for t in intra_threads.split(",") if t.strip())
    except ValueError:
        raise UsageError(f"--intra-threads {intra_threads!r}: give counts such as 1,2,4"
                         ) from None
    result = sweep(model, inputs, intra_threads=threads)
    if json:
        output.emit_json(result)
        return
    output.emit_table(
        ("optimisation", "mode", "intra", "inter", "max |o-r|", "rel diff", ""),
        [[r["settings"]["graph_optimization_level"], r["settings"]["execution_mode"],
          r["settings"]["intra_op_num_threads"], r["settings"]["inter_op_num_threads"],
          render.number(r["max_abs_diff"]), render.number(r["rel_diff"]), r["note"] or ""]
         for r in result["settings"]])
    output.emit_lines(["r: the first row's outputs; rel diff = max|o-r| / max|r|, the "
                       "largest over the outputs; 0 threads: onnxruntime's default"])


@app.command("remove")
def remove(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Id, id prefix or name.", metavar="ID")],
    cascade: CascadeOption = False,
    json: JsonOption = False,
) -> None:
    """Remove the experiment record in one commit (exit 2 when something depends on it, unless
    --cascade); `lineage store gc` then deletes its files. Removing it twice does nothing."""
    remove_and_report(ctx, "experiment", name, cascade=cascade, json=json)
