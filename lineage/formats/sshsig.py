"""OpenSSH signatures (PROTOCOL.sshsig) and allowed_signers files, with ed25519 keys.

A signature is the armored blob `ssh-keygen -Y sign` writes:

    "SSHSIG" | uint32 1 | string public key | string namespace | string reserved ("")
             | string hash algorithm ("sha512") | string signature

and what the key signs is `"SSHSIG" | string namespace | string "" | string "sha512" |
string SHA-512(data)`. Armored: `-----BEGIN SSH SIGNATURE-----`, the blob in base64
lines of 70 characters, `-----END SSH SIGNATURE-----`. The namespace keeps a signature
made for one purpose from passing for another: lineage.audit signs records in
"lineage-audit"; a file signed with `ssh-keygen -Y sign -n file` is in "file".

Only ed25519 keys: one algorithm, deterministic signatures, and no choice to get wrong.
Who may sign is an `allowed_signers` file (ssh-keygen's ALLOWED SIGNERS format), read by
`parse_allowed_signers` and asked by `is_allowed` (for a name) or `allowed_principals`
(for the names a key may sign as).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import struct
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from lineage.errors import InputError, RuleError
from lineage.userfiles import read_regular

MAGIC = b"SSHSIG"
VERSION = 1
KEY_TYPE = "ssh-ed25519"
HASH_ALGORITHM = "sha512"  # what ssh-keygen writes; sha256 is also read, as ssh-keygen does
_HASHES = {"sha512": hashlib.sha512, "sha256": hashlib.sha256}
BEGIN = "-----BEGIN SSH SIGNATURE-----"
END = "-----END SSH SIGNATURE-----"
_LINE = 70  # the armor's line width, as ssh-keygen writes it
_SIGNATURE_LABEL = "SSH signature"
MAX_ALLOWED_SIGNERS_BYTES = 16 << 20  # about 150,000 lines of a key each


# --- the wire format ---------------------------------------------------------------


def _string(value: bytes) -> bytes:
    return struct.pack(">I", len(value)) + value


class _Reader:
    """SSH wire-format fields out of a blob; a short or malformed blob is a RuleError."""

    def __init__(self, data: bytes, label: str) -> None:
        self.data, self.at, self.label = data, 0, label

    def take(self, size: int, what: str) -> bytes:
        if self.at + size > len(self.data):
            raise RuleError(self.label, "blob", f"the blob ends inside its {what}")
        chunk = self.data[self.at : self.at + size]
        self.at += size
        return chunk

    def uint32(self, what: str) -> int:
        value: int = struct.unpack(">I", self.take(4, what))[0]
        return value

    def string(self, what: str) -> bytes:
        return self.take(self.uint32(what), what)

    def text(self, what: str) -> str:
        try:
            return self.string(what).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RuleError(self.label, "blob", f"its {what} is not UTF-8") from exc

    def finish(self, what: str) -> None:
        if self.at != len(self.data):
            raise RuleError(self.label, "blob", f"{len(self.data) - self.at} bytes after the "
                            f"{what}")


def signed_data(data: bytes, namespace: str, hash_algorithm: str) -> bytes:
    digest = _HASHES[hash_algorithm](data).digest()
    return (MAGIC + _string(namespace.encode("utf-8")) + _string(b"")
            + _string(hash_algorithm.encode("ascii")) + _string(digest))


def armor(blob: bytes) -> str:
    text = base64.b64encode(blob).decode("ascii")
    lines = [text[i : i + _LINE] for i in range(0, len(text), _LINE)]
    return "\n".join([BEGIN, *lines, END]) + "\n"


def _dearmor(armored: str, label: str) -> bytes:
    lines = [line.strip() for line in armored.strip().splitlines()]
    if len(lines) < 3 or lines[0] != BEGIN or lines[-1] != END:
        raise RuleError(label, "armor", f"not an armored SSH signature ({BEGIN} ... {END})")
    try:
        return base64.b64decode("".join(lines[1:-1]), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise RuleError(label, "armor", "the signature's base64 is damaged") from exc


# --- keys ----------------------------------------------------------------------------


def ed25519_blob(raw: bytes) -> bytes:
    return _string(KEY_TYPE.encode()) + _string(raw)


def key_line(raw: bytes) -> str:
    return f"{KEY_TYPE} {base64.b64encode(ed25519_blob(raw)).decode('ascii')}"


def normalize_public_key(line: str, *, label: str = "public key") -> str:
    """`type base64` of a public key line (its comment dropped), checked to be well formed."""
    fields = line.split()
    if len(fields) < 2:
        raise RuleError(label, "public-key", f"{line!r} is not a public key line "
                        "(type base64 [comment])")
    try:
        blob = base64.b64decode(fields[1], validate=True)
    except (binascii.Error, ValueError) as exc:
        raise RuleError(label, "public-key", "the key's base64 is damaged") from exc
    reader = _Reader(blob, label)
    if reader.text("key type") != fields[0]:
        raise RuleError(label, "public-key", f"the key's blob is not of type {fields[0]}")
    return f"{fields[0]} {fields[1]}"


# --- verify ------------------------------------------------------------------------------


def signature_blob(raw_public_key: bytes, signature: bytes, namespace: str) -> bytes:
    """The SSHSIG blob (before armor) of an ed25519 `signature` over signed_data(...)."""
    return (MAGIC + struct.pack(">I", VERSION) + _string(ed25519_blob(raw_public_key))
            + _string(namespace.encode("utf-8")) + _string(b"")
            + _string(HASH_ALGORITHM.encode("ascii"))
            + _string(_string(KEY_TYPE.encode()) + _string(signature)))


def verify(data: bytes, armored: str, *, namespace: str,
           label: str = _SIGNATURE_LABEL) -> str:
    """The signer's public key line ("ssh-ed25519 AAAA...") when `armored` is a valid
    SSHSIG of `data` in `namespace`; otherwise a RuleError naming the rule broken."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    reader = _Reader(_dearmor(armored, label), label)
    if reader.take(len(MAGIC), "magic") != MAGIC:
        raise RuleError(label, "magic", "the blob does not start with SSHSIG")
    if (version := reader.uint32("version")) != VERSION:
        raise RuleError(label, "version", f"SSHSIG version {version}; lineage reads {VERSION}")
    key_blob = reader.string("public key")
    signed_for, _reserved = reader.text("namespace"), reader.string("reserved")
    hash_algorithm, signature_blob = reader.text("hash algorithm"), reader.string("signature")
    reader.finish("signature")
    raw = _ed25519_key(key_blob, label)
    if signed_for != namespace:
        raise RuleError(label, "namespace", f"signed for namespace {signed_for!r}, not "
                        f"{namespace!r}")
    if hash_algorithm not in _HASHES:
        raise RuleError(label, "hash-algorithm", f"{hash_algorithm!r} (sha512 or sha256)")
    signature = _ed25519_signature(signature_blob, label)
    try:
        Ed25519PublicKey.from_public_bytes(raw).verify(
            signature, signed_data(data, namespace, hash_algorithm))
    except InvalidSignature:
        raise RuleError(label, "signature", "does not verify: the data or the signature was "
                        "altered, or another key signed it") from None
    return key_line(raw)


