"""`verify --sums LIST --sums-key KEY`: the list's signature against a trusted key, a
verdict of its own. Signatures are made by the real writers: ssh-keygen, gpg and
py-minisign (minisign's format, by minisign's author among others); minisign's own
published key and a signature it made check the reader against minisign itself."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import minisign as minisign_writer
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lineage
from lineage.diligence.authenticity import authenticity_verdict
from lineage.diligence.openpgp import read_status
from lineage.errors import InputError, UsageError
from lineage.formats import minisign

from .conftest import Cli

needs_ssh = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="no ssh-keygen")
needs_gpg = pytest.mark.skipif(shutil.which("gpg") is None, reason="no gpg")


def model(tmp_path: Path) -> tuple[Path, Path]:
    """A folder of one file and its SHA256SUMS list beside it."""
    folder = tmp_path / "m"
    folder.mkdir()
    data = b'{"hidden_size": 8}\n'
    (folder / "config.json").write_bytes(data)
    sums = tmp_path / "SHA256SUMS"
    sums.write_text(f"{hashlib.sha256(data).hexdigest()}  config.json\n")
    return folder, sums


def tamper(sums: Path) -> None:
    """Change the list without changing what it says of the files: checksums still pass."""
    sums.write_text(sums.read_text() + "# an added line\n")


def verify_cli(tmp_path: Path, *args: str, code: int = 0) -> str:
    result = Cli(tmp_path / "no-store")("verify", *args, code=code)
    return str(result.stdout + result.stderr)


# --- SSH ---------------------------------------------------------------------------


def ssh_key(tmp_path: Path, name: str) -> Path:
    key = tmp_path / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)],
                   check=True)
    return key


def ssh_sign(key: Path, sums: Path, namespace: str = "file") -> None:
    subprocess.run(["ssh-keygen", "-Y", "sign", "-q", "-f", str(key), "-n", namespace,
                    str(sums)], check=True, capture_output=True)


def allowed_signers(tmp_path: Path, *entries: tuple[str, Path]) -> Path:
    path = tmp_path / "allowed_signers"
    path.write_text("# who may sign our lists\n" + "".join(
        f"{who} {Path(f'{key}.pub').read_text().strip()}\n" for who, key in entries))
    return path


@needs_ssh
def test_ssh_signature_by_an_allowed_key_passes(tmp_path: Path) -> None:
    folder, sums = model(tmp_path)
    key = ssh_key(tmp_path, "release")
    ssh_sign(key, sums)
    allowed = allowed_signers(tmp_path, ("release@example.org", key))
    answer = lineage.verify(folder, sums=sums, sums_key=allowed)
    fingerprint = subprocess.run(["ssh-keygen", "-lf", f"{key}.pub"], check=True,
                                 capture_output=True, text=True).stdout.split()[1]
    assert answer.ok and answer.authenticity.ok and answer.checksums.ok
    assert answer.authenticity.method == "ssh"
    assert answer.authenticity.signature == f"{sums}.sig"
    assert answer.authenticity.signer == "release@example.org"
    assert answer.authenticity.key_id == fingerprint  # as ssh-keygen -l prints it
    # ssh-keygen agrees that the same file and key verify
    done = subprocess.run(["ssh-keygen", "-Y", "verify", "-f", str(allowed), "-I",
                           "release@example.org", "-n", "file", "-s", f"{sums}.sig"],
                          input=sums.read_bytes(), capture_output=True, check=False)
    assert done.returncode == 0, done.stderr


@needs_ssh
def test_ssh_changed_list_fails_authenticity_while_checksums_pass(tmp_path: Path) -> None:
    folder, sums = model(tmp_path)
    key = ssh_key(tmp_path, "release")
    ssh_sign(key, sums)
    tamper(sums)
    answer = lineage.verify(folder, sums=sums, sums_key=allowed_signers(tmp_path, ("r", key)))
    assert answer.checksums.ok is True
    assert answer.authenticity.ok is False and answer.ok is False
    assert [p.rule for p in answer.authenticity.problems] == ["signature"]


@needs_ssh
def test_ssh_signature_by_a_key_not_allowed_fails_naming_the_key(tmp_path: Path) -> None:
    folder, sums = model(tmp_path)
    mallory, release = ssh_key(tmp_path, "mallory"), ssh_key(tmp_path, "release")
    ssh_sign(mallory, sums)
    allowed = allowed_signers(tmp_path, ("release", release))
    verdict = authenticity_verdict(sums, allowed)
    fingerprint = subprocess.run(["ssh-keygen", "-lf", f"{mallory}.pub"], check=True,
                                 capture_output=True, text=True).stdout.split()[1]
    assert verdict["ok"] is False and verdict["key_id"] == fingerprint
    assert verdict["problems"][0]["rule"] == "not-allowed"
    assert fingerprint in verdict["problems"][0]["message"]
    text = verify_cli(tmp_path, str(folder), "--sums", str(sums), "--sums-key", str(allowed),
                      code=1)
    assert f"not-allowed: signed by {fingerprint}" in text


@needs_ssh
def test_ssh_signature_in_another_namespace_fails(tmp_path: Path) -> None:
    _, sums = model(tmp_path)
    key = ssh_key(tmp_path, "release")
    ssh_sign(key, sums, namespace="email")
    verdict = authenticity_verdict(sums, allowed_signers(tmp_path, ("r", key)))
    assert verdict["ok"] is False and verdict["problems"][0]["rule"] == "signature"
    assert "'email'" in verdict["problems"][0]["message"]


@needs_ssh
def test_ssh_allowed_signers_namespaces_option_is_obeyed(tmp_path: Path) -> None:
    _, sums = model(tmp_path)
    key = ssh_key(tmp_path, "release")
    ssh_sign(key, sums)
    allowed = tmp_path / "allowed"
    allowed.write_text(f'r namespaces="git" {Path(f"{key}.pub").read_text()}')
    assert authenticity_verdict(sums, allowed)["problems"][0]["rule"] == "not-allowed"
    allowed.write_text(f'r namespaces="git,file" {Path(f"{key}.pub").read_text()}')
    assert authenticity_verdict(sums, allowed)["ok"] is True


@needs_ssh
def test_a_plain_public_key_is_refused_with_what_to_write(tmp_path: Path) -> None:
    _, sums = model(tmp_path)
    key = ssh_key(tmp_path, "release")
    with pytest.raises(InputError, match="put the signer's name before the key"):
        authenticity_verdict(sums, Path(f"{key}.pub"))


# --- minisign ----------------------------------------------------------------------


def minisign_keys(tmp_path: Path, name: str = "minisign.pub") -> minisign_writer.KeyPair:
    pair = minisign_writer.KeyPair.generate()
    (tmp_path / name).write_bytes(bytes(pair.public_key) + b"\n")
    return pair


@pytest.mark.parametrize("prehash", [True, False], ids=["ED-blake2b", "Ed-legacy"])
def test_minisign_signature_passes(tmp_path: Path, prehash: bool) -> None:
    folder, sums = model(tmp_path)
    pair = minisign_keys(tmp_path)
    pair.secret_key.sign_file(sums, prehash=prehash, drop_signature=True)
    answer = lineage.verify(folder, sums=sums, sums_key=tmp_path / "minisign.pub")
    assert answer.ok and answer.authenticity.ok
    assert answer.authenticity.method == "minisign"
    assert answer.authenticity.signature == f"{sums}.minisig"
    raw = base64.b64decode(pair.public_key.to_base64())
    assert answer.authenticity.key_id == f"{int.from_bytes(raw[2:10], 'little'):016X}"


def test_minisign_changed_list_fails(tmp_path: Path) -> None:
    folder, sums = model(tmp_path)
    minisign_keys(tmp_path).secret_key.sign_file(sums, prehash=True, drop_signature=True)
    tamper(sums)
    answer = lineage.verify(folder, sums=sums, sums_key=tmp_path / "minisign.pub")
    assert answer.checksums.ok and answer.authenticity.ok is False and not answer.ok
    assert [p.rule for p in answer.authenticity.problems] == ["signature"]


def test_minisign_other_key_fails_on_its_key_id(tmp_path: Path) -> None:
    _, sums = model(tmp_path)
    minisign_keys(tmp_path)
    other = minisign_keys(tmp_path, "other.pub")
    other.secret_key.sign_file(sums, prehash=True, drop_signature=True)
    verdict = authenticity_verdict(sums, tmp_path / "minisign.pub")
    other_id = minisign.read_public_key(tmp_path / "other.pub").key_id_hex
    assert verdict["ok"] is False and verdict["problems"][0]["rule"] == "key-id"
    assert f"signed by key {other_id}" in verdict["problems"][0]["message"]


def test_minisign_changed_trusted_comment_fails(tmp_path: Path) -> None:
    _, sums = model(tmp_path)
    minisign_keys(tmp_path).secret_key.sign_file(sums, prehash=True, drop_signature=True,
                                                 trusted_comment="release 1.0")
    signature = Path(f"{sums}.minisig")
    signature.write_text(signature.read_text().replace("release 1.0", "release 2.0"))
    verdict = authenticity_verdict(sums, tmp_path / "minisign.pub")
    assert [p["rule"] for p in verdict["problems"]] == ["trusted-comment"]


# minisign's own release key and a signature minisign made of the 4 bytes "test" (the
# example in py-minisign's README); its key id as minisign prints it is E7620F1842B4E81F.
MINISIGN_KEY = "RWQf6LRCGA9i53mlYecO4IzT51TGPpvWucNSCh1CBM0QTaLn73Y7GFO3"
MINISIGN_SIGNATURE = (
    "untrusted comment: signature from minisign secret key\n"
    "RWQf6LRCGA9i59SLOFxz6NxvASXDJeRtuZykwQepbDEGt87ig1BNpWaVWuNrm73YiIiJbq71Wi+dP9eKL8OC351"
    "vwIasSSbXxwA=\n"
    "trusted comment: timestamp:1555779966\tfile:test\n"
    "QtKMXWyYcwdpZAlPF7tE2ENJkRd1ujvKjlj1m9RtHTBnZPa5WKU5uWRs5GoP5M/VqE81QFuMKI5k/SfNQUaOAA==\n")


def test_minisign_reader_accepts_a_signature_minisign_made() -> None:
    key = minisign.parse_public_key(f"untrusted comment: x\n{MINISIGN_KEY}\n", label="k")
    assert key.key_id_hex == "E7620F1842B4E81F"
    signature = minisign.parse_signature(MINISIGN_SIGNATURE, label="s")
    minisign.verify(b"test", signature, key, label="s")
    with pytest.raises(InputError, match="signature: does not verify"):
        minisign.verify(b"tesT", signature, key, label="s")


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=0, max_value=len(MINISIGN_SIGNATURE) - 1), st.characters())
def test_any_changed_character_of_a_minisig_fails_or_is_refused(at: int, char: str) -> None:
    """A damaged signature never verifies: a changed character is a format error or a
    failed check, except in the untrusted comment, which nothing checks by design."""
    changed = MINISIGN_SIGNATURE[:at] + char + MINISIGN_SIGNATURE[at + 1:]
    key = minisign.parse_public_key(MINISIGN_KEY, label="k")
    untrusted = MINISIGN_SIGNATURE.index("\n")
    try:
        minisign.verify(b"test", minisign.parse_signature(changed, label="s"), key, label="s")
    except InputError:
        return
    assert at < untrusted or changed == MINISIGN_SIGNATURE or \
        changed.splitlines() == MINISIGN_SIGNATURE.splitlines()


# --- OpenPGP -----------------------------------------------------------------------


@pytest.fixture
def gnupg(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A GnuPG home of the test's own, its agent stopped afterwards."""
    home = tmp_path / "gnupg"
    home.mkdir(mode=0o700)
    env = {**os.environ, "GNUPGHOME": str(home)}
    yield env
    subprocess.run(["gpgconf", "--kill", "gpg-agent"], env=env, check=False,
                   capture_output=True)


