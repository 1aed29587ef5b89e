"""Tables and lines written to a pipe without rich are the bytes rich writes there.

The command line draws a table for a pipe itself (`output.plain_table`): rich measures and
draws every cell as a segment, which made a 200-row `docs` answer cost more than the lookup.
At a terminal rich still draws (styles, folding to the window); on a pipe nothing is styled
or folded, so the two must agree byte for byte on any value a command can show.
"""

from __future__ import annotations

import io
import string

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from lineage.api import Store
from lineage.cli import output

from .conftest import Cli

# What cells hold: names and paths in any script (wide, combining, zero-width, controls,
# markup-like brackets), numbers, missing values.
values = st.one_of(
    st.text(max_size=12),
    st.text(alphabet=string.ascii_letters + "[]/:._-", max_size=20),
    st.sampled_from(["", " ", "ﾃｽﾄ", "漢字", "e\u0301", "\u200b", "a\tb", "\x1b[31m", "🙂"]),
    st.integers(-10**12, 10**12), st.none(), st.booleans(), st.floats(allow_nan=False),
)


def _rich(renderable: object) -> str:
    buffer = io.StringIO()
    Console(file=buffer, soft_wrap=True, markup=False, emoji=False, highlight=False,
            width=output._PIPED_WIDTH).print(renderable)
    return buffer.getvalue()


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 5).flatmap(lambda n: st.tuples(
    st.lists(st.text(min_size=1, max_size=10), min_size=n, max_size=n),
    st.lists(st.lists(values, min_size=n, max_size=n), max_size=6))))
def test_a_piped_table_is_what_rich_draws(table: tuple[list[str], list[list[object]]]) -> None:
    columns, rows = table
    assert output.plain_table(columns, rows) == _rich(output.rich_table(columns, rows))


@settings(max_examples=300, deadline=None)
@given(values)
def test_a_piped_line_is_what_rich_writes(value: object) -> None:
    assert output.shown(value) + "\n" == _rich(output._text(value))


def test_a_command_on_a_pipe_prints_the_plain_table(run_store: Store) -> None:
    cli = Cli(run_store.root)
    documents = cli.json("docs", "--step", "3")["documents"]
    lines = cli("docs", "--step", "3").stdout.splitlines()
    assert lines[0].startswith("stream ") and "step 3" in lines[0]
    header, rule, *rows = lines[1:]
    assert header.split(" \u2503 ")[0].rstrip() == "window"
    assert set(rule) <= {"\u2501", "\u2547"} and len(rule) == len(header)
    assert [row.split(" \u2502 ")[2].rstrip() for row in rows] == [
        d["doc_id"] for d in documents]
