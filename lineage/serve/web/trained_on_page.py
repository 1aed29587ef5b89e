""""Was this trained on?": a form taking pasted text or a file, and the verdict with the
matched passages highlighted in the query.

The answer is `lineage trained-on`'s: pasted text is asked as `--text` asks it (labelled
`<text 1>`), a file's bytes as standard input is (`<stdin>`, `trained-on -`). The body is
read up to MAX_BODY_BYTES and refused beyond, before any part of it is parsed.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile
from starlette.formparsers import FormParser, MultiPartException, MultiPartParser
from starlette.routing import Route

from lineage.errors import LineageError, UsageError
from lineage.serve.stores import store_for
from lineage.serve.web.markup import (
    Markup,
    code,
    esc,
    facts,
    join,
    link,
    section,
    table,
    tag,
    url,
)
from lineage.serve.web.respond import (
    RequestTooLargeError,
    error_response,
    respond,
    wants_json,
)

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import BaseRoute

MAX_BODY_BYTES = 8 << 20  # the whole form: the text, the file and the choices


def routes() -> list[BaseRoute]:
    return [Route("/trained-on.json", _endpoint(as_json=True), methods=["GET", "POST"]),
            Route("/trained-on", _endpoint(as_json=False), methods=["GET", "POST"])]


def _endpoint(*, as_json: bool) -> Any:
    async def endpoint(request: Request) -> Response:
        json_wanted = wants_json(request, suffixed=as_json)
        try:
            if request.method == "POST":
                form = await read_form(request)
                data = await run_in_threadpool(_ask, request, form)
            else:
                data = await run_in_threadpool(_choices, request)
        except LineageError as exc:
            return error_response(request, exc, as_json=json_wanted)
        if json_wanted and request.method == "POST":
            data = data["answer"]  # exactly what `lineage trained-on --json` prints
        return respond(request, data, render, as_json=json_wanted)

    return endpoint


async def read_form(request: Request) -> dict[str, Any]:
    """The posted form (multipart or urlencoded): `text`, `file` (bytes and name),
    `stream`, `run`. UsageError for a body the form cannot be read from."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    stream = _bounded(request)
    try:
        if kind == "multipart/form-data":
            form = await MultiPartParser(request.headers, stream, max_files=1, max_fields=8,
                                         max_part_size=MAX_BODY_BYTES).parse()
        elif kind == "application/x-www-form-urlencoded":
            form = await FormParser(request.headers, stream, max_fields=8,
                                    max_part_size=MAX_BODY_BYTES).parse()
        else:
            raise UsageError("post the form as multipart/form-data or "
                             "application/x-www-form-urlencoded, not " + repr(kind or "nothing"))
    except MultiPartException as exc:
        raise UsageError(f"the form cannot be read: {exc.message}") from None
    upload = form.get("file")
    data, filename = None, None
    try:
        if isinstance(upload, UploadFile) and upload.filename:
            data, filename = await upload.read(), upload.filename
    finally:
        await form.close()
    return {"text": _field(form.get("text")), "file": data, "filename": filename,
            "stream": _field(form.get("stream")), "run": _field(form.get("run"))}


def _field(value: Any) -> str | None:
    return value if isinstance(value, str) and value != "" else None


async def _bounded(request: Request) -> AsyncGenerator[bytes, None]:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise RequestTooLargeError(f"the form is {int(declared):,} bytes; the limit is "
                                   f"{MAX_BODY_BYTES:,}")
    seen = 0
    async for chunk in request.stream():
        seen += len(chunk)
        if seen > MAX_BODY_BYTES:
            raise RequestTooLargeError(f"the form is more than {MAX_BODY_BYTES:,} bytes")
        yield chunk


def _choices(request: Request) -> dict[str, Any]:
    with store_for(request) as store:
        return {"streams": [s.name for s in store.streams()],
                "runs": [r.name for r in store.runs() if r.stream is not None],
                "max_bytes": MAX_BODY_BYTES, "fields": ["text", "file", "stream", "run"]}


def _ask(request: Request, form: dict[str, Any]) -> dict[str, Any]:
    text, data = form["text"], form["file"]
    if text is None and data is None:
        raise UsageError("paste a text or choose a file to look for")
    with store_for(request) as store:
        answer = store.trained_on(texts=[text] if text is not None else (), stdin=data,
                                  stream=form["stream"], run=form["run"])
        choices = _choices(request)
    queries = ([text] if text is not None else []) + ([_as_text(data)] if data is not None
                                                      else [])
    return {**choices, "answer": answer.to_dict(), "queries": queries, "text": text,
            "filename": form["filename"], "asked": {"stream": form["stream"],
                                                    "run": form["run"]}}


