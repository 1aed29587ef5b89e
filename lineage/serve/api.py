"""The JSON API: each endpoint answers exactly what one command prints with `--json`.

The body is the command's standard output byte for byte (the JSON and its final
newline); the header `X-Lineage-Exit-Code` carries the exit code the command would end
with, so an answer of "no" (a file not trained on, a broken chain, two records that
differ) is a 200 with exit code 1, as it is an answer, not an error. Errors are JSON too
(lineage/serve/errors.py). Parameters are the command's options, in snake case; an
unknown parameter is refused, as an unknown option is.

Nothing here writes to the store, and no path comes from a request: names are looked up
in the catalog, posted bytes are answered as standard input is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import blake3
from starlette.responses import Response
from starlette.routing import Route

from lineage.errors import EXIT_NO, EXIT_OK
from lineage.serve.answering import (
    CACHE_HEADER,
    EXIT_HEADER,
    Endpoint,
    Param,
    answered,
    json_answer,
    limits_of,
    query_params,
)
from lineage.serve.errors import HTTPProblem

if TYPE_CHECKING:
    from starlette.datastructures import FormData
    from starlette.requests import Request

    from lineage.api import Store
    from lineage.serve.sql_process import SqlProcesses

__all__ = ["CACHE_HEADER", "ENDPOINTS", "EXIT_HEADER", "Endpoint", "Param", "routes"]


# -- corpora and streams ---------------------------------------------------------------


async def corpora(request: Request) -> Response:
    query_params(request, ())
    return await answered(request, lambda store: json_answer(store.corpora().to_json()))


async def corpus(request: Request) -> Response:
    query_params(request, ())
    name = request.path_params["name"]
    return await answered(request, lambda store: json_answer(store.corpus(name).to_json()))


async def streams(request: Request) -> Response:
    query_params(request, ())
    return await answered(request, lambda store: json_answer(store.streams().to_json()))


async def stream(request: Request) -> Response:
    query_params(request, ())
    name = request.path_params["name"]
    return await answered(request, lambda store: json_answer(store.stream(name).to_json()))


DOCS_PARAMS = (
    Param("step", "integer", "The training step.", required=True, minimum=0),
    Param("stream", description="The stream (default: the only one)."),
    Param("rank", "integer", "Only this rank's windows (with world_size).", minimum=0),
    Param("world_size", "integer", "Ranks in the world.", minimum=1),
    Param("window", "integer", "Only this window.", minimum=0),
)


async def docs(request: Request) -> Response:
    options = query_params(request, DOCS_PARAMS)

    def question(store: Store) -> Response:
        # The question's JSON object as is, as the command line's lean path prints it (the
        # typed answer prints the same bytes; building it costs more than the lookup).
        from lineage.jsonout import json_text
        from lineage.stream.query import docs_in_step

        return json_answer(json_text(docs_in_step(
            store, options["step"], stream=options.get("stream"), rank=options.get("rank"),
            world_size=options.get("world_size"), window=options.get("window"))))

    return await answered(request, question, quick=True)


# -- trained-on --------------------------------------------------------------------------


TRAINED_ON_PARAMS = (
    Param("stream", description="Only this stream."),
    Param("run", description="Answer for this run: trained, skipped-only, not-reached."),
    Param("min_containment", "number", "Share of a text matched passages must cover for "
          "`partial` (0 to 1).", minimum=0),
    Param("limit", "integer", "Candidate documents examined per text.", minimum=1),
)


async def trained_on(request: Request) -> Response:
    """A raw body is standard input (`trained-on -`); a multipart form's `file` part is
    too, and each `text` field is a `--text`."""
    from lineage.text.trained_on import DEFAULT_LIMIT, DEFAULT_MIN_CONTAINMENT

    options = query_params(request, TRAINED_ON_PARAMS)
    limits = limits_of(request)
    containment = options.get("min_containment", DEFAULT_MIN_CONTAINMENT)
    if containment > 1:
        raise HTTPProblem(400, f"parameter 'min_containment' must be at most 1, not "
                               f"{containment:g}")
    limit = options.get("limit", DEFAULT_LIMIT)
    if limit > limits.max_candidates:
        raise HTTPProblem(400, f"parameter 'limit' must be at most {limits.max_candidates}")
    stdin, texts = await _posted(request)

    def question(store: Store) -> Response:
        from lineage.jsonout import json_text
        from lineage.text.trained_on import all_found
        from lineage.text.trained_on import trained_on as ask

        answer = ask(store, texts=texts, stdin=stdin, stream=options.get("stream"),
                     run=options.get("run"), min_containment=containment, limit=limit)
        return json_answer(json_text(answer),
                           exit_code=EXIT_OK if all_found(answer) else EXIT_NO)

    asked = b"".join([b"s", b"-" if stdin is None else blake3.blake3(stdin).digest(),
                      *(b"t" + blake3.blake3(t.encode("utf-8", "surrogatepass")).digest()
                        for t in texts)])
    # A file alone is first looked up by its bytes, at once, as `?hash=` is; if no corpus
    # holds them, matching it as text refuses that and the question goes to a thread.
    quick = stdin is not None and not texts and "run" not in options and \
        len(stdin) <= limits.quick_body_bytes
    return await answered(request, question, body=asked, quick=quick)


async def _posted(request: Request) -> tuple[bytes | None, list[str]]:
    """(standard input, texts) from a raw body or a multipart form."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "multipart/form-data":
        body = await request.body()
        return body, []
    from starlette.exceptions import HTTPException

    try:
        async with request.form(max_files=1, max_fields=100) as form:
            return await _form_queries(form)
    except HTTPException as exc:  # Starlette's word for a malformed or too large form
        raise HTTPProblem(400, f"malformed multipart body: {exc.detail}") from None


