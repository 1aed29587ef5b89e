"""`lineage serve`: the store's questions over HTTP (docs/serve.md)."""

from __future__ import annotations

import ipaddress
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from lineage.cli import output
from lineage.cli.common import current_store
from lineage.errors import StoreError, UsageError

if TYPE_CHECKING:
    from lineage.api import Store


def serve(
    ctx: typer.Context,
    host: Annotated[str, typer.Option(help="The address to listen on (loopback by "
                                      "default; any other needs --token-file).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="The port.", min=0, max=65535)] = 8000,
    token_file: Annotated[
        Path | None, typer.Option(help="A file holding the bearer token every request must "
                                  "send (Authorization: Bearer TOKEN); a browser signs in "
                                  "with it at /sign-in.")] = None,
    workers: Annotated[int, typer.Option(help="Server processes, each with its own "
                                         "reader.", min=1)] = 1,
    allow_host: Annotated[
        list[str] | None, typer.Option(help="Another name clients use for this server in "
                                       "the Host header (repeatable).")] = None,
    lookup_copies: Annotated[
        bool, typer.Option("--lookup-copies", help="Copy the lookup tables and the text "
                           "index into a private temporary folder at start-up, as Arrow IPC "
                           "batches that need no decoding: `docs` and `trained-on` by hash "
                           "then take a third to a sixth of the CPU and text matching a "
                           "third to a half, for about twice the store's size on disk "
                           "while the server runs.")] = False,
    sql_max_memory: Annotated[
        str, typer.Option(help="Memory one SQL query may use, such as 512MiB or 2GB: each "
                          "runs in a process of its own, bounded to this.")] = "1GiB",
) -> None:
    """Serve the store read-only over HTTP: the JSON API (each answer exactly the
    command's --json), /openapi.json and the web explorer, until interrupted."""
    import uvicorn

    from lineage.store.no_pandas import keep_pandas_out

    keep_pandas_out()  # no answer needs pandas: pyarrow would import it per process
    from lineage.serve.app import (
        COPIES_ENV,
        HOSTS_ENV,
        ROOT_ENV,
        SQL_MEMORY_ENV,
        TOKEN_FILE_ENV,
        read_token,
    )
    from lineage.serve.tcp import UVICORN_SETTINGS
    from lineage.serve.workers import can_hand_over, listen
    from lineage.serve.workers import serve as serve_workers
    from lineage.stream.build import memory_bytes

    sql_memory = memory_bytes(sql_max_memory)
    if sql_memory < 1 << 20:
        raise UsageError(f"--sql-max-memory {sql_max_memory}: give at least 1MiB")
    store = current_store(ctx)  # an existing store, or the usual one-line error
    loopback = _is_loopback(host)
    token = read_token(token_file) if token_file is not None else None
    if not loopback and token is None:
        raise UsageError(f"--host {host} is not a loopback address: give --token-file so "
                         "that only holders of the token can ask")
    hosts = ["*"] if not loopback else ["127.0.0.1", "localhost", "::1", "[::1]"]
    os.environ[ROOT_ENV] = str(store.root.resolve())
    os.environ[HOSTS_ENV] = ",".join([*hosts, *(allow_host or [])])
    os.environ[SQL_MEMORY_ENV] = str(sql_memory)
    if token_file is not None:
        os.environ[TOKEN_FILE_ENV] = str(token_file.resolve())
    dealt = workers > 1 and can_hand_over()  # connections dealt to the workers in turn
    listener = listen(host, port) if dealt else None
    with _copies(store, lookup_copies) as copies:
        if copies is not None:
            os.environ[COPIES_ENV] = copies
        shown = f"[{host}]" if ":" in host else host
        output.info(f"serving {store.root} read-only at http://{shown}:{port}/ (API under "
                    f"/api, /openapi.json); Ctrl-C stops")
        if listener is not None:
            serve_workers(listener, workers)
        else:
            uvicorn.run("lineage.serve.app:app_from_environment", factory=True, host=host,
                        port=port, workers=workers, **UVICORN_SETTINGS)


@contextmanager
def _copies(store: Store, wanted: bool) -> Iterator[str | None]:
    """The lookup copies made for this server ("digest:folder"), removed when it stops."""
    if not wanted:
        yield None
        return
    from lineage.store.lookup_copy_write import make_copies

    folder = Path(tempfile.mkdtemp(prefix="lineage-lookup-copies-"))  # this user's only
    try:
        started = time.monotonic()
        with output.progress_bar(True) as progress:
            try:
                digest = make_copies(store, folder, progress=progress)
            except OSError as exc:  # a full disk, most likely
                raise StoreError(f"cannot write the lookup copies to {folder}: "
                                 f"{exc.strerror} (they take about three times the lookup "
                                 "tables' Parquet size; TMPDIR chooses where)") from None
        size = sum(path.stat().st_size for path in folder.iterdir())
        shown = f"{size / 1e9:.2f} GB" if size >= 1e8 else f"{size / 1e6:.1f} MB"
        output.info(f"copied the lookup tables to {folder} ({shown}, "
                    f"{time.monotonic() - started:.1f} s); removed when the server stops")
        yield f"{digest}:{folder}"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
