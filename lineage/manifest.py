"""`lineage-manifest/1`: the canonical form of a corpus manifest and its hash.

A manifest is the set of a corpus's documents. Its hash is BLAKE3-256 over

    b"lineage-manifest/1\n" + line(d1) + line(d2) + ...

for the documents sorted by `doc_id` (byte order of UTF-8), where

    line(d) = doc_id TAB source TAB n_bytes TAB n_tokens TAB content_hash TAB license LF

with integers in decimal, `content_hash` as 64 lowercase hex digits, and an absent
licence as the empty string. `uri` and `metadata` are left out: they say where a copy
lives, not what the corpus is, so the same corpus hashes the same on every machine.
Names and licences may not contain control characters, which keeps lines unambiguous.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import blake3

if TYPE_CHECKING:
    import pyarrow as pa

MANIFEST_SPEC = "lineage-manifest/1"
HASH_COLUMNS = ("doc_id", "source", "n_bytes", "n_tokens", "content_hash", "license")

NAME_RULE = "names use letters, digits, '.', '_' and '-', start with a letter or digit, ≤ 128"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
CONTROL_CHARS_REGEX = r"[\x00-\x1f\x7f]"
HEX64_REGEX = r"^[0-9a-f]{64}$"


def is_valid_name(name: str) -> bool:
    """Corpus, stream and run names: safe in file names and in messages."""
    return bool(_NAME.match(name))


class ManifestHasher:
    """Feeds sorted document batches into the manifest hash, batch by batch."""

    def __init__(self) -> None:
        self._hasher = blake3.blake3(f"{MANIFEST_SPEC}\n".encode())
        self.rows = 0

    def update(self, batch: pa.RecordBatch | pa.Table) -> None:
        import pyarrow.compute as pc

        if batch.num_rows == 0:
            return
        parts = [
            batch.column("doc_id"),
            batch.column("source"),
            pc.cast(batch.column("n_bytes"), "string"),
            pc.cast(batch.column("n_tokens"), "string"),
            batch.column("content_hash"),
            pc.fill_null(batch.column("license").cast("string"), ""),
        ]
        lines = pc.binary_join_element_wise(*parts, "\t")
        lines = pc.binary_join_element_wise(lines, "", "\n")
        for chunk in getattr(lines, "chunks", [lines]):
            self._hasher.update(_string_values(chunk))
        self.rows += batch.num_rows

    def hexdigest(self) -> str:
        return self._hasher.hexdigest()

    def manifest_hash(self) -> str:
        return f"blake3:{self.hexdigest()}"


def manifest_hash_of_rows(rows: list[dict[str, object]]) -> str:
    """The manifest hash computed row by row: the reference the fast path is tested on."""
    hasher = blake3.blake3(f"{MANIFEST_SPEC}\n".encode())
    for row in sorted(rows, key=lambda r: str(r["doc_id"]).encode("utf-8")):
        fields = [row[c] if row[c] is not None else "" for c in HASH_COLUMNS]
        hasher.update(("\t".join(str(f) for f in fields) + "\n").encode("utf-8"))
    return f"blake3:{hasher.hexdigest()}"


def _string_values(array: pa.Array) -> memoryview:
    """The concatenated UTF-8 bytes of a string array's values, without copying."""
    import pyarrow as pa

    if array.type == pa.string_view() or array.type == pa.binary_view():
        array = array.cast(pa.large_string())
    offsets_buf, data_buf = array.buffers()[1], array.buffers()[2]
    fmt = "q" if array.type in (pa.large_string(), pa.large_binary()) else "i"
    offsets = memoryview(offsets_buf).cast(fmt)
    start, end = offsets[array.offset], offsets[array.offset + len(array)]
    return memoryview(data_buf)[start:end]
