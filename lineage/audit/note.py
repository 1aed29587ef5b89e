"""Signed notes and log checkpoints (C2SP signed-note and tlog-checkpoint).

A note is UTF-8 text ending in a newline, a blank line, then one line per signature:
`— <key name> <base64(key id || signature)>`. An Ed25519 key's id is the first four bytes
of SHA-256(name || 0x0A || 0x01 || public key). Keys travel as the Go `sumdb/note`
package writes them: a verifier key `<name>+<id hex>+<base64(0x01 || public key)>`, a
signer key `PRIVATE+KEY+<name>+<id hex>+<base64(0x01 || seed)>`, so the store's log can be
checked, and its checkpoints cosigned, by the field's own tools.

A checkpoint is a note whose text is the log's origin, its size in decimal and its root
hash in base64, each on a line of its own.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

ALG_ED25519 = 1
DASH = "\u2014"  # the em dash that starts a signature line
MAX_NOTE_BYTES = 1 << 20


class NoteError(ValueError):
    """A note, key or checkpoint that breaks its format or does not verify."""


def _key_id(name: str, public: bytes) -> bytes:
    return hashlib.sha256(name.encode() + b"\n" + bytes([ALG_ED25519]) + public).digest()[:4]


def _check_name(name: str) -> None:
    if not name or "+" in name or any(c.isspace() for c in name):
        raise NoteError(f"key name {name!r}: empty, or holds '+' or a space")


@dataclass(frozen=True)
class Verifier:
    name: str
    key_id: bytes
    public: bytes

    @classmethod
    def parse(cls, text: str) -> Verifier:
        """A verifier key `<name>+<id hex>+<base64(0x01 || public key)>`."""
        name, _, rest = text.strip().partition("+")
        id_hex, _, material = rest.partition("+")
        try:
            key_id, data = bytes.fromhex(id_hex), base64.b64decode(material, validate=True)
        except (ValueError, binascii.Error) as exc:
            raise NoteError(f"verifier key {text.strip()!r}: not hex and base64") from exc
        _check_name(name)
        if len(key_id) != 4 or len(data) != 33 or data[0] != ALG_ED25519:
            raise NoteError(f"verifier key {text.strip()!r}: not an Ed25519 key "
                            "(a 4-byte id, the type 1 and 32 bytes)")
        if _key_id(name, data[1:]) != key_id:
            raise NoteError(f"verifier key {text.strip()!r}: its id is not its key's")
        return cls(name, key_id, data[1:])

    def __str__(self) -> str:
        material = base64.b64encode(bytes([ALG_ED25519]) + self.public).decode()
        return f"{self.name}+{self.key_id.hex()}+{material}"

    def verifies(self, message: bytes, signature: bytes) -> bool:
        try:
            Ed25519PublicKey.from_public_bytes(self.public).verify(signature, message)
        except InvalidSignature:
            return False
        return True


@dataclass(frozen=True)
class Signer:
    name: str
    seed: bytes

    @classmethod
    def generate(cls, name: str) -> Signer:
        _check_name(name)
        from cryptography.hazmat.primitives.serialization import NoEncryption, PrivateFormat

        seed = Ed25519PrivateKey.generate().private_bytes(
            Encoding.Raw, PrivateFormat.Raw, NoEncryption())
        return cls(name, seed)

    @classmethod
    def parse(cls, text: str) -> Signer:
        """A signer key `PRIVATE+KEY+<name>+<id hex>+<base64(0x01 || seed)>`."""
        parts = text.strip().split("+", 4)
        if len(parts) != 5 or parts[:2] != ["PRIVATE", "KEY"]:
            raise NoteError("not a signer key (PRIVATE+KEY+<name>+<id>+<key>)")
        name, id_hex, material = parts[2:]
        try:
            key_id, data = bytes.fromhex(id_hex), base64.b64decode(material, validate=True)
        except (ValueError, binascii.Error) as exc:
            raise NoteError("signer key: its id and key are not hex and base64") from exc
        _check_name(name)
        if len(data) != 33 or data[0] != ALG_ED25519:
            raise NoteError("signer key: not an Ed25519 key")
        signer = cls(name, data[1:])
        if signer.verifier.key_id != key_id:
            raise NoteError("signer key: its id is not its key's")
        return signer

    def __str__(self) -> str:
        material = base64.b64encode(bytes([ALG_ED25519]) + self.seed).decode()
        return f"PRIVATE+KEY+{self.name}+{self.verifier.key_id.hex()}+{material}"

    @property
    def verifier(self) -> Verifier:
        public = Ed25519PrivateKey.from_private_bytes(self.seed).public_key().public_bytes(
            Encoding.Raw, PublicFormat.Raw)
        return Verifier(self.name, _key_id(self.name, public), public)

    def sign(self, text: str) -> str:
        """The note: `text` (ending in a newline), a blank line and this key's signature."""
        _check_text(text)
        signature = Ed25519PrivateKey.from_private_bytes(self.seed).sign(text.encode())
        blob = base64.b64encode(self.verifier.key_id + signature).decode()
        return f"{text}\n{DASH} {self.name} {blob}\n"


def _check_text(text: str) -> None:
    if not text.endswith("\n") or "\n\n" in text or any(
            c < " " and c != "\n" for c in text):
        raise NoteError("a note's text ends in a newline, has no blank line and no other "
                        "control character")


def open_note(note: str, verifier: Verifier) -> str:
    """The note's text, when `verifier`'s signature on it verifies; NoteError otherwise.
    Signatures by other keys are allowed and ignored (cosignatures)."""
    if len(note.encode()) > MAX_NOTE_BYTES:
        raise NoteError("a note over 1 MiB")
    text, blank, signatures = note.rpartition("\n\n")
    if not blank or not signatures.endswith("\n"):
        raise NoteError("no blank line before the signatures, or no final newline")
    text += "\n"
    _check_text(text)
    for line in signatures[:-1].split("\n"):
        dash, name, blob = (line.split(" ") + ["", ""])[:3]
        if dash != DASH or not name or len(line.split(" ")) != 3:
            raise NoteError(f"signature line {line!r}: not '{DASH} <name> <signature>'")
        try:
            data = base64.b64decode(blob, validate=True)
        except binascii.Error as exc:
            raise NoteError(f"signature line {line!r}: not base64") from exc
        if (name == verifier.name and data[:4] == verifier.key_id
                and verifier.verifies(text.encode(), data[4:])):
            return text
    raise NoteError(f"no valid signature by {verifier.name}+{verifier.key_id.hex()}")


@dataclass(frozen=True)
class Checkpoint:
    origin: str
    size: int
    root: bytes

    @property
    def text(self) -> str:
        return f"{self.origin}\n{self.size}\n{base64.b64encode(self.root).decode()}\n"

    @classmethod
    def parse(cls, text: str) -> Checkpoint:
        lines = text.split("\n")
        if len(lines) < 4 or not lines[0] or not lines[1].isdigit() or (
                lines[1] != "0" and lines[1].startswith("0")):
            raise NoteError("not a checkpoint (origin, size in decimal, root in base64)")
        try:
            root = base64.b64decode(lines[2], validate=True)
        except binascii.Error as exc:
            raise NoteError("checkpoint: its root is not base64") from exc
        if len(root) != 32:
            raise NoteError(f"checkpoint: a root of {len(root)} bytes, not 32")
        return cls(lines[0], int(lines[1]), root)
