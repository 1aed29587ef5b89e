"""The authenticity verdict: is a SHA256SUMS list signed by a key the caller trusts?

The checksums verdict trusts the list as given; this one checks who wrote it, and is never
merged into it. The key's format picks the method, and the method the signature file
beside the list:

    SSH allowed_signers file     LIST.sig      SSHSIG (`ssh-keygen -Y sign -n file LIST`)
    minisign public key          LIST.minisig  (`minisign -S -m LIST`)
    OpenPGP public key           LIST.asc      (`gpg --detach-sign --armor LIST`)

A key file of none of these formats is bad input (exit 2); so is an allowed_signers file
that does not parse. A missing, malformed or failing signature file is a failed verdict
that names the problem: the signature is part of what is being checked, like the list.
"""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

from lineage.diligence.openpgp import verify_detached
from lineage.errors import InputError, RuleError
from lineage.formats import minisign, sshsig
from lineage.formats.sha256sums import MAX_LIST_BYTES
from lineage.userfiles import read_regular

SSH_NAMESPACE = "file"  # ssh-keygen(1)'s namespace for signing files
SIGNATURE_FILES = {"ssh": ".sig", "minisign": ".minisig", "openpgp": ".asc"}
MAX_KEY_FILE_BYTES = 16 << 20  # an allowed_signers file may be long; a public key is small
MAX_SIGNATURE_BYTES = 1 << 20
_PGP_ARMOR = "-----BEGIN PGP PUBLIC KEY BLOCK-----"
# A binary key starts with a public-key packet (tag 6): old-format headers 0x98-0x9A
# (one, two or four length bytes), new-format 0xC6 (RFC 4880, 4.2).
_PGP_KEY_PACKETS = (b"\x98", b"\x99", b"\x9a", b"\xc6")


def not_checked() -> dict[str, Any]:
    """The verdict when no key is given: not run, as checksums are without a list."""
    return {"ok": None, "method": None, "key": None, "signature": None, "signer": None,
            "key_id": None, "problems": []}


def authenticity_verdict(sums: str | Path, key: str | Path) -> dict[str, Any]:
    """The list's signature checked against `key`: the verdict, `ok` True or False."""
    sums, key = Path(sums), Path(key)
    method = key_method(key)
    signature = Path(f"{sums}{SIGNATURE_FILES[method]}")
    verdict = {**not_checked(), "method": method, "key": str(key), "signature": str(signature)}
    if not signature.is_file():
        problem = ("missing-signature", f"no {signature.name} beside the list (a {method} "
                   f"key is checked against LIST{SIGNATURE_FILES[method]})")
        return {**verdict, "ok": False, "problems": [_problem(*problem)]}
    # The list's own cap: a list too large to check is refused before any signature work.
    data = read_regular(sums, what="SHA256SUMS list", max_bytes=MAX_LIST_BYTES)
    check = {"ssh": _check_ssh, "minisign": _check_minisign, "openpgp": _check_openpgp}[method]
    signer, key_id, problems = check(sums, data, signature, key)
    return {**verdict, "ok": not problems, "signer": signer, "key_id": key_id,
            "problems": [_problem(*p) for p in problems]}


def key_method(key: Path) -> str:
    """ssh, minisign or openpgp, from the key file's content; InputError for anything else."""
    data = read_regular(key, what="signing key", max_bytes=MAX_KEY_FILE_BYTES)
    text = data.decode("utf-8", errors="replace")
    if _PGP_ARMOR in text or data[:1] in _PGP_KEY_PACKETS:
        return "openpgp"
    if minisign.looks_like_public_key(text):
        return "minisign"
    lines = [line for line in text.splitlines() if line.strip()
             and not line.lstrip().startswith("#")]
    if lines and sshsig.is_key_type(lines[0].split()[0]):
        raise InputError(key, "key-format: an SSH public key, not an allowed_signers file: "
                         "put the signer's name before the key (`NAME ssh-ed25519 AAAA...`)")
    if lines and any(_has_ssh_key(line) for line in lines):
        return "ssh"
    raise InputError(key, "key-format: not an SSH allowed_signers file, a minisign public "
                     "key or an OpenPGP public key")


def _has_ssh_key(line: str) -> bool:
    return any(sshsig.is_key_type(token) for token in line.split())


def _problem(rule: str, message: str) -> dict[str, str]:
    return {"rule": rule, "message": message}


Found = tuple[str | None, str | None, list[tuple[str, str]]]  # signer, key id, problems


def _check_ssh(sums: Path, data: bytes, signature: Path, key: Path) -> Found:
    allowed = sshsig.parse_allowed_signers(key)  # a malformed file is bad input (exit 2)
    armored = _signature_text(signature)
    try:
        signer_key = sshsig.verify(data, armored, namespace=SSH_NAMESPACE,
                                   label=str(signature))
    except RuleError as exc:
        rule = "signature" if exc.rule_id in ("signature", "namespace") else "signature-format"
        return None, None, [(rule, exc.message)]
    key_id = ssh_fingerprint(signer_key)
    principals = sshsig.allowed_principals(signer_key, allowed, namespace=SSH_NAMESPACE)
    if not principals:
        return None, key_id, [("not-allowed", f"signed by {key_id}, which {key.name} does "
                               f"not allow to sign in namespace {SSH_NAMESPACE!r}")]
    return ",".join(principals), key_id, []


def ssh_fingerprint(key_line: str) -> str:
    """`SHA256:...` as ssh-keygen -l prints it."""
    blob = base64.b64decode(key_line.split()[1])
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode("ascii").rstrip("=")
    return f"SHA256:{digest}"


def _check_minisign(sums: Path, data: bytes, signature: Path, key: Path) -> Found:
    public = minisign.read_public_key(key)
    try:
        parsed = minisign.parse_signature(_signature_text(signature), label=str(signature))
        minisign.verify(data, parsed, public, label=str(signature))
    except RuleError as exc:
        return None, public.key_id_hex, [(exc.rule_id, exc.message)]
    return None, public.key_id_hex, []  # minisign names no signer: the key id is the answer


def _check_openpgp(sums: Path, data: bytes, signature: Path, key: Path) -> Found:
    answer = verify_detached(sums, signature, key)
    return answer.signer, answer.fingerprint, answer.problems


def _signature_text(signature: Path) -> str:
    raw = read_regular(signature, what="signature", max_bytes=MAX_SIGNATURE_BYTES)
    return raw.decode("utf-8", errors="replace")