async def _form_queries(form: FormData) -> tuple[bytes | None, list[str]]:
    from starlette.datastructures import UploadFile

    unknown = sorted(set(form.keys()) - {"file", "text"})
    if unknown:
        raise HTTPProblem(400, f"unknown form field(s) {', '.join(unknown)} (this endpoint "
                               "takes: file, text)")
    stdin = None
    texts = []
    for key, value in form.multi_items():
        if key == "file":
            if not isinstance(value, UploadFile):
                raise HTTPProblem(400, "form field 'file' must be a file upload")
            stdin = await value.read()
        elif isinstance(value, str):
            texts.append(value)
        else:
            raise HTTPProblem(400, "form field 'text' must be text, not a file")
    if stdin is None and not texts:
        raise HTTPProblem(400, "the form holds no `file` or `text` field")
    return stdin, texts


HASH_PARAMS = (
    Param("hash", description="The BLAKE3 of the file's bytes (hex, or blake3:hex).",
          required=True),
    Param("stream", description="Only this stream."),
)


async def trained_on_hash(request: Request) -> Response:
    """By content hash, for a client that hashed the file itself: the exact-bytes part of
    the answer `trained-on` gives for that file, with the hash as its `file`."""
    import re

    options = query_params(request, HASH_PARAMS)
    digest = options["hash"].removeprefix("blake3:").lower()
    if not re.fullmatch(r"[0-9a-f]{64}", digest):
        raise HTTPProblem(400, "parameter 'hash' must be a BLAKE3 digest: 64 hex digits")

    def question(store: Store) -> Response:
        from lineage.jsonout import json_text
        from lineage.text.trained_on import all_found, trained_on_hashes

        answer = trained_on_hashes(store, [(options["hash"], digest)],
                                   stream=options.get("stream"))
        return json_answer(json_text(answer),
                           exit_code=EXIT_OK if all_found(answer) else EXIT_NO)

    return await answered(request, question, quick=True)


# -- runs, trace, chain, checkpoints ---------------------------------------------------


TRACE_PARAMS = (
    Param("run", description="The run.", required=True),
    Param("step", "integer", "One step.", minimum=0),
    Param("clipped", "boolean", "Every clipped step."),
    Param("skipped", "boolean", "Every skipped step."),
    Param("limit", "integer", "Only the first N steps.", minimum=1),
)


