"""A directory of files as a corpus: one file is one document.

`doc_id` is the path relative to the directory with '/' separators (a followed link's
documents: the link's path). Each immediate subfolder is a source unless one is forced;
top-level files belong to the forced source or to the directory's own name. Hidden
entries, links and special files are dealt with by the walk (ingest/walk.py, `--links`);
a folder or file that cannot be read is refused with its rule (ingest/input_rules.py).
Files are hashed as bytes on all cores.
docs/manifest-spec.md states these rules for re-implementers.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import blake3

from lineage.corpora.token_count import TokenizerSpec, count_tokens
from lineage.errors import InputError
from lineage.ingest.input_rules import IngestRuleError, hash_regular, read_regular
from lineage.ingest.staging import ShardSummary, staged_schema
from lineage.ingest.text_index import TextIndexer
from lineage.ingest.walk import DEFAULT_LINKS, WalkCounts, walk_folder
from lineage.store.durable import parquet_writer

_BATCH_FILES = 512
_CHUNK_FILES = 16  # files per hashing task


@dataclass(frozen=True)
class FileEntry:
    path: str  # a plain string: a path object per file costs more than hashing it
    doc_id: str
    source: str


@dataclass
class DirectoryListing:
    files: list[FileEntry]
    skipped_hidden: int = 0
    skipped_links: int = 0
    followed_links: int = 0


def list_directory(root: Path, *, source: str | None,
                   links: str = DEFAULT_LINKS) -> DirectoryListing:
    """Every file below `root` (ingest/walk.py: hidden entries, links, special files), in
    sorted doc_id order."""
    counts = WalkCounts()
    found = walk_folder(root, links=links, counts=counts)
    top_source = source or root.resolve().name
    files = []
    for item in found:
        top, sep, _ = item.rel.partition("/")
        files.append(FileEntry(item.path, item.rel, source or (top if sep else top_source)))
    files.sort(key=lambda entry: entry.doc_id.encode("utf-8"))
    return DirectoryListing(files, counts.skipped_hidden, counts.skipped_links,
                            counts.followed_links)


def hash_file(path: str | Path, *, keep: bool = True) -> tuple[str, int, bytes | None]:
    """(BLAKE3 hex, size, the bytes when `keep` and small enough for a tokenizer).

    Read in chunks into one buffer per thread (no memory map: a file truncated while it
    is hashed would end the process with SIGBUS), refusing a file that is not regular or
    that changes while it is read (ingest/input_rules.py)."""
    return hash_regular(path, keep=keep)


def stage_directory(
    root: Path,
    listing: DirectoryListing,
    part_dir: Path,
    *,
    tokenizer: TokenizerSpec,
    progress: object = None,
    workers: int | None = None,
    fingerprints: bool = True,
    part: Path | None = None,
) -> ShardSummary:
    """Hash every listed file and write one staged Parquet part for the directory.

    With `fingerprints`, files that are UTF-8 text also get their text identity and
    staged fingerprints; other files stay documents of bytes.
    """
    import pyarrow as pa

    tok = tokenizer.load() if tokenizer.kind == "file" else None
    if tokenizer.kind == "input":
        raise InputError(root, "--tokenizer input needs shards with a token_count column")
    if part is None:  # a task of a cluster names its own: the folder is shared
        part = part_dir / f"dir-{len(list(part_dir.iterdir())):05d}.parquet"
    indexer = TextIndexer(part.with_suffix(".fingerprints.parquet")) if fingerprints else None
    schema = staged_schema()
    base = root.resolve()  # once: resolving every file cost more than hashing small ones
    kept = dropped = done = 0
    total = len(listing.files)
    with (
        ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool,
        parquet_writer(part, schema) as writer,
        indexer or contextlib.nullcontext(),
    ):
        # One map over every file keeps both cores hashing; rows are written in batches.
        # A thread pool ignores map's chunksize, so files go to it in chunks: one future
        # per file cost ~10 ms of the 2,000-file benchmark.
        hash_chunk = partial(_hash_chunk, keep=tok is not None or indexer is not None)
        chunks = [listing.files[i:i + _CHUNK_FILES] for i in range(0, total, _CHUNK_FILES)]
        results = itertools.chain.from_iterable(pool.map(hash_chunk, chunks))
        for start in range(0, total, _BATCH_FILES):
            batch = listing.files[start:start + _BATCH_FILES]
            hashed = [next(results) for _ in batch]
            columns = _columns_for(batch, hashed, tok, base, indexer)
            dropped += len(batch) - len(columns["doc_id"])
            kept += len(columns["doc_id"])
            writer.write_table(pa.table(columns, schema=schema))
            done += len(batch)
            if callable(progress):
                progress("hashing files", done, total)
    staged_fingerprints = indexer.close() if indexer else None
    return ShardSummary(str(part) if kept else None, kept, dropped, staged_fingerprints,
                        indexer.staged_near if indexer else None)


def _hash_chunk(entries: list[FileEntry], *, keep: bool) -> list[tuple[str, int, bytes | None]]:
    return [_hash_entry(entry, keep=keep) for entry in entries]


def _hash_entry(entry: FileEntry, *, keep: bool) -> tuple[str, int, bytes | None]:
    return hash_file(entry.path, keep=keep)


def _columns_for(
    batch: list[FileEntry],
    results: list[tuple[str, int, bytes | None]],
    tok: object,
    base: Path,
    indexer: TextIndexer | None = None,
) -> dict[str, list[Any]]:
    rows = [(e, r) for e, r in zip(batch, results, strict=True) if r[1] > 0]
    folder = str(base).rstrip("/")  # "/" itself would otherwise give "//name"
    text_hashes: list[str | None] = [None] * len(rows)
    n_words: list[int | None] = [None] * len(rows)
    # Read and decode each file once, for the text index and the tokenizer alike.
    decoded = [_decoded(e, r) for e, r in rows] if indexer or tok is not None else []
    texts = [d if isinstance(d, str) else None for d in decoded]
    if indexer is not None:
        text_hashes, n_words = indexer.identities([e.doc_id for e, _ in rows], texts)
    if tok is not None:
        for (entry, _), text in zip(rows, decoded, strict=True):
            if isinstance(text, UnicodeDecodeError):
                raise InputError(
                    entry.path, f"not valid UTF-8 at byte {text.start}: a tokenizer needs "
                    "text (use --tokenizer bytes to count bytes instead)") from text
        n_tokens = count_tokens(tok, texts)  # type: ignore[arg-type]
    else:
        n_tokens = [result[1] for _, result in rows]
    return {
        "doc_id": [entry.doc_id for entry, _ in rows],
        "source": [entry.source for entry, _ in rows],
        "uri": [_file_uri(f"{folder}/{entry.doc_id}") for entry, _ in rows],
        "n_bytes": [result[1] for _, result in rows],
        "n_tokens": n_tokens,
        "content_hash": [result[0] for _, result in rows],
        "license": [None] * len(rows),  # assigned in the reduce (--license)
        "metadata": [None] * len(rows),
        "origin": [f"{folder}/{entry.doc_id}" for entry, _ in rows],
        "record": [None] * len(rows),
        "has_text": [True] * len(rows),
        "text_hash": text_hashes,
        "n_words": n_words,
        "byte_offset": [None] * len(rows),
    }


def _read(path: str, expected: str) -> bytes:
    """A large file read again for its text: still the bytes that were hashed."""
    data = read_regular(path)
    if blake3.blake3(data).hexdigest() != expected:
        raise IngestRuleError(path, "changed-while-read", "the file changed between hashing "
                              "and reading its text; ingest it again once nothing writes to it")
    return data


def _file_uri(path: str) -> str:
    """`Path(path).as_uri()` for an absolute POSIX path, without building a path object
    per file (they cost more than hashing a small file)."""
    from urllib.parse import quote_from_bytes

    return "file://" + quote_from_bytes(os.fsencode(path))


def _decoded(entry: FileEntry,
             result: tuple[str, int, bytes | None]) -> str | UnicodeDecodeError:
    """The file as text, or why it is not UTF-8 (it stays a document of bytes)."""
    data = result[2] if result[2] is not None else _read(entry.path, result[0])
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc
