"""The typed answer of "was this trained on?" (`lineage trained-on`; lineage.answer explains
the pattern).

A `TrainedOn` holds one `QueryAnswer` per query (files, a folder's files in path order,
then texts, then standard input) and, when a folder was asked about, a `FolderSummary`;
each result holds its matches: an `ExactMatch` (a document with the query's exact bytes),
a `TextMatch` (a document with the same normalized words, or passages of it) or a
`NearMatch` (a document the query is an edited copy of), each placed in the streams that
hold the document.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from lineage.answer import Answer, UInt64, optional

if TYPE_CHECKING:
    import polars as pl


class TextSpan(Answer):
    """A passage shared by the query and a document: word and character ranges are
    [start, end) on each side."""

    query_words: tuple[int, int]
    query_chars: tuple[int, int]
    doc_words: tuple[int, int]
    doc_chars: tuple[int, int] | None  # None: the document's text could not be read
    doc_bytes: tuple[int, int] | None  # the passage's bytes in the document
    verified: bool  # checked word for word against the document's text
    windows: tuple[int, ...]  # windows that held the passage's own tokens (byte tokenizer)
    steps: tuple[int, ...]


class TextIndexSpec(Answer):
    """The text index a text match was found in, and the specs it was built under."""

    text_spec: str  # lineage-text/1
    fingerprint_spec: str  # lineage-fingerprint/1
    k: int  # words per fingerprinted gram
    w: int  # winnowing window, in grams
    unicode_version: str | None  # None: not recorded when the index was built


class ExactMatch(Answer):
    """A document whose bytes are the query's, in one stream (or in none)."""

    corpus: str
    manifest_hash: str | None  # the corpus manifest's hash
    source: str
    doc_id: str
    match: str  # exact
    containment: float  # 1.0
    spans: tuple[TextSpan, ...]  # empty: the whole document matched
    stream: str | None  # None: the document is in no stream
    spec_hash: str | None  # the stream spec's hash
    steps: tuple[int, ...]  # the steps that read the document's tokens
    windows: tuple[int, ...]
    epochs: tuple[int, ...]
    run_steps: tuple[int, ...] | None = optional()  # those steps in the run (data skips moved them)
    run_verdict: str | None = optional()  # trained, skipped-only, not-reached or in-corpus-only


class TextMatch(Answer):
    """A document matched as text: the same normalized words (`match` text) or passages
    of it (`match` partial), in one stream (or in none)."""

    corpus: str
    source: str
    doc_id: str
    content_hash: str  # the document's bytes (blake3 hex)
    text_hash: str  # the document's normalized text (blake3 hex, lineage-text/1)
    match: str  # text or partial
    containment: float  # share of the query's words the passages cover, to 4 places
    fingerprints: int  # fingerprints the query shares with the document
    spans: tuple[TextSpan, ...]
    index: TextIndexSpec
    note: str | None = optional()  # why the spans come from fingerprints only
    manifest_hash: str | None
    stream: str | None
    spec_hash: str | None
    steps: tuple[int, ...]
    windows: tuple[int, ...]
    epochs: tuple[int, ...]
    copies: int | None = optional()  # documents of the corpus with this normalized text
    seen: int | None = optional()  # times the stream placed one of them (in a stream)
    seen_steps: tuple[int, ...] | None = optional(present_with="seen")  # steps reading them
    run_steps: tuple[int, ...] | None = optional()
    run_verdict: str | None = optional()


class NearSpan(Answer):
    """A region where the query and a document run side by side, words edited between
    their aligned words: word and character ranges are [start, end) on each side."""

    query_words: tuple[int, int]
    query_chars: tuple[int, int]
    doc_words: tuple[int, int]
    doc_chars: tuple[int, int]
    doc_bytes: tuple[int, int]  # the region's UTF-8 bytes in the document
    aligned: int  # the query's words in the region aligned with equal document words
    windows: tuple[int, ...]  # windows that held the region's own tokens (byte tokenizer)
    steps: tuple[int, ...]


