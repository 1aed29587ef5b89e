"""The digest of the segments one rank read in one step (`lineage-batch/1`,
docs/chain-spec.md): what a chain record's `batch_digests` hold, computed from the stream."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import blake3

BATCH_TAG = b"lineage-batch/1\n"


def batch_digest(segments: Iterable[Any]) -> str:
    """Digest of one rank's segments (StreamReader.segments or `docs --step` rows)."""
    hasher = blake3.blake3(BATCH_TAG)
    for s in segments:
        get = s.get if isinstance(s, dict) else lambda k, s=s: getattr(s, k)
        line = f"{get('window')}\t{get('doc_id')}\t{get('token_start')}\t{get('token_end')}\n"
        hasher.update(line.encode("utf-8"))
    return "blake3:" + hasher.hexdigest()
