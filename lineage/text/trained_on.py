""""Was this file trained on?": content hash -> documents -> stream positions -> steps.

Verdicts by exact bytes: `in-stream` (a document with these exact bytes is placed in a
stream), `in-corpus-only` (recorded in a corpus but in no stream, e.g. past the token
budget). A query no corpus holds byte for byte is then matched as text
(lineage/text/match.py): `text-match` (the same normalized words as a document) or
`partial` (passages of documents cover enough of it); a text still unmatched is looked
up as an edited copy (lineage/text/near_match.py): `near-duplicate`; else `not-found`. With a run,
verdicts become `trained`, `skipped-only` or `not-reached`. Each match carries the
evidence: content hash, corpus manifest hash, each stream's spec hash, windows and
steps, and for text matches the normalization and fingerprint parameters and spans.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import blake3

from lineage.errors import InputError, UsageError
from lineage.store.arrays_use import (
    current_records,
    document_rows,
    placement_rows,
    stream_records,
    with_record,
    with_records,
)
from lineage.store.base import BaseStore
from lineage.store.budget import refuse_within_budget
from lineage.store.memo import remembered
from lineage.text.folders import Folder, is_folder, read_folder, summaries
from lineage.text.verdicts import (
    FOUND,
    IN_CORPUS_ONLY,
    IN_STREAM,
    NEAR_DUPLICATE,
    NOT_FOUND,
    NOT_REACHED,
    SKIPPED_ONLY,
    TEXT_VERDICTS,
    TRAINED,
)
from lineage.userfiles import open_regular

if TYPE_CHECKING:
    import duckdb

    from lineage.stream.record import StreamRecord


def hash_file(path: Path) -> str:
    """BLAKE3 of a file's bytes, opened without blocking and only when it is a regular
    file (lineage.userfiles); read in chunks, never memory-mapped (a file cut short while
    it is hashed would end the process with SIGBUS)."""
    hasher = blake3.blake3(max_threads=blake3.blake3.AUTO)
    try:
        with open_regular(path) as handle:
            while chunk := handle.read(_HASH_CHUNK):
                hasher.update(chunk)
    except OSError as exc:
        raise InputError(path, f"cannot read ({exc.strerror or exc})") from exc
    return hasher.hexdigest()


_HASH_CHUNK = 1 << 23  # big enough for BLAKE3 to hash a large file on every core


DEFAULT_MIN_CONTAINMENT = 0.5  # share of a text that matched passages must cover: `partial`
DEFAULT_MIN_SIMILARITY = 0.5  # aligned share of a text's words: `near-duplicate`
DEFAULT_LIMIT = 20  # candidate documents examined per text query (and per kind of match)
_RANK = [TRAINED, SKIPPED_ONLY, NOT_REACHED, IN_CORPUS_ONLY, NOT_FOUND]


def all_found(answer: Mapping[str, Any]) -> bool:
    """Whether every query was trained on (in the stream, or matched as text; with a
    run, trained by that run): the exit code 0 of `lineage trained-on`."""
    return all(found(result, run="run" in answer) for result in answer["results"])


def found(result: Mapping[str, Any], *, run: bool) -> bool:
    """Whether one query was trained on (`run`: the answer is about a run)."""
    if run:
        return bool(result.get("run_verdict", result["verdict"]) == TRAINED)
    return result["verdict"] in FOUND


@dataclass(frozen=True)
class Query:
    """One thing asked about: a file, a text given inline, or standard input."""

    label: str
    digest: str  # BLAKE3 of its exact bytes
    data: bytes | None = None  # the bytes, when already in memory
    path: Path | None = None

    def text(self) -> tuple[str | None, str | None]:
        """(the query as text for matching, None) or (None, why it cannot be matched)."""
        data = self.data
        if data is None and self.path is not None:
            if self.path.stat().st_size > MAX_TEXT_QUERY_BYTES:
                return None, (f"larger than {MAX_TEXT_QUERY_BYTES >> 20} MiB: looked up by "
                              "its exact bytes only")
            data = self.path.read_bytes()
        try:
            return (data or b"").decode("utf-8"), None
        except UnicodeDecodeError:
            return None, "not UTF-8 text: looked up by its exact bytes only"


MAX_TEXT_QUERY_BYTES = 64 << 20  # larger files are looked up by exact content only


def queries_for(files: Sequence[str | os.PathLike[str]] = (), texts: Sequence[str] = (),
                stdin: bytes | None = None, *,
                folders: list[tuple[Folder, int]] | None = None) -> list[Query]:
    """The queries in the order given; a folder stands for its files (lineage/text/
    folders.py), and each is added to `folders` with the index of its first query."""
    queries: list[Query] = []
    for item in files:
        if is_folder(os.fspath(item)):
            folder = read_folder(os.fspath(item))
            if folders is not None:
                folders.append((folder, len(queries)))
            queries += [Query(label, hash_file(Path(path)), path=Path(path))
                        for label, path in folder.files]
            continue
        path = Path(item)
        if not os.path.lexists(path):
            raise InputError(path, "no such file or folder (trained-on takes files and "
                             "folders)")
        queries.append(Query(str(path), hash_file(path), path=path))  # a FIFO: refused
    for number, text in enumerate(texts, start=1):
        data = _bounded(text.encode("utf-8", errors="surrogatepass"), f"--text {number}")
        queries.append(Query(f"<text {number}>", blake3.blake3(data).hexdigest(), data))
    if stdin is not None:
        stdin = _bounded(stdin, "standard input")
        queries.append(Query("<stdin>", blake3.blake3(stdin).hexdigest(), stdin))
    if not queries:
        raise UsageError("give a file, --text or - (standard input) to look for")
    return queries


def _bounded(data: bytes, what: str) -> bytes:
    if len(data) > MAX_TEXT_QUERY_BYTES:
        raise UsageError(f"{what}: {len(data):,} bytes is more than a text query takes "
                         f"({MAX_TEXT_QUERY_BYTES >> 20} MiB); save it to a file to look it "
                         "up by its exact bytes")
    return data


def trained_on(
    store: BaseStore, files: Sequence[str | os.PathLike[str]] = (), *, texts: Sequence[str] = (),
    stdin: bytes | None = None, stream: str | None = None, run: str | None = None,
    min_containment: float | None = None, limit: int | None = None,
    min_similarity: float | None = None,
) -> dict[str, Any]:
    """One result per query (files, then texts, then stdin), in the order given.

    A query whose exact bytes are in no corpus is matched as text when it is text: by
    normalized-text hash (`text-match`), by fingerprints (`partial`, when the matched
    passages cover at least `min_containment` of it), then by near-duplicate band keys
    (`near-duplicate`, when a document aligns with at least `min_similarity` of its
    words). With `run`, verdicts about that run.
    """
    folders: list[tuple[Folder, int]] = []
    queries = queries_for(files, texts, stdin, folders=folders)
    info = None
    if run is not None:
        from lineage.runs.query import get_run

        info = get_run(store, run)
        if info["stream"] is None:
            raise UsageError(f"run {run!r} is a foreign chain bound to no stream")
        if stream is not None and stream != info["stream"]:
            raise UsageError(f"run {run!r} read stream {info['stream']!r}, not {stream!r}")
        stream = info["stream"]
    with store.reader(views=False) as con:  # one catalog session for both kinds of match
        context = _Context(con, store, _streams(con, store, stream), *_corpora(con, store))
        results = context.by_bytes([(q.label, q.digest) for q in queries])
        answer: dict[str, Any] = {"stream": stream, "results": results}
        _match_texts(context, queries, answer, explicit=bool(texts) or stdin is not None,
                     thresholds=_thresholds(min_containment, min_similarity), limit=limit)
    if info is not None:
        answer = with_run(store, answer, info)
    if folders:
        answer["folders"] = summaries([f for f, _ in folders], results,
                                      [start for _, start in folders],
                                      lambda result: found(result, run=info is not None))
    return answer


@dataclass(frozen=True)
class _Context:
    """What every query of one question reads: the catalog session, streams, corpora."""

    con: Any
    store: BaseStore
    streams: dict[str, StreamRecord]
    corpora: dict[str, str]  # corpus -> manifest hash
    tokenizers: dict[str, str]  # corpus -> how its tokens were counted

    def by_bytes(self, queries: list[tuple[str, str]]) -> list[dict[str, Any]]:
        """The answer by exact bytes for each (label, BLAKE3 hex)."""
        return _answers(self.con, self.store, queries, self.streams, self.corpora)


def _thresholds(min_containment: float | None,
                min_similarity: float | None) -> tuple[float, float]:
    """(min_containment, min_similarity), defaults filled in, each checked."""
    chosen = (DEFAULT_MIN_CONTAINMENT if min_containment is None else min_containment,
              DEFAULT_MIN_SIMILARITY if min_similarity is None else min_similarity)
    for option, value in zip(("--min-containment", "--min-similarity"), chosen, strict=True):
        if not 0.0 <= value <= 1.0:
            raise UsageError(f"{option} {value}: must be between 0 and 1")
    return chosen


def _match_texts(
    context: _Context, queries: list[Query], answer: dict[str, Any], *, explicit: bool,
    thresholds: tuple[float, float], limit: int | None,
) -> None:
    """Text verdicts for the queries no corpus holds byte for byte; `text_evidence`
    (specs, parameters, thresholds) joins the answer when any query was matched as text."""
    threshold, min_similarity = thresholds
    pending = [(q, r) for q, r in zip(queries, answer["results"], strict=True)
               if r["verdict"] == NOT_FOUND]
    con, store = context.con, context.store
    if not pending or not (explicit or _any_text_index(con)):
        return
    refuse_within_budget("matching text")  # milliseconds of fingerprints: never at once
    # Only now: queries found by their bytes never need the text machinery.
    from lineage.text import match as text_match
    from lineage.text import near_match
    from lineage.text.fingerprint import parameters as fingerprint_parameters
    from lineage.text.identity import TEXT_SPEC, UNICODE_VERSION, located_words

    answer["text_evidence"] = {"text_spec": TEXT_SPEC, "unicode_version": UNICODE_VERSION,
                               "fingerprint": fingerprint_parameters(),
                               "min_containment": threshold}
    # Read once per catalog state where the store keeps one (lineage/store/memo.py).
    indexes = remembered(store, ("text_indexes",), lambda: text_match.text_indexes(con))
    if explicit:
        text_match.require_index(indexes)
    streams, corpora, tokenizers = context.streams, context.corpora, context.tokenizers
    near = None  # whether any corpus has near-duplicate band keys, asked once
    for query, result in pending:
        text, why = query.text()
        if text is None:
            result["note"] = why
            continue
        located = located_words(text)
        found = text_match.match_text(
            con, store, text, indexes=indexes, min_containment=threshold,
            limit=limit or DEFAULT_LIMIT, located=located)
        if found["verdict"] == NOT_FOUND and located.words:
            near = near_match.has_near_index(con, store) if near is None else near
        if near and found["verdict"] == NOT_FOUND and located.words:
            similarity, near_found = near_match.near_matches(
                con, store, located, indexes=indexes, limit=limit or DEFAULT_LIMIT,
                min_similarity=min_similarity)
            if similarity is None:  # too long to align: a note says so
                result["note"] = (f"more than {near_match.MAX_WORDS:,} words: not looked "
                                  "up as an edited copy")
            else:
                found["similarity"] = similarity
            if near_found:
                found["verdict"] = NEAR_DUPLICATE
            found["matches"] = near_found + found["matches"]
            answer["text_evidence"]["near"] = near_match.parameters(min_similarity)
        matches = []
        known: Placements = {}  # the matched documents' placements, for their copy counts
        for match in found.pop("matches"):
            key = (match["corpus"], match["doc_id"])
            placed = _placements(con, store, streams, match["content_hash"],
                                 {match["corpus"]})
            known[key] = placed.get(key, [])
            base = {**match, "manifest_hash": corpora.get(match["corpus"])}
            for where in _stream_entries(placed, *key):
                entry = {**base, **where}
                if where["stream"] and tokenizers.get(match["corpus"]) == "bytes":
                    hits = [h for h in placed[key] if h[0] == where["stream"]]
                    entry["spans"] = [_span_steps(span, hits) for span in match["spans"]]
                matches.append(entry)
        _with_copies(context, matches, known)
        result.update(found)
        result["matches"] = matches


def _with_copies(context: _Context, matches: list[dict[str, Any]], known: Placements) -> None:
    """Each text match gains `copies` (documents of its corpus with the same normalized
    text, itself included) and, in a stream, `seen` and `seen_steps` (how many times the
    stream placed one of them, and the steps that read them): memorisation claims turn
    on how often a text was read, not only whether. One lookup of all the text hashes;
    where a text has documents the matches do not name (`known` holds the placements of
    those they name), one of those documents and one of their placements per stream."""
    from lineage.store.part_read import lookup_rows
    from lineage.text.match import document_rows

    if not matches:
        return
    con, store = context.con, context.store
    holders: dict[tuple[str, str], list[int]] = {}
    for corpus, text_hash, doc in lookup_rows(
            con, store, "text_hashes", None, ["corpus", "text_hash", "doc"],
            any_of=("text_hash", sorted({m["text_hash"] for m in matches}))):
        holders.setdefault((corpus, text_hash), []).append(int(doc))
    named: dict[tuple[str, str], set[str]] = {}
    for match in matches:
        named.setdefault((match["corpus"], match["text_hash"]), set()).add(match["doc_id"])
    # The documents of each text, by doc_id, with their placements: read only for the
    # texts that have documents no match names (the matches' own are in `known`).
    unnamed = [(corpus, doc) for key, docs in holders.items()
               if len(docs) > len(named.get(key, ())) for corpus, doc in
               ((key[0], d) for d in docs)]
    rows = document_rows(con, store, unnamed) if unnamed else {}
    corpora_of: dict[str, set[str]] = {}
    for (corpus, _), info in rows.items():
        corpora_of.setdefault(info.content_hash, set()).add(corpus)
    placed = _placements_of(con, store, context.streams, corpora_of) if corpora_of else {}
    texts: dict[tuple[str, str], dict[str, list[tuple[Any, ...]]]] = {}
    for key, doc_ids in named.items():
        texts[key] = {doc_id: known.get((key[0], doc_id), []) for doc_id in doc_ids}
    for (corpus, _), info in rows.items():
        texts.setdefault((corpus, info.text_hash), {})[info.doc_id] = placed.get(
            info.content_hash, {}).get((corpus, info.doc_id), [])
    for match in matches:
        same = texts[(match["corpus"], match["text_hash"])]
        match["copies"] = len(same)
        if not match["stream"]:
            continue
        stream = context.streams[match["stream"]]
        hits = [h for found in same.values() for h in found if h[0] == match["stream"]]
        windows = {w for _, _, _, start, end, _ in hits for w in _windows(stream, start, end)}
        match["seen"] = len(hits)
        match["seen_steps"] = _steps_of(stream, sorted(windows))


def with_run(store: BaseStore, answer: dict[str, Any], run: Mapping[str, Any]) -> dict[str, Any]:
    """Refine verdicts by what the run did: trained, skipped-only or not-reached."""
    from lineage.runs.windows import RunWindows
    from lineage.stream.query import stream_row, stream_schedule

    with store.reader(views=False) as con:
        skipped = {r[0] for r in con.execute(
            "SELECT step FROM steps WHERE run = ? AND skipped", [run["name"]]).fetchall()}
        info = stream_row(con, run["stream"]) if run["stream"] is not None else None
        reading = RunWindows.read(con, run["name"], stream_schedule(info)) if info else None
    last = run["last_step"] if run["last_step"] is not None else -1
    for result in answer["results"]:
        text_verdict = result["verdict"] in TEXT_VERDICTS
        verdicts = []
        for match in result["matches"]:
            steps, jumped = match["steps"], False
            if reading is not None and match.get("windows"):  # data skips moved the steps
                steps, jumped = reading.steps_for(match["windows"])
                match["run_steps"] = steps
            if not match["steps"]:
                match["run_verdict"] = IN_CORPUS_ONLY
            elif any(s <= last and s not in skipped for s in steps):
                match["run_verdict"] = TRAINED
            elif jumped or any(s <= last for s in steps):
                match["run_verdict"] = SKIPPED_ONLY
            else:
                match["run_verdict"] = NOT_REACHED
            verdicts.append(match["run_verdict"])
        if verdicts and text_verdict:  # the text verdict stands; the run's is beside it
            result["run_verdict"] = min(verdicts, key=_RANK.index)
        elif verdicts:
            result["verdict"] = min(verdicts, key=_RANK.index)
    answer["run"] = run["name"]
    answer["run_last_step"] = run["last_step"]
    return answer


def _any_text_index(con: Any) -> bool:
    return bool(con.execute("SELECT count(*) FROM text_indexes").fetchall()[0][0])


def trained_on_hashes(
    store: BaseStore, queries: list[tuple[str, str]], *, stream: str | None = None
) -> dict[str, Any]:
    """The same answer for (label, BLAKE3 hex) pairs already hashed."""
    with store.reader(views=False) as con:
        context = _Context(con, store, _streams(con, store, stream), *_corpora(con, store))
        return {"stream": stream, "results": context.by_bytes(queries)}


def _streams(con: duckdb.DuckDBPyConnection, store: BaseStore, name: str | None,
             ) -> dict[str, StreamRecord]:
    """The stream named, or every stream, by name (read once per catalog state where the
    store keeps one: lineage/store/memo.py)."""
    from lineage.stream.query import resolved_stream, stream_rows

    if name is not None:
        info = resolved_stream(con, store, name)
        return {info.name: info}
    rows = remembered(store, ("streams",), lambda: stream_rows(con))
    return {info.name: info for info in rows}


def _answers(
    con: duckdb.DuckDBPyConnection, store: BaseStore, queries: list[tuple[str, str]],
    streams: dict[str, StreamRecord], corpora: dict[str, str],
) -> list[dict[str, Any]]:
    """One answer per (label, digest), from one lookup of every digest in the documents'
    hashes and one in each stream that can hold them: a folder of a few hundred files
    looked up file by file spent ~9 ms a file on the two lookups."""
    digests = sorted({digest for _, digest in queries})
    documents: dict[str, list[tuple[Any, ...]]] = {}
    for digest, *document in _document_lookup(con, store, digests):
        documents.setdefault(digest, []).append(tuple(document))
    # A stream holds only documents of its corpus: no document, nothing to place.
    placed = _placements_of(con, store, streams, {
        digest: {d[0] for d in held} for digest, held in documents.items()})
    return [_answer(label, digest, documents.get(digest, []), placed.get(digest, {}), corpora)
            for label, digest in queries]


def _answer(label: str, digest: str, documents: list[tuple[Any, ...]],
            placed: dict[tuple[str, str], list[tuple[Any, ...]]], corpora: dict[str, str],
            ) -> dict[str, Any]:
    matches: list[dict[str, Any]] = []
    for corpus, source, doc_id in documents:
        base = {"corpus": corpus, "manifest_hash": corpora.get(corpus), "source": source,
                "doc_id": doc_id, "match": "exact", "containment": 1.0, "spans": []}
        matches.extend({**base, **where} for where in _stream_entries(placed, corpus, doc_id))
    verdict = NOT_FOUND
    if matches:
        verdict = IN_STREAM if any(m["windows"] for m in matches) else IN_CORPUS_ONLY
    return {"file": label, "content_hash": digest, "verdict": verdict,
            "containment": 1.0 if matches else 0.0, "matches": matches}


Placements = dict[tuple[str, str], list[tuple[Any, ...]]]


def _placements(
    con: duckdb.DuckDBPyConnection, store: BaseStore, streams: dict[str, StreamRecord],
    digest: str, corpora: set[str],
) -> Placements:
    """Where the documents with this content hash sit in each stream made of one of
    `corpora` (the corpora of the documents asked about)."""
    return _placements_of(con, store, streams, {digest: corpora}).get(digest, {})


def _placements_of(
    con: duckdb.DuckDBPyConnection, store: BaseStore, streams: dict[str, StreamRecord],
    corpora_of: dict[str, set[str]],
) -> dict[str, Placements]:
    """`_placements` for each digest (with its documents' corpora), one lookup a stream."""
    wanted: dict[str, list[str]] = {}  # stream -> the digests to look up in it
    for digest, corpora in corpora_of.items():
        for name in _of_corpora(streams, corpora):
            wanted.setdefault(name, []).append(digest)
    placed: dict[str, Placements] = {}
    for name, info in streams.items():
        digests = sorted(wanted.get(name, []))
        if not digests:
            continue
        rows = _placement_lookup(con, store, name, info.corpus, digests)
        for digest, corpus, doc_id, epoch, start, end, offset in rows:
            placed.setdefault(digest, {}).setdefault((corpus, doc_id), []).append(
                (name, info, epoch, start, end, offset))
    return placed


def _of_corpora(streams: dict[str, StreamRecord], corpora: set[str],
                ) -> dict[str, StreamRecord]:
    """The streams made of one of `corpora`: the only ones that can hold their documents
    (a lookup in each of the others would find nothing the answer uses)."""
    return {name: info for name, info in streams.items() if info.corpus in corpora}


def _stream_entries(placed: dict[tuple[str, str], list[tuple[Any, ...]]], corpus: str,
                    doc_id: str) -> list[dict[str, Any]]:
    """One entry per stream holding the document (steps, windows, epochs), or one
    entry without a stream."""
    hits = placed.get((corpus, doc_id), [])
    if not hits:
        return [{"stream": None, "spec_hash": None, "steps": [], "windows": [], "epochs": []}]
    entries = []
    for name, info, spans in _group(hits):
        windows = sorted({w for _, start, end in spans for w in _windows(info, start, end)})
        entries.append({"stream": name, "spec_hash": info.spec_hash,
                        "steps": _steps_of(info, windows), "windows": windows,
                        "epochs": sorted({epoch for epoch, _, _ in spans})})
    return entries


def _document_lookup(con: duckdb.DuckDBPyConnection, store: BaseStore, digests: list[str],
                     ) -> list[tuple[Any, ...]]:
    """(content_hash, corpus, source, doc_id) of every document holding one of these
    content hashes, in order."""
    found: list[tuple[Any, ...]] = []
    # Each corpus's arrays file where it has a current one, else its parts
    for name, record in current_records(con, "document_hashes", None, store=store,
                                        notify=store.kept_arrays is None).items():
        rows = None if record is None else with_record(
            store, record, lambda arrays: document_rows(arrays, digests))
        if rows is None:
            from lineage.store.part_read import lookup_rows

            rows = lookup_rows(con, store, "document_hashes", name,
                               ["content_hash", "corpus", "source", "doc_id"],
                               any_of=("content_hash", digests))
        found += rows
    return sorted(found)


def _placement_lookup(con: duckdb.DuckDBPyConnection, store: BaseStore, stream: str,
                      corpus: str, digests: list[str]) -> list[tuple[Any, ...]]:
    """(content_hash, corpus, doc_id, epoch, stream_start, stream_end, doc_offset) of
    every occurrence in `stream` of a document holding one of these content hashes, in
    order: from the stream's and its corpus's arrays files where both are current, else
    from the stream's `occurrence_hashes` parts."""
    records = stream_records(con, store, stream, corpus)
    rows = None if records is None else with_records(
        store, records, lambda files: placement_rows(files[0], files[1], digests))
    if rows is None:
        from lineage.store.part_read import lookup_rows

        rows = lookup_rows(con, store, "occurrence_hashes", stream,
                           ["content_hash", "corpus", "doc_id", "epoch", "stream_start",
                            "stream_end", "doc_offset"], any_of=("content_hash", digests))
    return sorted(rows)


def _span_steps(span: dict[str, Any], hits: list[tuple[Any, ...]]) -> dict[str, Any]:
    """The windows and steps that held a matched span's own tokens (byte tokenizer: a
    document's token offsets are its byte offsets)."""
    if span.get("doc_bytes") is None:
        return span
    first, last = span["doc_bytes"]
    windows: set[int] = set()
    steps: set[int] = set()
    for _, info, _, start, end, doc_offset in hits:
        low = start + max(0, first - doc_offset)
        high = start + min(end - start, last - doc_offset)
        held = list(_windows(info, low, high))
        windows.update(held)
        steps.update(_steps_of(info, held))
    return {**span, "windows": sorted(windows), "steps": sorted(steps)}


def _steps_of(info: StreamRecord, windows: list[int]) -> list[int]:
    """The steps that consumed these windows, by the stream's schedule."""
    from lineage.stream.query import stream_schedule

    schedule = stream_schedule(info)
    return sorted({schedule.step_of_window(w) for w in windows})


def _corpora(con: duckdb.DuckDBPyConnection, store: BaseStore,
             ) -> tuple[dict[str, str], dict[str, str]]:
    """(corpus -> manifest hash, corpus -> tokenizer), from one read of the catalog (once
    per catalog state where the store keeps one)."""
    rows = remembered(store, ("corpora",), lambda: con.execute(
        "SELECT name, manifest_hash, tokenizer FROM corpora").fetchall())
    return {r[0]: r[1] for r in rows}, {r[0]: r[2] for r in rows}


def _group(hits: list[tuple[Any, ...]]):  # type: ignore[no-untyped-def]
    by_stream: dict[str, tuple[dict[str, Any], list[tuple[int, int, int]]]] = {}
    for name, info, epoch, start, end, _ in hits:
        by_stream.setdefault(name, (info, []))[1].append((epoch, start, end))
    for name in sorted(by_stream):
        info, spans = by_stream[name]
        yield name, info, spans


def _windows(info: StreamRecord, start: int, end: int) -> range:
    """Windows holding at least one token of [start, end), within the consumed stream."""
    seq_len, total = info.seq_len, info.windows
    if end <= start:
        return range(0)
    return range(start // seq_len, min((end - 1) // seq_len + 1, total))
