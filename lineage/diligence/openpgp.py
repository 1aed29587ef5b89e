"""A detached OpenPGP signature checked by the system's GnuPG, never the user's keyring.

The public key given is imported into a fresh GNUPGHOME that is deleted afterwards, so
the only key gpg knows is the one the caller trusts; `gpg --status-fd` reports what it
found in machine-readable lines (GnuPG's doc/DETAILS): VALIDSIG and GOODSIG for a good
signature, BADSIG for a bad one, ERRSIG (with NO_PUBKEY) for one made by another key,
NODATA for a file that holds no signature.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import NamedTuple

from lineage.errors import InputError, UsageError

GPG_TIMEOUT = 120  # seconds; a verify of a list is well under one
_ERRSIG_NO_PUBKEY = "9"  # ERRSIG's return code for "no public key"


class GpgAnswer(NamedTuple):
    fingerprint: str | None  # the signing (sub)key's, from VALIDSIG
    signer: str | None  # the user id GOODSIG names
    problems: list[tuple[str, str]]  # (rule, message); empty when the signature is good


def gpg_binary() -> str:
    """The gpg on PATH, or a UsageError (exit 2) saying how to install it."""
    found = shutil.which("gpg")
    if found is None:
        raise UsageError("checking an OpenPGP (.asc) signature needs GnuPG's `gpg` on PATH: "
                         "install it (apt-get install gnupg, brew install gnupg)")
    return found


def verify_detached(data_path: Path, signature_path: Path, key_path: Path) -> GpgAnswer:
    """Whether `signature_path` is a good detached signature of `data_path` by the key in
    `key_path`. A key file gpg imports no key from is an InputError naming it."""
    gpg = gpg_binary()
    with tempfile.TemporaryDirectory(prefix="lineage-gpg-") as home:
        base = [gpg, "--homedir", home, "--batch", "--no-tty", "--no-autostart",
                "--status-fd", "1"]
        imported = _run([*base, "--import", str(key_path)])
        if not any(line.startswith("IMPORT_OK") for line in imported):
            raise InputError(key_path, "key-format: gpg imports no OpenPGP public key from it")
        status = _run([*base, "--verify", str(signature_path), str(data_path)])
    return read_status(status)


def read_status(lines: list[str]) -> GpgAnswer:
    """What gpg's status lines (without their "[GNUPG:] " prefix) say of one signature."""
    fingerprint = signer = None
    problems: list[tuple[str, str]] = []
    good = False
    for line in lines:
        keyword, _, rest = line.partition(" ")
        args = rest.split()
        if keyword == "VALIDSIG" and args:
            fingerprint = args[0]
        elif keyword == "GOODSIG":
            good, signer = True, rest.partition(" ")[2] or None
        elif keyword == "BADSIG":
            problems.append(("signature", f"does not verify (key {args[0] if args else '?'}): "
                             "the list or the signature was altered"))
        elif keyword in ("EXPKEYSIG", "REVKEYSIG"):
            what = "expired" if keyword == "EXPKEYSIG" else "revoked"
            problems.append((f"key-{what}", f"made by key {args[0] if args else '?'}, which "
                             f"is {what}"))
        elif keyword == "ERRSIG" and args:
            if len(args) >= 6 and args[5] == _ERRSIG_NO_PUBKEY:
                problems.append(("not-allowed", f"signed by key {args[0]}, not by the key "
                                 "given"))
            else:
                problems.append(("signature", f"gpg cannot check it (key {args[0]}, error "
                                 f"{args[5] if len(args) >= 6 else '?'})"))
        elif keyword == "NODATA":
            problems.append(("signature-format", "not an OpenPGP signature (gpg finds no "
                             "signature data in it)"))
    if not problems and not (good and fingerprint):
        problems.append(("signature", "gpg reports no good signature"))
    return GpgAnswer(fingerprint, signer, _unique(problems))


def _unique(problems: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return list(dict.fromkeys(problems))  # gpg may report NODATA more than once


def _run(command: list[str]) -> list[str]:
    try:
        done = subprocess.run(command, capture_output=True, timeout=GPG_TIMEOUT, check=False)
    except subprocess.TimeoutExpired as exc:
        raise UsageError(f"gpg did not answer within {GPG_TIMEOUT} s") from exc
    prefix = "[GNUPG:] "
    return [line[len(prefix):] for line in done.stdout.decode("utf-8", "replace").splitlines()
            if line.startswith(prefix)]
