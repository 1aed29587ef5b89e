"""Questions about recorded corpora: which exist, and what each holds."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from lineage.answer import AnswerList
from lineage.corpora.answers import Corpus, CorpusSource, CorpusSummary, TextIndex
from lineage.errors import UnknownObjectError
from lineage.store.base import BaseStore

# The text index's columns are the answer's fields, in its order.
TEXT_INDEX_COLUMNS = tuple(f.name for f in dataclasses.fields(TextIndex))


def list_corpora(store: BaseStore) -> AnswerList[CorpusSummary]:
    """Every corpus, by name, with its totals and manifest hash."""
    with store.reader(views=False) as con:  # catalog tables only: no Parquet views
        rows = con.execute(
            "SELECT name, manifest_hash, documents, tokens, bytes, dropped_empty, tokenizer, "
            "created_at FROM corpora ORDER BY name"
        ).fetchall()
    return AnswerList(CorpusSummary, (
        CorpusSummary(name=name, manifest_hash=manifest_hash, documents=documents,
                      tokens=tokens, bytes=size, dropped_empty=dropped_empty,
                      tokenizer=tokenizer, created_at=_created_text(created_at))
        for name, manifest_hash, documents, tokens, size, dropped_empty, tokenizer, created_at
        in rows))


def get_corpus(store: BaseStore, name: str) -> Corpus:
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
        index_row = con.execute(
            f"SELECT {', '.join(TEXT_INDEX_COLUMNS)} FROM text_indexes WHERE corpus = ?",
            [name]).fetchone()
    name, manifest_hash, manifest_spec, documents, tokens, size, dropped_empty, tokenizer, \
        created_at = row
    shares = _sources(sources, tokens)
    return Corpus(
        name=name, manifest_hash=manifest_hash, manifest_spec=manifest_spec,
        documents=documents, tokens=tokens, bytes=size, dropped_empty=dropped_empty,
        tokenizer=tokenizer, created_at=_created_text(created_at), sources=shares,
        licenses=tuple(sorted({lic for s in shares for lic in s.licenses})),
        # The text index (docs/text-spec.md), or None when ingested without one.
        text_index=(None if index_row is None
                    else TextIndex(**dict(zip(TEXT_INDEX_COLUMNS, index_row, strict=True)))),
    )


def _sources(rows: list[tuple[Any, ...]], total: int) -> tuple[CorpusSource, ...]:
    """Each source's counts, with its share of the corpus's `total` tokens."""
    return tuple(
        CorpusSource(source=source, documents=docs, tokens=tokens, bytes=size,
                     share=round(tokens / total, 6) if total else 0.0,
                     licenses=tuple(licenses))
        for source, docs, tokens, size, licenses in rows)


def _created_text(created: datetime) -> str:
    """A catalog timestamp (UTC) as the answers print it: ISO 8601, whole seconds, `Z`."""
    return created.isoformat(timespec="seconds") + "Z"