def _ed25519_key(blob: bytes, label: str) -> bytes:
    reader = _Reader(blob, label)
    if (kind := reader.text("key type")) != KEY_TYPE:
        raise RuleError(label, "key-type", f"signed with a {kind} key; only ed25519 "
                        "signatures are read")
    raw = reader.string("public key")
    reader.finish("public key")
    if len(raw) != 32:
        raise RuleError(label, "blob", f"an ed25519 public key of {len(raw)} bytes, not 32")
    return raw


def _ed25519_signature(blob: bytes, label: str) -> bytes:
    reader = _Reader(blob, label)
    if (kind := reader.text("signature type")) != KEY_TYPE:
        raise RuleError(label, "key-type", f"a {kind} signature; only ed25519 is read")
    signature = reader.string("signature")
    reader.finish("signature")
    if len(signature) != 64:
        raise RuleError(label, "blob", f"an ed25519 signature of {len(signature)} bytes, "
                        "not 64")
    return signature


# --- allowed signers -----------------------------------------------------------------


class AllowedSigner(NamedTuple):
    """One line of an allowed_signers file: whose key counts, for which namespaces."""

    principals: tuple[str, ...]  # patterns (`*`, `?`, `!negated`) for the signer's name
    key: str  # "type base64"
    namespaces: tuple[str, ...] | None = None  # patterns; None: every namespace
    cert_authority: bool = False  # a CA line: matches certificates, which lineage never has
    valid_after: datetime | None = None
    valid_before: datetime | None = None


_KEY_TYPES = re.compile(r"^(ssh-(ed25519|rsa|dss)|ecdsa-sha2-nistp(256|384|521)"
                        r"|sk-(ssh-ed25519|ecdsa-sha2-nistp256)@openssh\.com)"
                        r"(-cert-v01@openssh\.com)?$")


def is_key_type(token: str) -> bool:
    """Whether `token` names an SSH public key type (ssh-ed25519, ecdsa-..., sk-...)."""
    return _KEY_TYPES.match(token) is not None


_OPTIONS = ("cert-authority", "namespaces", "valid-after", "valid-before")


def parse_allowed_signers(path: str | Path) -> list[AllowedSigner]:
    """The entries of an allowed_signers file (ssh-keygen(1), ALLOWED SIGNERS): lines of
    `principals [options] keytype base64 [comment]`; `#` comments and blank lines skipped.
    A line that does not parse is an InputError naming the file and the line."""
    data = read_regular(path, what="allowed_signers file", max_bytes=MAX_ALLOWED_SIGNERS_BYTES)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(path, f"allowed-signers: cannot read the file ({exc})") from exc
    entries = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if line and not line.startswith("#"):
            entries.append(_parse_line(line, path, f"line {number}"))
    return entries


