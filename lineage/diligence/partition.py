"""`inspect --supported-ops FILE | --provider NAME`: how each ONNX graph of the folder splits
between a provider and the CPU (lineage.formats.onnx_partition counts the pieces)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from lineage.errors import UsageError
from lineage.formats.onnx_partition import (
    partition_graph,
    provider_support,
    read_supported_ops,
)
from lineage.formats.onnx_reader import read_onnx


def graph_partition(root: Path, files: list[dict[str, Any]], *,
                    supported_ops: str | Path | None, provider: str | None) -> dict[str, Any]:
    """The `partition` section: the support used and, per ONNX file, its pieces."""
    if supported_ops is not None and provider is not None:
        raise UsageError("give --supported-ops or --provider, not both")
    supported: Callable[[str], bool]
    source: dict[str, Any]
    if supported_ops is not None:
        ops = read_supported_ops(supported_ops)
        supported = ops.__contains__
        source = {"supported_ops": str(supported_ops), "ops": sorted(ops)}
    else:
        assert provider is not None
        name, supported = provider_support(provider)
        source = {"provider": name}
    onnx_files = [f["path"] for f in files if f["format"] == "onnx"]
    if not onnx_files:
        raise UsageError("--supported-ops and --provider count the pieces of an ONNX graph: "
                         "there is no .onnx file here")
    graphs = []
    for name in onnx_files:
        path = root / name
        model = read_onnx(path, nodes=True)
        graphs.append({"file": name,
                       **partition_graph(model.nodes, supported, path=path).to_dict()})
    return {**source, "graphs": graphs}
