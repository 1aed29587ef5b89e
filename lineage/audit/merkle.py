"""The ledger's Merkle tree: RFC 6962 hashing, stored as tlog-tiles (docs/audit-spec.md,
"The ledger as a transparency log").

Leaves hash as SHA-256(0x00 || entry), interior nodes as SHA-256(0x01 || left || right),
and a tree of n leaves is split at the largest power of two below n (RFC 6962 §2.1).

The tree is kept as tiles (C2SP tlog-tiles): the tile at level L and index N holds the
hashes of the nodes of height 8L numbered 256N to 256N + W - 1, W of them (256 for a full
tile, fewer for the one partial tile at the right edge of a level), as W x 32 bytes. Only
the hashes of heights 0, 8, 16, ... are stored; every other node of the tree is hashed up
from at most 128 of them, so any root and any proof is a few tile reads away.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

HASH_BYTES = 32
TILE_HEIGHT = 8
TILE_WIDTH = 1 << TILE_HEIGHT  # hashes in a full tile
EMPTY_ROOT = hashlib.sha256(b"").digest()  # the root of the tree with no leaves

TileReader = Callable[[int, int, int], bytes]  # (level, index, width) -> the tile's bytes


def leaf_hash(entry: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + entry).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def tile_path(level: int, index: int, width: int = TILE_WIDTH) -> str:
    """The tile's path in the tlog-tiles layout: `tile/<L>/<N>[.p/<W>]`, N in groups of
    three digits, every group but the last prefixed with `x` (1234067 -> x001/x234/067)."""
    return f"tile/{level}/{_index_path(index)}" + ("" if width == TILE_WIDTH else f".p/{width}")


def entries_path(index: int, width: int = TILE_WIDTH) -> str:
    return f"tile/entries/{_index_path(index)}" + ("" if width == TILE_WIDTH else f".p/{width}")


def _index_path(index: int) -> str:
    groups = [f"{index % 1000:03d}"]
    index //= 1000
    while index:
        groups.append(f"x{index % 1000:03d}")
        index //= 1000
    return "/".join(reversed(groups))


def _largest_power_below(n: int) -> int:
    """The largest power of two strictly below n (n >= 2)."""
    return 1 << ((n - 1).bit_length() - 1)


def _hash_up(hashes: Sequence[bytes]) -> bytes:
    """The root of a perfect tree over `hashes` (a power of two of them)."""
    level = list(hashes)
    while len(level) > 1:
        level = [node_hash(level[i], level[i + 1]) for i in range(0, len(level), 2)]
    return level[0]


class TiledTree:
    """A tree of `size` leaves read through its tiles: roots of any earlier size, and the
    inclusion and consistency proofs of RFC 6962 §2.1.1 and §2.1.2."""

    def __init__(self, size: int, read_tile: TileReader) -> None:
        self.size = size
        self._read_tile = read_tile
        self._tiles: dict[tuple[int, int], list[bytes]] = {}

    def stored_hashes(self, level: int, first: int, count: int) -> list[bytes]:
        """`count` stored hashes of height 8*level from number `first`, within one tile."""
        index, offset = divmod(first, TILE_WIDTH)
        have = (self.size >> (TILE_HEIGHT * level)) - index * TILE_WIDTH
        width = min(TILE_WIDTH, have)
        hashes = self._tiles.get((level, index))
        if hashes is None or len(hashes) < width:
            data = self._read_tile(level, index, width)
            if len(data) != width * HASH_BYTES:
                raise ValueError(f"{tile_path(level, index, width)}: {len(data)} bytes, "
                                 f"expected {width * HASH_BYTES}")
            hashes = [data[i:i + HASH_BYTES] for i in range(0, len(data), HASH_BYTES)]
            self._tiles[(level, index)] = hashes
        return hashes[offset:offset + count]

    def subtree_hash(self, height: int, index: int) -> bytes:
        """The node of `height` over leaves [index << height, (index + 1) << height)."""
        if (index + 1) << height > self.size:
            raise ValueError(f"node {index} of height {height} is past a tree of {self.size}")
        level, below = divmod(height, TILE_HEIGHT)
        return _hash_up(self.stored_hashes(level, index << below, 1 << below))

    def range_hash(self, first: int, end: int) -> bytes:
        """MTH of leaves [first, end), `first` aligned as RFC 6962's recursion leaves it."""
        n = end - first
        if n & (n - 1) == 0:
            return self.subtree_hash(n.bit_length() - 1, first >> (n.bit_length() - 1))
        k = _largest_power_below(n)
        return node_hash(self.range_hash(first, first + k), self.range_hash(first + k, end))

    def root(self, size: int | None = None) -> bytes:
        size = self.size if size is None else size
        if size > self.size:
            raise ValueError(f"no root of size {size} in a tree of {self.size}")
        return EMPTY_ROOT if size == 0 else self.range_hash(0, size)

    def inclusion_proof(self, index: int, size: int | None = None) -> list[bytes]:
        """PATH(index, D[0:size]): the audit path of leaf `index` (RFC 6962 §2.1.1)."""
        size = self.size if size is None else size
        if not 0 <= index < size <= self.size:
            raise ValueError(f"no leaf {index} in a tree of {size}")
        proof: list[bytes] = []
        first, end = 0, size
        while end - first > 1:
            k = _largest_power_below(end - first)
            if index < first + k:
                proof.append(self.range_hash(first + k, end))
                end = first + k
            else:
                proof.append(self.range_hash(first, first + k))
                first += k
        return proof[::-1]

    def consistency_proof(self, old_size: int, size: int | None = None) -> list[bytes]:
        """PROOF(old_size, D[0:size]) (RFC 6962 §2.1.2)."""
        size = self.size if size is None else size
        if not 0 < old_size <= size <= self.size:
            raise ValueError(f"no consistency proof from {old_size} to {size}")
        return self._subproof(old_size, 0, size, True)

    def _subproof(self, m: int, first: int, end: int, whole: bool) -> list[bytes]:
        n = end - first
        if m == n:
            return [] if whole else [self.range_hash(first, end)]
        k = _largest_power_below(n)
        if m <= k:
            return self._subproof(m, first, first + k, whole) + [self.range_hash(first + k, end)]
        return self._subproof(m - k, first + k, end, False) + [self.range_hash(first, first + k)]


