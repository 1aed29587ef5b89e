"""Hostile input: every attack on every entry point that reads it, refused the same way.

A table of entry points (the Python API and the CLI of each ingest that reads files) and a
table of cases, grouped by attack class. Each case builds one hostile input of one kind;
every entry point that takes that kind must refuse it with exit 2 (a `LineageError` from
the API), one line on stderr naming the file and the rule, no traceback, and a store whose
every file is byte-identical afterwards.

To cover a new entry point, add an `Entry` naming the input kinds it reads; every case of
those kinds then runs on it. To cover a new attack, add a `Case`.

Unreadable files cannot be made with chmod here (the tests run as root, who reads any
mode): the case replaces `input_rules.open_fd`, the one call that opens input files, or
`os.scandir` for a folder, so that they raise PermissionError for the chosen path.
"""

from __future__ import annotations

import gzip
import json
import os
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from lineage.api import Store
from lineage.errors import LineageError
from lineage.ingest import ingest_corpus, input_rules
from lineage.ingest.steps import ingest_steps
from lineage.ingest.windows import ingest_windows
from lineage.runs.chain import canonical_json

from ..conftest import Cli, holding, write_jsonl

# ---------------------------------------------------------------- entry points


@dataclass(frozen=True)
class Entry:
    name: str
    kinds: tuple[str, ...]  # the kinds of input this entry point reads
    api: Callable[[Store, Path], object]
    argv: Callable[[Path], list[str]]


ENTRIES = (
    Entry("ingest corpus", ("folder", "jsonl", "parquet", "manifest", "special"),
          lambda store, p: ingest_corpus(store, [p], corpus="hostile"),
          lambda p: ["ingest", "corpus", str(p), "--corpus", "hostile"]),
    Entry("ingest corpus --format jsonl", ("shard-folder", "special"),
          lambda store, p: ingest_corpus(store, [p], corpus="hostile", fmt="jsonl"),
          lambda p: ["ingest", "corpus", str(p), "--corpus", "hostile", "--format", "jsonl"]),
    Entry("ingest corpus --links refuse", ("folder", "refused-links"),
          lambda store, p: ingest_corpus(store, [p], corpus="hostile", links="refuse"),
          lambda p: ["ingest", "corpus", str(p), "--corpus", "hostile", "--links", "refuse"]),
    Entry("ingest corpus --links follow", ("folder", "followed-links"),
          lambda store, p: ingest_corpus(store, [p], corpus="hostile", links="follow"),
          lambda p: ["ingest", "corpus", str(p), "--corpus", "hostile", "--links", "follow"]),
    Entry("ingest corpus --format jsonl --links refuse", ("refused-shard-links",),
          lambda store, p: ingest_corpus(store, [p], corpus="hostile", fmt="jsonl",
                                         links="refuse"),
          lambda p: ["ingest", "corpus", str(p), "--corpus", "hostile", "--format", "jsonl",
                     "--links", "refuse"]),
    Entry("ingest corpus --fingerprints", ("manifest-texts",),
          lambda store, p: ingest_corpus(store, [p], corpus="hostile", fingerprints=True),
          lambda p: ["ingest", "corpus", str(p), "--corpus", "hostile", "--fingerprints"]),
    Entry("ingest windows", ("windows", "special"),
          lambda store, p: ingest_windows(store, p, stream="w", corpus="base", seq_len=16,
                                          batch=2),
          lambda p: ["ingest", "windows", str(p), "--stream", "w", "--corpus", "base",
                     "--seq-len", "16", "--batch", "2"]),
    Entry("ingest steps", ("steps", "special"),
          lambda store, p: ingest_steps(store, p, run="r", stream=None, world_size=1),
          lambda p: ["ingest", "steps", str(p), "--run", "r", "--world-size", "1"]),
)

# ---------------------------------------------------------------- cases


@dataclass(frozen=True)
class Case:
    name: str
    kind: str
    rule: str  # what the one-line error must say after the file name
    build: Callable[[Path], Path]  # makes the input under a fresh folder, returns the PATH
    patch: Callable[[pytest.MonkeyPatch, Path], None] | None = None
    names: str = field(default="")  # the file the error must name; default: the PATH


def _jsonl(name: str, *records: dict[str, Any] | str) -> Callable[[Path], Path]:
    return lambda d: write_jsonl(d / name, list(records))


