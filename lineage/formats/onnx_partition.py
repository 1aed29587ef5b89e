"""How an ONNX graph splits between an execution provider and the CPU, from the graph alone.

An execution provider takes the nodes whose op types it supports; ONNX Runtime groups them
into the provider's partitions with a wave over the graph in topological order (a variant of
Kahn's sort): a wave adds every ready supported node to the current group and stops at the
group's border, the unsupported nodes that consume the group's outputs; the next wave starts
there. Nodes the provider does not take fall back to the CPU provider, which takes each one
as a partition of its own. So the graph splits into

    pieces     = the provider's groups + one piece per unsupported node
    transfers  = distinct (tensor, producing piece, consuming piece) with the two pieces
                 different: a tensor one piece hands to another
    crossings  = the transfers between a supported piece and an unsupported one: the ones
                 that cross a device boundary when the provider runs on another device

A MatMul-Add-Relu-MatMul-Add chain with only MatMul supported: 5 pieces (MatMul | Add |
Relu | MatMul | Add), 4 transfers, 3 of them crossings (Add to Relu stays on the CPU). Graph
inputs, initializers and graph outputs are not transfers (they are placed once, not handed
between pieces); nodes inside control-flow subgraphs are not read. docs/reports.md explains
what the figure means.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from lineage.errors import InputError, UsageError
from lineage.formats.onnx_reader import Node
from lineage.userfiles import read_regular

__all__ = [
    "BUILTIN_PROVIDERS",
    "MAX_OPS_FILE_BYTES",
    "Partition",
    "partition_graph",
    "provider_support",
    "read_supported_ops",
]

MAX_OPS_FILE_BYTES = 1 << 20

# Providers whose support is known without a list. ONNX Runtime's CPU provider has a kernel
# for every op of the default domain; other providers' support depends on opset, data types,
# shapes and build options, so no fixed list of op types would be honest: give --supported-ops.
BUILTIN_PROVIDERS: dict[str, str] = {
    "CPUExecutionProvider": "every op type (ONNX Runtime's reference provider)",
}
_ALIASES = {"cpu": "CPUExecutionProvider"}


@dataclass(frozen=True)
class Partition:
    nodes: int
    supported_nodes: int
    pieces: int
    supported_pieces: int  # the provider's groups
    unsupported_pieces: int  # one per unsupported node
    transfers: int
    crossings: int  # transfers between a supported and an unsupported piece
    unsupported_ops: dict[str, int]  # op type -> nodes, most first

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def read_supported_ops(path: str | Path) -> frozenset[str]:
    """Op types, one a line; `#` starts a comment; blank lines are skipped."""
    data = read_regular(path, what="supported-ops file", max_bytes=MAX_OPS_FILE_BYTES)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(path, "supported-ops: the file is not UTF-8 text",
                         where=f"byte {exc.start}") from None
    ops: set[str] = set()
    for number, line in enumerate(text.splitlines(), 1):
        op = line.split("#", 1)[0].strip()
        if not op:
            continue
        if any(ch.isspace() for ch in op):
            raise InputError(path, "supported-ops: one op type a line (an op type has no "
                                   "spaces)", where=f"line {number}")
        ops.add(op)
    if not ops:
        raise InputError(path, "supported-ops: the file lists no op type")
    return frozenset(ops)


def provider_support(name: str) -> tuple[str, Callable[[str], bool]]:
    """A provider's full name and built-in support; other providers need --supported-ops."""
    canonical = _ALIASES.get(name.lower(), name)
    if canonical not in BUILTIN_PROVIDERS:
        raise UsageError(
            f"--provider {name!r}: no built-in op list (known: "
            f"{', '.join(BUILTIN_PROVIDERS)}); list the op types it supports in a file and "
            "give it with --supported-ops")
    return canonical, lambda op_type: True


def partition_graph(nodes: Sequence[Node], supported: Callable[[str], bool],
                    *, path: str | Path = "") -> Partition:
    """Split the graph's nodes into pieces as ONNX Runtime assigns them (module docstring)."""
    producer: dict[str, int] = {}
    for index, node in enumerate(nodes):
        for name in node.outputs:
            if name:
                producer[name] = index
    # One edge per input slot fed by another node, as ONNX Runtime counts them.
    consumers: list[list[int]] = [[] for _ in nodes]
    in_degree = [0] * len(nodes)
    for index, node in enumerate(nodes):
        for name in node.inputs:
            source = producer.get(name) if name else None
            if source is not None and source != index:
                consumers[source].append(index)
                in_degree[index] += 1
    is_supported = [supported(node.op_type) for node in nodes]
    piece_of = _assign_pieces(consumers, in_degree, is_supported, path)
    transfers, crossings = _count_transfers(nodes, producer, piece_of, is_supported)
    supported_pieces = len({piece_of[i] for i, ok in enumerate(is_supported) if ok})
    unsupported = Counter(node.op_type for node, ok in zip(nodes, is_supported, strict=True)
                          if not ok)
    return Partition(
        nodes=len(nodes), supported_nodes=sum(is_supported),
        pieces=len(set(piece_of)), supported_pieces=supported_pieces,
        unsupported_pieces=sum(unsupported.values()), transfers=transfers,
        crossings=crossings, unsupported_ops=dict(unsupported.most_common()))


def _assign_pieces(consumers: list[list[int]], in_degree: list[int],
                   is_supported: list[bool], path: str | Path) -> list[int]:
    """Piece number per node: the waves over the graph that group supported nodes."""
    remaining = list(in_degree)
    ready = deque(i for i, degree in enumerate(remaining) if degree == 0)
    later: deque[int] = deque()  # unsupported nodes on the current group's border
    border: set[int] = set()
    piece_of = [-1] * len(in_degree)
    pieces = 0
    group = -1  # the open group's piece number, -1 when none is open
    processed = 0
    while ready or later:
        if not ready:
            group, border = -1, set()  # close the group; the next wave starts at its border
            ready, later = later, deque()
            continue
        node = ready.popleft()
        if not is_supported[node] and node in border:
            later.append(node)
            continue
        if is_supported[node]:
            if group < 0:
                group, pieces = pieces, pieces + 1
            piece_of[node] = group
            border.discard(node)
        else:
            piece_of[node], pieces = pieces, pieces + 1
        for consumer in consumers[node]:
            if is_supported[node]:
                border.add(consumer)
            remaining[consumer] -= 1
            if remaining[consumer] == 0:
                ready.append(consumer)
        processed += 1
    if processed != len(in_degree):
        raise InputError(path, "graph-cycle: the nodes' inputs and outputs form a cycle, so "
                               "the graph has no topological order")
    return piece_of


def _count_transfers(nodes: Sequence[Node], producer: dict[str, int], piece_of: list[int],
                     is_supported: list[bool]) -> tuple[int, int]:
    seen: set[tuple[str, int]] = set()  # (tensor, consuming piece): one copy feeds a piece
    crossings = 0
    for index, node in enumerate(nodes):
        for name in node.inputs:
            source = producer.get(name) if name else None
            if source is None or piece_of[source] == piece_of[index]:
                continue
            if (name, piece_of[index]) in seen:
                continue
            seen.add((name, piece_of[index]))
            crossings += is_supported[source] != is_supported[index]
    return len(seen), crossings
