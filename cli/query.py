"""`lineage docs` and `lineage trained-on`: the two headline questions."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lineage.cli import output
from lineage.cli.common import JsonOption, current_store
from lineage.errors import EXIT_NO

StreamOption = Annotated[
    str | None, typer.Option("--stream", help="The stream (default: the only one).")
]


def docs(
    ctx: typer.Context,
    step: Annotated[int, typer.Option("--step", help="The training step.", min=0)],
    stream: StreamOption = None,
    rank: Annotated[int | None, typer.Option(help="Only this rank's windows.", min=0)] = None,
    world_size: Annotated[
        int | None, typer.Option(help="Ranks in the world (must divide the batch).", min=1)
    ] = None,
    window: Annotated[int | None, typer.Option(help="Only this window.", min=0)] = None,
    json: JsonOption = False,
) -> None:
    """Which documents were in step N: every segment of every document, with offsets."""
    answer = current_store(ctx).docs_in_step(
        step, stream=stream, rank=rank, world_size=world_size, window=window
    )
    if json:
        output.emit_json(answer)
        return
    first, last = answer["windows"]
    output.emit_lines([f"stream {answer['stream']} ({answer['spec_hash']}) step "
                       f"{answer['step']}: windows {first}..{last}"])
    output.emit_table(
        ("window", "rank", "doc_id", "source", "tokens", "content_hash"),
        [[d["window"], "" if d["rank"] is None else d["rank"], d["doc_id"], d["source"],
          f"{d['token_start']}..{d['token_end']}", d["content_hash"][:16]]
         for d in answer["documents"]],
    )


def trained_on(
    ctx: typer.Context,
    files: Annotated[list[Path], typer.Argument(help="Files to look for, by exact content.")],
    stream: StreamOption = None,
    run: Annotated[
        str | None, typer.Option(help="Answer for this run: trained, skipped-only, "
                                 "not-reached.")
    ] = None,
    json: JsonOption = False,
) -> None:
    """Was this file trained on? Exit 0 when every file is in the stream (or trained)."""
    answer = current_store(ctx).trained_on([str(f) for f in files], stream=stream, run=run)
    wanted = "trained" if run else "in-stream"
    if json:
        output.emit_json(answer)
    else:
        for result in answer["results"]:
            output.emit_lines([f"{result['file']}: {result['verdict']} "
                               f"(blake3 {result['content_hash']})"])
            for m in result["matches"]:
                where = "in no stream"
                if m["stream"]:
                    where = (f"stream {m['stream']}: steps {_ranges(m['steps'])}, "
                             f"windows {_ranges(m['windows'])}, epochs {_ranges(m['epochs'])}")
                run_note = f" [{m['run_verdict']}]" if "run_verdict" in m else ""
                output.emit_lines([f"  {m['corpus']}/{m['doc_id']} ({m['source']}): "
                                   f"{where}{run_note}"])
    if any(r["verdict"] != wanted for r in answer["results"]):
        raise typer.Exit(EXIT_NO)


def trace(
    ctx: typer.Context,
    run: Annotated[str, typer.Option("--run", help="The run.")],
    step: Annotated[int | None, typer.Option(help="One step.", min=0)] = None,
    clipped: Annotated[bool, typer.Option("--clipped", help="Every clipped step.")] = False,
    skipped: Annotated[bool, typer.Option("--skipped", help="Every skipped step.")] = False,
    limit: Annotated[int | None, typer.Option(help="Only the first N steps.", min=1)] = None,
    json: JsonOption = False,
) -> None:
    """Loss, grad norm and the documents of a run's step, or of its clipped/skipped steps."""
    answer = current_store(ctx).trace(run, step=step, clipped=clipped, skipped=skipped,
                                      limit=limit)
    if json:
        output.emit_json(answer)
        return
    for s in answer["steps"]:
        flags = ", ".join(f for f, on in (("clipped", s["clipped"]), ("skipped", s["skipped"]))
                          if on) or "normal"
        output.emit_lines([f"step {s['step']}: loss {s['loss']:.4f}, grad norm "
                           f"{s['grad_norm']:.4f} ({flags})"])
        output.emit_table(
            ("doc_id", "source", "windows", "tokens", "content_hash"),
            [[d["doc_id"], d["source"], _ranges(d["windows"]), d["tokens"],
              d["content_hash"][:16]] for d in s["documents"]])


def _ranges(values: list[int]) -> str:
    """[1, 2, 3, 7] -> '1-3, 7'."""
    if not values:
        return "-"
    spans, start, prev = [], values[0], values[0]
    for v in values[1:]:
        if v != prev + 1:
            spans.append(f"{start}-{prev}" if prev != start else str(start))
            start = v
        prev = v
    spans.append(f"{start}-{prev}" if prev != start else str(start))
    return ", ".join(spans)
