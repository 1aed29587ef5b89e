"""`lineage serve`: the store's questions over HTTP, and a web explorer (docs/serve.md).

`app` builds the ASGI application and guards every request, `stores` hands each request
the store as a per-process copy of the catalog (refreshed after commits), `api` holds the
JSON endpoints (each returns exactly the command line's `--json` answer), `answering`
runs their questions (parameters, a worker thread, answers kept per catalog state in
`cache`), `errors` turns every error into JSON with the command line's exit code,
`limits` bounds what a request may ask, `sql_process` runs SQL in bounded processes of
its own, `tcp` and `workers` are the connections' protocol and processes, `openapi`
describes the routes, and `web`
holds the server-rendered pages of the explorer.

A front end beside the command line: nothing in the core imports it.
May import: lineage.api, lineage.exports, lineage.audit, lineage.exp, lineage.diligence,
lineage.text, lineage.runs, lineage.stream, lineage.corpora, lineage.formats,
lineage.store, lineage.errors, lineage.version, lineage.answer, lineage.jsonout.
"""
