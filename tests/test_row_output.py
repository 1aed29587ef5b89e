"""`--csv`, `--tsv` and `--nl` on the commands whose answer is a table: the same columns
and values as the rows of `--json`, read back with Python's own csv and json readers; and
`sql` streamed in batches, never holding the whole result."""

from __future__ import annotations

import csv
import io
import json
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lineage.api import open_store
from lineage.cli import output

from .conftest import Cli

# (arguments, where the rows are in the --json answer: None for a list answer)
TABLES = [
    (("corpus", "list"), None),
    (("corpus", "show", "example"), "sources"),
    (("stream", "list"), None),
    (("run", "list"), None),
    (("exp", "list"), None),
    (("docs", "--step", "3"), "documents"),
    (("trace", "--run", "tiny", "--clipped", "--limit", "3"), "steps"),
    (("store", "verify"), "problems"),
    (("run", "checkpoints", "tiny"), "checkpoints"),
    (("audit", "status", "tiny"), "per_interval"),
    (("audit", "who", "tiny"), "participants"),
    (("trained-on", str(Path(__file__).parents[1] / "examples/corpus/shakespeare")),
     "results"),
    (("sql", "SELECT doc_id, n_bytes, license FROM documents ORDER BY doc_id LIMIT 40"),
     None),
]


@pytest.fixture(scope="module")
def cli(demo_run: Path) -> Cli:
    return Cli(demo_run / "store")


def _json_rows(cli: Cli, args: tuple[str, ...], key: str | None) -> list[dict[str, Any]]:
    answer = cli.json(*args)
    return answer if key is None else answer[key]


def _cell(value: Any) -> str:
    """What a CSV cell holds for a JSON value (written independently of lineage)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | dict):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return str(value)


def _read_back(cell: str, value: Any) -> str:
    """A JSON cell as `_cell` writes it, once it reads back as `value`."""
    if isinstance(value, list | dict):
        assert json.loads(cell) == value
        assert "\n" not in cell and "\r" not in cell
        return _cell(value)
    return cell


@pytest.mark.parametrize(("args", "key"), TABLES, ids=lambda v: " ".join(v) if
                         isinstance(v, tuple) else str(v))
def test_csv_tsv_and_nl_hold_the_json_rows(cli: Cli, args: tuple[str, ...],
                                           key: str | None) -> None:
    rows = _json_rows(cli, args, key)
    code = 1 if args[:2] == ("store", "verify") and rows else 0
    for fmt, dialect in (("--csv", "excel"), ("--tsv", "excel-tab")):
        text = cli(*args, fmt, code=code).stdout
        read = list(csv.reader(io.StringIO(text), dialect=dialect))
        header, body = read[0], read[1:]
        assert len(body) == len(rows)
        if rows:
            assert header == list(rows[0]) or set(rows[0]) <= set(header)
        for row, line in zip(rows, body, strict=True):
            assert dict(zip(header, line, strict=True)) == {
                name: _cell(row.get(name)) for name in header}
    lines = cli(*args, "--nl", code=code).stdout.splitlines()
    assert [json.loads(line) for line in lines] == rows


def test_a_table_with_no_rows_still_has_its_header(cli: Cli) -> None:
    text = cli("store", "verify", "--csv").stdout
    assert text.splitlines() == ["path,owner,status,message"] or text.startswith("path,")
    assert cli("store", "verify", "--nl").stdout == ""


def test_one_output_format_at_a_time(cli: Cli) -> None:
    done = cli("corpus", "list", "--csv", "--nl", code=2)
    assert done.stderr.count("\n") == 1 and "--csv, --nl" in done.stderr


def test_sql_rows_are_streamed_in_batches(demo_run: Path) -> None:
    """25,000 rows reach the writer in batches of at most 10,000, as DuckDB fetches them;
    the result holds none of them."""
    store = open_store(demo_run / "store")
    batches: list[int] = []
    seen: list[int] = []

    def sink(columns: list[str], rows: list[tuple[Any, ...]]) -> None:
        assert columns == ["n"]
        batches.append(len(rows))
        seen.extend(r[0] for r in rows)

    result = store.sql("SELECT range AS n FROM range(25000)", max_rows=0, on_rows=sink)
    assert result.rows == [] and not result.truncated
    assert seen == list(range(25_000)) and max(batches) <= 10_000 and len(batches) >= 3
    batches.clear()
    seen.clear()
    cut = store.sql("SELECT range AS n FROM range(25000)", max_rows=12_345, on_rows=sink)
    assert cut.truncated and seen == list(range(12_345))


def test_sql_csv_cut_at_max_rows_says_so_on_stderr(cli: Cli) -> None:
    done = cli("sql", "SELECT range AS n FROM range(50)", "--max-rows", "7", "--csv")
    assert done.stdout.splitlines() == ["n", *map(str, range(7))]
    assert "only the first 7 rows" in done.stderr


cells = st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**63 - 1),
                  st.text(), st.lists(st.integers(), max_size=3),
                  st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


def _written(fmt: str, rows: list[tuple[Any, Any]]) -> str:
    with redirect_stdout(io.StringIO()) as out:
        output.RowWriter(fmt, ["a", "b"]).write(rows)
    return out.getvalue()


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.tuples(cells, cells), max_size=6), fmt=st.sampled_from(["csv", "tsv"]))
def test_any_value_reads_back_with_pythons_csv(rows: list[tuple[Any, Any]], fmt: str) -> None:
    """Commas, quotes, tabs, newlines and any script survive the round trip."""
    text = _written(fmt, rows)
    read = list(csv.reader(io.StringIO(text, newline=""),
                           dialect="excel" if fmt == "csv" else "excel-tab"))
    assert read[0] == ["a", "b"]
    # A list or an object is compact JSON; its line breaks other than \n may be written
    # as escapes, so the cell is compared as the value it reads back as.
    assert [[_read_back(cell, value) for cell, value in zip(line, row, strict=True)]
            for line, row in zip(read[1:], rows, strict=True)] == [
        [_cell(a), _cell(b)] for a, b in rows]
    assert len(read) == len(rows) + 1


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.tuples(cells, cells), max_size=6))
def test_any_value_reads_back_with_pythons_json(rows: list[tuple[Any, Any]]) -> None:
    lines = _written("nl", rows).splitlines()
    assert [json.loads(line) for line in lines] == [{"a": a, "b": b} for a, b in rows]