class NearIndexSpec(Answer):
    """The specs a near-duplicate match was found under."""

    near_spec: str  # lineage-near/1
    text_spec: str  # lineage-text/1
    unicode_version: str | None  # of the corpus's text index; None: not recorded


class NearMatch(Answer):
    """A document the query is an edited copy of (`match` near): found by shared band
    keys, confirmed by a word-level alignment with its text, in one stream (or in none)."""

    corpus: str
    source: str
    doc_id: str
    content_hash: str  # the document's bytes (blake3 hex)
    text_hash: str  # the document's normalized text (blake3 hex, lineage-text/1)
    match: str  # near
    similarity: float  # share of the query's words aligned with the document's, to 4 places
    aligned_words: int
    band_keys: tuple[UInt64, ...]  # the lineage-near/1 band keys the two texts share
    spans: tuple[NearSpan, ...]
    index: NearIndexSpec
    manifest_hash: str | None
    stream: str | None
    spec_hash: str | None
    steps: tuple[int, ...]
    windows: tuple[int, ...]
    epochs: tuple[int, ...]
    copies: int | None = optional()  # documents of the corpus with this normalized text
    seen: int | None = optional()  # times the stream placed one of them (in a stream)
    seen_steps: tuple[int, ...] | None = optional(present_with="seen")  # steps reading them
    run_steps: tuple[int, ...] | None = optional()
    run_verdict: str | None = optional()


class QueryAnswer(Answer):
    """The answer for one query (a file, `<text N>` or `<stdin>`)."""

    file: str  # the query's label
    content_hash: str  # blake3 hex of the query's exact bytes
    verdict: str  # in-stream, in-corpus-only, text-match, partial, near-duplicate, trained,
    # ... not-found
    containment: float  # share of the query the exact and passage matches cover
    matches: tuple[ExactMatch | TextMatch | NearMatch, ...]
    note: str | None = optional()  # why the query was not matched as text
    text_hash: str | None = optional(present_with="words")  # None: the text has no words
    words: int | None = optional()  # the query's words, when it was matched as text
    similarity: float | None = optional()  # the best near-duplicate candidate's similarity,
    # when the query was looked up as an edited copy
    run_verdict: str | None = optional()  # beside a text verdict: what the run did


class FingerprintParameters(Answer):
    """The fingerprint parameters every text match cites."""

    spec: str  # lineage-fingerprint/1
    k: int
    w: int
    guarantee_words: int  # any shared passage this long is found


class NearParameters(Answer):
    """The near-duplicate parameters every near match cites."""

    spec: str  # lineage-near/1
    shingle_words: int  # words per shingle
    bands: int
    rows: int  # signature values per band
    min_similarity: float  # the aligned share a `near-duplicate` verdict needs
    # aligned words a passage out of order needs to count (near-spec.md §7); the key is
    # absent from answers made before moved passages were aligned
    moved_words: int | None = optional()


class TextEvidence(Answer):
    """The specs and parameters text matching ran under."""

    text_spec: str
    unicode_version: str
    fingerprint: FingerprintParameters
    min_containment: float  # the share a `partial` verdict needs
    near: NearParameters | None = optional()  # when a query was looked up as an edited copy


class FolderSummary(Answer):
    """A folder asked about: its files by verdict, and what it held that was not asked."""

    folder: str  # as given
    files: int  # files asked about: one result each, labelled `<folder>/<path>`
    found: int  # of them, trained on (the exit code's rule: in a stream or matched as text;
    # with a run, trained by it)
    verdicts: dict[str, int]  # files per verdict, by verdict name
    skipped_hidden: int  # entries whose name starts with '.'
    skipped_links: int  # symbolic links (not followed)
    skipped_empty: int  # empty files: no corpus records one


