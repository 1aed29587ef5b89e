r"""The one place that writes to the terminal: data to stdout, messages to stderr.

Tables are for people, `--json` for programs. Progress bars go to stderr, only when
stderr is a terminal and the output is not JSON.

Data is shown as it is. Every value a person reads (table cells, titles, lines, errors)
passes through `shown`, and rich only ever receives the result as a `Text`, on consoles
with markup, emoji codes and highlighting off: `[b]`, `:x:` or `[link=...]` in a file
name print as those characters. Characters a terminal would act on instead of showing
are written as escapes, so a value stays on its line and cannot restyle the screen:
`\t` `\n` `\r`, `\xNN` for the other C0 controls, DEL and C1 controls (ESC is `\x1b`),
`\uNNNN` for line and paragraph separators, bidirectional overrides and lone surrogates
(an undecodable byte N in a file name is `\udcNN`). A backslash is shown as is. `--json`
output is exact (JSON escapes these itself), and so is `emit_raw`, kept for formats other
tools read (a checksum list, a report asked for in a format).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

# C0 controls, DEL, C1 controls, line/paragraph separators, bidirectional embeddings,
# overrides and isolates, and lone surrogates (how Python spells undecodable name bytes).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069"
                     "\ud800-\udfff]")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
# Piped tables are read by scripts and people alike: never fold a value across lines.
_PIPED_WIDTH = 1_000_000


def shown(value: Any) -> str:
    """Any value as one line of plain text that a terminal shows character for character."""
    text = _UNSAFE.sub(_escape, _plain(value))
    if text and not text.isascii() and _invisible(text):
        # Only zero-width characters (a lone combining mark, a zero-width space): printed
        # as they are, the value would look empty (and a table drops it), so each is
        # written as its escape.
        return "".join(_escaped(char) for char in text)
    return text


def shown_values(value: Any) -> Any:
    """The same structure with every string in it, keys included, passed through `shown`:
    for renderers that build a document from an answer's values."""
    if isinstance(value, str):
        return shown(value)
    if isinstance(value, dict):
        return {shown_values(k): shown_values(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [shown_values(v) for v in value]
    return value


def _escape(match: re.Match[str]) -> str:
    return _escaped(match.group())


def _escaped(char: str) -> str:
    code = ord(char)
    if code > 0xFFFF:  # eight digits, as Python writes it: `\u` takes four
        return f"\\U{code:08x}"
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def _invisible(text: str) -> bool:
    """Whether `text` takes no column on a terminal (as rich, which draws the tables,
    measures it)."""
    from rich.cells import cell_len

    return cell_len(text) == 0


def _plain(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value)
    return str(value)


def _text(value: Any, style: str = "") -> Text:
    from rich.text import Text

    return Text(shown(value), style=style)


@cache
def _console(to_stderr: bool) -> Console:
    """Rich consoles are made on first use: JSON output never pays for importing rich.

    Markup, emoji codes and highlighting are off: nothing in a value is ever interpreted.
    """
    from rich.console import Console

    if to_stderr:
        return Console(stderr=True, soft_wrap=True, markup=False, emoji=False, highlight=False)
    width = None if sys.stdout.isatty() else _PIPED_WIDTH
    return Console(soft_wrap=True, markup=False, emoji=False, highlight=False, width=width)


def emit_json(value: Any) -> None:
    from lineage.jsonout import json_text

    sys.stdout.write(json_text(value) + "\n")


def emit_table(
    columns: Sequence[str], rows: Sequence[Sequence[Any]], *, title: str | None = None
) -> None:
    if title is None and not sys.stdout.isatty():
        sys.stdout.write(plain_table(columns, rows))
        return
    _console(False).print(rich_table(columns, rows, title=title))


def rich_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], *,
               title: str | None = None) -> Any:
    from rich.table import Table

    table = Table(title=None if title is None else _text(title), title_justify="left",
                  show_edge=False, pad_edge=False)
    for name in columns:
        table.add_column(_text(name), overflow="fold")
    for row in rows:
        table.add_row(*(_text(v) for v in row))
    return table


def plain_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """The table exactly as rich draws it on a pipe (no styles, never folded), written
    directly: rich measures and draws every cell as a segment, which costs a lookup of a
    few hundred rows more than the lookup. tests/test_output_tables.py holds the two
    equal, byte for byte."""
    header = [shown(name) for name in columns]
    body = [[shown(value) for value in row] for row in rows]
    widths = [max(map(_cells, column)) for column in zip(header, *body, strict=True)]

    def line(cells: list[str], rule: str) -> str:
        return rule.join(cell + " " * (width - _cells(cell))
                         for cell, width in zip(cells, widths, strict=True))

    lines = [line(header, " \u2503 "), "\u2501\u2547\u2501".join("\u2501" * w for w in widths)]
    lines.extend(line(cells, " \u2502 ") for cells in body)
    return "".join(f"{text}\n" for text in lines)


def _cells(text: str) -> int:
    """Columns `text` takes on a terminal (as rich measures it)."""
    if text.isascii():  # `shown` has escaped the controls: one column a character
        return len(text)
    from rich.cells import cell_len

    return cell_len(text)


