"""DSSE envelopes around in-toto Statements, signed and opened through securesystemslib
(the library in-toto itself uses), with ed25519 keys in OpenSSH form.

The signature covers DSSE's pre-authentication encoding of the payload type
(`application/vnd.in-toto+json`) and the payload (the Statement's canonical JSON); the
key id is securesystemslib's (the SHA-256 of the public key's canonical description), so
in-toto's verifiers, and anyone with securesystemslib and the public key, check it.
"""

from __future__ import annotations

import base64
import binascii
import json
from pathlib import Path
from typing import Any

from lineage.attest.statements import PAYLOAD_TYPE
from lineage.errors import InputError
from lineage.runs.chain import canonical_json
from lineage.userfiles import read_regular

MAX_ENVELOPE_BYTES = 256 << 20
KEY_TYPES = "key-type: only ed25519 and elliptic-curve keys sign attestations"


def private_key(path: str | Path) -> Any:
    """An ed25519 key in OpenSSH form, or a PEM (PKCS#8) ed25519 or elliptic-curve key (the
    keys OpenSSF model signing takes)."""
    from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePrivateKey
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    from lineage.audit.sshsig import load_private_key

    data = read_regular(path, what="private key", max_bytes=1 << 20)
    if b"OPENSSH PRIVATE KEY" in data or b"PRIVATE KEY" not in data:
        return load_private_key(path)
    try:
        key = load_pem_private_key(data, password=None)
    except TypeError as exc:
        raise InputError(path, "encrypted-key: the key is protected by a passphrase") from exc
    except ValueError as exc:
        raise InputError(path, f"key-format: not a PEM private key ({exc})") from exc
    if not isinstance(key, Ed25519PrivateKey | EllipticCurvePrivateKey):
        raise InputError(path, KEY_TYPES)
    return key


def sign_statement(statement: dict[str, Any], key_path: str | Path) -> dict[str, Any]:
    """The DSSE envelope (JSON object) of `statement`, signed with the private key."""
    from securesystemslib.dsse import Envelope
    from securesystemslib.signer import CryptoSigner  # type: ignore[attr-defined]

    signer = CryptoSigner(private_key(key_path))
    envelope = Envelope(payload=canonical_json(statement).encode("utf-8"),
                        payload_type=PAYLOAD_TYPE, signatures={})
    envelope.sign(signer)
    result: dict[str, Any] = envelope.to_dict()
    return result


def public_key(path: str | Path) -> Any:
    """A public key from an OpenSSH public key file (`id_ed25519.pub`, or a line of one),
    a PEM public key, or the private key itself."""
    from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePublicKey
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    from cryptography.hazmat.primitives.serialization import (
        load_pem_public_key,
        load_ssh_public_key,
    )

    data = read_regular(path, what="key", max_bytes=1 << 20)
    if b"PRIVATE KEY" in data:
        return private_key(path).public_key()
    if b"BEGIN PUBLIC KEY" in data:
        try:
            pem = load_pem_public_key(data)
        except ValueError as exc:
            raise InputError(path, f"key-format: not a PEM public key ({exc})") from exc
        if not isinstance(pem, Ed25519PublicKey | EllipticCurvePublicKey):
            raise InputError(path, KEY_TYPES)
        return pem
    try:
        key = load_ssh_public_key(data.strip().split(b"\n")[0])
    except (ValueError, IndexError) as exc:
        raise InputError(path, f"key-format: not an OpenSSH public key ({exc})") from exc
    if not isinstance(key, Ed25519PublicKey):
        raise InputError(path, "key-type: only ed25519 keys sign attestations")
    return key


def read_envelope(path: str | Path) -> dict[str, Any]:
    """A DSSE envelope file, checked for its shape (not yet its signature)."""
    data = read_regular(path, what="attestation", max_bytes=MAX_ENVELOPE_BYTES)
    try:
        envelope = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(path, f"not JSON ({exc})") from exc
    if (not isinstance(envelope, dict) or not isinstance(envelope.get("payload"), str)
            or not isinstance(envelope.get("signatures"), list)):
        raise InputError(path, "not a DSSE envelope (payload, payloadType, signatures)")
    if envelope.get("payloadType") != PAYLOAD_TYPE:
        raise InputError(path, f"payloadType {envelope.get('payloadType')!r}: not an in-toto "
                         f"Statement ({PAYLOAD_TYPE})")
    return envelope


def signed_by(envelope: dict[str, Any], key: Any) -> bool:
    """True when one of the envelope's signatures verifies under `key` (securesystemslib's
    DSSE verification, threshold 1)."""
    from securesystemslib.dsse import Envelope
    from securesystemslib.exceptions import VerificationError
    from securesystemslib.signer import SSlibKey  # type: ignore[attr-defined]

    try:
        Envelope.from_dict(envelope).verify([SSlibKey.from_crypto(key)], 1)
    except (VerificationError, ValueError, KeyError, TypeError, binascii.Error):
        return False
    return True


def payload(path: str | Path, envelope: dict[str, Any]) -> dict[str, Any]:
    """The envelope's Statement."""
    try:
        statement = json.loads(base64.b64decode(envelope["payload"], validate=True))
    except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
        raise InputError(path, f"the payload is not a base64 JSON Statement ({exc})") from exc
    if not isinstance(statement, dict):
        raise InputError(path, "the payload is not a JSON object")
    return statement
