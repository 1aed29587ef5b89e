"""The store's front page, a corpus (sources, shares, licences, documents) and a document
(every step and window that held it, its text-index status)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lineage.charts import share_bars
from lineage.errors import UnknownObjectError, UsageError
from lineage.serve.web.figures import corpus_documents, stream_schedule_of
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
from lineage.serve.web.respond import int_param, page_routes

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.routing import BaseRoute

    from lineage.api import Store

DOCUMENTS_PER_PAGE = 100


def routes() -> list[BaseRoute]:
    return [*page_routes("/", load_index, render_index),
            *page_routes("/corpora/{name}", load_corpus, render_corpus),
            *page_routes("/corpora/{name}/document", load_document, render_document)]


def load_index(request: Request, store: Store) -> dict[str, Any]:
    """What the store holds: its corpora, streams, runs and experiments, as their list
    commands answer."""
    import lineage.exp

    return {"store": str(store.root), "corpora": store.corpora().to_list(),
            "streams": store.streams().to_list(), "runs": store.runs().to_list(),
            "experiments": lineage.exp.list(store).to_list()}


def render_index(data: dict[str, Any]) -> tuple[str, Markup]:
    corpora = table(["corpus", "documents", "tokens", "manifest hash"], (
        [link(url("corpora", c["name"]), c["name"]), c["documents"], c["tokens"],
         short_hash(c["manifest_hash"])] for c in data["corpora"]))
    streams = table(["stream", "corpus", "steps", "windows per step", "tokens", "spec hash"], (
        [link(url("streams", s["name"]), s["name"]), link(url("corpora", s["corpus"]),
                                                            s["corpus"]),
         s["steps"], s["batch"], s["tokens"], short_hash(s["spec_hash"])]
        for s in data["streams"]))
    runs = table(["run", "stream", "steps recorded", "progress", "clipped", "skipped"], (
        [link(url("runs", r["name"]), r["name"]), _stream_link(r["stream"]),
         r["steps_recorded"], f"{r['progress']:.1%}", r["clipped_count"], r["skipped_count"]]
        for r in data["runs"]))
    experiments = table(["experiment", "outcome", "revision", "recorded"], (
        [link(url("experiments", e["name"] or e["id"]), e["name"] or e["id"]),
         _outcome(e["outcome"]), e["revision"], e["created_at"]]
        for e in data["experiments"]))
    body = join([
        tag("p", Markup("Store ") + code(data["store"]) + Markup(". Ask ")
            + link("/trained-on", "was this trained on?")),
        section("Corpora", corpora), section("Streams", streams), section("Runs", runs),
        section("Experiments", experiments)])
    return "Store", body


def _stream_link(name: str | None) -> Markup:
    return esc(None) if name is None else link(url("streams", name), name)


def _outcome(outcome: str | None) -> Markup:
    return tag("span", outcome, cls="ok" if outcome == "passed" else "bad")


def load_corpus(request: Request, store: Store) -> dict[str, Any]:
    """The corpus as `corpus show` answers, and one page of its documents (`?offset=`)."""
    name = request.path_params["name"]
    corpus = store.corpus(name).to_dict()
    offset = int_param(request, "offset") or 0
    return {"corpus": corpus, "documents": corpus_documents(
        store, name, offset=offset, limit=DOCUMENTS_PER_PAGE)}


def render_corpus(data: dict[str, Any]) -> tuple[str, Markup]:
    corpus, page = data["corpus"], data["documents"]
    sources = table(["source", "documents", "tokens", "bytes", "share", "licences"], (
        [s["source"], s["documents"], s["tokens"], s["bytes"], f"{s['share']:.2%}",
         ", ".join(s["licenses"]) or "none recorded"] for s in corpus["sources"]))
    body = join([
        facts([("manifest hash", code(corpus["manifest_hash"])),
               ("manifest spec", corpus["manifest_spec"]), ("documents", corpus["documents"]),
               ("tokens", corpus["tokens"]), ("bytes", corpus["bytes"]),
               ("empty documents dropped", corpus["dropped_empty"]),
               ("tokenizer", corpus["tokenizer"]), ("ingested", corpus["created_at"]),
               ("licences", ", ".join(corpus["licenses"]) or "none recorded")]),
        section("Sources", share_bars([(s["source"], s["share"]) for s in corpus["sources"]],
                                      title="share of the corpus's tokens"), sources),
        section("Text index", _text_index(corpus["text_index"])),
        section("Documents", _documents(corpus["name"], page))])
    return f"Corpus {corpus['name']}", body


def _text_index(index: dict[str, Any] | None) -> Markup:
    if index is None:
        return tag("p", "No text index: `trained-on` matches this corpus by exact bytes only.",
                   cls="muted")
    return facts([("text spec", index["text_spec"]),
                  ("fingerprint spec", f"{index['fingerprint_spec']} (k={index['k']}, "
                                       f"w={index['w']})"),
                  ("documents indexed", index["documents"]),
                  ("documents not text", index["not_text"]), ("words", index["words"]),
                  ("fingerprints", index["fingerprints"]),
                  ("Unicode version", index["unicode_version"])])


def _documents(corpus: str, page: dict[str, Any]) -> Markup:
    offset, limit, total = page["offset"], page["limit"], page["total"]
    rows = table(["doc_id", "source", "tokens", "bytes", "licence"], (
        [link(url("corpora", corpus, "document", id=d["doc_id"]), d["doc_id"]), d["source"],
         d["n_tokens"], d["n_bytes"], d["license"]] for d in page["documents"]))
    shown = f"{offset + 1:,}–{min(offset + limit, total):,} of {total:,}" if total else "none"
    pager = []
    if offset > 0:
        pager.append(link(url("corpora", corpus, offset=max(offset - limit, 0)), "previous"))
    if offset + limit < total:
        pager.append(link(url("corpora", corpus, offset=offset + limit), "next"))
    return join([tag("p", Markup(f"Documents {esc(shown)} ") + join(pager, " · ")), rows])


def load_document(request: Request, store: Store) -> dict[str, Any]:
    """A document's manifest row, the steps and windows of every stream that read it (as
    `trained-on` places its bytes), and whether the corpus's text index holds it."""
    corpus, doc_id = request.path_params["name"], request.query_params.get("id")
    if not doc_id:
        raise UsageError("a document page needs ?id=DOC_ID")
    with store.reader(views=False) as con:
        document = _one_row(con, store, "documents", corpus, doc_id, DOCUMENT_COLUMNS)
        if document is None:
            store.corpus(corpus)  # the command line's error for a corpus the store lacks
            raise UnknownObjectError(f"corpus {corpus!r} has no document {doc_id!r}")
        text = _text_status(con, store, corpus, doc_id)
    streams = _placements(store, document)
    return {"document": document, "streams": streams, "runs": _run_verdicts(store, document),
            "text_index": text}