ROW_FORMATS = ("csv", "tsv", "nl")


class RowWriter:
    """Rows to stdout as CSV or TSV (a header line, then a line a row, each ending in CR LF)
    or newline-delimited JSON (an object a line), a batch at a time, as sqlite-utils
    writes them. Values are
    written as `--json` holds them: a list or an object as compact JSON in a cell, null
    as an empty cell, booleans as true/false. Exact, like `--json`: no escaping for
    terminals (`shown`) is applied."""

    def __init__(self, fmt: str, columns: Sequence[str]) -> None:
        import csv

        self.fmt, self.columns = fmt, list(columns)
        self._csv = None
        if fmt != "nl":
            # Lines end in \r\n, as RFC 4180 (and Excel, and sqlite-utils) has it: the csv
            # module quotes a value holding a line end only if it is one of these characters.
            self._csv = csv.writer(sys.stdout, dialect="excel" if fmt == "csv" else "excel-tab")
            self._csv.writerow(self.columns)

    def write(self, rows: Iterable[Any]) -> None:
        from lineage.jsonout import json_line

        for row in rows:
            if self._csv is None:  # an object as `--json` holds it (absent keys stay so)
                as_object = row if isinstance(row, dict) else dict(
                    zip(self.columns, row, strict=True))
                sys.stdout.write(json_line(as_object) + "\n")
            else:
                values = [row.get(c) for c in self.columns] if isinstance(row, dict) else row
                self._csv.writerow([_cell(v) for v in values])


def _cell(value: Any) -> Any:
    from lineage.jsonout import json_line, to_jsonable

    value = to_jsonable(value)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | dict):
        return json_line(value)
    return value


def emit_rows(fmt: str, answer: Any) -> None:
    """A table answer's rows (`Answer.table_rows()`, `AnswerList.table_rows()`) in `fmt`."""
    columns, rows = answer.table_rows()
    RowWriter(fmt, columns).write(rows)


def emit_lines(lines: Sequence[Any]) -> None:
    """Each item on its own line; a newline inside one is shown as `\\n`."""
    if not sys.stdout.isatty():  # what rich writes to a pipe, without loading it
        sys.stdout.write("".join(f"{shown(line)}\n" for line in lines))
        return
    console = _console(False)
    for line in lines:
        console.print(_text(line))


def emit_document(text: str) -> None:
    """A multi-line document for people (e.g. a Markdown report): its own line breaks are
    kept, every other character a terminal would act on is escaped as `shown` does."""
    sys.stdout.write("\n".join(shown(line) for line in text.split("\n")))


def emit_raw(text: str) -> None:
    """Text exactly as given, for other tools to read (e.g. a checksum list)."""
    sys.stdout.write(text)


def emit_bytes(chunks: Iterable[bytes]) -> None:
    """Bytes exactly as given (e.g. a command's stored output)."""
    sys.stdout.flush()
    for chunk in chunks:
        sys.stdout.buffer.write(chunk)
    sys.stdout.buffer.flush()


def passthrough(*, stdout_to_stderr: bool) -> Callable[[str, bytes], None]:
    """A callback that shows a command's output as it comes: its stdout on ours (on
    stderr when ours carries JSON), its stderr on ours."""
    sys.stdout.flush()
    sys.stderr.flush()
    targets = {"stdout": sys.stderr if stdout_to_stderr else sys.stdout, "stderr": sys.stderr}

    def show(stream: str, chunk: bytes) -> None:
        target = targets[stream].buffer
        target.write(chunk)
        target.flush()

    return show


def write_file(path: Path, text: str) -> None:
    """Write a result file atomically (temp file, fsync, rename) and say so on stderr;
    only a regular file or a new path (lineage.userfiles.write_output)."""
    from lineage.userfiles import write_output

    write_output(path, text)
    info(f"wrote {path}")


def info(message: Any) -> None:
    _console(True).print(_text(message))


def info_lines(lines: Sequence[Any]) -> None:
    """Each item on its own line on stderr; a newline inside one is shown as `\\n`."""
    for line in lines:
        info(line)


def warning(message: Any) -> None:
    """One line on stderr, whatever the message holds."""
    _console(True).print(_labelled("warning: ", message, style="yellow"))


def error(message: Any) -> None:
    """One line on stderr, whatever the message holds."""
    _console(True).print(_labelled("error: ", message, style="red"))


def _labelled(label: str, message: Any, style: str) -> Text:
    """The message shown as `shown` shows it alone, after its label: a message of only
    zero-width characters is escaped, though the line, with its label, is not empty."""
    from rich.text import Text

    return Text(label + shown(message), style=style)


@contextmanager
def progress_bar(enabled: bool) -> Iterator[Callable[[str, int | None, int | None], None] | None]:
    """A progress callback for the core, drawn on stderr when it is a terminal."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=_console(True), transient=True,
    ) as bar:
        tasks: dict[str, Any] = {}

        def report(stage: str, done: int | None, total: int | None) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(shown(stage), total=total)
            bar.update(tasks[stage], completed=done or 0, total=total)

        yield report

