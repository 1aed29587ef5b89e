"""Questions about recorded corpora: which exist, and what each holds."""

from __future__ import annotations

from typing import Any

from lineage.errors import UnknownObjectError
from lineage.store.base import BaseStore


def list_corpora(store: BaseStore) -> list[dict[str, Any]]:
    """Every corpus, by name, with its totals and manifest hash."""
    with store.reader(views=False) as con:  # catalog tables only: no Parquet views
        rows = con.execute(
            "SELECT name, manifest_hash, documents, tokens, bytes, dropped_empty, tokenizer, "
            "created_at FROM corpora ORDER BY name"
        ).fetchall()
    keys = ("name", "manifest_hash", "documents", "tokens", "bytes", "dropped_empty",
            "tokenizer", "created_at")
    return [_jsonable(dict(zip(keys, row, strict=True))) for row in rows]


def get_corpus(store: BaseStore, name: str) -> dict[str, Any]:
    """One corpus with its sources and token shares; UnknownObjectError when absent."""
    with store.reader(views=False) as con:  # catalog tables only: no Parquet views
        row = con.execute(
            "SELECT name, manifest_hash, manifest_spec, documents, tokens, bytes, dropped_empty, "
            "tokenizer, created_at FROM corpora WHERE name = ?",
            [name],
        ).fetchone()
        if row is None:
            known = [r[0] for r in con.execute("SELECT name FROM corpora ORDER BY name").fetchall()]
            hint = f"known: {', '.join(known)}" if known else "the store has no corpora yet"
            raise UnknownObjectError(f"no corpus named {name!r} ({hint})")
        sources = con.execute(
            "SELECT source, documents, tokens, bytes, licenses FROM corpus_sources "
            "WHERE corpus = ? ORDER BY source",
            [name],
        ).fetchall()
        cursor = con.execute("SELECT * EXCLUDE (corpus) FROM text_indexes WHERE corpus = ?",
                             [name])
        index_row = cursor.fetchone()
        index_keys = [d[0] for d in cursor.description]
    keys = ("name", "manifest_hash", "manifest_spec", "documents", "tokens", "bytes",
            "dropped_empty", "tokenizer", "created_at")
    result = _jsonable(dict(zip(keys, row, strict=True)))
    total = result["tokens"] or 0
    result["sources"] = [
        {
            "source": source,
            "documents": docs,
            "tokens": tokens,
            "bytes": size,
            "share": round(tokens / total, 6) if total else 0.0,
            "licenses": list(licenses),
        }
        for source, docs, tokens, size, licenses in sources
    ]
    result["licenses"] = sorted({lic for s in result["sources"] for lic in s["licenses"]})
    # The text index (docs/text-spec.md), or None when the corpus was ingested without one.
    result["text_index"] = (dict(zip(index_keys, index_row, strict=True))
                            if index_row is not None else None)
    return result


def _jsonable(row: dict[str, Any]) -> dict[str, Any]:
    created = row.get("created_at")
    if created is not None and hasattr(created, "isoformat"):
        row["created_at"] = created.isoformat(timespec="seconds") + "Z"
    return row
