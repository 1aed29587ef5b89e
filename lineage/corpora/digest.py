"""Digests of tables as canonical text: one tab-separated line per row, in table order.

Used for the manifest hash and the occurrence digest. A line is the row's fields as
text (integers in decimal, NULL as the empty string) joined by TAB and ended by LF,
hashed with BLAKE3 after a header line naming the spec. Rows reach the hasher as Arrow
batches and are joined by Arrow compute, so Python never touches a row.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import blake3

if TYPE_CHECKING:
    import pyarrow as pa


LINE_COLUMN = "line"


class LineHasher:
    """BLAKE3 over `header + LF` and the canonical lines of every row fed to it.

    The lines are built with Arrow compute from the batch's columns, or taken from its
    `line` column when the query that produced the batch built them (`sql_line`): DuckDB
    does that on all cores, where Arrow takes one."""

    def __init__(self, header: str, columns: Sequence[str]) -> None:
        self.columns = tuple(columns)
        self._hasher = blake3.blake3(f"{header}\n".encode())
        self.rows = 0

    def sql_line(self) -> str:
        """A DuckDB expression for the same line (integers print in decimal there too)."""
        fields = ", ".join(f"coalesce(CAST({name} AS VARCHAR), '')" for name in self.columns)
        return f"concat_ws(chr(9), {fields}) || chr(10)"

    def update(self, batch: pa.RecordBatch | pa.Table) -> None:
        if batch.num_rows == 0:
            return
        lines = (batch.column(LINE_COLUMN) if LINE_COLUMN in batch.schema.names
                 else canonical_lines(batch, self.columns))
        for chunk in getattr(lines, "chunks", [lines]):
            self._hasher.update(string_values(chunk))
        self.rows += batch.num_rows

    def hexdigest(self) -> str:
        return self._hasher.hexdigest()

    def prefixed(self) -> str:
        return f"blake3:{self.hexdigest()}"


def canonical_lines(batch: pa.RecordBatch | pa.Table, columns: Sequence[str]) -> pa.Array:
    """Each row's fields as text joined by TAB and ended by LF (NULL as empty)."""
    import pyarrow.compute as pc

    fields = [pc.fill_null(batch.column(name).cast("string"), "") for name in columns]
    lines = pc.binary_join_element_wise(*fields, "\t")
    return pc.binary_join_element_wise(lines, "", "\n")


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
    fmt: Literal["q", "i"] = "q" if array.type in (pa.large_string(), pa.large_binary()) else "i"
    offsets = memoryview(offsets_buf).cast(fmt)
    start, end = offsets[array.offset], offsets[array.offset + len(array)]
    if data_buf is None:
        return memoryview(b"")
    return memoryview(data_buf)[start:end]