DOCUMENT_COLUMNS = ("corpus", "doc_id", "source", "uri", "n_bytes", "n_tokens", "content_hash",
                    "license")


def _one_row(con: Any, store: Store, table: str, corpus: str, doc_id: str,
             columns: tuple[str, ...]) -> dict[str, Any] | None:
    """The document's row of a corpus's table, read from the row group that holds it
    (checked against the catalog): lineage/store/part_read.py."""
    from lineage.store.part_read import row_by_doc_id

    return row_by_doc_id(con, store, table, corpus, doc_id, columns)


def _text_status(con: Any, store: Store, corpus: str, doc_id: str) -> dict[str, Any]:
    if con.execute("SELECT corpus FROM text_indexes WHERE corpus = ?", [corpus]).fetchone() is None:
        return {"status": "no text index"}
    row = _one_row(con, store, "text_documents", corpus, doc_id, ("text_hash", "n_words"))
    if row is None:
        return {"status": "not text"}
    return {"status": "indexed", "text_hash": row["text_hash"], "words": row["n_words"]}


def _placements(store: Store, document: dict[str, Any]) -> list[dict[str, Any]]:
    from lineage.text.trained_on import trained_on_hashes

    answer = trained_on_hashes(store, [(document["doc_id"], document["content_hash"])])
    placed = []
    for match in answer["results"][0]["matches"]:
        if (match["corpus"], match["doc_id"]) != (document["corpus"], document["doc_id"]):
            continue  # another document with the same bytes
        if match["stream"] is None:
            continue
        schedule = stream_schedule_of(store.stream(match["stream"]))
        placed.append({**{k: match[k] for k in ("stream", "spec_hash", "epochs", "steps",
                                                "windows")},
                       "window_steps": [schedule.step_of_window(w) for w in match["windows"]]})
    return placed


