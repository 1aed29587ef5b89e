"""SSH signatures of audit records: OpenSSH's SSHSIG format (lineage.formats.sshsig) in
the namespace "lineage-audit", with ed25519 keys.

`ssh-keygen -Y verify -n lineage-audit` accepts what lineage signs and lineage accepts
what ssh-keygen signs. A record's signature covers its canonical bytes without the
`signature` key, after the signing key's public line is written into
`auditor.public_key`; `verify_record` holds the two together. Who may sign for whom is an
`allowed_signers` file (ssh-keygen's ALLOWED SIGNERS format), read by
`parse_allowed_signers` and asked by `is_allowed`.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from lineage.audit.records import canonical_bytes, record_id
from lineage.errors import InputError, RuleError
from lineage.formats import sshsig as _format
from lineage.formats.sshsig import (
    BEGIN,
    END,
    HASH_ALGORITHM,
    KEY_TYPE,
    AllowedSigner,
    armor,
    key_line,
    matches_patterns,
    normalize_public_key,
    parse_allowed_signers,
    signature_blob,
    signed_data,
)
from lineage.userfiles import read_regular

__all__ = ["BEGIN", "END", "KEY_TYPE", "NAMESPACE", "AllowedSigner", "is_allowed",
           "matches_patterns", "normalize_public_key", "parse_allowed_signers",
           "public_key_line", "sign", "sign_record", "verify", "verify_record"]

NAMESPACE = "lineage-audit"
_SIGNATURE_LABEL = "SSH signature"
MAX_KEY_BYTES = 64 << 10  # an ed25519 private key is about 400 bytes, an RSA one a few KB


# --- keys ----------------------------------------------------------------------------


def load_private_key(path: str | Path) -> Any:
    """An unencrypted OpenSSH ed25519 private key (cryptography's Ed25519PrivateKey)."""
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import load_ssh_private_key

    data = read_regular(path, what="private key", max_bytes=MAX_KEY_BYTES)
    try:
        key = load_ssh_private_key(data, password=None)
    except TypeError as exc:  # cryptography's way of saying "a passphrase is needed"
        raise InputError(path, "encrypted-key: the key is protected by a passphrase; lineage "
                         "reads unencrypted keys only (sign with `ssh-keygen -Y sign` "
                         "instead)") from exc
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise InputError(path, f"key-format: not an OpenSSH private key ({exc})") from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise InputError(path, f"key-type: a {_private_key_type(key)} key; only ed25519 keys "
                         "sign audit records (ssh-keygen -t ed25519)")
    return key


def _private_key_type(key: Any) -> str:
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    try:
        line = key.public_key().public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH)
        return str(line.split()[0].decode("ascii"))
    except (ValueError, TypeError, AttributeError):
        return type(key).__name__


def public_key_line(private_key_path: str | Path) -> str:
    """The "ssh-ed25519 AAAA..." line of an OpenSSH ed25519 private key file."""
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    raw = load_private_key(private_key_path).public_key().public_bytes(
        Encoding.Raw, PublicFormat.Raw)
    return key_line(raw)


# --- sign and verify -----------------------------------------------------------------


def sign(data: bytes, private_key_path: str | Path, *, namespace: str = NAMESPACE) -> str:
    """The armored SSHSIG of `data` by an unencrypted OpenSSH ed25519 private key."""
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    if not namespace:
        raise InputError(private_key_path, "namespace: a signature needs a namespace")
    key = load_private_key(private_key_path)
    raw = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    signature = key.sign(signed_data(data, namespace, HASH_ALGORITHM))
    return armor(signature_blob(raw, signature, namespace))


def verify(data: bytes, armored: str, *, namespace: str = NAMESPACE,
           label: str = _SIGNATURE_LABEL) -> str:
    """The signer's public key line ("ssh-ed25519 AAAA...") when `armored` is a valid
    SSHSIG of `data` in `namespace`; otherwise a RuleError naming the rule broken."""
    return _format.verify(data, armored, namespace=namespace, label=label)


def is_allowed(public_key: str, name: str, allowed: list[AllowedSigner], *,
               namespace: str = NAMESPACE, now: datetime | None = None) -> bool:
    """Whether some entry lets `public_key` sign as `name` in `namespace` at `now`."""
    return _format.is_allowed(public_key, name, allowed, namespace=namespace, now=now)


# --- records -------------------------------------------------------------------------


def sign_record(record: dict[str, Any], key_path: str | Path) -> dict[str, Any]:
    """A copy of `record` whose `auditor.public_key` is the key's public line and whose
    `signature` covers the rest (a signature already there is replaced)."""
    auditor = record.get("auditor")
    if not isinstance(auditor, dict):
        raise InputError(key_path, "auditor: the record names no auditor to sign for")
    signed = {key: value for key, value in record.items() if key != "signature"}
    signed["auditor"] = {**auditor, "public_key": public_key_line(key_path)}
    signed["signature"] = sign(canonical_bytes(signed), key_path)
    return signed


def verify_record(record: dict[str, Any]) -> bool:
    """True when the record is signed, the signature verifies over its canonical bytes
    and the signing key is `auditor.public_key`; False when it is unsigned; a RuleError
    "signature" (named by the record's id) when it is signed but not by that key."""
    armored = record.get("signature")
    if armored is None:
        return False
    label = record_id(record)
    if not isinstance(armored, str):
        raise RuleError(label, "signature", "the signature is not an armored string")
    try:
        signer = verify(canonical_bytes(record), armored, label=label)
    except RuleError as exc:
        if exc.rule_id == "signature":
            raise
        raise RuleError(label, "signature", exc.rule) from exc
    auditor = record.get("auditor")
    claimed = auditor.get("public_key") if isinstance(auditor, dict) else None
    if not isinstance(claimed, str) or _normalized_or_none(claimed) != signer:
        raise RuleError(label, "signature", f"signed by {signer}, but auditor.public_key is "
                        f"{claimed!r}")
    return True


def _normalized_or_none(line: str) -> str | None:
    try:
        return normalize_public_key(line)
    except RuleError:
        return None
