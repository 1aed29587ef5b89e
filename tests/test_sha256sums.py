"""SHA256SUMS reader, verifier and writer, checked against the real coreutils `sha256sum`."""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
import string
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lineage.errors import InputError
from lineage.formats.sha256sums import (
    MAX_LIST_BYTES,
    SumEntry,
    SumsReport,
    parse_sums,
    read_sums,
    sha256_files,
    verify_sums,
    write_sums,
)

from .conftest import Cli

SHA256SUM = shutil.which("sha256sum")
SHASUM = shutil.which("shasum")
# coreutils and perl are part of every machine this runs on; a missing tool fails loudly.
assert SHA256SUM is not None and SHASUM is not None, "sha256sum and shasum are required"

H = "ab" * 32  # a well-formed digest for lines whose hash is not the point


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def rule_of(exc: InputError) -> str:
    return exc.rule.split(":", 1)[0]


def make(folder: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return folder


def run_sha256sum(folder: Path, *args: str) -> str:
    """The real tool's output, run inside `folder` so names are relative."""
    assert SHA256SUM is not None
    done = subprocess.run([SHA256SUM, *args], cwd=folder, capture_output=True, check=True)
    return done.stdout.decode("utf-8")


def statuses(report: SumsReport) -> dict[str, str]:
    return {row["path"]: row["status"] for row in report.files}


def rules(report: SumsReport) -> list[str]:
    """The rules broken by listed entries (files the list does not name are tested apart)."""
    return [problem.rule for problem in report.problems if problem.rule != "unlisted-file"]


FILES = {"model-00001.safetensors": b"\x00" * 3000 + b"weights", "config.json": b"{}\n",
         "sub/dir/tokenizer.json": os.urandom(70_000)}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return make(tmp_path / "model", FILES)


# --- reading what the real tools write -----------------------------------------------------


@pytest.mark.parametrize("flags", [[], ["--tag"], ["-b"]], ids=["gnu", "tagged", "binary"])
def test_reads_and_verifies_real_sha256sum_output(folder: Path, flags: list[str]) -> None:
    text = run_sha256sum(folder, *flags, "--", *sorted(FILES))
    if flags == ["-b"]:
        assert all(line[65] == "*" for line in text.splitlines())
    entries = parse_sums(text)
    assert [(e.line, e.path, e.sha256) for e in entries] == [
        (n, rel, sha(FILES[rel])) for n, rel in enumerate(sorted(FILES), start=1)
    ]
    report = verify_sums(folder, entries)
    assert report.ok and report.problems == []
    assert report.bytes_hashed == sum(len(data) for data in FILES.values())
    assert set(statuses(report).values()) == {"ok"}
    row = report.files[0]
    assert set(row) == {"path", "expected", "actual", "status", "line"}
    assert row["expected"] == row["actual"] == sha(FILES[row["path"]])


def test_reads_shasum_output_with_dot_slash_names(folder: Path) -> None:
    assert SHASUM is not None
    names = [f"./{rel}" for rel in sorted(FILES)]  # as in `shasum -a 256 ./*.safetensors`
    out = subprocess.run([SHASUM, "-a", "256", *names], cwd=folder, capture_output=True,
                         check=True).stdout.decode()
    entries = parse_sums(out)
    assert [e.path for e in entries] == sorted(FILES)  # './' dropped
    assert verify_sums(folder, entries).ok


def test_reads_bsd_reversed_single_space(folder: Path) -> None:
    text = "".join(f"{sha(data)} {rel}\n" for rel, data in FILES.items())  # `sha256 -r`
    assert verify_sums(folder, parse_sums(text)).ok


def test_crlf_uppercase_blank_lines_and_comments(folder: Path, tmp_path: Path) -> None:
    lines = run_sha256sum(folder, *sorted(FILES)).splitlines()
    shouted = [line[:64].upper() + line[64:] for line in lines]
    text = "# made on the source machine\r\n\r\n" + "\r\n".join(shouted) + "\r\n\r\n"
    sums = tmp_path / "SHA256SUMS"
    sums.write_bytes(text.encode())
    entries = read_sums(sums)
    assert [e.line for e in entries] == [3, 4, 5]
    assert all(e.sha256 == e.sha256.lower() for e in entries)
    assert verify_sums(folder, entries).ok


@pytest.mark.parametrize("flags", [[], ["--tag"]], ids=["gnu", "tagged"])
def test_escaped_names_as_sha256sum_writes_them(tmp_path: Path, flags: list[str]) -> None:
    odd = "new\nline and back\\slash\rcr.bin"
    folder = make(tmp_path / "m", {odd: b"odd content", "plain": b"p"})
    text = run_sha256sum(folder, *flags, odd, "plain")
    assert text.startswith("\\")  # the tool announced escapes on that line
    entries = parse_sums(text)
    assert [e.path for e in entries] == [odd, "plain"]
    assert verify_sums(folder, entries).ok


def test_unknown_escape_is_refused() -> None:
    with pytest.raises(InputError) as caught:
        parse_sums(f"\\{H}  a\\tb\n")
    assert rule_of(caught.value) == "malformed-line"


def test_backslash_without_escape_marker_is_literal(tmp_path: Path) -> None:
    folder = make(tmp_path / "m", {"a\\tb": b"x"})
    entries = parse_sums(f"{sha(b'x')}  a\\tb\n")
    assert entries[0].path == "a\\tb"
    assert verify_sums(folder, entries).ok


# --- refusals while reading ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "rule"),
    [
        ("not a checksum line", "malformed-line"),
        (f"{H[:40]}  a", "malformed-line"),  # a SHA-1 list
        (f"{H}{H}  a", "malformed-line"),  # a SHA-512 list
        (f"{H[:-1]}g  a", "malformed-line"),
        (H, "malformed-line"),
        (f"{H}  ", "malformed-line"),
        (f"{H}\ta", "malformed-line"),
        (f"  {H}  a", "malformed-line"),
        (f"MD5 (a) = {H[:32]}", "malformed-line"),
        (f"SHA1 (a) = {H[:40]}", "malformed-line"),
        (f"SHA512 (a) = {H}{H}", "malformed-line"),
        (f"SHA256 (a) = {H[:63]}", "malformed-line"),
        (f"SHA256 (a)= {H}", "malformed-line"),
        ("SHA256 () = " + H, "malformed-line"),
        (f"{H}  /etc/passwd", "absolute-path"),
        (f"SHA256 (/etc/passwd) = {H}", "absolute-path"),
        (f"{H}  ../outside", "parent-path"),
        (f"{H}  sub/../../outside", "parent-path"),
        (f"{H}  -", "stdin-not-allowed"),
        (f"{H} *-", "stdin-not-allowed"),
        (f"{H}  sub/", "not-a-regular-file"),
        (f"{H}  .", "not-a-regular-file"),
    ],
)
def test_refusals_name_line_and_rule(line: str, rule: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_sums(f"{H}  fine.bin\n{line}\n", source="SHA256SUMS")
    assert rule_of(caught.value) == rule
    assert caught.value.where == "line 2"
    assert str(caught.value).startswith("SHA256SUMS:line 2: ")


def test_read_sums_names_the_file_and_line(tmp_path: Path) -> None:
    sums = tmp_path / "SHA256SUMS"
    sums.write_bytes(f"{H}  a\n\n{H}  ../b\n".encode())
    with pytest.raises(InputError) as caught:
        read_sums(sums)
    assert caught.value.path == str(sums) and caught.value.where == "line 3"
    assert rule_of(caught.value) == "parent-path"


def test_non_utf8_line_is_malformed(tmp_path: Path) -> None:
    sums = tmp_path / "SHA256SUMS"
    sums.write_bytes(f"{H}  a\n{H}  caf".encode() + b"\xe9\n")
    with pytest.raises(InputError) as caught:
        read_sums(sums)
    assert rule_of(caught.value) == "malformed-line" and caught.value.where == "line 2"


def test_missing_or_unreadable_sums_file_raises(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        read_sums(tmp_path / "absent")
    assert rule_of(caught.value) == "missing-file" and caught.value.path.endswith("absent")
    with pytest.raises(InputError) as caught:
        read_sums(tmp_path)  # a folder given as the list
    assert rule_of(caught.value) == "not-a-regular-file"


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null"])
def test_a_device_or_fifo_given_as_the_list_is_refused_unread(tmp_path: Path,
                                                            device: str) -> None:
    os.mkfifo(tmp_path / "pipe")  # reading it would wait for a writer forever
    for path in (Path(device), tmp_path / "pipe"):
        with pytest.raises(InputError, match="not-a-regular-file: a (character device|FIFO), "
                                             "not a SHA256SUMS list"):
            read_sums(path)


def test_a_list_over_the_cap_is_refused_before_it_is_read(tmp_path: Path) -> None:
    sums = tmp_path / "SHA256SUMS"
    with sums.open("wb") as handle:
        handle.truncate(MAX_LIST_BYTES + 1)  # sparse: no memory, no disk
    with pytest.raises(InputError, match="too-large: 67,108,865 bytes, over the 64 MiB limit"):
        read_sums(sums)


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\r\n"])
def test_a_list_without_entries_is_refused(text: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_sums(text)
    assert rule_of(caught.value) == "empty-list"


@pytest.mark.parametrize("second", ["a", "./a", ".//a"])
def test_same_path_with_two_hashes_is_a_conflict(second: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_sums(f"{H}  a\n{'cd' * 32}  {second}\n")
    assert rule_of(caught.value) == "conflicting-entry" and caught.value.where == "line 2"


def test_same_path_same_hash_is_a_warning_only(folder: Path) -> None:
    digest = sha(FILES["config.json"])
    entries = parse_sums(f"{digest}  config.json\n{digest.upper()}  ./config.json\n")
    assert [e.path for e in entries] == ["config.json", "config.json"]
    report = verify_sums(folder, entries)
    assert report.ok  # the warnings do not fail the check
    assert [(p.line, p.rule) for p in report.problems if p.path == "config.json"] == [
        (2, "duplicate-entry")]
    assert report.unlisted == ["model-00001.safetensors", "sub/dir/tokenizer.json"]
    assert {p.rule for p in report.problems} == {"duplicate-entry", "unlisted-file"}
    assert [row["status"] for row in report.files] == ["ok", "ok"]
    assert report.bytes_hashed == len(FILES["config.json"])  # read once


# --- verification outcomes ----------------------------------------------------------------


def listed(folder: Path, extra: str = "") -> list[SumEntry]:
    text = "".join(f"{sha(data)}  {rel}\n" for rel, data in sorted(FILES.items()))
    return parse_sums(text + extra)


def test_missing_file_fails_and_is_never_verified(folder: Path) -> None:
    (folder / "config.json").unlink()
    report = verify_sums(folder, listed(folder))
    assert not report.ok
    assert statuses(report)["config.json"] == "missing"
    assert rules(report) == ["missing-file"]
    missing = next(row for row in report.files if row["status"] == "missing")
    assert missing["actual"] is None and missing["line"] == 1


def test_truncated_file_is_a_mismatch(folder: Path) -> None:
    shard = folder / "model-00001.safetensors"
    shard.write_bytes(shard.read_bytes()[:-1])
    report = verify_sums(folder, listed(folder))
    assert not report.ok
    assert statuses(report)["model-00001.safetensors"] == "mismatch"
    assert rules(report) == ["hash-mismatch"]
    row = next(r for r in report.files if r["status"] == "mismatch")
    assert row["actual"] == sha(shard.read_bytes()) != row["expected"]


def test_symlink_inside_the_folder_is_followed(folder: Path) -> None:
    (folder / "alias.json").symlink_to("config.json")
    (folder / "linked").symlink_to("sub", target_is_directory=True)
    extra = (f"{sha(FILES['config.json'])}  alias.json\n"
             f"{sha(FILES['sub/dir/tokenizer.json'])}  linked/dir/tokenizer.json\n")
    report = verify_sums(folder, listed(folder, extra))
    assert report.ok, report.problems


def test_symlinks_leaving_the_folder_are_refused(folder: Path, tmp_path: Path) -> None:
    outside = make(tmp_path / "outside", {"secret": b"s"})
    (folder / "escape").symlink_to(outside / "secret")
    (folder / "escape-dir").symlink_to(outside, target_is_directory=True)
    (folder / "relative").symlink_to("../outside/secret")
    extra = "".join(f"{sha(b's')}  {name}\n"
                    for name in ["escape", "escape-dir/secret", "relative"])
    report = verify_sums(folder, listed(folder, extra))
    assert not report.ok
    assert rules(report) == ["symlink-escapes"] * 3
    assert {row["path"]: row["actual"] for row in report.files if row["status"] == "refused"} \
        == {"escape": None, "escape-dir/secret": None, "relative": None}


def test_dangling_symlink_is_missing(folder: Path) -> None:
    (folder / "gone").symlink_to("nowhere")
    report = verify_sums(folder, listed(folder, f"{H}  gone\n"))
    assert statuses(report)["gone"] == "missing" and rules(report) == ["missing-file"]


def test_fifo_is_refused_without_blocking(folder: Path) -> None:
    os.mkfifo(folder / "pipe")  # opening it for reading would wait for a writer
    report = verify_sums(folder, listed(folder, f"{H}  pipe\n"))
    assert not report.ok
    assert statuses(report)["pipe"] == "refused"
    assert rules(report) == ["not-a-regular-file"]


def test_directory_entry_is_refused(folder: Path) -> None:
    report = verify_sums(folder, listed(folder, f"{H}  sub/dir\n"))
    assert statuses(report)["sub/dir"] == "refused"
    assert rules(report) == ["not-a-regular-file"]


def test_hand_built_entries_get_the_same_rules(folder: Path) -> None:
    digest = sha(FILES["config.json"])
    entries = [SumEntry(1, "config.json", digest), SumEntry(2, "config.json", H),
               SumEntry(3, "/etc/passwd", H), SumEntry(4, "../x", H), SumEntry(5, "-", H),
               SumEntry(6, "sub/dir/tokenizer.json", "nothex")]
    report = verify_sums(folder, entries)
    assert not report.ok
    assert [row["status"] for row in report.files] == ["refused"] * 6
    assert rules(report) == ["conflicting-entry", "conflicting-entry", "absolute-path",
                             "parent-path", "stdin-not-allowed", "malformed-line"]


def test_no_entries_is_not_ok(folder: Path) -> None:
    report = verify_sums(folder, [])
    assert not report.ok and rules(report) == ["empty-list"]


def test_missing_folder_reports_every_file_missing(tmp_path: Path) -> None:
    report = verify_sums(tmp_path / "absent", parse_sums(f"{H}  a\n{H}  b\n"))
    assert not report.ok and set(statuses(report).values()) == {"missing"}


def test_unreadable_file_is_refused(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Root (as in CI) reads any file whatever its mode, so the refusal comes from open().
    from lineage.formats import sha256sums

    real_open = os.open

    def refuse(path: object, *args: object, **kwargs: object) -> int:
        if str(path).endswith("config.json"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(sha256sums.os, "open", refuse)
    report = verify_sums(folder, listed(folder))
    assert statuses(report)["config.json"] == "refused"
    assert rules(report) == ["unreadable-file"]


def test_a_file_removed_while_verifying_is_missing_not_a_mismatch(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_open = os.open

    def vanish(path: object, *args: object, **kwargs: object) -> int:
        if str(path).endswith("tokenizer.json"):  # located, then gone before it is read
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return real_open(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", vanish)
    report = verify_sums(folder, listed(folder))
    assert statuses(report)["sub/dir/tokenizer.json"] == "missing"
    assert rules(report) == ["missing-file"]


# --- files on disk that the list does not name ---------------------------------------------


def test_unlisted_files_warn_and_fail_when_strict(folder: Path, tmp_path: Path) -> None:
    make(folder, {"extra.bin": b"x", "sub/dir/notes.txt": b"n"})
    (folder / "link-to-config").symlink_to("config.json")
    sums = make(tmp_path, {"list.txt": run_sha256sum(folder, *FILES).encode()}) / "list.txt"
    report = verify_sums(folder, read_sums(sums), list_path=sums)
    assert report.ok and rules(report) == []
    assert report.unlisted == ["extra.bin", "link-to-config", "sub/dir/notes.txt"]
    assert [(p.path, p.rule) for p in report.problems] == [
        (rel, "unlisted-file") for rel in report.unlisted]
    strict = verify_sums(folder, read_sums(sums), list_path=sums, strict=True)
    assert not strict.ok and strict.unlisted == report.unlisted


def test_the_list_and_its_companions_are_not_unlisted(folder: Path, tmp_path: Path) -> None:
    (folder / "SHA256SUMS").write_text(run_sha256sum(folder, *FILES))
    make(folder, {"SHA256SUMS.asc": b"sig", "weights.sums.minisig": b"sig",
                  ".cache/huggingface/download/config.json.metadata": b"m",
                  ".cache/other/x": b"kept"})
    (folder / "linked").symlink_to("sub", target_is_directory=True)
    inside = verify_sums(folder, read_sums(folder / "SHA256SUMS"),
                         list_path=folder / "SHA256SUMS")
    assert inside.unlisted == [".cache/other/x", "linked", "weights.sums.minisig"]
    outside = tmp_path / "weights.sums"
    tokenizer = sha(FILES["sub/dir/tokenizer.json"])
    outside.write_text(run_sha256sum(folder, *FILES) + f"{tokenizer}  linked/dir/tokenizer.json\n")
    report = verify_sums(folder, read_sums(outside), list_path=outside)
    assert report.ok and report.unlisted == [".cache/other/x"]  # SHA256SUMS: the usual name


def test_cli_verify_reports_unlisted_files(folder: Path, tmp_path: Path) -> None:
    (folder / "SHA256SUMS").write_text(run_sha256sum(folder, *FILES))
    (folder / "stray.py").write_text("print('hi')\n")
    cli = Cli(tmp_path / "unused-store")
    sums = str(folder / "SHA256SUMS")
    warned = cli.json("verify", str(folder), "--sums", sums, code=1)  # no safetensors header
    assert warned["checksums"]["ok"] and warned["checksums"]["unlisted"] == ["stray.py"]
    strict = cli.json("verify", str(folder), "--sums", sums, "--strict", code=1)
    assert strict["checksums"]["ok"] is False
    assert [p["rule"] for p in strict["checksums"]["problems"]] == ["unlisted-file"]


# --- files the folder model already read whole ---------------------------------------------


def test_files_read_whole_are_hashed_from_memory_only_where_read_as_plain_files(
        folder: Path) -> None:
    (folder / "cfg").symlink_to("model-00001.safetensors")
    (folder / "linked").symlink_to("sub", target_is_directory=True)
    extra = (f"{sha(FILES['model-00001.safetensors'])}  cfg\n"
             f"{sha(FILES['sub/dir/tokenizer.json'])}  linked/dir/tokenizer.json\n")
    wrong = b"not what the file holds"
    report = verify_sums(folder, listed(folder, extra), contents={
        "config.json": wrong, "cfg": wrong, "linked/dir/tokenizer.json": wrong})
    # The plain file is hashed from the bytes given; a link, or a path through a linked
    # folder, is read from disk by the full rules.
    assert statuses(report) == {"config.json": "mismatch", "cfg": "ok",
                                "linked/dir/tokenizer.json": "ok",
                                "model-00001.safetensors": "ok", "sub/dir/tokenizer.json": "ok"}
    assert rules(report) == ["hash-mismatch"]


def test_bytes_read_whole_do_not_stand_for_a_file_swapped_since(folder: Path) -> None:
    contents = {"config.json": FILES["config.json"]}
    (folder / "config.json").unlink()
    os.mkfifo(folder / "config.json")  # swapped for a FIFO after the folder model read it
    report = verify_sums(folder, listed(folder), contents=contents)
    assert statuses(report)["config.json"] == "refused"
    assert rules(report) == ["not-a-regular-file"]
    (folder / "config.json").unlink()
    (folder / "config.json").symlink_to(folder / "sub/dir/tokenizer.json")
    report = verify_sums(folder, listed(folder), contents=contents)
    assert statuses(report)["config.json"] == "mismatch"  # the link's target, read from disk


def test_the_folder_model_keeps_whole_only_small_regular_files(tmp_path: Path) -> None:
    from lineage.formats.downloads import CONTENT_HEAD_BYTES
    from lineage.formats.folder import read_folder

    folder = make(tmp_path / "data", {"a.txt": b"x", "sub/b.txt": b"", "big.txt": b"y" * 2000,
                                      "edge.txt": b"z" * CONTENT_HEAD_BYTES})
    (folder / "link.txt").symlink_to("a.txt")
    os.mkfifo(folder / "pipe.txt")
    assert read_folder(folder).contents == {"a.txt": b"x", "sub/b.txt": b""}
    assert read_folder(folder / "a.txt").contents == {"a.txt": b"x"}


def _hostile_folder(root: Path) -> tuple[Path, Path]:
    """Small files and what a list can meet: a changed file, a pickle named .txt, links
    inside and leaving, a FIFO, a missing file, a folder, duplicates, an unlisted file."""
    files = {f"shard-{i // 10}/part-{i}.txt": f"record {i}\n".encode() for i in range(40)}
    files["notes.txt"] = pickle.dumps({"a": [1, 2]}, protocol=0)
    folder = make(root / "data", files)
    (root / "outside.txt").write_bytes(b"record 3\n")
    lines = [f"{sha(data)}  {rel}" for rel, data in sorted(files.items())]
    lines += [f"{sha(files['notes.txt'])}  inside-link", f"{sha(b'record 3')}  escape",
              f"{H}  pipe", f"{H}  gone.txt", f"{H}  shard-1", lines[5], f"{H}  ./shard-2//x"]
    (folder / "inside-link").symlink_to("notes.txt")
    (folder / "escape").symlink_to(root / "outside.txt")
    os.mkfifo(folder / "pipe")
    (folder / "shard-2" / "part-21.txt").write_bytes(b"changed after listing\n")
    (folder / "unlisted.txt").write_bytes(b"u")
    sums = root / "SHA256SUMS"
    sums.write_text("\n".join(lines) + "\n")
    return folder, sums


def test_the_verdict_is_the_same_with_or_without_the_bytes_read_whole(tmp_path: Path) -> None:
    from lineage.formats.folder import read_folder

    folder, sums = _hostile_folder(tmp_path)
    entries = read_sums(sums)
    model = read_folder(folder)
    assert "shard-2/part-21.txt" in model.contents and "notes.txt" in model.contents
    read = verify_sums(folder, entries, list_path=sums, contents=model.contents)
    assert read == verify_sums(folder, entries, list_path=sums)
    assert statuses(read)["shard-2/part-21.txt"] == "mismatch"
    assert sorted(set(rules(read))) == ["duplicate-entry", "hash-mismatch", "missing-file",
                                        "not-a-regular-file", "symlink-escapes"]
    answer = Cli(tmp_path / "unused-store").json("verify", str(folder), "--sums", str(sums),
                                                 code=1)
    disk = verify_sums(folder, entries, list_path=sums)
    assert answer["checksums"]["files"] == disk.files and answer["checksums"]["ok"] is False
    assert answer["checksums"]["problems"] == [p.__dict__ for p in disk.problems]
    assert answer["checksums"]["bytes_hashed"] == disk.bytes_hashed
    assert {r["file"] for r in answer["risks"]["findings"]} >= {"notes.txt"}


@pytest.mark.parametrize("size", [0, 1, 1023, (1 << 20) - 1, 1 << 20, (1 << 20) + 1])
def test_files_around_one_read_hash_as_hashlib_does(tmp_path: Path, size: int) -> None:
    from lineage.formats.file_hash import digest_regular_file

    data = os.urandom(size)
    (tmp_path / "f").write_bytes(data)
    assert digest_regular_file(tmp_path / "f") == (sha(data), size)
    blob = hashlib.sha1(b"blob %d\0" % size + data, usedforsecurity=False).hexdigest()
    assert digest_regular_file(str(tmp_path / "f"), "git-sha1") == (blob, size)


def test_progress_counts_distinct_files(folder: Path) -> None:
    calls: list[tuple[int, int]] = []
    report = verify_sums(folder, listed(folder), workers=2,
                         progress=lambda done, total: calls.append((done, total)))
    assert report.ok
    assert calls == [(1, 3), (2, 3), (3, 3)]


# --- writing ----------------------------------------------------------------------------


def test_write_sums_matches_sha256sum_and_passes_its_check(tmp_path: Path) -> None:
    odd = "back\\slash\nnew line.bin"
    folder = make(tmp_path / "m", {**FILES, odd: b"odd", "SHA256SUMS": b"old list"})
    text = write_sums(folder)
    names = sorted(rel for rel in [*FILES, odd])
    assert text == run_sha256sum(folder, "--", *names)  # byte for byte, escapes included
    (folder / "SHA256SUMS").write_text(text, encoding="utf-8")
    check = subprocess.run([SHA256SUM or "sha256sum", "-c", "--strict", "SHA256SUMS"],
                           cwd=folder, capture_output=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert verify_sums(folder, read_sums(folder / "SHA256SUMS")).ok


def test_write_sums_default_listing(folder: Path, tmp_path: Path) -> None:
    (folder / "alias.json").symlink_to("config.json")  # in-folder link: listed
    os.mkfifo(folder / "pipe")  # not a regular file: skipped
    (folder / "gone").symlink_to("nowhere")  # points at nothing: skipped
    (folder / "SHA256SUMS").write_text("stale")
    (folder / "sub" / "SHA256SUMS").write_text("nested: a real file, listed")
    paths = [e.path for e in parse_sums(write_sums(folder))]
    assert paths == sorted([*FILES, "alias.json", "sub/SHA256SUMS"])


def test_write_sums_explicit_files(folder: Path) -> None:
    text = write_sums(folder, [Path("sub/dir/tokenizer.json"), folder / "config.json",
                               Path("./config.json")])
    assert [e.path for e in parse_sums(text)] == ["config.json", "sub/dir/tokenizer.json"]


@pytest.mark.parametrize(
    ("make_bad", "rule"),
    [
        (lambda f, out: (f / "x").symlink_to(out / "secret"), "symlink-escapes"),
        (lambda f, out: os.mkfifo(f / "x"), "not-a-regular-file"),
        (lambda f, out: (f / "x").mkdir(), "not-a-regular-file"),
        (lambda f, out: None, "missing-file"),
    ],
    ids=["escaping-symlink", "fifo", "directory", "missing"],
)
def test_write_sums_refuses_bad_explicit_files(folder: Path, tmp_path: Path, make_bad,
                                               rule: str) -> None:
    outside = make(tmp_path / "outside", {"secret": b"s"})
    make_bad(folder, outside)
    with pytest.raises(InputError) as caught:
        write_sums(folder, [Path("x")])
    assert rule_of(caught.value) == rule


def test_write_sums_refuses_paths_outside_the_folder(folder: Path, tmp_path: Path) -> None:
    outside = make(tmp_path / "outside", {"secret": b"s"})
    for path, rule in [(outside / "secret", "outside-folder"), (Path("../outside/secret"),
                                                                 "parent-path")]:
        with pytest.raises(InputError) as caught:
            write_sums(folder, [path])
        assert rule_of(caught.value) == rule


def test_write_sums_refuses_an_escaping_symlink_in_the_walk(folder: Path, tmp_path: Path) -> None:
    outside = make(tmp_path / "outside", {"secret": b"s"})
    (folder / "escape").symlink_to(outside / "secret")
    with pytest.raises(InputError) as caught:
        write_sums(folder)
    assert rule_of(caught.value) == "symlink-escapes"


def test_write_sums_refuses_a_file_named_dash(folder: Path) -> None:
    (folder / "-").write_bytes(b"a reader would take this line for stdin")
    (folder / "sub" / "-").write_bytes(b"fine below the top")
    with pytest.raises(InputError) as caught:
        write_sums(folder)
    assert rule_of(caught.value) == "stdin-not-allowed"
    assert "sub/-" in [e.path for e in parse_sums(write_sums(folder, [Path("sub/-")]))]


def test_write_sums_of_an_empty_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError) as caught:
        write_sums(tmp_path / "empty")
    assert rule_of(caught.value) == "empty-list"


# --- parallel hashing ------------------------------------------------------------------


def test_sha256_files_in_parallel(tmp_path: Path) -> None:
    blobs = {f"f{i}.bin": os.urandom(i * 300_001 % 3_000_000) for i in range(12)}
    folder = make(tmp_path / "m", blobs)
    (folder / "link.bin").symlink_to("f3.bin")
    paths = [folder / name for name in blobs] + [folder / "link.bin"]
    digests = sha256_files(paths, workers=4)
    assert digests == {**{folder / n: sha(d) for n, d in blobs.items()},
                       folder / "link.bin": sha(blobs["f3.bin"])}


@pytest.mark.parametrize("kind", ["fifo", "missing", "directory"])
def test_sha256_files_refuses_what_it_cannot_hash(tmp_path: Path, kind: str) -> None:
    target = tmp_path / "x"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "directory":
        target.mkdir()
    with pytest.raises(InputError) as caught:
        sha256_files([target])
    expected = "missing-file" if kind == "missing" else "not-a-regular-file"
    assert rule_of(caught.value) == expected


# --- property: write -> parse -> verify, and every flipped byte is caught ---------------


_names = st.text(alphabet=string.ascii_lowercase + string.digits + "._- ", min_size=1,
                 max_size=12).filter(lambda n: n not in (".", "..", "-") and n.strip() == n)
_layout = st.dictionaries(
    st.tuples(st.sampled_from(["", "D1/", "D1/D2/"]), _names).map("".join),
    st.binary(min_size=1, max_size=3000),
    min_size=1,
    max_size=6,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(files=_layout, data=st.data())
def test_round_trip_and_single_byte_flips(files: dict[str, bytes], data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = make(Path(tmp), files)
        entries = parse_sums(write_sums(folder, workers=3))
        assert sorted(e.path for e in entries) == sorted(files)
        assert verify_sums(folder, entries).ok

        victim = data.draw(st.sampled_from(sorted(files)), label="file")
        offset = data.draw(st.integers(0, len(files[victim]) - 1), label="byte")
        flipped = bytearray(files[victim])
        flipped[offset] ^= data.draw(st.integers(1, 255), label="xor")
        (folder / victim).write_bytes(bytes(flipped))

        report = verify_sums(folder, entries, workers=3)
        assert not report.ok
        assert {p: s for p, s in statuses(report).items() if s != "ok"} == {victim: "mismatch"}
        assert [(p.path, p.rule) for p in report.problems] == [(victim, "hash-mismatch")]


_NAME_PIECES = st.sampled_from(["a", "b.txt", ".", "..", "", " ", "-", "x\\y", "\r", "é", "*"])
_LINE_NAMES = st.lists(_NAME_PIECES, min_size=1, max_size=4).map("/".join)


@given(digest=st.text("0123456789abcdefABCDEF", min_size=63, max_size=65),
       marker=st.sampled_from(["  ", " *", " ", "   ", "\t "]), name=_LINE_NAMES,
       ending=st.sampled_from(["", "\r"]))
def test_the_fast_line_path_reads_as_the_full_rules_do(digest: str, marker: str, name: str,
                                                       ending: str) -> None:
    """A plain `<hex>  <name>` line is read without the full rules; any line must come out
    the same either way: the same entry, or the same refusal."""
    from lineage.formats.file_hash import Refusal
    from lineage.formats.sha256sums import _parse_any_line, _parse_line

    line = f"{digest}{marker}{name}{ending}"

    def outcome(parse: Any) -> object:
        try:
            return parse(7, line)
        except Refusal as refusal:
            return (refusal.rule, refusal.message)

    assert outcome(_parse_line) == outcome(_parse_any_line)



def test_a_folder_without_weights_is_judged_by_its_list_alone(tmp_path: Path) -> None:
    """A wheel unpacked, a dataset: nothing for the structure check to read. Against a
    list `sha256sum` wrote, the checksums are the verdict (exit 0 when they match, 1 when a
    file differs); without a list, or as a checkpoint, a folder without weights still
    fails."""
    import lineage

    folder = tmp_path / "dataset"
    shutil.copytree(Path(__file__).parents[1] / "examples" / "corpus" / "shakespeare", folder)
    names = sorted(p.name for p in folder.iterdir())
    sums = tmp_path / "SHA256SUMS"
    sums.write_bytes(subprocess.run([SHA256SUM, *names], cwd=folder, check=True,
                                    capture_output=True).stdout)
    cli = Cli(tmp_path / "no-store")
    shown = cli("verify", "--sums", str(sums), str(folder)).stdout
    assert shown.splitlines()[0] == ("structure: not checked (no weights file; the checksums "
                                     "are the verdict)")
    assert f"checksums: ok ({len(names)}/{len(names)} files match" in shown
    answer = lineage.verify(folder, sums=sums)
    assert answer.ok and answer.structure.ok is None
    assert [w.rule for w in answer.structure.warnings] == ["no-weights"]
    assert cli.json("verify", "--sums", str(sums), str(folder), "--json")["ok"] is True

    with (folder / names[0]).open("ab") as changed:
        changed.write(b"\n")
    assert not lineage.verify(folder, sums=sums).ok
    cli("verify", "--sums", str(sums), str(folder), code=1)
    cli("verify", str(folder), code=1)  # no list: nothing vouches for the folder
    assert lineage.verify(folder).structure.ok is False