def _run_verdicts(store: Store, document: dict[str, Any]) -> list[dict[str, Any]]:
    """What each run over a stream of the document's corpus did with it, as `trained-on
    --run` says: trained, skipped-only, not-reached or in-corpus-only, and the run's steps
    that read it."""
    from lineage.runs.query import get_run
    from lineage.text.trained_on import trained_on_hashes, with_run

    verdicts = []
    for run in store.runs():
        if run.stream is None or store.stream(run.stream).corpus != document["corpus"]:
            continue
        answer = with_run(store, trained_on_hashes(
            store, [(document["doc_id"], document["content_hash"])], stream=run.stream),
            get_run(store, run.name))
        for match in answer["results"][0]["matches"]:
            if (match["corpus"], match["doc_id"]) == (document["corpus"], document["doc_id"]):
                verdicts.append({"run": run.name, "stream": run.stream,
                                 "last_step": answer["run_last_step"],
                                 "verdict": match["run_verdict"],
                                 "steps": match.get("run_steps", match["steps"])})
    return verdicts


def _runs_table(runs: list[dict[str, Any]]) -> Markup:
    if not runs:
        return tag("p", "No run has recorded steps over a stream of this corpus.", cls="muted")
    rows = ([link(url("runs", r["run"]), r["run"]), link(url("streams", r["stream"]),
                                                        r["stream"]),
             tag("span", r["verdict"], cls="ok" if r["verdict"] == "trained" else "muted"),
             capped([_run_step(r, s) for s in r["steps"]])] for r in runs)
    return table(["run", "stream", "verdict", "its steps that read the document"], rows)


def _run_step(run: dict[str, Any], step: int) -> Markup:
    """A step of the run, linked to its record when the run has got that far."""
    if run["last_step"] is None or step > run["last_step"]:
        return esc(str(step))
    return link(url("runs", run["run"], "steps", step), step)


def render_document(data: dict[str, Any]) -> tuple[str, Markup]:
    doc, text = data["document"], data["text_index"]
    body = join([
        facts([("corpus", link(url("corpora", doc["corpus"]), doc["corpus"])),
               ("source", doc["source"]), ("uri", doc["uri"]),
               ("content hash", code(doc["content_hash"])), ("bytes", doc["n_bytes"]),
               ("tokens", doc["n_tokens"]), ("licence", doc["license"])]),
        section("Text index", facts([(k.replace("_", " "), v) for k, v in text.items()])),
        section("In training", _where(data["streams"])),
        section("In runs", _runs_table(data["runs"]))])
    return f"Document {doc['doc_id']}", body


def _where(streams: list[dict[str, Any]]) -> Markup:
    if not streams:
        return tag("p", "No stream reads this document.", cls="muted")
    parts = []
    for placed in streams:
        name = placed["stream"]
        steps = capped([link(url("streams", name, "steps", s), s) for s in placed["steps"]])
        windows = capped([link(url("streams", name, "steps", step, window=w), w) for w, step
                          in zip(placed["windows"], placed["window_steps"], strict=True)])
        parts.append(join([tag("h3", Markup("Stream ") + link(url("streams", name), name)),
                           facts([("spec hash", short_hash(placed["spec_hash"])),
                                  ("epochs", ", ".join(map(str, placed["epochs"]))),
                                  ("steps", steps or esc("none: past the stream's end")),
                                  ("windows", windows)])]))
    return join(parts)