def gpg_key(env: dict[str, str], uid: str, out: Path) -> Path:
    subprocess.run(["gpg", "--batch", "--passphrase", "", "--quick-gen-key", uid, "ed25519",
                    "sign", "never"], env=env, check=True, capture_output=True)
    exported = subprocess.run(["gpg", "--batch", "--armor", "--export", uid], env=env,
                              check=True, capture_output=True).stdout
    out.write_bytes(exported)
    return out


def gpg_sign(env: dict[str, str], uid: str, sums: Path) -> None:
    subprocess.run(["gpg", "--batch", "--yes", "--local-user", uid, "--detach-sign",
                    "--armor", str(sums)], env=env, check=True, capture_output=True)


@needs_gpg
def test_openpgp_signature_passes_and_changed_list_fails(tmp_path: Path,
                                                         gnupg: dict[str, str]) -> None:
    folder, sums = model(tmp_path)
    key = gpg_key(gnupg, "Release <release@example.org>", tmp_path / "release.asc")
    gpg_sign(gnupg, "release@example.org", sums)
    answer = lineage.verify(folder, sums=sums, sums_key=key)
    assert answer.ok and answer.authenticity.method == "openpgp"
    assert answer.authenticity.signer == "Release <release@example.org>"
    assert answer.authenticity.key_id and len(answer.authenticity.key_id) == 40
    tamper(sums)
    answer = lineage.verify(folder, sums=sums, sums_key=key)
    assert answer.checksums.ok and not answer.ok
    assert [p.rule for p in answer.authenticity.problems] == ["signature"]