async def trace(request: Request) -> Response:
    options = query_params(request, TRACE_PARAMS)
    clipped, skipped = options.get("clipped", False), options.get("skipped", False)
    cap = limits_of(request).max_trace_steps
    limit = options.get("limit")
    if (clipped or skipped) and (limit is None or limit > cap):
        raise HTTPProblem(400, f"give limit (at most {cap}) with clipped or skipped")

    def question(store: Store) -> Response:
        # the question's JSON object as is (the typed answer prints the same bytes), as
        # `docs` answers: building the typed answer cost as much as the lookup
        from lineage.jsonout import json_text
        from lineage.runs.trace import trace as trace_steps

        return json_answer(json_text(trace_steps(
            store, options["run"], step=options.get("step"), clipped=clipped,
            skipped=skipped, limit=limit)))

    # one step is a lookup: the run's steps and the stream's arrays, kept by the server
    return await answered(request, question, quick=options.get("step") is not None)


async def runs(request: Request) -> Response:
    query_params(request, ())
    return await answered(request, lambda store: json_answer(store.runs().to_json()))


async def run(request: Request) -> Response:
    query_params(request, ())
    name = request.path_params["name"]
    return await answered(request, lambda store: json_answer(store.run(name).to_json()))


CHECKPOINT_PARAMS = (
    Param("nearest", "integer", "The nearest good checkpoint at or before this step.",
          minimum=0),
)


async def checkpoints(request: Request) -> Response:
    options = query_params(request, CHECKPOINT_PARAMS)
    name = request.path_params["name"]
    return await answered(request, lambda store: json_answer(store.checkpoints(
        name, nearest=options.get("nearest")).to_json()))


CHAIN_PARAMS = (
    Param("batches", "boolean", "Also recompute every batch digest (default true)."),
    Param("expect_steps", "integer", "The number of steps the run had.", minimum=0),
    Param("accept_continuity", "boolean", "Exit code 0 for a foreign chain whose "
          "continuity holds."),
)


async def chain_verify(request: Request) -> Response:
    options = query_params(request, CHAIN_PARAMS)
    name = request.path_params["name"]

    def question(store: Store) -> Response:
        report = store.verify_chain(name, batches=options.get("batches", True),
                                    expect_steps=options.get("expect_steps"))
        passed = report["ok"] or (options.get("accept_continuity", False)
                                  and report["verdict"] == "continuity-only")
        return json_answer(report.to_json(), exit_code=EXIT_OK if passed else EXIT_NO)

    return await answered(request, question)


# -- audit -------------------------------------------------------------------------------


async def audit_status(request: Request) -> Response:
    query_params(request, ())
    name = request.path_params["name"]
    return await answered(request, lambda store: json_answer(
        store.audit_status(name).to_json()))


async def audit_step(request: Request) -> Response:
    options = query_params(request, (Param("step", "integer", "The step.", required=True,
                                           minimum=0),))
    name = request.path_params["name"]
    return await answered(request, lambda store: json_answer(
        store.audit_step(name, options["step"]).to_json()))


async def audit_who(request: Request) -> Response:
    query_params(request, ())
    name = request.path_params["name"]
    return await answered(request, lambda store: json_answer(store.audit_who(name).to_json()))


# -- experiments -------------------------------------------------------------------------


async def experiments(request: Request) -> Response:
    from lineage.exp.api import list_experiments

    query_params(request, ())
    return await answered(request, lambda store: json_answer(
        list_experiments(store).to_json()))


async def experiment(request: Request) -> Response:
    from lineage.exp.api import show_experiment

    query_params(request, ())
    exp_id = request.path_params["exp_id"]
    return await answered(request, lambda store: json_answer(
        show_experiment(store, exp_id).to_json()))


DIFF_PARAMS = (
    Param("a", description="First record.", required=True),
    Param("b", description="Second record.", required=True),
    Param("all", "boolean", "Every field, the same ones too."),
)


async def experiment_diff(request: Request) -> Response:
    from lineage.exp.api import diff_experiments

    options = query_params(request, DIFF_PARAMS)

    def question(store: Store) -> Response:
        result = diff_experiments(store, options["a"], options["b"],
                                  all=options.get("all", False))
        return json_answer(result.to_json(), exit_code=EXIT_OK if result["same"] else EXIT_NO)

    return await answered(request, question)


# -- SQL ---------------------------------------------------------------------------------


SQL_PARAMS = (
    Param("q", description="The SQL (GET; a POST sends it as the body)."),
    Param("max_rows", "integer", "Rows at most (no more than the server's limit).", minimum=1),
    Param("timeout", "number", "Seconds at most (no more than the server's limit).",
          minimum=0.001),
)