def verify_inclusion(index: int, size: int, leaf: bytes, proof: Sequence[bytes],
                     root: bytes) -> bool:
    """RFC 9162 §2.1.3.2: does `proof` show leaf hash `leaf` at `index` of the tree `root`?"""
    if not 0 <= index < size:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while fn & 1 == 0 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


def verify_consistency(old_size: int, size: int, old_root: bytes, root: bytes,
                       proof: Sequence[bytes]) -> bool:
    """RFC 9162 §2.1.4.2: is the tree `root` of `size` an extension of `old_root`?"""
    if old_size == size:
        return old_root == root and not proof
    if not 0 < old_size < size:
        return old_size == 0 and not proof
    path = list(proof)
    if old_size & (old_size - 1) == 0:
        path.insert(0, old_root)
    if not path:
        return False
    fn, sn = old_size - 1, size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not fn & 1:
                while fn & 1 == 0 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return sn == 0 and fr == old_root and sr == root


@dataclass
class TileAppender:
    """Appends leaf hashes to a tree of `size` leaves and collects the tiles that change.

    `edges` holds each level's partial tile (its hashes) as the tree stands; after
    `append`, `written` maps each new or grown tile (level, index, width) to its bytes."""

    size: int
    edges: list[list[bytes]] = field(default_factory=list)
    written: dict[tuple[int, int, int], bytes] = field(default_factory=dict)

    @classmethod
    def over(cls, tree: TiledTree) -> TileAppender:
        """An appender continuing `tree`: the partial tile of each level read back."""
        edges: list[list[bytes]] = []
        level = 0
        while tree.size >> (TILE_HEIGHT * level):
            count = tree.size >> (TILE_HEIGHT * level)
            width = count % TILE_WIDTH
            edges.append(tree.stored_hashes(level, count - width, width) if width else [])
            level += 1
        return cls(tree.size, edges)

    def append(self, leaves: Iterable[bytes]) -> None:
        touched: set[int] = set()
        for leaf in leaves:
            self._push(0, leaf, touched)
            self.size += 1
        for level in touched:  # the partial tiles as they stand now
            hashes = self.edges[level]
            if hashes:
                index = (self.size >> (TILE_HEIGHT * level)) // TILE_WIDTH
                self.written[(level, index, len(hashes))] = b"".join(hashes)

    def _push(self, level: int, hash_: bytes, touched: set[int]) -> None:
        while len(self.edges) <= level:
            self.edges.append([])
        hashes = self.edges[level]
        hashes.append(hash_)
        touched.add(level)
        if len(hashes) == TILE_WIDTH:
            index = ((self.size + 1) >> (TILE_HEIGHT * level)) // TILE_WIDTH - 1
            self.written[(level, index, TILE_WIDTH)] = b"".join(hashes)
            self.edges[level] = []
            self._push(level + 1, _hash_up(hashes), touched)
