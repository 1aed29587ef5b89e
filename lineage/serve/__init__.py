"""`lineage serve`: the store's questions over HTTP, and a web explorer (docs/serve.md).

`app` builds the ASGI application, `stores` hands each request an open store, `api` holds
the JSON endpoints (each returns exactly the command line's `--json` answer), and `web`
the server-rendered pages of the explorer.

A front end beside the command line: nothing in the core imports it.
May import: lineage.api, lineage.exports, lineage.audit, lineage.exp, lineage.diligence,
lineage.text, lineage.runs, lineage.stream, lineage.corpora, lineage.formats,
lineage.store, lineage.errors, lineage.version, lineage.answer, lineage.jsonout.
"""
