"""A run (loss and grad norm over its steps, clipped and skipped steps linked to their
documents, its chain's status, its checkpoints, its audit) and one step of a run
(`lineage trace`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lineage.charts import Mark, line_plot
from lineage.serve.web.figures import kept, run_series, stream_schedule_of
from lineage.serve.web.markup import (
    Markup,
    capped,
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
from lineage.serve.web.respond import page_routes

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.routing import BaseRoute

    from lineage.api import Store

CLIPPED, SKIPPED = "#e07b24", "#b3261e"


def routes() -> list[BaseRoute]:
    return [*page_routes("/runs/{name}", load_run, render_run),
            *page_routes("/runs/{name}/steps/{step:int}", load_run_step, render_run_step)]


def load_run(request: Request, store: Store) -> dict[str, Any]:
    """The run as `run show` answers, its per-step series, `chain verify` (batch digests
    recomputed from the stream when the run has one) and `run checkpoints`."""
    run = store.run(request.path_params["name"])
    # Recomputing every batch digest reads every step's windows: the verification is kept
    # while the run's record (its `run show` answer: steps, segments, closing) is the same.
    chain = kept(("chain", str(store.root), run.name, run.to_json()),
                 lambda: store.verify_chain(run.name, batches=run.stream is not None).to_dict())
    audit = None if run.checkpoint_every is None else store.audit_status(run.name).to_dict()
    return {"run": run.to_dict(), "series": run_series(store, run.name),
            "chain": chain, "checkpoints": store.checkpoints(run.name).to_dict(),
            "audit": audit}


def render_run(data: dict[str, Any]) -> tuple[str, Markup]:
    run, series, name = data["run"], data["series"], data["run"]["name"]
    stream = run["stream"]
    body = join([
        facts([("stream", esc(None) if stream is None else link(url("streams", stream), stream)),
               ("world size", run["world_size"]), ("chain", f"{run['chain']} ({run['algorithm']})"),
               ("genesis", code(run["genesis"])), ("closed", run["closed"]),
               ("steps recorded", run["steps_recorded"]),
               ("steps", f"{run['first_step']}–{run['last_step']}"
                         if run["first_step"] is not None else None),
               ("progress through the stream", f"{run['progress']:.1%}"),
               ("skip rule", _skip_rule(run["skip_rule"])),
               ("checkpoint every", run["checkpoint_every"])]),
        section("Loss and grad norm", _plot(name, series, "loss", linked=stream is not None),
                _plot(name, series, "grad_norm", linked=stream is not None),
                tag("p", Markup(f'<span style="color:{CLIPPED}">●</span> clipped '
                                f'<span style="color:{SKIPPED}">●</span> skipped: '
                                "each dot links to the step and its documents"),
                    cls="muted")),
        section("Clipped steps", _step_links(name, run["clipped_steps"], stream)),
        section("Skipped steps", _step_links(name, run["skipped_steps"], stream)),
        section("Chain", _chain(data["chain"])),
        section("Checkpoints", _checkpoints(data["checkpoints"])),
        section("Audit", _audit(data["audit"]))])
    return f"Run {name}", body


def _skip_rule(rule: dict[str, Any] | None) -> Any:
    if rule is None:
        return None
    return (f"{rule['rule']}: grad norm above {rule['grad_norm_above']} skips the step and "
            f"the {rule['skip_following']} after it")


def _plot(run: str, series: dict[str, list[Any]], column: str, *, linked: bool) -> Markup:
    """The series' line, and a dot per clipped or skipped step (linked to the step's
    page when the run has a stream to trace its documents in)."""
    label = column.replace("_", " ")
    marks = []
    for step, value, clipped, skipped in zip(series["step"], series[column], series["clipped"],
                                             series["skipped"], strict=True):
        if value is not None and (clipped or skipped):
            kind = "skipped" if skipped else "clipped"
            marks.append(Mark(step, value, url("runs", run, "steps", step) if linked else None,
                              f"step {step} {kind}: {label} {value:.4g}",
                              SKIPPED if skipped else CLIPPED))
    return line_plot(series["step"], series[column], title=f"{label} by step", y_label=label,
                     marks=marks)


def _step_links(run: str, steps: list[int], stream: str | None) -> Markup:
    if not steps:
        return tag("p", "none", cls="muted")
    if stream is None:  # a foreign chain: no stream to find the step's documents in
        return tag("p", ", ".join(map(str, steps)))
    return tag("p", capped([link(url("runs", run, "steps", s), s) for s in steps]))


def _chain(chain: dict[str, Any]) -> Markup:
    verdict = tag("span", chain["verdict"], cls="ok" if chain["ok"] else "bad")
    rule = chain["skip_rule"]
    return facts([("verdict", verdict), ("checked", chain["checked"]),
                  ("batch digests recomputed", chain["batches_checked"]),
                  ("steps checked", chain["steps_checked"]),
                  ("first broken step", chain["first_broken_step"]),
                  ("reason", chain["reason"]), ("closed", chain["closed"]),
                  ("last state hash", short_hash(chain["last_state_hash"])),
                  ("skip rule", f"{rule['verdict']}" + (f": {rule['description']}"
                                                        if rule.get("description") else ""))])


def _checkpoints(checkpoints: dict[str, Any]) -> Markup:
    rows = ([c["step"], _verdict(c["structure_ok"]), _verdict(c["checksums_ok"]),
             _verdict(c["matches_chain"]), _verdict(c["matches_state"]), _verdict(c["risks_ok"]),
             _verdict(c["ok"])] for c in checkpoints["checkpoints"])
    missing = checkpoints["missing"]
    note = tag("p", f"The interval expects {checkpoints['expected']}; not recorded after steps: "
                    + (", ".join(map(str, missing)) or "none"), cls="muted") \
        if checkpoints["expected"] is not None else Markup("")
    return join([table(["after step", "structure", "checksums", "matches chain",
                        "matches state", "no risk", "ok"], rows), note])


def _audit(audit: dict[str, Any] | None) -> Markup:
    if audit is None:
        return tag("p", "The run declares no checkpoint interval: it cannot be audited by "
                        "intervals.", cls="muted")
    intervals = audit["intervals"]
    return facts([("spec", audit["spec"]), ("interval", f"{audit['interval']} steps"),
                  ("intervals", ", ".join(f"{v} {k}" for k, v in intervals.items())),
                  ("steps verified", f"{audit['steps_verified']:,} of {audit['steps']:,}"),
                  ("longest contiguous verified", audit["longest_contiguous"]),
                  ("auditors", audit["participants"]),
                  ("next unclaimed steps", ", ".join(map(str, audit["next_unclaimed"])))])


def _verdict(value: bool | None) -> Markup:
    if value is None:
        return tag("span", "not checked", cls="muted")
    return tag("span", "yes" if value else "no", cls="ok" if value else "bad")


def load_run_step(request: Request, store: Store) -> dict[str, Any]:
    """`lineage trace --run R --step N --json`, and the run's stream's corpus for links."""
    name = request.path_params["name"]
    trace = store.trace(name, step=request.path_params["step"])
    stream = store.stream(trace.stream)
    schedule = stream_schedule_of(stream)
    windows = sorted({w for step in trace.steps for d in step.documents for w in d.windows})
    return {"trace": trace.to_dict(), "corpus": stream.corpus,
            "window_steps": {str(w): schedule.step_of_window(w) for w in windows}}


def _window_links(stream: str, windows: list[int], window_steps: dict[str, int]) -> Markup:
    return join((link(url("streams", stream, "steps", window_steps[str(w)], window=w), w)
                 for w in windows), ", ")


def render_run_step(data: dict[str, Any]) -> tuple[str, Markup]:
    trace, corpus = data["trace"], data["corpus"]
    run, stream = trace["run"], trace["stream"]
    window_steps = data["window_steps"]
    parts = [facts([("run", link(url("runs", run), run)),
                    ("stream", link(url("streams", stream), stream)),
                    ("spec hash", code(trace["spec_hash"])),
                    ("manifest hash", code(trace["manifest_hash"]))])]
    for step in trace["steps"]:
        documents = table(["doc_id", "source", "epoch", "windows", "tokens", "content hash"], (
            [link(url("corpora", corpus, "document", id=d["doc_id"]), d["doc_id"]), d["source"],
             d["epoch"], _window_links(stream, d["windows"], window_steps), d["tokens"],
             short_hash("blake3:" + d["content_hash"])] for d in step["documents"]))
        parts.append(section(f"Step {step['step']}", facts([
            ("loss", step["loss"]), ("grad norm (before clipping)", step["grad_norm"]),
            ("learning rate", step["lr"]), ("clipped", step["clipped"]),
            ("skipped", step["skipped"]), ("state hash", code(step["state_hash"]))]),
            documents))
    steps = trace["steps"]
    title = f"Run {run}, step {steps[0]['step']}" if steps else f"Run {run}"
    return title, join(parts)