def _as_text(data: bytes) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def render(data: dict[str, Any]) -> tuple[str, Markup]:
    parts = [_form(data)]
    if "answer" in data:
        answer = data["answer"]
        for result, query in zip(answer["results"], data["queries"], strict=True):
            label = result["file"]
            if label == "<stdin>" and data["filename"]:
                label = f"{data['filename']} (sent as standard input)"
            parts.append(_result(label, result, query))
    return "Was this trained on?", join(parts)


def _form(data: dict[str, Any]) -> Markup:
    asked = data.get("asked", {})
    stream = _select("stream", data["streams"], asked.get("stream"), "every stream")
    run = _select("run", data["runs"], asked.get("run"), "no run")
    return Markup(
        '<form method="post" action="/trained-on" enctype="multipart/form-data">'
        '<p><label for="text">paste a text</label><textarea id="text" name="text" rows="8">'
        # the parser drops a newline right after <textarea>: this one, not the text's
        f'\n{esc(data.get("text") or "")}</textarea></p>'
        '<p><label for="file">or choose a file</label><input id="file" name="file" '
        f'type="file"></p><div class="inline">{stream}{run}</div>'
        f'<p><button type="submit">look it up</button> <span class="muted">up to '
        f"{data['max_bytes'] >> 20} MiB</span></p></form>")


def _select(name: str, options: list[str], chosen: str | None, empty: str) -> Markup:
    items = join([tag("option", empty, value="")] + [
        tag("option", o, value=o, selected="selected" if o == chosen else None)
        for o in options])
    return Markup(f'<p><label for="{name}">{name}</label><select id="{name}" name="{name}">'
                  f"{items}</select></p>")


def _result(label: str, result: dict[str, Any], query: str | None) -> Markup:
    found = result["verdict"] != "not-found"
    verdict = tag("span", result["verdict"], cls="verdict " + ("ok" if found else "bad"))
    details = facts([("verdict", verdict), ("run verdict", result.get("run_verdict")),
                     ("share of the query matched", f"{result['containment']:.1%}"),
                     ("share aligned with an edited copy's document",
                      None if "similarity" not in result else f"{result['similarity']:.1%}"),
                     ("query BLAKE3", code(result["content_hash"])),
                     ("words", result.get("words")), ("note", result.get("note"))])
    return section(label, details, _matches(result["matches"]),
                   tag("h3", "The query, matched passages marked"),
                   _highlighted(query, result))


def _matches(matches: list[dict[str, Any]]) -> Markup:
    if not matches:
        return Markup("")
    rows = ([link(url("corpora", m["corpus"], "document", id=m["doc_id"]), m["doc_id"]),
             m["corpus"], m["match"], _share(m), _stream_cell(m),
             _steps_cell(m), m.get("run_verdict")] for m in matches)
    return table(["document", "corpus", "match", "share", "stream", "steps",
                  "run verdict"], rows)


def _share(match: dict[str, Any]) -> str:
    """The share of the query a match covers: its containment, or for a near match the
    aligned share of the query's words."""
    if match["match"] == "near":
        return f"{match['similarity']:.1%} aligned"
    return f"{match['containment']:.1%}"


def _stream_cell(match: dict[str, Any]) -> Markup:
    stream = match["stream"]
    return esc(None) if stream is None else link(url("streams", stream), stream)


def _steps_cell(match: dict[str, Any], shown: int = 12) -> Markup:
    steps, stream = match["steps"], match["stream"]
    links = [link(url("streams", stream, "steps", s), s) for s in steps[:shown]]
    more = [esc(f"… {len(steps) - shown:,} more")] if len(steps) > shown else []
    return join(links + more, ", ") if links else esc("none")


def marked_spans(result: dict[str, Any], length: int) -> list[tuple[int, int]]:
    """The character ranges of the query that a match covers, merged and sorted; an
    exact match covers the whole query."""
    if any(m["match"] == "exact" for m in result["matches"]):
        return [(0, length)] if length else []
    ranges = sorted(tuple(span["query_chars"]) for m in result["matches"]
                    for span in m.get("spans", ()))
    merged: list[tuple[int, int]] = []
    for start, end in ranges:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _highlighted(query: str | None, result: dict[str, Any]) -> Markup:
    if query is None:
        return tag("p", "The query is not UTF-8 text: it was looked up by its bytes only.",
                   cls="muted")
    pieces, at = [], 0
    for start, end in marked_spans(result, len(query)):
        pieces.append(esc(query[at:start]))
        pieces.append(tag("mark", query[start:end]))
        at = end
    pieces.append(esc(query[at:]))
    return tag("pre", join(pieces), cls="query")
