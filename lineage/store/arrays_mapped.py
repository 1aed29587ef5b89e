"""A server's reads of a lookup arrays file it keeps mapped (checked whole at start-up):
a span's columns and its documents' attributes gathered by numpy over the mapped bytes,
in C, instead of a value at a time.

A command reads the same values through lineage/store/arrays.py alone, without numpy:
for one lookup, importing numpy would cost more than the reads it saves. Both give the
same values (tests/test_lookup_arrays.py holds them to it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from lineage.store.arrays import HASH_BYTES, INT_KINDS

if TYPE_CHECKING:
    from lineage.store.arrays import ArraysFile

IntArray = np.ndarray[Any, np.dtype[np.int64]]

_DTYPES = {kind: np.dtype("<" + letter) for kind, letter in INT_KINDS.items()}


def column(arrays: ArraysFile, name: str) -> np.ndarray[Any, Any]:
    """Column `name` of a mapped file over its bytes: integers (a dictionary's codes, a
    string column's end offsets, one more than its rows) or a hash column's rows of 32
    bytes. A view: the caller copies what it keeps (the file closes only without one)."""
    spec = arrays.columns[name]
    kind, at, count = spec["kind"], int(spec["at"]), int(spec["count"])
    data = arrays.mapped_bytes()
    if kind == "h32":
        return np.frombuffer(data, np.uint8, count=HASH_BYTES * count,
                             offset=at).reshape(count, HASH_BYTES)
    if kind == "str":
        return np.frombuffer(data, _DTYPES[spec["width"]], count=count + 1, offset=at)
    width = spec["width"] if kind == "dict" else kind
    return np.frombuffer(data, _DTYPES[width], count=count, offset=at)


def span(arrays: ArraysFile, names: tuple[str, ...], lo: int, hi: int) -> list[IntArray]:
    """Integer columns `names`, rows lo..hi, as int64 arrays."""
    return [column(arrays, name)[lo:hi].astype(np.int64) for name in names]


def gather(arrays: ArraysFile, name: str, rows: IntArray) -> list[Any]:
    """Column `name` at each of `rows`, as `ArraysFile.value_at` gives them (a content
    hash as its hex, a string as str or None)."""
    spec = arrays.columns[name]
    kind, values = spec["kind"], column(arrays, name)
    if kind == "h32":
        text = values[rows].tobytes().hex()
        return [text[i:i + 2 * HASH_BYTES] for i in range(0, len(text), 2 * HASH_BYTES)]
    if kind == "dict":
        words = spec["words"]
        return [words[code] for code in values[rows].tolist()]
    if kind != "str":
        return values[rows].tolist()  # type: ignore[no-any-return]
    # A string's end offset is `end * 2 + null`; its bytes lie in the heap.
    heap, data = int(spec["heap"]), arrays.mapped_bytes()
    starts = ((values[rows].astype(np.int64) >> 1) + heap).tolist()
    ends = values[rows + 1].astype(np.int64)
    nulls, stops = (ends & 1).tolist(), ((ends >> 1) + heap).tolist()
    return [None if null else data[start:stop].decode("utf-8")
            for start, stop, null in zip(starts, stops, nulls, strict=True)]


OCCURRENCE_COLUMNS = ("stream_start", "stream_end", "doc_offset", "epoch", "doc")
DOCUMENT_COLUMNS = ("doc_id", "source", "uri", "content_hash")


def span_columns(stream: ArraysFile, corpus: ArraysFile, first: int, last: int,
                 ) -> tuple[dict[str, IntArray], dict[str, list[Any]]]:
    """Occurrences first..last (`arrays_use.span_bounds`), in stream order: their integer
    columns, and each one's document's attributes from the corpus file (as
    `arrays_use.span_rows` reads them)."""
    occurrences = dict(zip(OCCURRENCE_COLUMNS, span(stream, OCCURRENCE_COLUMNS, first, last),
                           strict=True))
    documents = {name: gather(corpus, name, occurrences["doc"]) for name in DOCUMENT_COLUMNS}
    return occurrences, documents
