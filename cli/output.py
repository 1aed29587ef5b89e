"""The one place that writes to the terminal: data to stdout, messages to stderr.

Tables are for people, `--json` for programs. Progress bars go to stderr, only when
stderr is a terminal and the output is not JSON.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console


@cache
def _console(to_stderr: bool) -> Console:
    """Rich consoles are made on first use: JSON output never pays for importing rich."""
    from rich.console import Console

    if to_stderr:
        return Console(stderr=True, soft_wrap=True, highlight=False)
    # Piped output is read by scripts and people alike: do not fold it to 80 columns.
    return Console(soft_wrap=True, highlight=False, width=None if sys.stdout.isatty() else 200)


def emit_json(value: Any) -> None:
    from lineage.query import json_text

    sys.stdout.write(json_text(value) + "\n")


def emit_table(
    columns: Sequence[str], rows: Sequence[Sequence[Any]], *, title: str | None = None
) -> None:
    from rich.table import Table

    table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
    for name in columns:
        table.add_column(name, overflow="fold")
    for row in rows:
        table.add_row(*("" if v is None else _cell(v) for v in row))
    _console(False).print(table)


def emit_lines(lines: Sequence[str]) -> None:
    for line in lines:
        _console(False).print(line, markup=False)


def emit_raw(text: str) -> None:
    """Text exactly as given (e.g. a checksum list other tools will read)."""
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
    """Write a result file atomically (temp file, fsync, rename) and say so on stderr."""
    from lineage.durable import publish, temp_path_for

    final = path.resolve()
    temp = temp_path_for(final)
    temp.write_text(text, encoding="utf-8")
    publish(temp, final)
    info(f"wrote {path}")


def info(message: str) -> None:
    _console(True).print(message, markup=False)


def warning(message: str) -> None:
    _console(True).print(f"warning: {message}", markup=False, style="yellow")


def error(message: str) -> None:
    _console(True).print(f"error: {message}", markup=False, style="red")


@contextmanager
def progress_bar(enabled: bool) -> Iterator[Callable[[str, int | None, int | None], None] | None]:
    """A progress callback for the core, drawn on stderr when it is a terminal."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=_console(True), transient=True,
    ) as bar:
        tasks: dict[str, Any] = {}

        def report(stage: str, done: int | None, total: int | None) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total)
            bar.update(tasks[stage], completed=done or 0, total=total)

        yield report


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value)
    return str(value)
