"""A lean path for the machine queries `docs ... --json` and `trained-on FILE|DIR... --json`.

Scripts call these in loops, where each call's cost is the process start-up: Python and
DuckDB, then the command line's own imports (typer, click and rich take longer than the
query). This path reads the few options these commands take without importing them and
prints the same JSON (tests hold the two paths byte for byte equal). Anything else
(help, human output, other options, any error) returns None and goes to the full command
line, which parses and reports as usual.

The catalog rows a lookup reads are kept beside the catalog after the first one
(lineage/store/kept_reads.py), so the next lookup answers from the lookup arrays without
starting DuckDB at all.
"""

from __future__ import annotations

import sys
from typing import Any

_DOCS_OPTIONS = {"--step": 0, "--rank": 0, "--window": 0, "--world-size": 1, "--stream": None}
_TRAINED_ON_OPTIONS = {"--stream": None, "--run": None}


def run_fast(argv: list[str]) -> int | None:
    """The exit code when this path answered, else None (use the full command line)."""
    parsed = _parse(argv)
    if parsed is None:
        return None
    from lineage.store.no_pandas import pandas_refused

    # pyarrow would import pandas for its first conversion, if a lookup reads Parquet
    with pandas_refused():
        return _answer(*parsed)


def _answer(store_path: str | None, command: str, options: dict[str, Any],
            positional: list[str]) -> int | None:
    if (command == "docs" and ("--step" not in options or positional)) or (
            command == "trained-on" and not positional):
        return None
    try:
        from lineage.api import open_store
        from lineage.store.base import take_notices
        from lineage.store.lookup_reads import with_kept_reads

        store = open_store(store_path)
        # The catalog rows an earlier lookup kept (lineage/store/kept_reads.py): no DuckDB.
        text, code = with_kept_reads(
            store, lambda: _question(store, command, options, positional))
        if take_notices():  # e.g. damaged lookup arrays: the full command line says so
            return None
    except Exception:  # noqa: BLE001 - the full command line reports every error, as always
        return None
    sys.stdout.write(text + "\n")
    return code


def _question(store: Any, command: str, options: dict[str, Any], positional: list[str],
              ) -> tuple[str, int]:
    """The JSON text and exit code of the question. Each question's JSON object as is,
    not the Store method's typed answer: the answer classes take ~3 ms to set up in a
    fresh process, a lookup takes less. The tests hold this output equal to the full
    command line's, which prints the typed answer's to_json()."""
    from lineage.errors import EXIT_NO
    from lineage.jsonout import json_text

    if command == "docs":
        from lineage.stream.query import docs_in_step

        return json_text(docs_in_step(
            store, options["--step"], stream=options.get("--stream"),
            rank=options.get("--rank"), world_size=options.get("--world-size"),
            window=options.get("--window"))), 0
    from lineage.text.trained_on import all_found, trained_on

    answer = trained_on(store, positional, stream=options.get("--stream"),
                        run=options.get("--run"))
    return json_text(answer), 0 if all_found(answer) else EXIT_NO


def _parse(argv: list[str]) -> tuple[str | None, str, dict[str, Any], list[str]] | None:
    args = list(argv)
    store: str | None = None
    while args and args[0].startswith("--store"):
        name, value, args = _take(args)
        if name != "--store" or value is None:
            return None
        store = value
    if not args or args[0] not in ("docs", "trained-on"):
        return None
    command, rest = args[0], args[1:]
    known = _DOCS_OPTIONS if command == "docs" else _TRAINED_ON_OPTIONS
    options: dict[str, Any] = {}
    positional: list[str] = []
    saw_json = False
    while rest:
        if rest[0] == "--json":
            saw_json, rest = True, rest[1:]
            continue
        if not rest[0].startswith("-"):
            positional.append(rest.pop(0))
            continue
        name, value, rest = _take(rest)
        if name not in known or value is None or name in options:
            return None
        minimum = known[name]
        if minimum is not None:
            number = _integer(value, minimum)
            if number is None:
                return None
            options[name] = number
        else:
            options[name] = value
    if not saw_json:
        return None
    return store, command, options, positional


def _take(args: list[str]) -> tuple[str, str | None, list[str]]:
    """(`--name`, value, the rest) from `--name value` or `--name=value`."""
    head = args[0]
    if "=" in head:
        name, value = head.split("=", 1)
        return name, value, args[1:]
    if len(args) < 2 or args[1].startswith("-"):
        return head, None, args[1:]
    return head, args[1], args[2:]


def _integer(value: str, minimum: int) -> int | None:
    return int(value) if value.isascii() and value.isdigit() and int(value) >= minimum else None


