"""A stream (its parameters and its source mix over training, step range by step range)
and a step (its documents, windows and ranks, as `lineage docs --step` answers)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lineage.charts import stacked_columns
from lineage.serve.web.figures import source_mix
from lineage.serve.web.markup import (
    Markup,
    code,
    esc,
    facts,
    join,
    link,
    section,
    short_hash,
    table,
    tag,
    url,
)
from lineage.serve.web.respond import int_param, page_routes

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.routing import BaseRoute

    from lineage.api import Store


def routes() -> list[BaseRoute]:
    return [*page_routes("/streams/{name}", load_stream, render_stream),
            *page_routes("/streams/{name}/steps/{step:int}", load_step, render_step)]


def load_stream(request: Request, store: Store) -> dict[str, Any]:
    """The stream as `stream show` answers, its source mix and the runs that read it."""
    stream = store.stream(request.path_params["name"])
    runs = [r.to_dict() for r in store.runs() if r.stream == stream.name]
    return {"stream": stream.to_dict(), "source_mix": source_mix(store, stream), "runs": runs}


def render_stream(data: dict[str, Any]) -> tuple[str, Markup]:
    stream, mix = data["stream"], data["source_mix"]
    name = stream["name"]
    body = join([
        facts([("corpus", link(url("corpora", stream["corpus"]), stream["corpus"])),
               ("spec", stream["spec"]), ("spec hash", code(stream["spec_hash"])),
               ("manifest hash", code(stream["manifest_hash"])), ("seed", stream["seed"]),
               ("tokens per window", stream["seq_len"]),
               ("windows per step", _windows_per_step(stream)),
               ("separator tokens", stream["separator_tokens"]),
               ("epochs", ", ".join(f"{k}: {v}" for k, v in stream["epochs"].items())),
               ("steps", stream["steps"]), ("windows", stream["windows"]),
               ("tokens", stream["tokens"]), ("occurrences", stream["occurrences"]),
               ("occurrences digest", code(stream["occurrences_digest"]))]),
        section("Source mix over training", _mix_plot(name, mix), _mix_table(name, mix)),
        section("Runs reading this stream", _runs(data["runs"]))])
    return f"Stream {name}", body


def _windows_per_step(stream: dict[str, Any]) -> str:
    schedule = stream.get("schedule")  # stated by stores that know batch-size schedules
    if not schedule:
        return f"{stream['batch']:,}"
    return "; ".join(f"{windows:,} from step {first:,}" for first, windows in schedule)


def _shares(mix: dict[str, Any]) -> list[tuple[str, list[float]]]:
    totals = [sum(r["tokens"].values()) for r in mix["ranges"]]
    return [(source, [r["tokens"][source] / total if total else 0.0
                      for r, total in zip(mix["ranges"], totals, strict=True)])
            for source in mix["sources"]]


def _range_label(r: dict[str, Any]) -> str:
    return f"steps {r['first_step']}–{r['last_step']}"


def _mix_plot(name: str, mix: dict[str, Any]) -> Markup:
    ranges = mix["ranges"]
    return stacked_columns([_range_label(r) for r in ranges], _shares(mix),
                           hrefs=[url("streams", name, "steps", r["first_step"]) for r in ranges],
                           title=f"tokens by source, {mix['steps_per_range']} steps per column")


def _mix_table(name: str, mix: dict[str, Any]) -> Markup:
    shares = _shares(mix)
    rows = ([link(url("streams", name, "steps", r["first_step"]), _range_label(r)),
             *(f"{values[i]:.1%}" for _, values in shares)]
            for i, r in enumerate(mix["ranges"]))
    return tag("details", Markup(tag("summary", "the shares as a table"))
               + table(["steps", *mix["sources"]], rows))


def _runs(runs: list[dict[str, Any]]) -> Markup:
    if not runs:
        return tag("p", "No run has recorded steps over this stream.", cls="muted")
    return table(["run", "world size", "steps recorded", "progress"], (
        [link(url("runs", r["name"]), r["name"]), r["world_size"], r["steps_recorded"],
         f"{r['progress']:.1%}"] for r in runs))


def load_step(request: Request, store: Store) -> dict[str, Any]:
    """`lineage docs --step N --json` for the step, with `?rank=&world_size=&window=`; a
    world size without a rank gives every rank's part, rank by rank. With the stream's
    corpus and step count for the links."""
    stream = store.stream(request.path_params["name"])
    step, window = request.path_params["step"], int_param(request, "window")
    rank, world_size = int_param(request, "rank"), int_param(request, "world_size", minimum=1)
    if world_size is not None and rank is None and window is None:
        # every rank's part, as the stream's rank rule splits the step, in window order
        parts = [store.docs_in_step(step, stream=stream.name, rank=r, world_size=world_size)
                 for r in range(world_size)]
        docs = {**store.docs_in_step(step, stream=stream.name).to_dict(),
                "documents": sorted((d for part in parts for d in part.to_dict()["documents"]),
                                    key=lambda d: d["window"])}
    else:
        docs = store.docs_in_step(step, stream=stream.name, rank=rank, world_size=world_size,
                                  window=window).to_dict()
    return {"docs": docs, "corpus": stream.corpus, "steps": stream.steps,
            "world_size": world_size}


def render_step(data: dict[str, Any]) -> tuple[str, Markup]:
    docs, corpus = data["docs"], data["corpus"]
    name, step = docs["stream"], docs["step"]
    first, last = docs["windows"]
    rows = ([link(url("streams", name, "steps", step, window=d["window"]), d["window"]),
             d["rank"], link(url("corpora", corpus, "document", id=d["doc_id"]), d["doc_id"]),
             d["source"], d["epoch"], f"{d['token_start']:,}–{d['token_end']:,}",
             d["token_end"] - d["token_start"], short_hash("blake3:" + d["content_hash"])]
            for d in docs["documents"])
    body = join([
        tag("p", _step_nav(name, step, data["steps"])),
        facts([("stream", link(url("streams", name), name)), ("spec", docs["spec"]),
               ("spec hash", code(docs["spec_hash"])),
               ("manifest hash", code(docs["manifest_hash"])),
               ("windows", f"{first}–{last}"), ("segments", len(docs["documents"])),
               *_rank_rule(docs)]),
        _rank_form(name, step, data["world_size"]),
        section("Documents, window by window",
                table(["window", "rank", "doc_id", "source", "epoch", "tokens of the document",
                       "tokens", "content hash"], rows))])
    return f"Step {step} of {name}", body


def _rank_rule(docs: dict[str, Any]) -> list[tuple[str, Any]]:
    """How ranks split the step, where the answer states it (a scheduled stream's, or one
    with a rank rule other than lineage's contiguous split)."""
    rule = docs.get("rank_rule")
    if not rule:
        return []
    return [("rank rule", ", ".join(f"{k}: {v}" for k, v in rule.items()))]


def _step_nav(name: str, step: int, steps: int) -> Markup:
    parts = []
    if step > 0:
        parts.append(link(url("streams", name, "steps", step - 1), f"← step {step - 1}"))
    parts.append(link(url("streams", name, "steps", step), "the whole step"))
    if step + 1 < steps:
        parts.append(link(url("streams", name, "steps", step + 1), f"step {step + 1} →"))
    return join(parts, " · ")


def _rank_form(name: str, step: int, world_size: int | None) -> Markup:
    """A GET form: the documents of one rank of a world size."""
    size = esc(world_size or "")
    return Markup(
        f'<form class="inline" method="get" action="{esc(url("streams", name, "steps", step))}">'
        f'<div><label for="world_size">world size</label><input id="world_size" '
        f'name="world_size" type="number" min="1" value="{size}"></div>'
        '<div><label for="rank">rank (empty: all)</label><input id="rank" name="rank" '
        'type="number" min="0"></div><button type="submit">show ranks</button></form>')