class TrainedOn(Answer):
    """`lineage trained-on`: was this file or text trained on? One result per query.

    `to_polars()` gives the matches: one row per (query, match), the query named by its
    `file` label and `verdict`, then the match's `corpus, source, doc_id, content_hash`
    (the document's bytes), `match` (exact, text, partial, near), `containment` (null for
    near matches), `fingerprints` (null for exact and near matches), `similarity` (near
    matches only), `manifest_hash, stream, spec_hash, steps, windows, epochs`,
    and with a run `run_steps` and `run_verdict` (else null). A query without matches has
    no row; spans and index evidence stay in `results`.
    """

    ROWS: ClassVar[str | None] = "results"

    stream: str | None  # the stream asked about (None: every stream)
    results: tuple[QueryAnswer, ...]
    text_evidence: TextEvidence | None = optional()  # when any query was matched as text
    run: str | None = optional()  # the run asked about
    run_last_step: int | None = optional(present_with="run")  # None: no step recorded
    folders: tuple[FolderSummary, ...] | None = optional()  # when a folder was asked about

    def to_polars(self) -> pl.DataFrame:
        """One row per (query, match); see the class docstring for the columns."""
        import polars as pl

        schema = _matches_schema()
        rows = [_match_row(result, match, schema)
                for result in self.results for match in result.matches]
        return pl.DataFrame(rows, schema=schema)


def _match_row(result: QueryAnswer, match: ExactMatch | TextMatch | NearMatch,
               schema: dict[str, Any]) -> dict[str, Any]:
    row = {**match.to_dict(), "file": result.file, "verdict": result.verdict}
    if isinstance(match, ExactMatch):
        row["content_hash"] = result.content_hash
    return {column: row.get(column) for column in schema}


def _matches_schema() -> dict[str, Any]:
    import polars as pl

    steps = pl.List(pl.Int64)
    return {"file": pl.String, "verdict": pl.String, "corpus": pl.String,
            "source": pl.String, "doc_id": pl.String, "content_hash": pl.String,
            "match": pl.String, "containment": pl.Float64, "fingerprints": pl.Int64,
            "similarity": pl.Float64,
            "manifest_hash": pl.String, "stream": pl.String, "spec_hash": pl.String,
            "steps": steps, "windows": steps, "epochs": steps, "run_steps": steps,
            "run_verdict": pl.String}


class DuplicateDocument(Answer):
    """A document of a cluster of copies."""

    doc_id: str
    source: str
    content_hash: str  # its bytes (blake3 hex)


class DuplicateCluster(Answer):
    """Documents that are copies of each other: `exact` (one content hash), `text` (one
    normalized text, several content hashes) or `near` (signatures agreeing on enough
    bands, joined transitively; several texts). A weaker kind's cluster holds the
    members of the stronger ones it joins."""

    kind: str  # exact, text or near
    size: int
    content_hash: str | None  # exact: the shared content hash
    text_hash: str | None  # text: the shared normalized-text hash
    shared_bands: tuple[int, int] | None  # near: fewest and most bands a joined pair shares
    documents: tuple[DuplicateDocument, ...]  # by doc_id


class CorpusDuplicates(Answer):
    """`lineage corpus duplicates NAME`: the clusters of copies a corpus holds, largest
    first. `to_polars()` gives one row per cluster."""

    ROWS: ClassVar[str | None] = "clusters"

    corpus: str
    documents: int  # documents in the corpus
    near_index: bool  # whether the corpus has near-duplicate band keys (else no near clusters)
    near_spec: str  # lineage-near/1
    threshold: float  # the shingle Jaccard a near pair must reach, estimated from its bands
    min_shared_bands: int  # ceil(42 * threshold^3): the bands a near pair shares at least
    max_run: int  # a band key held by more documents makes no pairs
    clusters_by_kind: dict[str, int]
    documents_in_clusters: int  # summed over the clusters (a document may be in two kinds)
    clusters: tuple[DuplicateCluster, ...]
