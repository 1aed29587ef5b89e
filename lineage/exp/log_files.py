"""The stdout and stderr of experiment commands, kept in the store (up to `--max-log`).

Each stream is a zstd file under `logs/`, named by the BLAKE3 of the bytes it holds
(`logs/<hex>.zst`), so the same output is stored once: the bytes the command wrote, or,
when they were more than `--max-log`, their head and tail (the record's `kept` says which
and gives their BLAKE3; the whole stream's BLAKE3 and length stay in the record). A file
is written durably (temp file, fsync, rename, fsync of the folder) before the record that
names it is committed, and `experiment_logs` registers it with the size and SHA-256 of the
compressed file (`lineage store verify` re-checks them) next to the BLAKE3 and length of
the bytes it holds (checked again on every read). A file no record registers is garbage
from an interrupted run; `lineage store gc` removes it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import blake3

from lineage.errors import NotFoundError, StoreError, UsageError
from lineage.exp.runner import STREAMS
from lineage.store.base import BaseStore
from lineage.store.durable import publish, remove_quietly, sha256_file

LOGS_DIR = "logs"
_CHUNK = 1 << 16


def log_name(content: str) -> str:
    """`logs/<hex>.zst` for content `blake3:<hex>`."""
    return f"{LOGS_DIR}/{content.split(':', 1)[1]}.zst"


def stored_content(summary: dict[str, Any]) -> tuple[str, int]:
    """(BLAKE3, length) of the bytes stored for a stream: the whole stream, or, when
    --max-log cut it, its head and tail (`kept`)."""
    kept = summary.get("kept") or summary
    return kept["blake3"], kept["bytes"]


def publish_logs(store: BaseStore, staging: Path, record: dict[str, Any]) -> list[dict[str, Any]]:
    """Move a run's staged logs into the store; the rows to register with the record.

    A stream whose capture was incomplete (a process lineage could not end still held
    it, or the disk failed) is left out: its digest stays in the record.
    """
    command = record.get("command") or {}
    rows = []
    (store.root / LOGS_DIR).mkdir(exist_ok=True)
    for stream in STREAMS:
        summary, staged = command.get(stream), staging / f"{stream}.zst"
        if not summary or not staged.is_file() or set(summary) & {"incomplete", "log_error"}:
            continue
        content, n_bytes = stored_content(summary)
        final = store.root / log_name(content)
        if _holds(final, content, n_bytes):
            remove_quietly(staged)  # the same bytes are already stored
        else:  # none yet, or a leftover that does not hold them: the staged file wins
            publish(staged, final)
        rows.append({"stream": stream, "content": content, "n_bytes": n_bytes,
                     "path": log_name(content), "stored_bytes": final.stat().st_size,
                     "stored_sha256": sha256_file(final)})
    return rows


def _holds(path: Path, content: str, n_bytes: int) -> bool:
    """`path` exists and decompresses to `n_bytes` bytes with BLAKE3 `content`."""
    if not path.is_file():
        return False
    try:
        _check_content(path, content, n_bytes)
    except Exception:  # damaged, or not zstd: a write that was interrupted left it
        return False
    return True


def store_log_file(store: BaseStore, compressed: Path, content: str,
                   n_bytes: int) -> dict[str, Any]:
    """Register-ready row for a zstd file that arrived from elsewhere (a bundle), after
    checking it decompresses to `n_bytes` bytes with BLAKE3 `content`."""
    _check_content(compressed, content, n_bytes)
    (store.root / LOGS_DIR).mkdir(exist_ok=True)
    final = store.root / log_name(content)
    if final.is_file():
        remove_quietly(compressed)
    else:
        publish(compressed, final)
    return {"content": content, "n_bytes": n_bytes, "path": log_name(content),
            "stored_bytes": final.stat().st_size, "stored_sha256": sha256_file(final)}


def register_logs(con: Any, exp_id: str, rows: list[dict[str, Any]]) -> None:
    """Inside the transaction that stores the record."""
    for row in rows:
        con.execute("INSERT OR IGNORE INTO experiment_logs VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [exp_id, row["stream"], row["content"], row["n_bytes"], row["path"],
                     row["stored_bytes"], row["stored_sha256"]])


def find_log(store: BaseStore, exp_id: str, stream: str) -> dict[str, Any] | None:
    with store.reader(views=False) as con:
        row = con.execute("SELECT content, n_bytes, path FROM experiment_logs WHERE "
                          "experiment = ? AND stream = ?", [exp_id, stream]).fetchone()
    return None if row is None else {"content": row[0], "n_bytes": row[1], "path": row[2]}


def iter_log(store: BaseStore, exp_id: str, stream: str) -> Iterator[bytes]:
    """The bytes the command wrote to `stream`, checked against their BLAKE3 first."""
    if stream not in STREAMS:
        raise UsageError(f"no stream {stream!r}: {' or '.join(STREAMS)}")
    found = find_log(store, exp_id, stream)
    if found is None:
        raise NotFoundError(f"{exp_id} has no stored {stream} (recorded before lineage kept "
                            "whole logs, or its capture was incomplete: `exp show` says)")
    path = store.root / found["path"]
    _check_content(path, found["content"], found["n_bytes"])
    yield from _decompressed(path)


def _check_content(path: Path, content: str, n_bytes: int) -> None:
    hasher, size = blake3.blake3(), 0
    try:
        for chunk in _decompressed(path):
            hasher.update(chunk)
            size += len(chunk)
    except FileNotFoundError as exc:
        raise StoreError(f"{path}: the log is missing; run `lineage store verify`") from exc
    except Exception as exc:  # zstandard.ZstdError and friends: a damaged frame
        raise StoreError(f"{path}: the log cannot be decompressed ({exc})") from exc
    if "blake3:" + hasher.hexdigest() != content or size != n_bytes:
        raise StoreError(f"{path}: the log does not match its digest {content}; "
                         "run `lineage store verify`")


def _decompressed(path: Path) -> Iterator[bytes]:
    import zstandard

    with open(path, "rb") as handle:
        reader = zstandard.ZstdDecompressor().stream_reader(handle, read_across_frames=True)
        while chunk := reader.read(_CHUNK):
            yield chunk
