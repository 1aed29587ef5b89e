"""minisign public keys and signatures (https://jedisct1.github.io/minisign/), ed25519.

A public key file is two lines: `untrusted comment: ...` and the base64 of
"Ed" | key id (8 bytes) | public key (32 bytes). A `.minisig` file is four lines:

    untrusted comment: ...
    base64( algorithm (2 bytes) | key id (8 bytes) | signature (64 bytes) )
    trusted comment: ...
    base64( global signature (64 bytes) )

Algorithm "ED" (what minisign writes by default) signs the BLAKE2b-512 of the file;
legacy "Ed" signs the file itself. The global signature covers signature || the trusted
comment's text, so the trusted comment cannot be changed either. The untrusted comments
are what they say: nothing checks them.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from pathlib import Path
from typing import NamedTuple

from lineage.errors import RuleError
from lineage.userfiles import read_regular

_KEY_ALGORITHM = b"Ed"
_PREHASHED = b"ED"  # BLAKE2b-512 of the data is signed
_LEGACY = b"Ed"  # the data itself is signed
UNTRUSTED = "untrusted comment:"
TRUSTED = "trusted comment: "  # the rest of the line, as is, is the signed comment
MAX_KEY_BYTES = 4 << 10  # a public key file is about 100 bytes
MAX_SIGNATURE_BYTES = 8 << 10  # a trusted comment is at most about 8 KB in minisign


class PublicKey(NamedTuple):
    key_id: bytes  # 8 bytes, as stored
    key: bytes  # 32 bytes of ed25519 public key

    @property
    def key_id_hex(self) -> str:
        """The key id as minisign prints it: the 8 bytes read as a little-endian integer."""
        return f"{int.from_bytes(self.key_id, 'little'):016X}"


class Signature(NamedTuple):
    algorithm: bytes  # b"ED" or b"Ed"
    key_id: bytes
    signature: bytes
    trusted_comment: str
    global_signature: bytes


def looks_like_public_key(text: str) -> bool:
    """Whether `text` is shaped like a minisign public key file (its base64 line decodes
    to "Ed" + 40 bytes); for telling key formats apart before reading one."""
    try:
        parse_public_key(text, label="key")
    except RuleError:
        return False
    return True


def read_public_key(path: str | Path) -> PublicKey:
    """A minisign public key file; an InputError naming the file when it is not one."""
    data = read_regular(path, what="minisign public key", max_bytes=MAX_KEY_BYTES)
    return parse_public_key(data.decode("utf-8", errors="replace"), label=str(path))


def parse_public_key(text: str, *, label: str) -> PublicKey:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if lines and lines[0].startswith(UNTRUSTED):
        lines = lines[1:]
    if len(lines) != 1:
        raise RuleError(label, "minisign-key", "not a minisign public key (an untrusted "
                        "comment line and one base64 line)")
    raw = _base64(lines[0], label, "minisign-key", "the key")
    if len(raw) != 42 or raw[:2] != _KEY_ALGORITHM:
        raise RuleError(label, "minisign-key", "the base64 line is not \"Ed\", an 8-byte key "
                        "id and a 32-byte ed25519 key")
    return PublicKey(raw[2:10], raw[10:])


def parse_signature(text: str, *, label: str) -> Signature:
    """The four lines of a .minisig file; a RuleError "signature-format" otherwise."""
    lines = text.splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    if len(lines) != 4 or not lines[0].startswith(UNTRUSTED) \
            or not lines[2].startswith(TRUSTED):
        raise RuleError(label, "signature-format", "not a minisign signature (untrusted "
                        "comment, signature, trusted comment, global signature)")
    raw = _base64(lines[1].strip(), label, "signature-format", "the signature line")
    if len(raw) != 74 or raw[:2] not in (_PREHASHED, _LEGACY):
        raise RuleError(label, "signature-format", "the signature line is not an algorithm "
                        "(ED or Ed), an 8-byte key id and a 64-byte signature")
    global_signature = _base64(lines[3].strip(), label, "signature-format",
                               "the global signature")
    if len(global_signature) != 64:
        raise RuleError(label, "signature-format", f"a global signature of "
                        f"{len(global_signature)} bytes, not 64")
    return Signature(raw[:2], raw[2:10], raw[10:], lines[2][len(TRUSTED):],
                     global_signature)


def verify(data: bytes, signature: Signature, key: PublicKey, *, label: str) -> None:
    """Nothing when `signature` is `key`'s over `data` and over its trusted comment; a
    RuleError "key-id", "signature" or "trusted-comment" otherwise."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    if signature.key_id != key.key_id:
        theirs = PublicKey(signature.key_id, b"").key_id_hex
        raise RuleError(label, "key-id", f"signed by key {theirs}, not by the key given "
                        f"({key.key_id_hex})")
    public = Ed25519PublicKey.from_public_bytes(key.key)
    signed = hashlib.blake2b(data).digest() if signature.algorithm == _PREHASHED else data
    try:
        public.verify(signature.signature, signed)
    except InvalidSignature:
        raise RuleError(label, "signature", "does not verify: the file or the signature was "
                        "altered") from None
    try:
        public.verify(signature.global_signature,
                      signature.signature + signature.trusted_comment.encode("utf-8"))
    except InvalidSignature:
        raise RuleError(label, "trusted-comment", "the global signature does not verify: "
                        "the trusted comment was altered") from None


def _base64(text: str, label: str, rule: str, what: str) -> bytes:
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise RuleError(label, rule, f"{what} is not base64") from exc
    # The bits a last character carries past the data are zero in what a writer makes:
    # otherwise two texts would decode to one signature, and a changed character verify.
    if base64.b64encode(raw).decode("ascii") != text:
        raise RuleError(label, rule, f"{what} is not base64 as a writer makes it "
                        "(bits set past the data)")
    return raw