@needs_gpg
def test_openpgp_signature_by_another_key_fails_naming_it(tmp_path: Path,
                                                          gnupg: dict[str, str]) -> None:
    _, sums = model(tmp_path)
    key = gpg_key(gnupg, "Release <release@example.org>", tmp_path / "release.asc")
    gpg_key(gnupg, "Mallory <mallory@example.org>", tmp_path / "mallory.asc")
    gpg_sign(gnupg, "mallory@example.org", sums)
    mallory_id = subprocess.run(
        ["gpg", "--batch", "--with-colons", "--list-keys", "mallory@example.org"], env=gnupg,
        check=True, capture_output=True, text=True).stdout
    long_id = next(line.split(":")[4] for line in mallory_id.splitlines()
                   if line.startswith("pub:"))
    verdict = authenticity_verdict(sums, key)
    assert verdict["ok"] is False
    assert verdict["problems"] == [{"rule": "not-allowed",
                                    "message": f"signed by key {long_id}, not by the key given"}]


@needs_gpg
def test_openpgp_never_touches_the_users_keyring(tmp_path: Path, gnupg: dict[str, str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    _, sums = model(tmp_path)
    key = gpg_key(gnupg, "Release <release@example.org>", tmp_path / "release.asc")
    gpg_sign(gnupg, "release@example.org", sums)
    home = Path(gnupg["GNUPGHOME"])
    before = {p.name: p.stat().st_mtime_ns for p in home.iterdir() if p.is_file()}
    monkeypatch.setenv("GNUPGHOME", str(home))
    assert authenticity_verdict(sums, key)["ok"] is True
    assert {p.name: p.stat().st_mtime_ns for p in home.iterdir() if p.is_file()} == before


def test_gpg_status_lines_are_read() -> None:
    good = read_status(["NEWSIG", "GOODSIG 1234 A <a@x>", "VALIDSIG ABCD 2026-01-01 0 4 0"])
    assert (good.signer, good.fingerprint, good.problems) == ("A <a@x>", "ABCD", [])
    bad = read_status(["NEWSIG", "BADSIG 1234 A <a@x>"])
    assert [rule for rule, _ in bad.problems] == ["signature"]
    assert read_status(["NODATA 1", "NODATA 2"]).problems[0][0] == "signature-format"
    assert read_status([]).problems == [("signature", "gpg reports no good signature")]


def test_no_gpg_is_a_one_line_error_saying_how_to_install(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, sums = model(tmp_path)
    key = tmp_path / "release.asc"
    key.write_text("-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nxx\n-----END PGP PUBLIC KEY "
                   "BLOCK-----\n")
    Path(f"{sums}.asc").write_text("x")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(UsageError, match="apt-get install gnupg"):
        authenticity_verdict(sums, key)


# --- what every method shares ------------------------------------------------------


@needs_ssh
def test_a_missing_signature_file_fails_naming_what_was_looked_for(tmp_path: Path) -> None:
    folder, sums = model(tmp_path)
    allowed = allowed_signers(tmp_path, ("r", ssh_key(tmp_path, "release")))
    answer = lineage.verify(folder, sums=sums, sums_key=allowed)
    assert answer.checksums.ok and answer.authenticity.ok is False and not answer.ok
    assert answer.authenticity.problems[0].rule == "missing-signature"
    assert "no SHA256SUMS.sig beside the list" in answer.authenticity.problems[0].message
    text = verify_cli(tmp_path, str(folder), "--sums", str(sums), "--sums-key", str(allowed),
                      code=1)
    assert "authenticity: FAILED (ssh: " in text and "missing-signature" in text


@pytest.mark.parametrize("method", ["ssh", "minisign"])
def test_a_malformed_signature_file_is_a_failed_verdict(tmp_path: Path, method: str) -> None:
    """The signature is part of what is checked (like a list line that does not match),
    so a damaged one fails the verdict with its rule, never a traceback or exit 2."""
    if method == "ssh" and shutil.which("ssh-keygen") is None:
        pytest.skip("no ssh-keygen")
    folder, sums = model(tmp_path)
    if method == "ssh":
        key = allowed_signers(tmp_path, ("r", ssh_key(tmp_path, "release")))
        Path(f"{sums}.sig").write_text("-----BEGIN SSH SIGNATURE-----\n!!\n"
                                       "-----END SSH SIGNATURE-----\n")
    else:
        minisign_keys(tmp_path)
        key = tmp_path / "minisign.pub"
        Path(f"{sums}.minisig").write_text("untrusted comment: x\nnot base64\n")
    text = verify_cli(tmp_path, str(folder), "--sums", str(sums), "--sums-key", str(key),
                      code=1)
    assert "signature-format: " in text and "Traceback" not in text


def test_without_a_key_authenticity_is_not_checked(tmp_path: Path) -> None:
    folder, sums = model(tmp_path)
    answer = Cli(tmp_path / "no-store").json("verify", str(folder), "--sums", str(sums))
    assert answer["ok"] is True
    assert answer["authenticity"] == {"ok": None, "method": None, "key": None,
                                      "signature": None, "signer": None, "key_id": None,
                                      "problems": []}
    assert "authenticity" not in verify_cli(tmp_path, str(folder), "--sums", str(sums))


def test_a_key_of_no_known_format_is_a_one_line_error(tmp_path: Path) -> None:
    folder, sums = model(tmp_path)
    key = tmp_path / "key.txt"
    key.write_text("hello\n")
    result = Cli(tmp_path / "no-store")("verify", str(folder), "--sums", str(sums),
                                        "--sums-key", str(key), code=2)
    assert result.stderr.strip().splitlines() == [
        f"error: {key}: key-format: not an SSH allowed_signers file, a minisign public key "
        "or an OpenPGP public key"]


def test_a_key_without_a_list_is_a_usage_error(tmp_path: Path) -> None:
    folder, _ = model(tmp_path)
    result = Cli(tmp_path / "no-store")("verify", str(folder), "--sums-key", "k", code=2)
    assert "--sums-key checks the signature of a --sums list" in result.stderr


@needs_ssh
def test_the_reports_doc_console_example_of_authenticity_is_what_verify_prints(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/reports.md's `--sums-key` example: its authenticity lines, the fingerprint
    aside, are what a list signed by a key the allowed_signers file does not name gives."""
    doc = (Path(__file__).parents[1] / "docs" / "reports.md").read_text(encoding="utf-8")
    block = doc.split("$ lineage verify minilm --sums SHA256SUMS --sums-key allowed_signers\n",
                      1)[1].split("```", 1)[0].splitlines()
    documented = [line for line in block if line.startswith(("authenticity:", "  not-"))]
    monkeypatch.chdir(tmp_path)
    folder, sums = model(tmp_path)
    ssh_sign(ssh_key(tmp_path, "mallory"), sums)
    allowed = allowed_signers(tmp_path, ("release", ssh_key(tmp_path, "release")))
    answer = authenticity_verdict("SHA256SUMS", allowed.name)
    text = verify_cli(tmp_path, "m", "--sums", "SHA256SUMS", "--sums-key", allowed.name,
                      code=1)
    printed = [line.replace(answer["key_id"], "SHA256:hlr2fWWuSAER4lakA1N7ElZCDkde5A4tLDBz"
                            "UVvPQIo") for line in text.splitlines()
               if line.startswith(("authenticity:", "  not-"))]
    assert len(documented) == 2 and printed == documented


@needs_ssh
def test_inspect_and_report_carry_the_authenticity_verdict(tmp_path: Path) -> None:
    folder, sums = model(tmp_path)
    key = ssh_key(tmp_path, "release")
    ssh_sign(key, sums)
    allowed = allowed_signers(tmp_path, ("release", key))
    inspected = lineage.inspect(folder, sums=sums, sums_key=allowed)
    assert inspected.integrity.authenticity is not None
    assert inspected.integrity.authenticity.ok and inspected.integrity.authenticity.method == "ssh"
    assert "authenticity: pass (ssh: release, SHA256:" in lineage.report(
        folder, sums=sums, sums_key=allowed)
    tamper(sums)
    cli = Cli(tmp_path / "no-store")
    shown = cli.json("inspect", str(folder), "--sums", str(sums), "--sums-key", str(allowed),
                     code=None)
    assert shown["integrity"]["checksums"]["ok"] is True
    assert shown["integrity"]["authenticity"]["ok"] is False
    html = cli("report", str(folder), "--format", "html", "--sums", str(sums),
               "--sums-key", str(allowed)).stdout
    assert "authenticity: FAIL (ssh)" in html and "signature: does not verify" in html
    unsigned = lineage.report(folder, sums=sums)
    assert "authenticity" not in unsigned  # reports without a key are as they were


@needs_gpg
def test_openpgp_binary_key_is_recognised(tmp_path: Path, gnupg: dict[str, str]) -> None:
    _, sums = model(tmp_path)
    gpg_key(gnupg, "Release <release@example.org>", tmp_path / "armored.asc")
    binary = subprocess.run(["gpg", "--batch", "--export", "release@example.org"],
                            env=gnupg, check=True, capture_output=True).stdout
    (tmp_path / "release.gpg").write_bytes(binary)
    gpg_sign(gnupg, "release@example.org", sums)
    verdict = authenticity_verdict(sums, tmp_path / "release.gpg")
    assert verdict["method"] == "openpgp" and verdict["ok"] is True


def test_a_signature_whose_padding_bits_are_set_is_refused() -> None:
    """Base64 that decodes to the real signature but is not what a writer makes (the
    last character before `==` carries 4 bits past the data) is refused, not verified."""
    lines = MINISIGN_SIGNATURE.splitlines(keepends=True)
    last = lines[3].rstrip("\n")
    assert last.endswith("==")
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    changed_char = alphabet[alphabet.index(last[-3]) ^ 1]  # a padding bit flipped
    lines[3] = last[:-3] + changed_char + "==\n"
    with pytest.raises(InputError, match="as a writer makes it"):
        minisign.parse_signature("".join(lines), label="s")
