"""Answers kept per snapshot: the same question about the same catalog state is answered
once per process, then from memory.

A key names the snapshot (its serial number), so an answer never outlives the commit
after it: the next snapshot's questions miss and are answered afresh. The newest
answers are kept up to `max_bytes` of bodies; an answer larger than a quarter of that
is not kept at all.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable


class AnswerCache:
    """Bodies and exit codes by key, least recently used first out."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[Hashable, tuple[bytes, dict[str, str]]] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, key: Hashable) -> tuple[bytes, dict[str, str]] | None:
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return found

    def put(self, key: Hashable, body: bytes, headers: dict[str, str]) -> None:
        if len(body) * 4 > self.max_bytes:
            return
        with self._lock:
            if key in self._entries:
                return
            self._entries[key] = (body, headers)
            self._size += len(body)
            while self._size > self.max_bytes:
                _, (old, _) = self._entries.popitem(last=False)
                self._size -= len(old)