def _parse_line(line: str, path: str | Path, where: str) -> AllowedSigner:
    principals, rest = _token(line, path, where)
    if len(principals) >= 2 and principals[0] == principals[-1] == '"':
        principals = principals[1:-1]
    options: dict[str, Any] = {}
    if rest and not _KEY_TYPES.match(rest.split()[0]):
        text, rest = _token(rest, path, where)
        options = _parse_options(text, path, where)
    fields = rest.split()
    if len(fields) < 2 or not _KEY_TYPES.match(fields[0]):
        raise InputError(path, "allowed-signers: no public key (keytype base64) after the "
                         "principals and options", where=where)
    try:
        key = normalize_public_key(f"{fields[0]} {fields[1]}", label=str(path))
    except RuleError as exc:
        raise InputError(path, f"allowed-signers: {exc.message}", where=where) from exc
    return AllowedSigner(tuple(principals.split(",")), key, **options)


def _token(text: str, path: str | Path, where: str) -> tuple[str, str]:
    """The first whitespace-separated token (double quotes may enclose spaces) and the rest."""
    quoted = False
    for at, char in enumerate(text):
        if char == '"':
            quoted = not quoted
        elif char in " \t" and not quoted:
            return text[:at], text[at:].strip()
    if quoted:
        raise InputError(path, "allowed-signers: an unclosed quote", where=where)
    return text, ""


def _parse_options(text: str, path: str | Path, where: str) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for item in re.findall(r'(?:[^,"]|"[^"]*")+', text):
        name, sep, value = item.partition("=")
        name = name.lower()
        if name not in _OPTIONS or (name == "cert-authority") == bool(sep):
            raise InputError(path, f"allowed-signers: unknown option {item!r} (known: "
                             f"{', '.join(_OPTIONS)})", where=where)
        if sep and not (len(value) >= 2 and value[0] == value[-1] == '"'):
            raise InputError(path, f"allowed-signers: {name} takes a quoted value",
                             where=where)
        value = value[1:-1]
        if name == "cert-authority":
            options["cert_authority"] = True
        elif name == "namespaces":
            options["namespaces"] = tuple(value.split(","))
        else:
            options[name.replace("-", "_")] = _parse_time(value, path, where)
    return options


def _parse_time(value: str, path: str | Path, where: str) -> datetime:
    """YYYYMMDD[HHMM[SS]][Z], as ssh-keygen reads it: UTC with Z, local time without."""
    digits, utc = (value[:-1], True) if value.upper().endswith("Z") else (value, False)
    formats = {8: "%Y%m%d", 12: "%Y%m%d%H%M", 14: "%Y%m%d%H%M%S"}
    try:
        moment = datetime.strptime(digits, formats[len(digits)])
    except (KeyError, ValueError) as exc:
        raise InputError(path, f"allowed-signers: {value!r} is not a time "
                         "(YYYYMMDD[HHMM[SS]][Z])", where=where) from exc
    return moment.replace(tzinfo=UTC) if utc else moment.astimezone()


def _pattern_matches(pattern: str, name: str) -> bool:
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, name, re.S) is not None


def matches_patterns(name: str, patterns: tuple[str, ...]) -> bool:
    """ssh's pattern lists: some pattern matches and no `!pattern` does."""
    found = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        if _pattern_matches(pattern[1:] if negated else pattern, name):
            if negated:
                return False
            found = True
    return found


def is_allowed(public_key: str, name: str, allowed: list[AllowedSigner], *,
               namespace: str, now: datetime | None = None) -> bool:
    """Whether some entry lets `public_key` sign as `name` in `namespace` at `now`."""
    key = normalize_public_key(public_key)
    moment = now or datetime.now(UTC)
    for entry in allowed:
        if entry.cert_authority or entry.key != key:
            continue
        if not matches_patterns(name, entry.principals):
            continue
        if entry.namespaces is not None and not matches_patterns(namespace, entry.namespaces):
            continue
        if (entry.valid_after and moment < entry.valid_after) or \
                (entry.valid_before and moment > entry.valid_before):
            continue
        return True
    return False


def allowed_principals(public_key: str, allowed: list[AllowedSigner], *, namespace: str,
                       now: datetime | None = None) -> list[str]:
    """The principal patterns of every entry that lets `public_key` sign in `namespace` at
    `now`, in file order ([] when none does): who the key signs as."""
    key = normalize_public_key(public_key)
    moment = now or datetime.now(UTC)
    found: list[str] = []
    for entry in allowed:
        if entry.cert_authority or entry.key != key:
            continue
        if entry.namespaces is not None and not matches_patterns(namespace, entry.namespaces):
            continue
        if (entry.valid_after and moment < entry.valid_after) or \
                (entry.valid_before and moment > entry.valid_before):
            continue
        found.extend(p for p in entry.principals if p not in found)
    return found