def _shard_folder(act: Callable[[Path, Path], Any]) -> Callable[[Path], Path]:
    """A folder `s` of JSONL shards holding one good shard, then `act(work, folder)`."""
    def build(d: Path) -> Path:
        (d / "s").mkdir()
        write_jsonl(d / "s" / "a.jsonl", [{"text": "a"}])
        act(d, d / "s")
        return d / "s"
    return build


def _raw(name: str, data: bytes) -> Callable[[Path], Path]:
    def build(d: Path) -> Path:
        (d / name).write_bytes(data)
        return d / name
    return build


def _parquet(name: str, table: pa.Table) -> Callable[[Path], Path]:
    def build(d: Path) -> Path:
        pq.write_table(table, d / name)
        return d / name
    return build


def _gzip_bad_crc(record: dict[str, Any] | None = None) -> bytes:
    line = (json.dumps(record) + "\n").encode() if record else b'{"text": "hello"}\n'
    data = bytearray(gzip.compress(line * 1000, mtime=0))
    data[-8] ^= 1  # the CRC32 in the trailer
    return bytes(data)


def _gzip_bad_length() -> bytes:
    data = bytearray(gzip.compress(b'{"text": "hello"}\n' * 1000, mtime=0))
    data[-1] ^= 1  # ISIZE
    return bytes(data)


def _zstd_bad_checksum() -> bytes:
    data = bytearray(zstandard.ZstdCompressor(write_checksum=True).compress(
        b'{"text": "hello"}\n' * 1000))
    data[-1] ^= 1  # the content checksum
    return bytes(data)


def _zstd_cut() -> bytes:
    data = zstandard.ZstdCompressor().compress(
        "".join(json.dumps({"text": f"doc {i} " * 50}) + "\n" for i in range(200)).encode())
    return data[: len(data) // 2]


def _folder(files: dict[str, bytes]) -> Callable[[Path], Path]:
    def build(d: Path) -> Path:
        root = d / "corpus"
        for name, data in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_bytes(data)
        return root
    return build


def _with(build: Callable[[Path], Path],
          act: Callable[[Path, Path], Any]) -> Callable[[Path], Path]:
    def built(d: Path) -> Path:
        path = build(d)
        act(d, path)
        return path
    return built


def _fifo_in(root_build: Callable[[Path], Path], name: str) -> Callable[[Path], Path]:
    return _with(root_build, lambda d, root: os.mkfifo(root / name))


def _socket_in(d: Path, root: Path) -> None:
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(root / "web" / "sock"))
    sock.close()  # the socket file stays


def _refuse_open(suffix: str) -> Callable[[pytest.MonkeyPatch, Path], None]:
    def patch(monkeypatch: pytest.MonkeyPatch, _path: Path) -> None:
        real = input_rules.open_fd

        def refuse(path: str | Path, flags: int) -> int:
            if str(path).endswith(suffix):
                raise PermissionError(13, "Permission denied", str(path))
            return real(path, flags)
        monkeypatch.setattr(input_rules, "open_fd", refuse)
    return patch


def _refuse_listing(suffix: str) -> Callable[[pytest.MonkeyPatch, Path], None]:
    def patch(monkeypatch: pytest.MonkeyPatch, _path: Path) -> None:
        real = os.scandir

        def refuse(path: Any = ".") -> Any:
            if str(path).rstrip("/").endswith(suffix):
                raise PermissionError(13, "Permission denied", str(path))
            return real(path)
        monkeypatch.setattr(os, "scandir", refuse)
    return patch


class _ChangingReads:
    """Stands in for `input_rules.read_into`: after the first chunk of the target is read,
    the file on disk is cut (or grown), as a writer would do meanwhile."""

    def __init__(self, target: str, grow: bool) -> None:
        self.target, self.grow, self.reads = target, grow, 0
        self.real = input_rules.read_into

    def __call__(self, fd: int, buffer: Any) -> int:
        count = self.real(fd, buffer)
        path = Path(os.readlink(f"/proc/self/fd/{fd}"))
        if path.name == self.target:
            self.reads += 1
            if self.reads == 1 and self.grow:
                with open(path, "ab") as out:
                    out.write(b"more")
            elif self.reads == 1:
                os.truncate(path, 10)
        return count


