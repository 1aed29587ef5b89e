"""Digests of tables as canonical text: one tab-separated line per row, in table order.

Used for the manifest hash and the occurrence digest. A line is the row's fields as
text (integers in decimal, NULL as the empty string) joined by TAB and ended by LF,
hashed with BLAKE3 after a header line naming the spec. Rows reach the hasher as Arrow
batches and are joined by Arrow compute, so Python never touches a row.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import blake3

if TYPE_CHECKING:
    import pyarrow as pa


class LineHasher:
    """BLAKE3 over `header + LF` and the canonical lines of every row fed to it."""

    def __init__(self, header: str, columns: Sequence[str]) -> None:
        self.columns = tuple(columns)
        self._hasher = blake3.blake3(f"{header}\n".encode())
        self.rows = 0

    def update(self, batch: pa.RecordBatch | pa.Table) -> None:
        import pyarrow.compute as pc

        if batch.num_rows == 0:
            return
        fields = [pc.fill_null(batch.column(name).cast("string"), "") for name in self.columns]
        lines = pc.binary_join_element_wise(*fields, "\t")
        lines = pc.binary_join_element_wise(lines, "", "\n")
        for chunk in getattr(lines, "chunks", [lines]):
            self._hasher.update(string_values(chunk))
        self.rows += batch.num_rows

    def hexdigest(self) -> str:
        return self._hasher.hexdigest()

    def prefixed(self) -> str:
        return f"blake3:{self.hexdigest()}"


def lines_digest(header: str, rows: Sequence[Sequence[object]]) -> str:
    """The same digest computed row by row in Python: the reference for tests and specs."""
    hasher = blake3.blake3(f"{header}\n".encode())
    for row in rows:
        text = "\t".join("" if v is None else str(v) for v in row) + "\n"
        hasher.update(text.encode("utf-8"))
    return f"blake3:{hasher.hexdigest()}"


def string_values(array: pa.Array) -> memoryview:
    """The concatenated UTF-8 bytes of a string array's values, without copying."""
    import pyarrow as pa

    if array.type in (pa.string_view(), pa.binary_view()):
        array = array.cast(pa.large_string())
    offsets_buf, data_buf = array.buffers()[1], array.buffers()[2]
    fmt = "q" if array.type in (pa.large_string(), pa.large_binary()) else "i"
    offsets = memoryview(offsets_buf).cast(fmt)
    start, end = offsets[array.offset], offsets[array.offset + len(array)]
    if data_buf is None:
        return memoryview(b"")
    return memoryview(data_buf)[start:end]
