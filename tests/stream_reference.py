"""A second, deliberately plain implementation of docs/stream-spec.md, row by row in Python.

The fast builder runs in DuckDB; this one follows the spec text line by line so the two
can be compared on any manifest. It also generates the golden vectors in tests/golden/.
"""

from __future__ import annotations

import hashlib
import math
from decimal import Decimal, localcontext
from typing import Any

SPEC = "lineage-stream/1"


def reference_stream(
    documents: list[dict[str, Any]], *, seed: int, seq_len: int, batch: int,
    separator_tokens: int = 1, epochs: dict[str, str] | None = None,
    token_budget: int | None = None,
) -> dict[str, Any]:
    epochs = epochs or {}
    by_source: dict[str, list[dict[str, Any]]] = {}
    for doc in documents:
        by_source.setdefault(doc["source"], []).append(doc)
    occurrences = []
    for source, docs in by_source.items():
        src = hashlib.sha256(source.encode("utf-8")).hexdigest()
        total = sum(d["n_tokens"] for d in docs)
        with localcontext() as ctx:
            ctx.prec = 200
            budget = int(Decimal(epochs.get(source, "1")) * total)
        n_epochs = max(math.ceil(Decimal(epochs.get(source, "1"))), 1)  # e = 0..ceil(E)-1
        sequence = []
        for epoch in range(n_epochs):
            def key(d: dict[str, Any], epoch: int = epoch, src: str = src) -> tuple[str, bytes]:
                message = f"{SPEC}\n{seed}\n{src}\n{epoch}\n{d['doc_id']}"
                return hashlib.sha256(message.encode("utf-8")).hexdigest(), \
                    d["doc_id"].encode("utf-8")
            sequence += [(epoch, d) for d in sorted(docs, key=key)]
        kept, running = [], 0
        for epoch, doc in sequence:
            if running + doc["n_tokens"] > budget:
                break
            kept.append((epoch, doc, running))
            running += doc["n_tokens"]
        s_total = running
        for q, (epoch, doc, c_before) in enumerate(kept):
            m = (2 * c_before + doc["n_tokens"]) * 2**64 // max(2 * s_total, 1)
            occurrences.append(((m, src, q), epoch, doc))
    occurrences.sort(key=lambda item: item[0])
    packed = sum(doc["n_tokens"] + separator_tokens for _, _, doc in occurrences)
    consumed = min(packed, token_budget) if token_budget else packed
    steps = consumed // seq_len // batch
    tokens = steps * batch * seq_len
    rows, position = [], 0
    for ordinal, (_, epoch, doc) in enumerate(occurrences):
        if position >= tokens:
            break
        rows.append({"ordinal": ordinal, "source": doc["source"], "doc_id": doc["doc_id"],
                     "epoch": epoch, "stream_start": position,
                     "stream_end": position + doc["n_tokens"]})
        position += doc["n_tokens"] + separator_tokens
    # What the end of the stream leaves out of the packed corpus.
    cut = {"tokens": packed - tokens, "documents": len(occurrences) - len(rows),
           "short": int(bool(rows) and rows[-1]["stream_end"] > tokens)}
    return {"steps": steps, "windows": steps * batch, "tokens": tokens, "occurrences": rows,
            "cut": cut}


def occurrences_digest(rows: list[dict[str, Any]]) -> str:
    from lineage.corpora.digest import lines_digest

    columns = ("ordinal", "source", "doc_id", "epoch", "stream_start", "stream_end")
    return lines_digest("lineage-occurrences/1", [[r[c] for c in columns] for r in rows])


def reference_imported(documents: list[dict[str, Any]], seq_len: int,
                       segments: list[list[Any]]) -> list[dict[str, Any]]:
    """docs/importers.md "What every importer stores", row by row: segments
    `[window, slot, doc_id, doc_offset, n_tokens]` placed at window · seq_len + slot, a
    segment that continues the occurrence before it (same document from its next token,
    at the next position) joined to it, each occurrence's epoch the document's tokens
    in earlier segments over its length, rounded down."""
    length = {d["doc_id"]: d["n_tokens"] for d in documents}
    source = {d["doc_id"]: d["source"] for d in documents}
    seen: dict[str, int] = {}
    rows: list[dict[str, Any]] = []
    for window, slot, doc_id, doc_offset, n_tokens in sorted(segments, key=lambda s: s[:2]):
        start = window * seq_len + slot
        last = rows[-1] if rows else None
        if last and last["doc_id"] == doc_id and last["stream_end"] == start and \
                last["doc_offset"] + last["stream_end"] - last["stream_start"] == doc_offset:
            last["stream_end"] += n_tokens
        else:
            rows.append({"ordinal": len(rows), "source": source[doc_id], "doc_id": doc_id,
                         "epoch": seen.get(doc_id, 0) // length[doc_id],
                         "stream_start": start, "stream_end": start + n_tokens,
                         "doc_offset": doc_offset})
        seen[doc_id] = seen.get(doc_id, 0) + n_tokens
    return rows


def occurrences_digest_2(rows: list[dict[str, Any]]) -> str:
    """lineage-occurrences/2: /1's columns and doc_offset (docs/stream-spec.md §5)."""
    from lineage.corpora.digest import lines_digest

    columns = ("ordinal", "source", "doc_id", "epoch", "stream_start", "stream_end",
               "doc_offset")
    return lines_digest("lineage-occurrences/2", [[r[c] for c in columns] for r in rows])
