"""`lineage docs` and `lineage trained-on`: the two headline questions."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

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
from lineage.errors import EXIT_NO
from lineage.store.lookup_reads import with_kept_reads
from lineage.store.no_pandas import pandas_refused
from lineage.text.trained_on import (
    DEFAULT_LIMIT,
    DEFAULT_MIN_CONTAINMENT,
    DEFAULT_MIN_SIMILARITY,
    all_found,
)

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
    csv: CsvOption = False,
    tsv: TsvOption = False,
    nl: NlOption = False,
) -> None:
    """Which documents were in step N: every segment of every document, with offsets."""
    fmt = rows_format(json=json, csv=csv, tsv=tsv, nl=nl)
    with pandas_refused():
        store = current_store(ctx)
        answer = with_kept_reads(store, lambda: store.docs_in_step(
            step, stream=stream, rank=rank, world_size=world_size, window=window))
    if fmt:
        output.emit_rows(fmt, answer)
        return
    if json:
        output.emit_json(answer)
        return
    output.emit_lines([f"stream {answer['stream']} ({answer['spec_hash']}) step "
                       f"{answer['step']}: {_windows_text(answer)}"])
    output.emit_table(
        ("window", "rank", "doc_id", "source", "tokens", "content_hash"),
        [[d["window"], "" if d["rank"] is None else d["rank"], d["doc_id"], d["source"],
          f"{d['token_start']}..{d['token_end']}", d["content_hash"][:16]]
         for d in answer["documents"]],
    )


def _windows_text(answer: Any) -> str:
    """`windows 8..11`; for a stream with a schedule or rank rule, also the step's
    windows and the rule (and a rank's windows one by one when they have gaps)."""
    first, last = answer["windows"]
    shown = f"windows {first}..{last}"
    if "rank_windows" in answer:
        shown = "windows " + ", ".join(map(str, answer["rank_windows"]))
    if "step_windows" not in answer:
        return shown
    from lineage.stream.schedule import RankRule

    rule = RankRule.from_json(answer["rank_rule"]).to_text()
    step_first, step_last = answer["step_windows"]
    return f"{shown} of step windows {step_first}..{step_last}, rank rule {rule}"


def trained_on(
    ctx: typer.Context,
    files: Annotated[
        list[Path] | None,
        typer.Argument(help="Files to look for, or folders (every file in them; - reads "
                       "standard input).", show_default=False),
    ] = None,
    text: Annotated[
        list[str] | None, typer.Option("--text", help="A text to look for (repeatable).")
    ] = None,
    stream: StreamOption = None,
    run: Annotated[
        str | None, typer.Option(help="Answer for this run: trained, skipped-only, "
                                 "not-reached.")
    ] = None,
    min_containment: Annotated[
        float, typer.Option(help="Share of a text that matched passages must cover for "
                            "a `partial` verdict.", min=0.0, max=1.0)
    ] = DEFAULT_MIN_CONTAINMENT,
    min_similarity: Annotated[
        float, typer.Option(help="Share of a text's words a document must align with for "
                            "a `near-duplicate` verdict (an edited copy).", min=0.0, max=1.0)
    ] = DEFAULT_MIN_SIMILARITY,
    limit: Annotated[
        int, typer.Option(help="Candidate documents examined per text.", min=1)
    ] = DEFAULT_LIMIT,
    json: JsonOption = False,
    csv: CsvOption = False,
    tsv: TsvOption = False,
    nl: NlOption = False,
) -> None:
    """Was this file or text trained on? By exact bytes, then as text (re-wrapped copies,
    passages, edited copies). Exit 0 when every query is in the stream (or trained) or
    matched as text.

    A folder stands for the files `ingest corpus` would record from it: every file at any
    depth, in path order, each a result of its own, then a summary of the folder (files by
    verdict; hidden entries, links and empty files are skipped and counted)."""
    fmt = rows_format(json=json, csv=csv, tsv=tsv, nl=nl)
    paths = [str(f) for f in files or []]
    stdin = sys.stdin.buffer.read() if "-" in paths else None
    with pandas_refused():
        store = current_store(ctx)
        answer = with_kept_reads(store, lambda: store.trained_on(
            [p for p in paths if p != "-"], texts=text or [], stdin=stdin, stream=stream,
            run=run, min_containment=min_containment, limit=limit,
            min_similarity=min_similarity))
    if fmt:
        output.emit_rows(fmt, answer)
    elif json:
        output.emit_json(answer.to_dict())
    else:
        for result in answer["results"]:
            output.emit_lines(_result_lines(result))
        output.emit_lines([_folder_line(folder) for folder in answer.get("folders", [])])
    if not all_found(answer):
        raise typer.Exit(EXIT_NO)


def _folder_line(folder: dict[str, Any]) -> str:
    """A folder's summary: its files by verdict, and what was skipped."""
    verdicts = ", ".join(f"{count:,} {verdict}" for verdict, count in folder["verdicts"].items())
    skipped = [f"{folder[key]:,} {what}" for key, what in (
        ("skipped_hidden", "hidden"), ("skipped_links", "links"),
        ("skipped_empty", "empty files")) if folder[key]]
    return (f"{output.shown(folder['folder'])}: {folder['found']:,} of {folder['files']:,} "
            f"files trained on" + (f" ({verdicts})" if verdicts else "")
            + (f"; skipped {', '.join(skipped)}" if skipped else ""))


def _result_lines(result: dict[str, Any]) -> list[str]:
    # Each name is shown on its own (output.shown): a doc_id of only zero-width characters
    # is escaped as it is in a table, where inside the line it would print invisibly.
    shown = output.shown
    head = f"{shown(result['file'])}: {result['verdict']} (blake3 {result['content_hash']})"
    if "text_hash" in result:
        head = (f"{shown(result['file'])}: {result['verdict']}, {result['containment']:.0%} "
                f"of {result['words']} words matched")
    if result["verdict"] == "near-duplicate":
        head = (f"{shown(result['file'])}: {result['verdict']}, {result['similarity']:.0%} "
                f"of {result['words']} words aligned")
    lines = [head]
    for m in result["matches"]:
        where = "in no stream"
        if m["stream"]:
            where = (f"stream {shown(m['stream'])}: steps {_ranges(m['steps'])}, "
                     f"windows {_ranges(m['windows'])}, epochs {_ranges(m['epochs'])}")
        run_note = f" [{m['run_verdict']}]" if "run_verdict" in m else ""
        if m["match"] == "near":
            share = f", near {m['similarity']:.0%}, {len(m['band_keys'])} bands shared"
        else:
            share = "" if m["match"] == "exact" else f", {m['match']} {m['containment']:.0%}"
        if m.get("copies", 1) > 1 or m.get("seen", 1) > 1:  # a text read more than once
            where += f"; {m['copies']} copies in the corpus"
            if m.get("seen") is not None:
                where += f", seen {m['seen']} times: steps {_ranges(m['seen_steps'])}"
        lines.append(f"  {shown(m['corpus'])}/{shown(m['doc_id'])} ({shown(m['source'])}"
                     f"{share}): {where}{run_note}")
        for span in m["spans"]:
            if m["match"] == "near":
                lines.append(_near_span_line(span))
                continue
            doc = f", document words {span['doc_words'][0]}..{span['doc_words'][1]}"
            if span.get("steps"):
                doc += f", steps {_ranges(span['steps'])}"
            lines.append(f"    query words {span['query_words'][0]}..{span['query_words'][1]} "
                         f"(chars {span['query_chars'][0]}..{span['query_chars'][1]}){doc}")
        if m.get("note"):
            lines.append(f"    note: {m['note']}")
    return lines


def _near_span_line(span: dict[str, Any]) -> str:
    """A region of a near match: both ranges, and how many query words it aligns."""
    (q0, q1), (d0, d1) = span["query_words"], span["doc_words"]
    steps = f", steps {_ranges(span['steps'])}" if span.get("steps") else ""
    return (f"    query words {q0}..{q1} (chars {span['query_chars'][0]}.."
            f"{span['query_chars'][1]}), document words {d0}..{d1}, {span['aligned']} words "
            f"aligned{steps}")


def trace(
    ctx: typer.Context,
    run: Annotated[str, typer.Option("--run", help="The run.")],
    step: Annotated[int | None, typer.Option(help="One step.", min=0)] = None,
    clipped: Annotated[bool, typer.Option("--clipped", help="Every clipped step.")] = False,
    skipped: Annotated[bool, typer.Option("--skipped", help="Every skipped step.")] = False,
    limit: Annotated[int | None, typer.Option(help="Only the first N steps.", min=1)] = None,
    json: JsonOption = False,
    csv: CsvOption = False,
    tsv: TsvOption = False,
    nl: NlOption = False,
) -> None:
    """Loss, grad norm and the documents of a run's step, or of its clipped/skipped steps."""
    fmt = rows_format(json=json, csv=csv, tsv=tsv, nl=nl)
    answer = current_store(ctx).trace(run, step=step, clipped=clipped, skipped=skipped,
                                      limit=limit)
    if fmt:
        output.emit_rows(fmt, answer)
        return
    if json:
        output.emit_json(answer.to_dict())
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
