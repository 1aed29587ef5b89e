"""What a checkpoint folder proves about a run (docs/chain-spec.md, "Checkpoints"):
its digests, to compare with the chain's record of that step.

weights_digest  lineage-tensors/1 over the tensors of the folder's *.safetensors files
                (the model; no subfolders), under their own names: a record's weights_digest
state_digest    when optimizer/state.safetensors is there: the weights under
                `weights/<name>` together with that file's tensors, which carry their chain
                names (`optimizer/<name>`, `gradients/<name>`): a record's state_digest.
                It sits in a subfolder so the model folder keeps its own shard rules.

Its risks are the `lineage verify` risks verdict (lineage.diligence.verify), as for any folder.

Tensors are read straight from the files, never loaded; pickles are scanned, never run.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from lineage.formats import safetensors as st
from lineage.runs.chain import GRADIENTS_PREFIX, OPTIMIZER_PREFIX, WEIGHTS_PREFIX, TensorDigest

OPTIMIZER_FILE = "optimizer/state.safetensors"
_CHUNK = 1 << 20

_Tensor = tuple[str, str, tuple[int, ...], Path, int, int]  # name, dtype, shape, file, at, n


def weights_digest(folder: str | Path) -> str:
    """The lineage-tensors/1 digest of the tensors of a folder's *.safetensors files."""
    return _digest(_weights(Path(folder)))


def _weights(folder: Path) -> list[_Tensor]:
    return [t for path in sorted(folder.glob("*.safetensors")) for t in _tensors(path)]


def checkpoint_digests(folder: str | Path) -> dict[str, Any]:
    """The weights digest and (with an optimizer state file) the state digest of a folder;
    `optimizer_errors` lists what is wrong with that file (then no state digest)."""
    folder = Path(folder)
    weights = _weights(folder)
    result: dict[str, Any] = {"weights_digest": _digest(weights), "state_digest": None,
                              "optimizer_tensors": None, "optimizer_errors": []}
    optimizer_path = folder / OPTIMIZER_FILE
    if not optimizer_path.is_file():
        return result
    checked = st.check_folder(optimizer_path.parent)
    extra = _tensors(optimizer_path) if checked["ok"] else []
    errors = [f"{e['rule']}: {e['message']}" for e in checked["errors"]]
    errors += [f"tensor {t[0]!r} is not named {OPTIMIZER_PREFIX}… or {GRADIENTS_PREFIX}…"
               for t in extra if not t[0].startswith((OPTIMIZER_PREFIX, GRADIENTS_PREFIX))]
    if errors:
        return {**result, "optimizer_errors": errors}
    named = [(WEIGHTS_PREFIX + t[0], *t[1:]) for t in weights]
    return {**result, "state_digest": _digest(named + extra),
            "optimizer_tensors": len(extra)}


def _tensors(path: Path) -> list[_Tensor]:
    header = st.read_header(path)
    base = st.PREFIX_BYTES + header.header_len
    return [(t.name, t.dtype, t.shape, path, base + t.start, t.end - t.start)
            for t in header.tensors]


def _digest(tensors: Iterable[_Tensor]) -> str:
    digest = TensorDigest()
    for name, dtype, shape, path, offset, length in sorted(
            tensors, key=lambda t: t[0].encode("utf-8")):
        digest.add_chunks(name, dtype, shape, length, _read_range(path, offset, length))
    return digest.hexdigest()


def _read_range(path: Path, offset: int, length: int) -> Iterator[bytes]:
    with open(path, "rb") as handle:
        handle.seek(offset)
        left = length
        while left:
            chunk = handle.read(min(_CHUNK, left))
            if not chunk:
                return
            left -= len(chunk)
            yield chunk
