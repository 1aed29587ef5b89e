"""`lineage-manifest/1`: the canonical form of a corpus manifest and its hash.

A manifest is the set of a corpus's documents. Its hash is BLAKE3-256 over

    b"lineage-manifest/1\n" + line(d1) + line(d2) + ...

for the documents sorted by `doc_id` (byte order of UTF-8), where

    line(d) = doc_id TAB source TAB n_bytes TAB n_tokens TAB content_hash TAB license LF

with integers in decimal, `content_hash` as 64 lowercase hex digits, and an absent
licence as the empty string. `uri` and `metadata` are left out: they say where a copy
lives, not what the corpus is, so the same corpus hashes the same on every machine.
Names and licences may not contain control characters, which keeps lines unambiguous.
"""

from __future__ import annotations

import re

from lineage.corpora.digest import LineHasher, lines_digest

MANIFEST_SPEC = "lineage-manifest/1"
HASH_COLUMNS = ("doc_id", "source", "n_bytes", "n_tokens", "content_hash", "license")

NAME_RULE = "names use letters, digits, '.', '_' and '-', start with a letter or digit, ≤ 128"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
CONTROL_CHARS_REGEX = r"[\x00-\x1f\x7f]"
HEX64_REGEX = r"^[0-9a-f]{64}$"


def is_valid_name(name: str) -> bool:
    """Corpus, stream and run names: safe in file names and in messages."""
    return bool(_NAME.match(name))


class ManifestHasher(LineHasher):
    """Feeds documents, already sorted by doc_id, into the manifest hash batch by batch."""

    def __init__(self) -> None:
        super().__init__(MANIFEST_SPEC, HASH_COLUMNS)

    def manifest_hash(self) -> str:
        return self.prefixed()


def manifest_hash_of_rows(rows: list[dict[str, object]]) -> str:
    """The manifest hash computed row by row: the reference the fast path is tested on."""
    ordered = sorted(rows, key=lambda r: str(r["doc_id"]).encode("utf-8"))
    return lines_digest(MANIFEST_SPEC, [[row[c] for c in HASH_COLUMNS] for row in ordered])