def _append_after_check(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    """The shard grows after its values were checked and before DuckDB loads it."""
    from lineage.ingest.readers import text_shards

    real = text_shards.check_shard_values

    def check_then_grow(task: Any) -> Any:
        checked = real(task)
        with open(task.path, "ab") as out:
            out.write(b'{"text": 5}\n')
        return checked
    monkeypatch.setattr(text_shards, "check_shard_values", check_then_grow)


def _fifo_after_listing(monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
    """A listed file is swapped for a FIFO before it is read: refused, not waited on."""
    from lineage.ingest import corpus

    real = corpus.list_directory

    def list_then_swap(folder: Path, **options: Any) -> Any:
        listing = real(folder, **options)
        target = folder / "web" / "a.txt"
        target.unlink()
        os.mkfifo(target)
        return listing
    monkeypatch.setattr(corpus, "list_directory", list_then_swap)


def _changing(target: str, *, grow: bool) -> Callable[[pytest.MonkeyPatch, Path], None]:
    def patch(monkeypatch: pytest.MonkeyPatch, _path: Path) -> None:
        monkeypatch.setattr(input_rules, "read_into", _ChangingReads(target, grow))
    return patch


_DOC = {"doc_id": "a", "source": "web", "uri": None, "n_bytes": 5, "n_tokens": 5,
        "content_hash": "0" * 64}
_WIN = {"step": 0, "rank": 0, "window": 0, "doc_id": "a.txt", "token_start": 0,
        "token_end": 8}
_HEADER = canonical_json({"algorithm": "x", "chain": "foreign-chain", "genesis": "g",
                          "world_size": 1})
_SMALL = {"web/a.txt": b"hello hostile world\n"}


def _huge_line(name: str, first: dict[str, Any] | None = None) -> Callable[[Path], Path]:
    """A JSONL file (plain or .gz) whose line after `first` is one byte over 16 MiB."""
    def build(d: Path) -> Path:
        opener: Any = gzip.open if name.endswith(".gz") else open
        with opener(d / name, "wb") as out:
            if first is not None:
                out.write(json.dumps(first).encode() + b"\n")
            text = b"x" * ((16 << 20) + 1 - len(b'{"text": ""}'))
            out.write(b'{"text": "' + text + b'"}\n')
        return d / name
    return build



def _manifest_for(name: str, data: bytes, n_bytes: int | None = None) -> Callable[[Path], Path]:
    """A ready manifest naming one local file (whose content hash is right)."""
    import blake3

    def build(d: Path) -> Path:
        (d / "doc.txt").write_bytes(data) if name == "doc.txt" else None
        row = {**_DOC, "uri": name, "content_hash": blake3.blake3(data).hexdigest(),
               "n_bytes": len(data) if n_bytes is None else n_bytes, "n_tokens": len(data)}
        return write_jsonl(d / "m.jsonl", [row])
    return build


CASES = (
    # -- compressed input whose checksum or length fails: read to the end, verified
    Case("gzip-bad-crc", "jsonl", "compressed-integrity", _raw("s.jsonl.gz", _gzip_bad_crc())),
    Case("gzip-bad-isize", "jsonl", "compressed-integrity",
         _raw("s.jsonl.gz", _gzip_bad_length())),
    Case("gzip-cut", "jsonl", "compressed-integrity",
         _raw("s.jsonl.gz", gzip.compress(b'{"text": "hi"}\n' * 500, mtime=0)[:-20])),
    Case("manifest-gzip-bad-crc", "manifest", "compressed-integrity",
         _raw("m.jsonl.gz", _gzip_bad_crc(_DOC))),
    Case("windows-gzip-bad-crc", "windows", "compressed-integrity",
         _raw("w.jsonl.gz", _gzip_bad_crc(_WIN))),
    Case("zstd-bad-checksum", "jsonl", "compressed-integrity",
         _raw("s.jsonl.zst", _zstd_bad_checksum())),
    Case("zstd-cut", "jsonl", "compressed-integrity", _raw("s.jsonl.zst", _zstd_cut())),
    Case("zstd-trailing-garbage", "jsonl", "compressed-integrity",
         _raw("s.jsonl.zst", zstandard.ZstdCompressor().compress(b'{"text": "a"}\n') +
              b"\x00garbage")),
    # -- values of the wrong type: nothing coerced
    Case("text-number", "jsonl", "line 2: value-type: `text` must be a string, not an integer",
         _jsonl("s.jsonl", {"text": "ok"}, {"text": 5})),
    Case("text-list", "jsonl", "line 1: value-type: `text` must be a string, not a list",
         _jsonl("s.jsonl", {"text": ["a"]})),
    Case("text-object", "jsonl", "value-type: `text` must be a string, not an object",
         _jsonl("s.jsonl", {"text": {"a": 1}})),
    Case("text-null", "jsonl", "value-type: `text` must be a string, not null",
         _jsonl("s.jsonl", {"text": None})),
    Case("id-object", "jsonl", "value-type: `id` must be a string or an integer, not an object",
         _jsonl("s.jsonl", {"text": "a", "id": {"x": 1}})),
    Case("id-null", "jsonl", "value-type: `id` must be a string or an integer, not null",
         _jsonl("s.jsonl", {"text": "a", "id": None})),
    Case("id-float", "jsonl", "value-type: `id` must be a string or an integer, not a float",
         _jsonl("s.jsonl", {"text": "a", "id": 1.5})),
    Case("url-number", "jsonl", "value-type: `url` must be a string",
         _jsonl("s.jsonl", {"text": "a", "url": 7})),
    Case("nan-in-metadata", "jsonl", "line 1: not-a-number: NaN",
         _jsonl("s.jsonl", '{"text": "a", "metadata": {"score": NaN}}')),
    Case("parquet-text-int", "parquet", "value-type: column `text` must be a string, not int64",
         _parquet("s.parquet", pa.table({"text": [1, 2]}))),
    Case("parquet-text-struct", "parquet", "value-type: column `text` must be a string",
         _parquet("s.parquet", pa.table({"text": [{"a": "x"}]}))),
    Case("parquet-id-struct", "parquet", "value-type: column `id` must be a string or an "
         "integer", _parquet("s.parquet", pa.table({"text": ["a"], "id": [{"a": 1}]}))),
    Case("parquet-id-null", "parquet", "row 2: value-type: `id` is null",
         _parquet("s.parquet", pa.table({"text": ["a", "b"], "id": ["x", None]}))),
    Case("parquet-token-count-float", "parquet", "value-type: column `token_count` must be "
         "an integer, not double",
         _parquet("s.parquet", pa.table({"text": ["a"], "token_count": [float("nan")]}))),
    Case("parquet-token-count-string", "parquet", "value-type: column `token_count` must be "
         "an integer", _parquet("s.parquet", pa.table({"text": ["a"], "token_count": ["3"]}))),
    Case("manifest-n-bytes-string", "manifest", "record 1: value-type: `n_bytes` must be an "
         "integer, not a string", _jsonl("m.jsonl", {**_DOC, "n_bytes": "5"})),
    Case("manifest-n-tokens-float", "manifest", "value-type: `n_tokens` must be an integer, "
         "not a float", _jsonl("m.jsonl", {**_DOC, "n_tokens": 5.0})),
    Case("manifest-doc-id-object", "manifest", "value-type: `doc_id` must be a string",
         _jsonl("m.jsonl", {**_DOC, "doc_id": {"a": 1}})),
    Case("manifest-nan", "manifest", "record 1: not-a-number: NaN",
         _jsonl("m.jsonl", json.dumps(_DOC).replace('"n_tokens": 5', '"n_tokens": NaN'))),
    Case("manifest-parquet-float-bytes", "manifest", "value-type: column `n_bytes` must be "
         "an integer, not double",
         _parquet("m.parquet", pa.table({**{k: [v] for k, v in _DOC.items()},
                                         "uri": pa.array([None], pa.string()),
                                         "n_bytes": [5.0]}))),
    Case("windows-offset-string", "windows", "value-type: `token_start` must be an integer, "
         "not a string", _jsonl("w.jsonl", {**_WIN, "token_start": "0"})),
    Case("windows-offset-float", "windows", "value-type: `token_end` must be an integer, "
         "not a float", _jsonl("w.jsonl", {**_WIN, "token_end": 8.0})),
    Case("windows-parquet-float-step", "windows", "value-type: column `step` must be an "
         "integer", _parquet("w.parquet", pa.table({**{k: [v] for k, v in _WIN.items()},
                                                    "step": [0.0]}))),
    # -- nesting depth and integer ranges
    Case("deep-metadata", "jsonl", "line 1: nesting-depth: JSON nested deeper than 32",
         _jsonl("s.jsonl", '{"text": "a", "metadata": ' + "[" * 50_000 + "]" * 50_000 + "}")),
    Case("deep-first-record", "manifest", "nesting-depth: JSON nested deeper than 32",
         _jsonl("m.jsonl", '{"content_hash": ' + "[" * 50_000 + "]" * 50_000 + "}")),
    Case("id-out-of-range", "jsonl", "integer-range: `id` 1180591620717411303424 is outside",
         _jsonl("s.jsonl", {"text": "a", "id": 2**70})),
    Case("manifest-n-bytes-2^64", "manifest", "record 1: integer-range: `n_bytes` "
         "18446744073709551616 is outside", _jsonl("m.jsonl", {**_DOC, "n_bytes": 2**64})),
    Case("manifest-uint64-above-range", "manifest", "row 1: integer-range: `n_tokens` "
         "18446744073709551615 is outside",
         _parquet("m.parquet", pa.table({**{k: [v] for k, v in _DOC.items()},
                                         "uri": pa.array([None], pa.string()),
                                         "n_tokens": pa.array([2**64 - 1], pa.uint64())}))),
    Case("manifest-total-above-2^63", "manifest", "integer-range: the corpus's n_bytes add up",
         _jsonl("m.jsonl", {**_DOC, "n_bytes": 2**62 + 1},
                {**_DOC, "doc_id": "b", "n_bytes": 2**62},
                {**_DOC, "doc_id": "c", "n_bytes": 2**62})),
    Case("huge-first-line", "jsonl", "line 1: line-size: a line longer than 16 MiB",
         _huge_line("s.jsonl")),
    Case("huge-line", "jsonl", "line 2: line-size: a line longer than 16 MiB",
         _huge_line("s.jsonl.gz", {"text": "a"})),
    Case("windows-huge-line", "windows", "line 2: line-size: a line longer than 16 MiB",
         _huge_line("w.jsonl", _WIN)),
    Case("windows-deep", "windows", "line 1: nesting-depth",
         _jsonl("w.jsonl", json.dumps(_WIN)[:-1] + ', "x": ' + "[" * 50_000 + "]" * 50_000 +
                "}")),
    Case("windows-nan", "windows", "line 1: not-a-number: NaN",
         _jsonl("w.jsonl", json.dumps(_WIN).replace('"token_start": 0', '"token_start": NaN'))),
    Case("windows-rank-beyond-batch", "windows", "rank-range: rank must be below --batch",
         _jsonl("w.jsonl", {**_WIN, "rank": 7})),
    Case("windows-huge-offset", "windows", "integer-range: `token_end` 36893488147419103232",
         _jsonl("w.jsonl", {**_WIN, "token_end": 2**65})),
    # -- files and folders that cannot be read: never skipped silently
    Case("unreadable-file", "folder", "unreadable: cannot be read (Permission denied)",
         _folder({**_SMALL, "web/locked.txt": b"secret"}), _refuse_open("locked.txt"),
         names="locked.txt"),
    Case("unreadable-subfolder", "folder", "unreadable: cannot be read (Permission denied)",
         _folder({**_SMALL, "locked/b.txt": b"x"}), _refuse_listing("locked"),
         names="locked"),
    Case("unreadable-shard-folder", "shard-folder", "unreadable: cannot be read",
         _shard_folder(lambda d, s: (s / "locked").mkdir()),
         _refuse_listing("locked"), names="locked"),
    Case("unreadable-shard", "jsonl", "unreadable: cannot be read (Permission denied)",
         _jsonl("s.jsonl", {"text": "a"}), _refuse_open("s.jsonl")),
    Case("dangling-link", "folder", "unreadable: a link whose target does not exist",
         _with(_folder(_SMALL), lambda d, r: (r / "web" / "gone.txt").symlink_to(d / "nope")),
         names="gone.txt"),
    Case("manifest-uri-unreadable", "manifest-texts", "unreadable: cannot be read",
         _manifest_for("doc.txt", b"some text"), _refuse_open("doc.txt")),
    # -- links leaving the folder (with --links refuse), and loops (in every mode)
    Case("link-out-of-folder", "refused-links", "symlink-outside: a link to",
         _with(_folder(_SMALL), lambda d, r: ((d / "secret.txt").write_bytes(b"s"),
                                              (r / "web" / "out.txt").symlink_to(
                                                  d / "secret.txt"))),
         names="out.txt"),
    Case("folder-link-out-of-folder", "refused-links", "symlink-outside: a link to",
         _with(_folder(_SMALL), lambda d, r: (r / "etc").symlink_to("/etc")), names="etc"),
    Case("link-to-a-fifo", "folder", "special-file: a FIFO",
         _with(_folder(_SMALL), lambda d, r: (os.mkfifo(d / "pipe"),
                                              (r / "web" / "p.txt").symlink_to(d / "pipe"))),
         names="p.txt"),
    Case("link-to-a-device", "folder", "special-file: a device",
         _with(_folder(_SMALL), lambda d, r: (r / "web" / "zero").symlink_to("/dev/zero")),
         names="zero"),
    Case("folder-link-holding-itself", "followed-links", "symlink-loop: a link to a folder "
         "that holds it", _with(_folder(_SMALL), lambda d, r: (r / "web" / "up").symlink_to(
             r)), names="up"),
    Case("link-loop", "folder", "symlink-loop: a symbolic link that loops",
         _with(_folder(_SMALL), lambda d, r: ((r / "web" / "x").symlink_to(r / "web" / "y"),
                                              (r / "web" / "y").symlink_to(r / "web" / "x"))),
         names="/x"),
    Case("shard-link-out-of-folder", "refused-shard-links", "symlink-outside: a link to",
         _shard_folder(lambda d, s: (s / "b.jsonl").symlink_to(write_jsonl(
             d / "elsewhere.jsonl", [{"text": "b"}]))), names="b.jsonl"),
    # -- special files: refused without being opened
    Case("fifo-in-folder", "folder", "special-file: a FIFO",
         _fifo_in(_folder(_SMALL), "web/pipe"), names="pipe"),
    Case("socket-in-folder", "folder", "special-file: a socket",
         _with(_folder(_SMALL), _socket_in), names="sock"),
    Case("fifo-shard-in-folder", "shard-folder", "special-file: a FIFO",
         _shard_folder(lambda d, s: os.mkfifo(s / "b.jsonl")),
         names="b.jsonl"),
    Case("fifo-swapped-in-after-listing", "folder", "special-file: a FIFO",
         _folder(_SMALL), _fifo_after_listing, names="a.txt"),
    Case("fifo-as-path", "special", "special-file: a FIFO",
         lambda d: (os.mkfifo(d / "pipe.jsonl"), d / "pipe.jsonl")[1]),
    Case("device-as-path", "special", "special-file: a device", lambda d: Path("/dev/zero")),
    Case("manifest-uri-fifo", "manifest-texts", "special-file: a FIFO",
         _with(_manifest_for("pipe.txt", b"x"), lambda d, p: os.mkfifo(d / "pipe.txt"))),
    Case("manifest-uri-device", "manifest-texts", "special-file: a device",
         _manifest_for("/dev/zero", b"x")),
    # -- files that change while they are read; no SIGBUS on a cut file
    Case("file-cut-while-read", "folder", "changed-while-read",
         _folder({**_SMALL, "web/big.txt": b"b" * 300_000}),
         _changing("big.txt", grow=False), names="big.txt"),
    Case("large-file-cut-while-read", "folder", "changed-while-read",
         _folder({**_SMALL, "web/big.bin": b"\x01" * (5 << 20)}),
         _changing("big.bin", grow=False), names="big.bin"),
    Case("file-grown-while-read", "folder", "changed-while-read",
         _folder({**_SMALL, "web/big.txt": b"b" * 300_000}),
         _changing("big.txt", grow=True), names="big.txt"),
    Case("shard-grown-after-check", "jsonl", "changed-while-read: size",
         _jsonl("s.jsonl", {"text": "a"}), _append_after_check),
    # -- ready manifests whose sizes disagree with the files read for fingerprints
    Case("manifest-size-differs", "manifest-texts", "manifest-size: n_bytes of 'a' is 99",
         _manifest_for("doc.txt", b"some text", n_bytes=99)),
    # -- step logs: the existing refusals of ingest steps
    Case("steps-cr", "steps", "line 2: CR in a line",
         _raw("steps.jsonl", (_HEADER + "\n" + '{"step":0}\r\n').encode())),
    Case("steps-deep", "steps", "line 2: JSON nested deeper than 32 levels",
         _raw("steps.jsonl", (_HEADER + "\n" + '{"step":0,"x":' + "[" * 40_000 +
                              "]" * 40_000 + "}\n").encode())),
    Case("steps-huge-step", "steps", "line 2: record has no integer `step`",
         _raw("steps.jsonl", (_HEADER + "\n" + '{"step":' + "9" * 40 + "}\n").encode())),
    Case("steps-malformed", "steps", "line 2: malformed JSON",
         _raw("steps.jsonl", (_HEADER + '\n{"step":\n').encode())),
    Case("steps-out-of-order", "steps", "line 3: out of step order",
         _raw("steps.jsonl", (_HEADER + '\n{"step":0}\n{"step":2}\n').encode())),
    Case("steps-not-utf8", "steps", "cannot read the step log",
         _raw("steps.jsonl", _HEADER.encode() + b'\n{"step":0,"x":"\xff"}\n')),
)

# ---------------------------------------------------------------- the matrix


def _matrix() -> Iterator[Any]:
    for entry in ENTRIES:
        for case in CASES:
            if case.kind in entry.kinds:
                for way in ("api", "cli"):
                    yield pytest.param(entry, case, way,
                                       id=f"{entry.name.replace(' ', '_')}-{case.name}-{way}")


def test_every_kind_is_read_by_some_entry_point() -> None:
    read = {kind for entry in ENTRIES for kind in entry.kinds}
    assert {case.kind for case in CASES} <= read


@pytest.fixture(scope="module")
def base_template(fresh_store: Callable[[Path], Store],
                  tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("base")
    store = fresh_store(root / "store")
    folder = root / "base"
    folder.mkdir()
    (folder / "a.txt").write_bytes(b"0123456789abcdef")
    ingest_corpus(store, [folder], corpus="base")
    return store.root


@pytest.fixture
def base(store: Store, base_template: Path) -> Store:
    """A store holding one small corpus (window logs refer to its documents)."""
    return holding(store, base_template)


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


@pytest.mark.parametrize(("entry", "case", "way"), list(_matrix()))
def test_hostile_input_is_refused(
    base: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry: Entry, case: Case,
    way: str,
) -> None:
    work = tmp_path / "in"
    work.mkdir()
    path = case.build(work)
    if case.patch is not None:
        case.patch(monkeypatch, path)
    before = _snapshot(base.root)
    named = case.names or str(path)
    if way == "api":
        with pytest.raises(LineageError) as caught:
            entry.api(base, path)
        message = str(caught.value)
        assert "\n" not in message
    else:
        result = Cli(base.root)(*entry.argv(path), code=2)
        message = result.stderr
        assert message.startswith("error: ") and message.count("\n") == 1, message
        assert "Traceback" not in result.output and result.stdout == ""
    assert named in message and case.rule in message, message
    assert _snapshot(base.root) == before


def test_gzip_checks_its_crc_only_at_the_end(tmp_path: Path) -> None:
    """Why a shard is read to its end before it is trusted: the first lines of a damaged
    gzip file read fine, and only the end says the CRC is wrong."""
    path = _raw("s.jsonl.gz", _gzip_bad_crc())(tmp_path)
    with gzip.open(path) as handle:
        assert handle.readline() == b'{"text": "hello"}\n'
        with pytest.raises(gzip.BadGzipFile, match="CRC check failed"):
            handle.read()


def test_a_zstd_stream_reader_stops_silently_at_a_cut_frame(tmp_path: Path) -> None:
    """Why zstd frames are decompressed one by one and checked to their end: the stream
    reader gives back less than was compressed, and no error."""
    path = _raw("s.jsonl.zst", _zstd_cut())(tmp_path)
    with open(path, "rb") as raw:
        read = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True).read()
    whole = "".join(json.dumps({"text": f"doc {i} " * 50}) + "\n" for i in range(200))
    assert len(read) < len(whole.encode())
