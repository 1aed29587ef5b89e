"""The map side of the text index: text identity and fingerprints of staged documents.

Each map task hands its documents' texts here batch by batch; the normalized-text hash
and word count go into the task's staged rows, and the fingerprints and near-duplicate
band keys (`lineage-near/1`) into staged parts of their own (keyed by doc_id: the reduce
numbers the documents once they are sorted).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import blake3

from lineage.ingest.staging import record_place, staged_fingerprint_schema, staged_near_schema
from lineage.store.durable import close_writers
from lineage.text.fingerprint import K, W, fingerprint_batch
from lineage.text.identity import words
from lineage.text.minhash import BANDS, long_text_band_keys, signature_batch

_BATCH_CHARS = 1 << 21  # fingerprint work arrays take ~40 bytes per byte of text
LONG_TEXT_WORDS = 1 << 18  # longer texts are fingerprinted in overlapping chunks
_MANIFEST_BATCH_BYTES = 32 << 20  # ready-manifest documents read before indexing them


class TextIndexer:
    """Stages the fingerprints and band keys of one map task; `identities` gives its
    per-row columns."""

    def __init__(self, part: str | Path) -> None:
        self.part = str(part)
        self.near_part = near_part_of(self.part)
        self.rows = 0
        self.near_rows = 0
        self._writer: Any = None
        self._near_writer: Any = None

    def identities(
        self, doc_ids: Sequence[str], texts: Sequence[str | None]
    ) -> tuple[list[str | None], list[int | None]]:
        """(text_hash, n_words) of each text, None for texts that are not text (or have no
        words); stages the fingerprints of all of them."""
        found = [words(t) if t is not None else [] for t in texts]
        normals = [" ".join(w) for w in found]
        hashes = [blake3.blake3(n.encode("utf-8")).hexdigest() if n else None for n in normals]
        counts = [len(w) if w else None for w in found]
        short = [i for i, w in enumerate(found) if len(w) <= LONG_TEXT_WORDS]
        start = 0
        while start < len(short):
            end, size = start, 0
            while end < len(short) and (end == start or size < _BATCH_CHARS):
                size += len(normals[short[end]])
                end += 1
            batch = short[start:end]
            self._stage([doc_ids[i] for i in batch], [normals[i] for i in batch],
                        [counts[i] for i in batch])
            start = end
        for i, text_words in enumerate(found):
            if len(text_words) > LONG_TEXT_WORDS:
                self._stage_long(doc_ids[i], text_words)
        return hashes, counts

    def _stage_near(self, doc_ids: Sequence[str], normals: Sequence[str],
                    counts: Sequence[int | None]) -> None:
        import numpy as np

        found = signature_batch(normals, [c or 0 for c in counts])
        ids = [doc_ids[i] for i in found.text.tolist() for _ in range(BANDS)]
        self._write_near(ids, found.band_keys.reshape(-1) if len(ids) else np.empty(0))

    def _write_near(self, doc_ids: Sequence[str], keys: Any) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        if not len(doc_ids):
            return
        table = pa.table({"doc_id": pa.array(doc_ids, pa.string()),
                          "band_key": pa.array(keys, pa.uint64())},
                         schema=staged_near_schema())
        if self._near_writer is None:
            self._near_writer = pq.ParquetWriter(self.near_part, staged_near_schema())
        self._near_writer.write_table(table)
        self.near_rows += table.num_rows

    def _stage_long(self, doc_id: str, text_words: list[str]) -> None:
        """A long text in chunks of LONG_TEXT_WORDS words overlapping by W + K - 2, so
        every window of W grams lies whole in some chunk: the same picks as one pass,
        with memory bounded by the chunk."""
        import numpy as np

        n, overlap = len(text_words), W + K - 2
        starts = list(range(0, n - LONG_TEXT_WORDS, LONG_TEXT_WORDS - overlap))
        starts.append(n - LONG_TEXT_WORDS)  # a full last chunk: no short-text rule inside
        positions, prints = [], []
        for start in starts:
            chunk = text_words[start:start + LONG_TEXT_WORDS]
            found = fingerprint_batch([" ".join(chunk)], [len(chunk)])
            positions.append(found.position + start)
            prints.append(found.fingerprint)
        position, first = np.unique(np.concatenate(positions), return_index=True)
        self._write([doc_id] * len(position), position, np.concatenate(prints)[first])
        self._write_near([doc_id] * BANDS, long_text_band_keys(text_words, LONG_TEXT_WORDS))

    def _stage(self, doc_ids: Sequence[str], normals: Sequence[str],
               counts: Sequence[int | None]) -> None:
        found = fingerprint_batch(normals, [c or 0 for c in counts])
        self._write([doc_ids[i] for i in found.text.tolist()], found.position,
                    found.fingerprint)
        self._stage_near(doc_ids, normals, counts)

    def _write(self, doc_ids: Sequence[str], position: Any, fingerprint: Any) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        if not len(fingerprint):
            return
        table = pa.table(
            {"doc_id": pa.array(doc_ids, pa.string()),
             "position": pa.array(position, pa.uint32()),
             "fingerprint": pa.array(fingerprint, pa.uint64())},
            schema=staged_fingerprint_schema(),
        )
        if self._writer is None:
            self._writer = pq.ParquetWriter(self.part, staged_fingerprint_schema())
        self._writer.write_table(table)
        self.rows += table.num_rows

    def close(self) -> str | None:
        """Finish the staged parts; the fingerprints' path, or None when no fingerprint
        was made (`staged_near` names the band keys' part)."""
        writers, self._writer, self._near_writer = (self._writer, self._near_writer), None, None
        close_writers(*writers)
        return self.part if self.rows else None

    @property
    def staged_near(self) -> str | None:
        """The staged band keys' path, or None when no text had words."""
        return self.near_part if self.near_rows else None

    def __enter__(self) -> TextIndexer:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.close()
            return
        with contextlib.suppress(Exception):  # the body's failure is the one to report
            self.close()


def near_part_of(fingerprint_part: str) -> str:
    """Where the band keys are staged beside a fingerprint part."""
    return fingerprint_part.removesuffix(".parquet").removesuffix(".fingerprints") + ".near.parquet"


def index_manifest_texts(
    con: Any, staging: Path, progress: Any = None
) -> tuple[list[str], list[str]]:
    """Read each ready-manifest document from its local `uri`, check it against its
    content hash, and give it a text identity, fingerprints and band keys (the opt-in for
    ready manifests, which carry no text). Returns the staged fingerprint and band-key
    parts, if any."""
    import pyarrow as pa

    from lineage.store.parts import report

    total = int(con.execute("SELECT count(*) FROM docs WHERE NOT has_text").fetchall()[0][0])
    reader = con.cursor().sql(
        "SELECT doc_id, uri, n_bytes, content_hash, origin, record FROM docs WHERE NOT has_text "
        "ORDER BY doc_id").to_arrow_reader(4096)
    updates: list[pa.Table] = []
    done = 0
    with TextIndexer(staging / "manifest.fingerprints.parquet") as indexer:
        rows: list[dict[str, Any]] = []
        paths: list[Path] = []
        texts: list[str | None] = []
        size = 0

        def flush() -> None:
            hashes, counts = indexer.identities([r["doc_id"] for r in rows], texts)
            updates.append(pa.table({
                "doc_id": [r["doc_id"] for r in rows], "path": [str(p) for p in paths],
                "text_hash": pa.array(hashes, pa.string()),
                "n_words": pa.array(counts, pa.int64())}))
            report(progress, "reading documents of the manifest", done, total)
            rows.clear()
            paths.clear()
            texts.clear()

        for batch in reader:
            for row in batch.to_pylist():
                path = _local_document(row)
                rows.append(row)
                paths.append(path)
                texts.append(_checked_text(row, path))
                size += len(texts[-1] or "")
                done += 1
                if size >= _MANIFEST_BATCH_BYTES:
                    flush()
                    size = 0
        if rows:
            flush()
        part = indexer.close()
        near = indexer.staged_near
    if updates:
        con.register("manifest_texts", pa.concat_tables(updates))
        con.execute("UPDATE docs SET origin = t.path, record = NULL, has_text = true, "
                    "text_hash = t.text_hash, n_words = t.n_words FROM manifest_texts t "
                    "WHERE docs.doc_id = t.doc_id")
        con.unregister("manifest_texts")
    return ([part] if part else []), ([near] if near else [])


def _local_document(row: dict[str, Any]) -> Path:
    from urllib.parse import unquote, urlparse

    from lineage.errors import InputError

    uri = row["uri"] or ""
    parsed = urlparse(uri)
    where = record_place(row["origin"], row["record"])
    if parsed.scheme == "file" and parsed.netloc in ("", "localhost"):
        return Path(unquote(parsed.path))
    if parsed.scheme == "" and uri:
        # Resolved now: the store records where the text is, whatever the working folder.
        return (Path(row["origin"]).parent / uri).resolve()
    raise InputError(row["origin"], f"uri {uri!r} of {row['doc_id']!r} is not a local file "
                     "(--fingerprints reads each document from its uri)", where=where)


def _checked_text(row: dict[str, Any], path: Path) -> str | None:
    from lineage.errors import InputError
    from lineage.ingest.input_rules import IngestRuleError, read_regular

    where = record_place(row["origin"], row["record"])
    try:
        data = read_regular(path)  # a FIFO or device named by a uri is refused unopened
    except IngestRuleError as exc:
        raise IngestRuleError(row["origin"], exc.rule_id, f"{exc.message} ({path}, the "
                              f"uri of {row['doc_id']!r})", where=where) from exc
    except OSError as exc:
        raise InputError(row["origin"], f"cannot read {path} for {row['doc_id']!r} "
                         f"({exc.strerror or exc})", where=where) from exc
    if blake3.blake3(data).hexdigest() != row["content_hash"]:
        raise InputError(row["origin"], f"{path} does not match the content_hash of "
                         f"{row['doc_id']!r}", where=where)
    if len(data) != row["n_bytes"]:
        raise IngestRuleError(row["origin"], "manifest-size", f"n_bytes of {row['doc_id']!r} "
                              f"is {row['n_bytes']}, but {path} holds {len(data)} bytes",
                              where=where)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None
