"""Near-duplicate matching: which documents are edited copies of this text?

A query the fingerprints leave unmatched (no passage of 24 unbroken words) may still be
a copy of a document with words replaced, deleted or inserted throughout. Its
`lineage-near/1` band keys (lineage/text/minhash.py) are looked up in `near_bands`: the
documents sharing at least one key are candidates, the most keys first. Each candidate's
text is read as the other text lookups read it (checked against its content hash) and
aligned with the query word by word (lineage/text/align.py); the aligned share of the
query's words is its similarity. A candidate at `min_similarity` or above is a
`near-duplicate` match, with the regions where the two texts run side by side.
"""

from __future__ import annotations

from typing import Any

from lineage.corpora.doc_text import read_checked
from lineage.errors import LineageError
from lineage.store.base import BaseStore
from lineage.store.part_select import part_files
from lineage.text.align import MOVED_WORDS, Region, align, aligned_words, regions
from lineage.text.identity import TEXT_SPEC, LocatedWords, located_words
from lineage.text.match import DocInfo, DocText, document_rows, document_texts
from lineage.text.minhash import (
    BANDS,
    NEAR_SPEC,
    ROWS,
    SHINGLE_WORDS,
    band_keys,
    signature,
    signature_batch,
)

MAX_WORDS = 200_000  # longer queries, and longer candidates, are not aligned: a book's size
_VECTOR_WORDS = 20_000  # longer queries are signed by the vectorized path


def has_near_index(con: Any, store: BaseStore) -> bool:
    """Whether any corpus has band keys (corpora ingested before the layer have none):
    one count in the catalog, read once per catalog state where the store keeps one."""
    from lineage.store.memo import remembered

    return bool(remembered(store, ("near index",), lambda: con.execute(
        "SELECT count(*) FROM parquet_files WHERE table_name = 'near_bands'").fetchall()[0][0]))


def near_matches(
    con: Any, store: BaseStore, located: LocatedWords, *,
    indexes: dict[str, dict[str, Any]], limit: int, min_similarity: float,
) -> tuple[float | None, list[dict[str, Any]]]:
    """(the best candidate's similarity, the matches at `min_similarity` or above), the
    most similar first; (None, []) for a query too long to align (MAX_WORDS)."""
    if len(located.words) > MAX_WORDS:
        return None, []
    keys = query_band_keys(located.words)
    if not keys:
        return 0.0, []
    candidates = _candidates(con, store, keys, limit)
    if not candidates:
        return 0.0, []
    chosen = [(corpus, doc) for corpus, doc, _ in candidates]
    documents = document_rows(con, store, chosen)
    texts = document_texts(con, chosen, documents)
    best, matches = 0.0, []
    for corpus, doc, shared in candidates:
        info = documents.get((corpus, doc))
        data = texts.get((corpus, doc))
        if info is None or info.n_words > MAX_WORDS:  # None: only a damaged store
            continue
        doc_text = _read(con, info, data)
        if doc_text is None:  # cannot be confirmed: not reported
            continue
        blocks = align(located.words, doc_text.words.words)
        similarity = round(aligned_words(blocks) / len(located.words), 4)
        best = max(best, similarity)
        if similarity >= min_similarity:
            matches.append(_entry(corpus, info, indexes[corpus], similarity,
                                  aligned_words(blocks), shared, regions(blocks), located,
                                  doc_text))
    matches.sort(key=lambda m: (-m["similarity"], m["corpus"], m["doc_id"]))
    return best, matches


def query_band_keys(words: list[str]) -> list[int]:
    """The query's band keys (none without words), by the plain signature for a page
    and the vectorized one for a long text (the same keys)."""
    if len(words) < _VECTOR_WORDS:
        sig = signature(words)
        return [] if sig is None else band_keys(sig)
    found = signature_batch([" ".join(words)], [len(words)])
    return [int(k) for k in found.band_keys[0]]


def parameters(min_similarity: float) -> dict[str, Any]:
    """The near-duplicate parameters every near answer cites."""
    return {"spec": NEAR_SPEC, "shingle_words": SHINGLE_WORDS, "bands": BANDS, "rows": ROWS,
            "min_similarity": min_similarity, "moved_words": MOVED_WORDS}


def _candidates(con: Any, store: BaseStore, keys: list[int],
                limit: int) -> list[tuple[str, int, list[int]]]:
    """(corpus, doc, the band keys it shares) of the `limit` documents sharing the most
    keys with the query, then the rarest (a key's weight is one over the documents that
    hold it), then by corpus and doc.

    A document sharing a single key that more than `limit` documents hold is left out:
    a band of three common shingles' minima (a few common word pairs) is shared by many
    unrelated documents, and choosing `limit` of them by their numbers would decide
    nothing but cost a text read and an alignment each. A true copy sharing one key
    shares a rare one (its three minima together are its own).

    Integers only, formatted by us: a literal list lets DuckDB read only the row groups
    whose min/max admit a key, the ones part_files checked. The ranking happens in SQL,
    so a key shared by millions of documents never reaches Python."""
    probes = sorted(set(keys))
    files = part_files(con, store, "near_bands", any_of=("band_key", probes))
    if not files:
        return []
    values = ", ".join(str(k) for k in probes)
    rows = con.execute(
        f"""WITH hits AS MATERIALIZED (
                SELECT corpus, band_key, doc FROM read_parquet(?)
                WHERE band_key IN ({values})),
            holders AS (SELECT band_key, count(*) AS held FROM hits GROUP BY band_key)
            SELECT corpus, doc, list(band_key ORDER BY band_key) AS shared
            FROM hits JOIN holders USING (band_key)
            GROUP BY corpus, doc
            HAVING count(*) > 1 OR min(held) <= ?
            ORDER BY count(*) DESC, sum(1.0 / held) DESC, corpus, doc LIMIT ?""",
        [files, limit, limit]).fetchall()
    return [(corpus, int(doc), [int(k) for k in shared]) for corpus, doc, shared in rows]


def _read(con: Any, info: DocInfo, data: bytes | None) -> DocText | None:
    """The document's text (`data`, or read here alone), None when it cannot be read
    or no longer hashes to its content hash."""
    try:
        if data is None:
            data = read_checked(con, info.doc_id, info.content_hash, info.origin,
                                info.record, info.byte_offset)
        text = data.decode("utf-8")
    except (LineageError, UnicodeDecodeError):
        return None
    return DocText(text, located_words(text))


def _entry(corpus: str, info: DocInfo, index: dict[str, Any], similarity: float,
           aligned: int, shared: list[int], found: list[Region], located: LocatedWords,
           doc: DocText) -> dict[str, Any]:
    return {
        "corpus": corpus, "source": info.source, "doc_id": info.doc_id,
        "content_hash": info.content_hash, "text_hash": info.text_hash,
        "match": "near", "similarity": similarity, "aligned_words": aligned,
        "band_keys": shared,
        "spans": [{"query_words": list(r.query), "query_chars": list(located.char_span(*r.query)),
                   "doc_words": list(r.doc), "doc_chars": list(doc.char_span(*r.doc)),
                   "doc_bytes": list(doc.byte_span(*r.doc)), "aligned": r.aligned,
                   "windows": [], "steps": []} for r in found],
        "index": {"near_spec": NEAR_SPEC, "text_spec": TEXT_SPEC,
                  "unicode_version": index.get("unicode_version")},
    }
