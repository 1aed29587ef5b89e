"""lineage.userfiles: files a user names are read only when regular and small enough,
and `-o` never replaces a device, FIFO or folder, nor leaves a half-written file."""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path

import pytest

from lineage.errors import InputError, UsageError
from lineage.userfiles import check_output_path, open_regular, read_regular, write_output


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "metrics.json"
    os.mkfifo(path)
    return path


def test_a_fifo_is_refused_at_once_not_waited_on(fifo: Path) -> None:
    with pytest.raises(InputError, match=r"metrics\.json: not-a-regular-file: a FIFO"):
        open_regular(fifo, what="metrics file")


@pytest.mark.parametrize(("device", "kind"), [("/dev/zero", "a character device"),
                                              ("/dev/null", "a character device")])
def test_devices_are_refused(device: str, kind: str) -> None:
    with pytest.raises(InputError, match=f"not-a-regular-file: {kind}"):
        read_regular(device, what="sums list", max_bytes=1 << 20)


def test_a_socket_and_a_folder_are_refused(tmp_path: Path) -> None:
    sock_path = tmp_path / "s.sock"
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(sock_path))
        with pytest.raises(InputError, match="not-a-regular-file: a socket"):
            open_regular(sock_path)
    finally:
        server.close()
    with pytest.raises(InputError, match="not-a-regular-file: a folder"):
        open_regular(tmp_path)


def test_a_file_over_its_cap_is_refused_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_bytes(b"x" * 2049)
    with pytest.raises(InputError, match=r"too-large: 2,049 bytes, over the 2 KiB limit"):
        read_regular(path, what="metrics file", max_bytes=2048)
    path.write_bytes(b"x" * 2048)
    assert read_regular(path, what="metrics file", max_bytes=2048) == b"x" * 2048


def test_a_link_is_followed_unless_asked_not_to(tmp_path: Path) -> None:
    (tmp_path / "real").write_bytes(b"ok")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert read_regular(tmp_path / "link", what="file", max_bytes=10) == b"ok"
    with pytest.raises(InputError, match="unreadable"):
        open_regular(tmp_path / "link", follow_links=False)


def test_a_missing_file_names_itself(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="nope.json: metrics file not found"):
        open_regular(tmp_path / "nope.json", what="metrics file")


@pytest.mark.parametrize("device", ["/dev/full", "/dev/null"])
def test_output_to_a_device_is_refused_and_the_device_stays(device: str) -> None:
    before = os.stat(device)
    with pytest.raises(UsageError, match=f"{device}: cannot write: it is a character device"):
        write_output(device, b"card")
    after = os.stat(device)
    assert (after.st_mode, after.st_rdev) == (before.st_mode, before.st_rdev)


def test_output_to_a_fifo_or_folder_is_refused(fifo: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="it is a FIFO"):
        write_output(fifo, "x")
    with pytest.raises(UsageError, match="it is a folder"):
        check_output_path(tmp_path)
    with pytest.raises(UsageError, match="the folder .* does not exist"):
        check_output_path(tmp_path / "no" / "card.md")


def test_output_replaces_a_regular_file_whole(tmp_path: Path) -> None:
    target = tmp_path / "card.md"
    write_output(target, "first")
    write_output(target, lambda handle: handle.write(b"second"))
    assert target.read_text() == "second"
    assert [p.name for p in tmp_path.iterdir()] == ["card.md"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "card.md"
    target.write_text("old")

    def fill(handle: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with pytest.raises(UsageError, match="card.md: cannot write: No space left on device"):
        write_output(target, fill)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["card.md"]


@pytest.mark.parametrize("command", [
    ["export", "croissant", "--corpus", "poems"],
    ["export", "openlineage", "--corpus", "poems"],
    ["export", "ai-act-summary", "--corpus", "poems"],
    ["export", "model-card", "--run", "r", "--checkpoint", "1"],
])
def test_export_output_refuses_a_device_before_any_work(
        command: list[str], tmp_path: Path) -> None:
    """`-o /dev/full` replaced the device node with a regular file and said "wrote"."""
    from lineage.api import init_store, open_store
    from lineage.ingest import ingest_corpus

    from .conftest import EXAMPLES, Cli

    init_store(tmp_path / "store")
    ingest_corpus(open_store(tmp_path / "store"), [EXAMPLES / "shards" / "poems.parquet"],
                  corpus="poems")
    before = os.stat("/dev/full")
    result = Cli(tmp_path / "store")(*command, "-o", "/dev/full", code=2)
    assert "/dev/full: cannot write: it is a character device" in result.stderr
    assert "wrote" not in result.stderr
    after = os.stat("/dev/full")
    assert (after.st_mode, after.st_rdev, after.st_ino) == \
        (before.st_mode, before.st_rdev, before.st_ino)


def test_export_output_writes_a_regular_file(tmp_path: Path) -> None:
    from lineage.api import init_store, open_store
    from lineage.ingest import ingest_corpus

    from .conftest import EXAMPLES, Cli

    init_store(tmp_path / "store")
    ingest_corpus(open_store(tmp_path / "store"), [EXAMPLES / "shards" / "poems.parquet"],
                  corpus="poems")
    cli = Cli(tmp_path / "store")
    for command, name in ((["export", "croissant", "--corpus", "poems"], "c.json"),
                          (["export", "openlineage", "--corpus", "poems"], "ol.jsonl")):
        target = tmp_path / name
        target.write_text("old")
        result = cli(*command, "-o", str(target))
        assert target.read_text() != "old" and target.stat().st_size > 0, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.json", "ol.jsonl", "store"]


def test_a_fifo_given_to_the_store_commands_is_refused_at_once(
        fifo: Path, tmp_path: Path) -> None:
    """An events file and an API key file that are FIFOs: refused, not waited on."""
    from lineage.api import init_store

    from .conftest import Cli

    init_store(tmp_path / "store")
    cli = Cli(tmp_path / "store")
    for command in (["ingest", "openlineage", str(fifo)],
                    ["export", "openlineage", "--url", "http://127.0.0.1:9", "--api-key-file",
                     str(fifo)]):
        result = cli(*command, code=2)
        assert "not-a-regular-file: a FIFO" in result.stderr, result.stderr
