"""`lineage docs` and `lineage trained-on`: the two headline questions."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from lineage.cli import output
from lineage.cli.common import JsonOption, current_store

from lineage.errors import EXIT_NO

StreamOption = Annotated[
    str | None, typer.Option("--stream", help="The stream [default: the only one].")
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
    json: JsonOption = False,
) -> None:
    """Was this file trained on? Exit 0 when every file is in a stream, 1 when one is not."""
    answer = current_store(ctx).trained_on([str(f) for f in files], stream=stream)
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
                output.emit_lines([f"  {m['corpus']}/{m['doc_id']} ({m['source']}): {where}"])
    if any(r["verdict"] != "in-stream" for r in answer["results"]):
        raise typer.Exit(EXIT_NO)


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