async def sql(request: Request) -> Response:
    options = query_params(request, SQL_PARAMS)
    limits = limits_of(request)
    if request.method == "POST":
        if "q" in options:
            raise HTTPProblem(400, "send the SQL either as the body or as q, not both")
        text = _utf8(await request.body(), "the SQL")
    elif "q" not in options:
        raise HTTPProblem(400, "parameter 'q' is required (or POST the SQL as the body)")
    else:
        text = options["q"]
    max_rows = min(options.get("max_rows", limits.max_sql_rows), limits.max_sql_rows)
    timeout = min(options.get("timeout", limits.sql_timeout), limits.sql_timeout)
    # Not through `answered`: never from the answer cache (it reads the catalog file),
    # and run in a bounded process of its own, which no question thread waits for.
    processes: SqlProcesses = request.app.state.sql_processes
    answer = await processes.answer(
        request.app.state.store_root, text, timeout=timeout, max_rows=max_rows,
        max_memory=limits.max_sql_memory, wait=limits.sql_timeout)
    headers = {"X-Lineage-Truncated": f"only the first {max_rows} rows"} \
        if answer.truncated else None
    return json_answer(answer.json, headers=headers)


def _utf8(body: bytes, what: str) -> str:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HTTPProblem(400, f"{what} is not UTF-8 (byte {exc.start})") from None


ENDPOINTS = (
    Endpoint("/api/corpora", "GET", "lineage corpus list --json", corpora),
    Endpoint("/api/corpora/{name}", "GET", "lineage corpus show NAME --json", corpus,
             path_params=("name",)),
    Endpoint("/api/streams", "GET", "lineage stream list --json", streams),
    Endpoint("/api/streams/{name}", "GET", "lineage stream show NAME --json", stream,
             path_params=("name",)),
    Endpoint("/api/docs", "GET", "lineage docs --step N --json", docs, DOCS_PARAMS),
    Endpoint("/api/trained-on", "POST", "lineage trained-on - --json", trained_on,
             TRAINED_ON_PARAMS, body="the file's bytes (raw body), or a multipart form "
             "with one `file` and any number of `text` fields"),
    Endpoint("/api/trained-on", "GET", "lineage trained-on FILE --json (exact bytes only)",
             trained_on_hash, HASH_PARAMS),
    Endpoint("/api/trace", "GET", "lineage trace --run R --json", trace, TRACE_PARAMS),
    Endpoint("/api/runs", "GET", "lineage run list --json", runs),
    Endpoint("/api/runs/{name}", "GET", "lineage run show NAME --json", run,
             path_params=("name",)),
    Endpoint("/api/runs/{name}/checkpoints", "GET", "lineage run checkpoints NAME --json",
             checkpoints, CHECKPOINT_PARAMS, path_params=("name",)),
    Endpoint("/api/runs/{name}/chain", "GET", "lineage chain verify NAME --json",
             chain_verify, CHAIN_PARAMS, path_params=("name",)),
    Endpoint("/api/audit/{name}", "GET", "lineage audit status RUN --json", audit_status,
             path_params=("name",)),
    Endpoint("/api/audit/{name}/step", "GET", "lineage audit show RUN --step N --json",
             audit_step, (Param("step", "integer", "The step.", required=True, minimum=0),),
             path_params=("name",)),
    Endpoint("/api/audit/{name}/who", "GET", "lineage audit who RUN --json", audit_who,
             path_params=("name",)),
    Endpoint("/api/experiments", "GET", "lineage exp list --json", experiments),
    Endpoint("/api/experiments/diff", "GET", "lineage exp diff A B --json", experiment_diff,
             DIFF_PARAMS),
    Endpoint("/api/experiments/{exp_id}", "GET", "lineage exp show ID --json", experiment,
             path_params=("exp_id",)),
    Endpoint("/api/sql", "GET", "lineage sql SQL --json", sql, SQL_PARAMS),
    Endpoint("/api/sql", "POST", "lineage sql SQL --json", sql, SQL_PARAMS,
             body="the SQL, UTF-8"),
)


def routes() -> list[Route]:
    return [endpoint.route() for endpoint in ENDPOINTS]
