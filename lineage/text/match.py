"""Partial text matching: which documents hold this text, or passages of it?

A query text is normalized (`lineage-text/1`) and looked up twice: by its normalized-text
hash (a re-wrapped or re-encoded copy of a whole document: `text-match`) and by its
winnowed fingerprints (`lineage-fingerprint/1`: passages inside larger documents). The
candidate documents, ranked by matched fingerprints, get spans: where the shared
passages lie in the query (words and characters) and in the document. When the
document's text can be read again (and still hashes to its content hash), each span is
the exact run of shared words; otherwise it is the run of matched fingerprints, a lower
bound. Containment is the share of the query's words that the spans cover.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import blake3

from lineage.corpora.doc_text import StoredDocument, read_all_checked, read_checked
from lineage.errors import LineageError, StoreError, UsageError
from lineage.store.base import BaseStore
from lineage.store.budget import OverBudget, lookup_budget
from lineage.store.part_read import lookup_rows
from lineage.store.part_select import part_files
from lineage.text.fingerprint import FINGERPRINT_SPEC, GUARANTEE_WORDS, K, W
from lineage.text.fingerprint import gram_hashes_many as query_gram_hashes
from lineage.text.fingerprint import winnow_many as winnow
from lineage.text.identity import TEXT_SPEC, UNICODE_VERSION, LocatedWords, located_words
from lineage.text.verdicts import PARTIAL, TEXT_MATCH

_MAX_REPEATS = 64  # query positions kept per repeated gram hash, beyond the winnowed ones
_MAX_SELECTED_REPEATS = 1024  # ... and winnowed ones (only a refrain repeats this often)
_MAX_PAIRS = 100_000  # (query, document) gram pairs examined per candidate document
_RANKED_HERE = 4_096  # a text's fingerprint hits ranked in Python; more, in DuckDB
_COPIED_ROWS = 65_536  # rows read from lookup copies for a text's lookup; more, by DuckDB
_MAX_ALIGNMENTS = 256  # alignments grown into runs per candidate, best supported first


@dataclass
class _Candidate:
    corpus: str
    doc: int
    pairs: list[tuple[int, int]] = field(default_factory=list)  # (query, doc) gram positions
    hashes: set[int] = field(default_factory=set)
    same_text: bool = False


@dataclass(frozen=True)
class _Span:
    query: tuple[int, int]  # words [start, end) of the query
    doc: tuple[int, int]  # words [start, end) of the document
    verified: bool  # compared word by word against the document's text
    whole: bool = False  # the whole document (same normalized text)


def text_indexes(con: Any) -> dict[str, dict[str, Any]]:
    """The text index of every corpus that has one, by corpus."""
    cursor = con.execute("SELECT * FROM text_indexes ORDER BY corpus")
    names = [d[0] for d in cursor.description]
    return {row[0]: dict(zip(names, row, strict=True)) for row in cursor.fetchall()}


def check_unicode_version(indexes: dict[str, dict[str, Any]], *, building: bool) -> None:
    """Refuse to mix Unicode versions: an index normalized under one version is only
    queried, and joined by new indexes, under the same one. An index from before the
    version was recorded (NULL) is taken to be of the running version."""
    for corpus, index in indexes.items():
        version = index.get("unicode_version")
        if version is None or version == UNICODE_VERSION:
            continue
        doing = ("build another text index in this store" if building
                 else "match text against it")
        hint = ("; or ingest with --no-fingerprints" if building else "")
        raise UsageError(
            f"corpus {corpus!r} was text-indexed under Unicode {version} and this Python "
            f"normalizes under Unicode {UNICODE_VERSION}: to {doing}, run lineage on a "
            f"Python whose unicodedata.unidata_version is {version}{hint}")


def match_text(
    con: Any, store: BaseStore, text: str, *, indexes: dict[str, dict[str, Any]],
    min_containment: float, limit: int, located: LocatedWords | None = None,
) -> dict[str, Any]:
    """The text verdict of one query: text-match, partial, or not-found, with matches
    (`located`: the text's words, when the caller has them already)."""
    for corpus, index in indexes.items():
        if (index["text_spec"], index["fingerprint_spec"], index["k"], index["w"]) != (
                TEXT_SPEC, FINGERPRINT_SPEC, K, W):
            raise StoreError(f"corpus {corpus!r} was indexed under {index['text_spec']} / "
                             f"{index['fingerprint_spec']} (k={index['k']}, w={index['w']}); "
                             f"this version reads {TEXT_SPEC} / {FINGERPRINT_SPEC} only")
    check_unicode_version(indexes, building=False)
    located = located_words(text) if located is None else located
    words = located.words
    normal = " ".join(words)
    answer: dict[str, Any] = {
        "text_hash": blake3.blake3(normal.encode("utf-8")).hexdigest() if words else None,
        "words": len(words), "containment": 0.0, "verdict": "not-found", "matches": [],
    }
    if not words or not indexes:
        return answer
    candidates = _same_text(con, store, answer["text_hash"])
    _add_fingerprint_hits(con, store, words, limit, candidates)
    chosen = _choose(candidates, limit)
    documents = _documents(con, store, chosen)
    texts = _texts_at_once(con, chosen, documents)
    matches: list[dict[str, Any]] = []
    covered: list[tuple[int, int]] = []
    for candidate in chosen:
        info = documents.get((candidate.corpus, candidate.doc))
        if info is None:  # a fingerprint naming no document: only a damaged store does
            continue
        spans, note, doc_words = _spans(con, candidate, info, words,
                                        texts.get((candidate.corpus, candidate.doc)))
        spans = _widest_first(spans)
        if not spans:
            continue
        covered.extend(s.query for s in spans)
        matches.append(_match_entry(candidate, info, indexes[candidate.corpus], spans,
                                    located, doc_words, note))
    matches.sort(key=lambda m: (m["match"] != "text", -m["containment"], -m["fingerprints"],
                                m["corpus"], m["doc_id"]))
    answer["matches"] = matches
    answer["containment"] = _share(covered, len(words))
    if any(m["match"] == "text" for m in matches):
        answer["verdict"] = TEXT_MATCH
    elif matches and answer["containment"] >= min_containment:
        answer["verdict"] = PARTIAL
    return answer


def _same_text(con: Any, store: BaseStore, digest: str) -> dict[tuple[str, int], _Candidate]:
    """The documents whose normalized text hashes to `digest`, read from the checked row
    groups of `text_hashes` that can hold it (no query engine: lineage/store/part_read.py)."""
    rows = lookup_rows(con, store, "text_hashes", None, ["corpus", "doc"],
                       equal=("text_hash", digest))
    return {(corpus, doc): _Candidate(corpus, doc, same_text=True)
            for corpus, doc in sorted(rows)}


def _add_fingerprint_hits(con: Any, store: BaseStore, words: list[str], limit: int,
                          candidates: dict[tuple[str, int], _Candidate]) -> None:
    """The `limit` documents sharing the most fingerprints with the query, with their
    (query, document) gram pairs."""
    grams = query_gram_hashes(words)
    selected = winnow(grams)
    # Winnowed probes keep the guarantee (a shared window picks the same gram on both
    # sides); a short query probes every gram, to catch shorter passages when it can.
    probes = sorted(set(grams)) if len(grams) <= 2 * W else sorted({h for _, h in selected})
    if not probes:
        return
    rows = _best_fingerprint_rows(con, store, probes, limit)
    where = _query_positions(grams, selected, set(probes))
    for corpus, h, doc, position in rows:
        candidate = candidates.setdefault((corpus, doc), _Candidate(corpus, doc))
        candidate.hashes.add(h)
        candidate.pairs.extend((q, position) for q in where[h])


def _best_fingerprint_rows(con: Any, store: BaseStore, probes: list[int],
                           limit: int) -> list[tuple[str, int, int, int]]:
    """(corpus, fingerprint, doc, position) of the `limit` documents sharing the most
    probed fingerprints with the query, at most `_MAX_REPEATS` positions per document and
    fingerprint, in (corpus, doc, fingerprint, position) order.

    A server's lookup copies give the hits at once; without them, a plain query does.
    Integers only, formatted by us: a literal list lets DuckDB skip row groups by their
    min/max, which a joined or unnested parameter list does not. A query's few thousand
    rows are ranked here (planning the ranking query cost more than the rest of a text
    question: 3.4 of 7.4 ms); past that, ranking happens in SQL, so a fingerprint shared
    by millions of documents never reaches Python."""
    columns = ["corpus", "fingerprint", "doc", "position"]
    hits = _copied_rows(con, store, "fingerprints", None, columns, ("fingerprint", probes))
    files = None
    if hits is None:
        files = part_files(con, store, "fingerprints", any_of=("fingerprint", probes))
        values = ", ".join(str(h) for h in probes)
        hits = con.execute(f"SELECT corpus, fingerprint, doc, position FROM read_parquet(?) "
                           f"WHERE fingerprint IN ({values}) LIMIT {_RANKED_HERE + 1}",
                           [files]).fetchall() if files else []
    if len(hits) <= _RANKED_HERE:
        return ranked_hits(hits, limit)
    if files is None:  # many hits in the copies: the query ranks them
        files = part_files(con, store, "fingerprints", any_of=("fingerprint", probes))
    return ranked_in_sql(con, files, probes, limit)


def _copied_rows(con: Any, store: BaseStore, table: str, owner: str | None,
                 columns: list[str], any_of: tuple[str, Sequence[Any]],
                 ) -> list[tuple[Any, ...]] | None:
    """The rows of `table` holding one of the key values, read from a server's lookup
    copies (lineage/store/lookup_copy.py) without a query; None where they cannot be
    (no copies: the command line; a part not copied; more than `_COPIED_ROWS` rows to
    read), for a query to find."""
    if store.lookup_copies is None:
        return None
    try:
        with lookup_budget(_COPIED_ROWS):
            return lookup_rows(con, store, table, owner, columns, any_of=any_of)
    except OverBudget:
        return None


def ranked_in_sql(con: Any, files: list[str], probes: list[int],
                  limit: int) -> list[tuple[str, int, int, int]]:
    """`_best_fingerprint_rows` ranked by DuckDB, for hits too many to rank in Python."""
    values = ", ".join(str(h) for h in probes)
    rows: list[tuple[str, int, int, int]] = con.execute(
        f"""WITH hits AS MATERIALIZED (
                SELECT corpus, fingerprint, doc, position FROM read_parquet(?)
                WHERE fingerprint IN ({values})),
            best AS (
                SELECT corpus, doc FROM hits GROUP BY corpus, doc
                ORDER BY count(DISTINCT fingerprint) DESC, corpus, doc LIMIT ?)
            SELECT corpus, fingerprint, doc, position FROM (
                SELECT h.*, row_number() OVER (PARTITION BY h.corpus, h.doc, h.fingerprint
                                               ORDER BY h.position) AS repeat
                FROM hits h SEMI JOIN best USING (corpus, doc))
            WHERE repeat <= ? ORDER BY corpus, doc, fingerprint, position""",
        [files, limit, _MAX_REPEATS]).fetchall()
    return rows


def ranked_hits(hits: Sequence[tuple[str, int, int, int]],
                limit: int) -> list[tuple[str, int, int, int]]:
    """The ranking query's answer for `hits` (corpus, fingerprint, doc, position), worked
    out here: the `limit` documents with the most distinct fingerprints (ties by corpus,
    then doc), the first `_MAX_REPEATS` positions of each of their fingerprints. A test
    holds the two to the same rows."""
    shared: dict[tuple[str, int], set[int]] = {}
    for corpus, fingerprint, doc, _ in hits:
        shared.setdefault((corpus, doc), set()).add(fingerprint)
    best = set(sorted(shared, key=lambda key: (-len(shared[key]), key))[:limit])
    found: list[tuple[str, int, int, int]] = []
    repeats: dict[tuple[str, int, int], int] = {}
    for corpus, doc, fingerprint, position in sorted(
            (corpus, doc, fingerprint, position) for corpus, fingerprint, doc, position in hits
            if (corpus, doc) in best):
        seen = repeats[corpus, doc, fingerprint] = repeats.get((corpus, doc, fingerprint), 0) + 1
        if seen <= _MAX_REPEATS:
            found.append((corpus, fingerprint, doc, position))
    return found


def _query_positions(grams: list[int], selected: list[tuple[int, int]],
                     probes: set[int]) -> dict[int, list[int]]:
    """Query positions of each probed hash: the winnowed ones always (the guarantee
    rests on them), other repeats up to a cap (a refrain repeated 10,000 times would
    otherwise pair every repeat with every document position)."""
    where: dict[int, list[int]] = {}
    for position, h in selected:
        found = where.setdefault(h, [])
        if len(found) < _MAX_SELECTED_REPEATS:
            found.append(position)
    for position, h in enumerate(grams):
        if h in probes:
            found = where.setdefault(h, [])
            if len(found) < _MAX_REPEATS and position not in found:
                found.append(position)
    return {h: sorted(found) for h, found in where.items()}


def _choose(candidates: dict[tuple[str, int], _Candidate], limit: int) -> list[_Candidate]:
    """Same-text documents, then the others by matched fingerprints, `limit` in all. A
    single shared fingerprint can be a whole guaranteed passage: spans decide, not counts."""
    ranked = sorted(candidates.values(),
                    key=lambda c: (not c.same_text, -len(c.hashes), c.corpus, c.doc))
    return ranked[:max(limit, sum(c.same_text for c in ranked))]


class DocInfo(NamedTuple):
    """A candidate's row of `text_documents`."""

    doc: int
    doc_id: str
    source: str
    content_hash: str
    text_hash: str
    n_words: int
    origin: str | None
    record: int | None
    byte_offset: int | None
    n_bytes: int


def _documents(con: Any, store: BaseStore,
               chosen: list[_Candidate]) -> dict[tuple[str, int], DocInfo]:
    return document_rows(con, store, [(c.corpus, c.doc) for c in chosen])


def document_rows(con: Any, store: BaseStore,
                  keys: Sequence[tuple[str, int]]) -> dict[tuple[str, int], DocInfo]:
    """The `text_documents` rows of these (corpus, doc) keys, read from the row groups
    that hold them."""
    by_corpus: dict[str, list[int]] = {}
    for corpus, doc in keys:
        by_corpus.setdefault(corpus, []).append(doc)
    found: dict[tuple[str, int], DocInfo] = {}
    for corpus, docs in sorted(by_corpus.items()):
        rows = _copied_rows(con, store, "text_documents", corpus, list(DocInfo._fields),
                            ("doc", sorted(docs)))
        if rows is None:
            files = part_files(con, store, "text_documents", corpus, any_of=("doc", docs))
            # Integers formatted by us: a literal list lets DuckDB skip row groups by
            # min/max, so it reads only the row groups part_files checked
            values = ", ".join(str(int(doc)) for doc in docs)
            rows = con.execute(
                f"SELECT {', '.join(DocInfo._fields)} FROM read_parquet(?) "
                f"WHERE doc IN ({values})", [files]).fetchall()
        for row in rows:
            found[(corpus, row[0])] = DocInfo(*row)
    return found


@dataclass(frozen=True)
class DocText:
    """A document's text and where its normalized words lie in it."""

    text: str
    words: LocatedWords

    def char_span(self, start: int, end: int) -> tuple[int, int]:
        return self.words.char_span(start, end)

    def byte_span(self, start: int, end: int) -> tuple[int, int]:
        """UTF-8 byte offsets of words [start, end): token offsets for byte tokenizers."""
        first, last = self.char_span(start, end)
        head = len(self.text[:first].encode("utf-8"))
        return head, head + len(self.text[first:last].encode("utf-8"))


def _texts_at_once(con: Any, chosen: list[_Candidate],
                   documents: dict[tuple[str, int], DocInfo]) -> dict[tuple[str, int], bytes]:
    """The texts `_spans` will check (see `document_texts`)."""
    return document_texts(con, [(c.corpus, c.doc) for c in chosen if not c.same_text],
                          documents)


def document_texts(con: Any, keys: Sequence[tuple[str, int]],
                   documents: dict[tuple[str, int], DocInfo]) -> dict[tuple[str, int], bytes]:
    """The texts of these (corpus, doc) keys, each checked against its content hash,
    read file by file (a compressed shard is scanned once for all of them, not once for
    each); none if one of them cannot be read: each is then read alone, so that a note
    falls on the document that failed."""
    held: dict[str, list[tuple[int, StoredDocument]]] = {}
    for corpus, doc in keys:
        info = documents.get((corpus, doc))
        if info is not None and info.origin is not None:
            held.setdefault(corpus, []).append((doc, StoredDocument(
                info.doc_id, info.content_hash, info.origin, info.record, info.byte_offset)))
    found: dict[tuple[str, int], bytes] = {}
    try:
        for corpus, stored in held.items():  # by corpus: doc_ids are a corpus's own
            texts = read_all_checked(con, [document for _, document in stored])
            found.update(((corpus, doc), texts[document.doc_id]) for doc, document in stored)
    except LineageError:
        return {}
    return found


def _spans(
    con: Any, candidate: _Candidate, info: DocInfo, words: list[str],
    data: bytes | None = None,
) -> tuple[list[_Span], str | None, DocText | None]:
    """The shared passages, checked against the document's text (`data`, or read here)
    when it can be read."""
    n_words = int(info.n_words)
    if candidate.same_text:
        return [_Span((0, len(words)), (0, n_words), True, whole=True)], None, None
    try:
        if data is None:
            data = read_checked(con, info.doc_id, info.content_hash, info.origin,
                                info.record, info.byte_offset)
        text = data.decode("utf-8")
    except (LineageError, UnicodeDecodeError) as exc:
        note = f"document text unavailable ({exc}); spans from fingerprints only"
        return _fingerprint_spans(candidate.pairs, len(words)), note, None
    doc = DocText(text, located_words(text))
    return _text_spans(candidate.pairs, words, doc.words.words), None, doc


def _text_spans(pairs: Sequence[tuple[int, int]], words: list[str],
                doc_words: list[str]) -> list[_Span]:
    """Maximal runs of equal words around each matched gram, at least G words long.

    Pairs are swept once per alignment (document minus query position), in query order;
    a pair inside a run already grown on its alignment adds nothing. At most
    `_MAX_PAIRS` pairs are examined, so a document repeating one phrase thousands of
    times costs a bounded amount."""
    shortest = min(GUARANTEE_WORDS, len(words))
    spans = []
    for shift, positions in _alignments(pairs):
        reach = -1
        for q in positions:
            if q < reach or words[q:q + K] != doc_words[q + shift:q + shift + K]:
                continue  # inside the last run, or two grams with one 64-bit hash
            start, end = q, q + K
            while (start > 0 and start + shift > 0
                   and words[start - 1] == doc_words[start - 1 + shift]):
                start -= 1
            while (end < len(words) and end + shift < len(doc_words)
                   and words[end] == doc_words[end + shift]):
                end += 1
            reach = end
            if end - start >= shortest:
                spans.append(_Span((start, end), (start + shift, end + shift), True))
    return sorted(spans, key=lambda s: (s.query, s.doc))


def _fingerprint_spans(pairs: Sequence[tuple[int, int]], n_query: int) -> list[_Span]:
    """Chains of matched grams with one alignment, at most W apart (winnowing keeps one
    gram in every W, so a shared run leaves no wider gap): lower bounds of the shared
    runs, kept whatever their length, since without the text nothing tells a 24-word
    passage holding one fingerprint from a stock phrase."""
    spans = []
    for shift, positions in _alignments(pairs):
        chain = [positions[0]]
        for q in [*positions[1:], None]:
            if q is not None and q - chain[-1] <= W:
                chain.append(q)
                continue
            start, end = chain[0], chain[-1] + K
            spans.append(_Span((start, end), (start + shift, end + shift), False))
            if q is not None:
                chain = [q]
    return sorted(spans, key=lambda s: (s.query, s.doc))


def _alignments(pairs: Sequence[tuple[int, int]]) -> list[tuple[int, list[int]]]:
    """(document minus query position, query positions) of the best supported
    alignments: bounded work however repetitive the texts are."""
    by_shift: dict[int, list[int]] = {}
    for q, d in sorted(set(pairs))[:_MAX_PAIRS]:
        by_shift.setdefault(d - q, []).append(q)
    ranked = sorted(by_shift.items(), key=lambda item: (-len(item[1]), abs(item[0]), item[0]))
    return ranked[:_MAX_ALIGNMENTS]


def _widest_first(spans: list[_Span]) -> list[_Span]:
    """The spans that each cover query words no wider span covers (a passage repeated
    in the document matches once per repeat; the others add nothing), by query order."""
    kept: list[_Span] = []
    for span in sorted(spans, key=lambda s: (s.query[0] - s.query[1], s.query, s.doc)):
        if _covered([k.query for k in kept] + [span.query]) > _covered([k.query for k in kept]):
            kept.append(span)
    return sorted(kept, key=lambda s: (s.query, s.doc))


def _covered(intervals: Sequence[tuple[int, int]]) -> int:
    """How many positions the union of the [start, end) intervals covers."""
    covered, reach = 0, 0
    for start, end in sorted(intervals):
        start = max(start, reach)
        if end > start:
            covered += end - start
            reach = end
    return covered


def _share(intervals: Sequence[tuple[int, int]], total: int) -> float:
    """Share of `total` words covered by the union of the intervals, to 4 places."""
    return round(_covered(intervals) / total, 4) if total else 0.0


def _match_entry(candidate: _Candidate, info: DocInfo, index: dict[str, Any], spans: list[_Span],
                 located: LocatedWords, doc_words: DocText | None,
                 note: str | None) -> dict[str, Any]:
    entry = {
        "corpus": candidate.corpus, "source": info.source, "doc_id": info.doc_id,
        "content_hash": info.content_hash, "text_hash": info.text_hash,
        "match": "text" if candidate.same_text else "partial",
        "containment": _share([s.query for s in spans], len(located.words)),
        "fingerprints": len(candidate.hashes),
        "spans": [_span_entry(s, located, doc_words, info.n_bytes) for s in spans],
        "index": {"text_spec": index["text_spec"], "fingerprint_spec": index["fingerprint_spec"],
                  "k": index["k"], "w": index["w"],
                  "unicode_version": index.get("unicode_version")},  # None: not recorded
    }
    if note:
        entry["note"] = note
    return entry


def _span_entry(span: _Span, located: LocatedWords, doc: DocText | None,
                n_bytes: int) -> dict[str, Any]:
    doc_bytes = [0, n_bytes] if span.whole else (list(doc.byte_span(*span.doc)) if doc
                                                 else None)
    return {
        "query_words": list(span.query),
        "query_chars": list(located.char_span(*span.query)),
        "doc_words": list(span.doc),
        "doc_chars": list(doc.char_span(*span.doc)) if doc else None,
        "doc_bytes": doc_bytes,
        "verified": span.verified,
        "windows": [],  # filled in from the stream when the corpus counts bytes as tokens
        "steps": [],
    }


def require_index(indexes: dict[str, dict[str, Any]]) -> None:
    if not indexes:
        raise UsageError("no corpus in the store has a text index: ingest documents with "
                         "text (fingerprints are on by default) to match text")
