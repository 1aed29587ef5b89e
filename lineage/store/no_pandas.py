"""Lookups without pandas: pyarrow imports pandas, when it is installed, the first time
it converts any Python value (`pa.scalar(5)`, `pc.equal(column, 5)`, a `to_numpy()`),
to check whether the value is a pandas object. That import costs a lookup process
0.6-1 s of a 1.3 s answer, for an answer that never holds a pandas object.

`keep_pandas_out()` lets pyarrow make that check once while `import pandas` fails, so it
records "no pandas" for the process and converts plain values without it. An explicit
pandas call (`to_pandas()`) still imports pandas then: pyarrow tries again when it is
asked for pandas itself. Only what does not need pandas may call this: a process that
answers lookups (the lean `docs`/`trained-on` path, a `lineage serve` worker), never the
library on import, since afterwards pyarrow no longer recognises a pandas object given
to it as one (e.g. `pa.array(series)`).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.machinery import ModuleSpec
from types import ModuleType


class _NoPandas:
    """A finder that refuses `import pandas` while pyarrow makes its check."""

    def find_spec(self, name: str, path: object = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if name == "pandas":
            raise ModuleNotFoundError("not needed by this process", name=name)
        return None


def keep_pandas_out() -> None:
    """Make pyarrow convert Python values without importing pandas (see above); does
    nothing when pandas is imported already."""
    if "pandas" in sys.modules:
        return
    finder = _NoPandas()
    sys.meta_path.insert(0, finder)
    try:
        import pyarrow as pa

        pa.scalar(0)  # pyarrow's first conversion: its one attempt to import pandas
    finally:
        sys.meta_path.remove(finder)


@contextmanager
def pandas_refused() -> Iterator[None]:
    """`import pandas` fails inside: pyarrow, if the block imports it and converts a
    value, makes its check then, as `keep_pandas_out` has it make it. A lookup answered
    from the lookup arrays never imports pyarrow, and pays nothing for it."""
    if "pandas" in sys.modules:
        yield
        return
    finder = _NoPandas()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
