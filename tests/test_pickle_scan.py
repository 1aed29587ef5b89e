"""Static pickle scanning: real torch.save output, real malicious samples, hand-made evasions.

Nothing in this module unpickles anything. Malicious payloads are written with `pickle.dumps`
(dumping only records the callable and its arguments) or assembled opcode by opcode; if any of
them ever ran it would create a marker file, and the module's teardown and its last test assert
that no marker appeared. Fixtures: tests/fixtures/pickles/torch (real torch 2.13 output) and
tests/fixtures/pickles/modelaudit (samples from the modelaudit sdist); see the NOTICE files.
"""

from __future__ import annotations

import _compat_pickle
import _pickle
import ast
import base64
import collections
import io
import os
import pickle
import pickletools
import re
import struct
import subprocess
import sys
import tracemalloc
import warnings
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lineage.formats.pickle_scan as pickle_scan
from lineage.errors import InputError
from lineage.formats.pickle_scan import (
    FINDING_KINDS,
    SAFE_GLOBALS,
    SEVERITIES,
    GlobalRef,
    PickleFinding,
    PickleScan,
    classify_global,
    scan_pickle_bytes,
    scan_pickle_file,
)

FIXTURES = Path(__file__).parent / "fixtures" / "pickles"
TORCH = FIXTURES / "torch"
MODELAUDIT = FIXTURES / "modelaudit"
# The committed torch_malicious_reduce.pt would touch this; payloads built here touch MARKER.
FIXTURE_MARKER = Path("/tmp/lineage-pickle-scan-marker-must-never-exist")
MARKER = Path(f"/tmp/lineage-pickle-scan-marker-{os.getpid()}")
MARKERS = (FIXTURE_MARKER, MARKER)


@pytest.fixture(scope="module", autouse=True)
def payloads_never_run() -> Iterator[None]:
    assert not any(marker.exists() for marker in MARKERS), "a marker exists before the tests"
    yield
    assert not any(marker.exists() for marker in MARKERS), "a pickle payload was executed"


# ---------------------------------------------------------------------------------------------
# Payloads and opcode assembly


class SystemPayload:
    def __reduce__(self) -> tuple[object, ...]:
        return (os.system, (f"touch {MARKER}",))


class EvalPayload:
    def __reduce__(self) -> tuple[object, ...]:
        return (eval, (f"__import__('os').system('touch {MARKER}')",))


class ExecPayload:
    def __reduce__(self) -> tuple[object, ...]:
        return (exec, (f"import os; os.system('touch {MARKER}')",))


class SubprocessPayload:
    def __reduce__(self) -> tuple[object, ...]:
        return (subprocess.call, (["touch", str(MARKER)],))


PAYLOADS = {
    SystemPayload: ("posix", "system"),
    EvalPayload: ("builtins", "eval"),
    ExecPayload: ("builtins", "exec"),
    SubprocessPayload: ("subprocess", "call"),
}
TOUCH = f"touch {MARKER}"


def text(value: str) -> bytes:
    """SHORT_BINUNICODE (or BINUNICODE when long)."""
    raw = value.encode("utf-8")
    if len(raw) < 256:
        return pickle.SHORT_BINUNICODE + bytes([len(raw)]) + raw
    return pickle.BINUNICODE + struct.pack("<I", len(raw)) + raw


def global_op(module: str, name: str) -> bytes:
    return pickle.GLOBAL + module.encode() + b"\n" + name.encode() + b"\n"


def proto(n: int = 4) -> bytes:
    return pickle.PROTO + bytes([n])


def call1(argument: bytes) -> bytes:
    """Call what is on the stack with one argument."""
    return argument + pickle.TUPLE1 + pickle.REDUCE


def valid(data: bytes) -> bytes:
    """Check hand-made bytes with pickletools' static disassembler (it never executes)."""
    pickletools.dis(data, out=io.StringIO())
    return data


def kinds(findings: list[PickleFinding]) -> set[str]:
    return {finding.kind for finding in findings}


def names(refs: list[GlobalRef]) -> set[tuple[str, str]]:
    return {(ref.module, ref.name) for ref in refs}


def python3_name(ref: GlobalRef) -> tuple[str, str]:
    """Protocols 0-2 write Python 2 names (`__builtin__.eval`, `commands.call` for
    subprocess.call), which the unpickler maps back: compare in Python 3 terms."""
    key = (ref.module, ref.name)
    if key in _compat_pickle.NAME_MAPPING:
        return _compat_pickle.NAME_MAPPING[key]
    return _compat_pickle.IMPORT_MAPPING.get(ref.module, ref.module), ref.name


def verdict_of(findings: list[PickleFinding]) -> str:
    return PickleScan("x", "pickle", [], findings, [], 0).verdict


def scan(data: bytes) -> tuple[list[GlobalRef], list[PickleFinding], str]:
    refs, findings = scan_pickle_bytes(data)
    return refs, findings, verdict_of(findings)


def dangerous_names(findings: list[PickleFinding]) -> list[str]:
    return [f.detail for f in findings if f.kind == "dangerous-global"]


# ---------------------------------------------------------------------------------------------
# Zip helpers


def write_zip(
    path: Path,
    members: list[tuple[str, bytes]],
    compression: int = zipfile.ZIP_STORED,
) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicate names are written on purpose
        with zipfile.ZipFile(path, "w", compression=compression) as archive:
            for name, data in members:
                archive.writestr(name, data)
    return path


def torch_like_data_pkl() -> bytes:
    """data.pkl as torch.save writes a one-tensor state dict, assembled by hand (protocol 2)."""
    return valid(
        proto(2)
        + global_op("collections", "OrderedDict")
        + pickle.EMPTY_TUPLE
        + pickle.REDUCE
        + pickle.BINPUT
        + b"\x00"
        + pickle.BINUNICODE
        + struct.pack("<I", 6)
        + b"weight"
        + global_op("torch._utils", "_rebuild_tensor_v2")
        + pickle.MARK
        + pickle.MARK
        + b"X\x07\x00\x00\x00storage"
        + global_op("torch", "FloatStorage")
        + b"X\x01\x00\x00\x000X\x03\x00\x00\x00cpu"
        + pickle.BININT1
        + b"\x0c"
        + pickle.TUPLE
        + pickle.BINPERSID
        + pickle.BININT1
        + b"\x00"
        + pickle.BININT1
        + b"\x03"
        + pickle.BININT1
        + b"\x04"
        + pickle.TUPLE2
        + pickle.BININT1
        + b"\x04"
        + pickle.BININT1
        + b"\x01"
        + pickle.TUPLE2
        + pickle.NEWFALSE
        + global_op("collections", "OrderedDict")
        + pickle.EMPTY_TUPLE
        + pickle.REDUCE
        + pickle.TUPLE
        + pickle.REDUCE
        + pickle.SETITEM
        + pickle.STOP
    )


def torch_like_members(folder: str, data_pkl: bytes, blob: bytes) -> list[tuple[str, bytes]]:
    """The member names torch.save writes (torch 2.13), in its order."""
    return [
        (f"{folder}/data.pkl", data_pkl),
        (f"{folder}/.format_version", b"1"),
        (f"{folder}/.storage_alignment", b"64"),
        (f"{folder}/byteorder", b"little"),
        (f"{folder}/data/0", blob),
        (f"{folder}/version", b"3\n"),
        (f"{folder}/.data/serialization_id", b"0123456789" * 4),
    ]


def member_shapes(path: Path) -> set[str]:
    """Member names without the top folder, storage numbers as N."""
    with zipfile.ZipFile(path) as archive:
        return {re.sub(r"\d+$", "N", i.filename.split("/", 1)[1]) for i in archive.infolist()}


def write_sparse_zip(path: Path, members: list[tuple[str, bytes | int]]) -> None:
    """A stored zip written by hand; an int member is that many zero bytes left as a file hole."""
    central = b""
    with path.open("wb") as out:
        for name, content in members:
            raw_name = name.encode()
            size = content if isinstance(content, int) else len(content)
            crc = zero_crc(content) if isinstance(content, int) else zlib.crc32(content)
            offset = out.tell()
            out.write(
                struct.pack(
                    "<4s5H3L2H", b"PK\x03\x04", 20, 0, 0, 0, 0, crc, size, size, len(raw_name), 0
                )
                + raw_name
            )
            if isinstance(content, int):
                out.seek(content, os.SEEK_CUR)  # a hole: no disk blocks, reads as zeros
            else:
                out.write(content)
            central += (
                struct.pack(
                    "<4s6H3L5H2L",
                    b"PK\x01\x02",
                    20,
                    20,
                    0,
                    0,
                    0,
                    0,
                    crc,
                    size,
                    size,
                    len(raw_name),
                    0,
                    0,
                    0,
                    0,
                    0,
                    offset,
                )
                + raw_name
            )
        start = out.tell()
        out.write(central)
        out.write(
            struct.pack(
                "<4s4H2LH", b"PK\x05\x06", 0, 0, len(members), len(members), len(central), start, 0
            )
        )


def zero_crc(size: int) -> int:
    crc, block = 0, bytes(2**20)
    for _ in range(size // len(block)):
        crc = zlib.crc32(block, crc)
    return zlib.crc32(bytes(size % len(block)), crc)


def patch_member_headers(path: Path, local: dict[int, int], central: dict[int, int]) -> None:
    """Overwrite 16-bit fields (offset -> value) in every local and central header."""
    data = bytearray(path.read_bytes())
    for signature, fields in ((b"PK\x03\x04", local), (b"PK\x01\x02", central)):
        at = data.find(signature)
        while at >= 0:
            for offset, value in fields.items():
                struct.pack_into("<H", data, at + offset, value)
            at = data.find(signature, at + 4)
    path.write_bytes(bytes(data))


# ---------------------------------------------------------------------------------------------
# Plain pickles from the real writer

SAFE_OBJECTS = {
    "dict": {"lr": 0.001, "step": 3, "betas": [0.9, 0.999], "big": 10**40, "neg": -7},
    "list": [1, 2.5, -3, [4, [5.0]], (6, 7), None, True],
    "ordered": collections.OrderedDict(a=1, b=2.0, c=collections.OrderedDict(d=[3])),
    "containers": {"set": {1, 2}, "frozen": frozenset({3}), "bytes": b"\x00\x80\xff"},
    "more": {"empty_bytes": b"", "array": bytearray(b"ab"), "complex": 1 + 2j, "text": "é"},
}


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
@pytest.mark.parametrize("name", sorted(SAFE_OBJECTS))
def test_plain_data_is_safe_at_every_protocol(name: str, protocol: int) -> None:
    refs, findings, verdict = scan(pickle.dumps(SAFE_OBJECTS[name], protocol=protocol))
    assert verdict == "ok", findings
    assert all(classify_global(r.module, r.name)[0] == "safe" for r in refs)
    assert {f.kind for f in findings} <= {"calls"}


def test_protocol_0_is_text_and_still_decoded() -> None:
    data = pickle.dumps(SAFE_OBJECTS["ordered"], protocol=0)
    assert data.isascii() and b"\x80" not in data
    refs, findings, verdict = scan(data)
    assert verdict == "ok"
    assert names(refs) == {("collections", "OrderedDict")}
    assert refs[0].opcode == "GLOBAL"


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_numpy_arrays_and_scalars_are_safe(protocol: int) -> None:
    value = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "loss": np.float64(0.25)}
    refs, findings, verdict = scan(pickle.dumps(value, protocol=protocol))
    assert verdict == "ok", findings
    assert ("numpy", "dtype") in names(refs)


# ---------------------------------------------------------------------------------------------
# Malicious pickles from the real writer


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
@pytest.mark.parametrize("payload", list(PAYLOADS), ids=lambda p: p.__name__)
def test_reduce_payloads_are_dangerous(payload: type, protocol: int) -> None:
    data = pickle.dumps({"weights": [1.0, 2.0], "hook": payload()}, protocol=protocol)
    refs, findings, verdict = scan(data)
    assert verdict == "dangerous"
    [ref] = [r for r in refs if python3_name(r) == PAYLOADS[payload]]
    assert ref.opcode == ("STACK_GLOBAL" if protocol >= 4 else "GLOBAL")
    assert data[ref.position] == (0x93 if protocol >= 4 else ord("c"))
    assert "calls" in kinds(findings)


def test_every_prefix_keeps_what_was_found_before_the_cut() -> None:
    data = pickle.dumps(SystemPayload(), protocol=2)
    global_end = data.index(b"system\n") + len(b"system\n")
    for cut in range(len(data)):
        refs, findings, verdict = scan(data[:cut])
        assert "broken-opcode" in kinds(findings)
        assert verdict == ("dangerous" if cut >= global_end else "unknown"), cut


# ---------------------------------------------------------------------------------------------
# Evasion tricks, assembled opcode by opcode


def test_stack_global_operands_resolved_through_the_memo() -> None:
    data = valid(
        proto()
        + text("os")
        + pickle.MEMOIZE
        + pickle.POP
        + text("system")
        + pickle.MEMOIZE
        + pickle.POP
        + text("decoy")
        + pickle.MEMOIZE
        + pickle.POP
        + pickle.BINGET
        + b"\x00"
        + pickle.BINGET
        + b"\x01"
        + pickle.STACK_GLOBAL
        + call1(text(TOUCH))
        + pickle.STOP
    )
    refs, findings, verdict = scan(data)
    assert verdict == "dangerous"
    assert names(refs) == {("os", "system")}
    assert kinds(findings) == {"dangerous-global", "calls"}


def test_stack_global_operands_through_put_get_dup_and_pop() -> None:
    data = valid(
        proto(2)
        + b"X\x02\x00\x00\x00os"
        + pickle.BINPUT
        + b"\x07"
        + pickle.POP
        + text("harmless")
        + pickle.POP  # decoys pushed and dropped: only the stack tells what STACK_GLOBAL takes
        + pickle.LONG_BINGET
        + struct.pack("<I", 7)
        + text("sys")
        + pickle.POP
        + text("system")
        + pickle.DUP
        + pickle.POP
        + pickle.STACK_GLOBAL
        + call1(text(TOUCH))
        + pickle.STOP
    )
    refs, findings, verdict = scan(data)
    assert names(refs) == {("os", "system")}
    assert verdict == "dangerous"


def test_protocol_0_memo_with_text_put_and_get() -> None:
    data = valid(
        b"Vos\np0\n0Vsystem\np1\n0g0\ng1\n"
        + pickle.STACK_GLOBAL
        + b"(V"
        + TOUCH.encode()
        + b"\ntR."
    )
    refs, _, verdict = scan(data)
    assert names(refs) == {("os", "system")} and verdict == "dangerous"


def test_memo_index_never_put_is_a_trick_and_never_clean() -> None:
    data = proto() + pickle.BINGET + b"\x05" + text("system") + pickle.STACK_GLOBAL + pickle.STOP
    refs, findings, verdict = scan(data)
    assert {"memo-trick", "unresolved-global"} <= kinds(findings)
    assert refs == [] and verdict == "dangerous"


def test_stack_global_operands_built_by_a_call_are_unresolved() -> None:
    # module = str("os"): a REDUCE result, which only running the pickle could reveal
    data = valid(
        proto()
        + text("builtins")
        + text("str")
        + pickle.STACK_GLOBAL
        + call1(text("os"))
        + text("system")
        + pickle.STACK_GLOBAL
        + call1(text(TOUCH))
        + pickle.STOP
    )
    refs, findings, verdict = scan(data)
    assert names(refs) == {("builtins", "str")}
    assert "unresolved-global" in kinds(findings) and "unknown-global" in kinds(findings)
    assert verdict == "dangerous"


def test_extension_registry_codes_are_unresolved() -> None:
    _, findings, verdict = scan(proto(2) + pickle.EXT1 + b"\x01" + pickle.STOP)
    assert "unresolved-global" in kinds(findings) and verdict == "dangerous"


def test_getattr_import_chain() -> None:
    data = valid(
        proto(2)
        + global_op("builtins", "getattr")
        + global_op("builtins", "__import__")
        + call1(text("os"))
        + text("system")
        + pickle.TUPLE2
        + pickle.REDUCE
        + call1(text(TOUCH))
        + pickle.STOP
    )
    refs, findings, verdict = scan(data)
    assert names(refs) == {("builtins", "getattr"), ("builtins", "__import__")}
    assert len(dangerous_names(findings)) == 2 and verdict == "dangerous"


def test_python2_names_are_mapped_like_the_unpickler_does() -> None:
    for module, name in [("__builtin__", "eval"), ("__builtin__", "getattr"), ("commands", "x")]:
        data = valid(proto(2) + global_op(module, name) + call1(text("1")) + pickle.STOP)
        assert scan(data)[2] == "dangerous", (module, name)
    assert scan(valid(proto(2) + global_op("__builtin__", "set") + pickle.STOP))[2] == "ok"


def test_dotted_names_through_dunders_are_dangerous() -> None:
    data = valid(
        proto()
        + text("collections")
        + text("OrderedDict.__init__.__globals__")
        + pickle.STACK_GLOBAL
        + pickle.STOP
    )
    _, findings, verdict = scan(data)
    assert verdict == "dangerous"
    assert "dunder" in dangerous_names(findings)[0]


def test_inst_opcode_protocol_0() -> None:
    data = valid(b"(S'" + TOUCH.encode() + b"'\nios\nsystem\n.")
    refs, findings, verdict = scan(data)
    inst_at = len(TOUCH) + 5  # after MARK and the quoted STRING line
    assert [(r.module, r.name, r.opcode, r.position) for r in refs] == [
        ("os", "system", "INST", inst_at)
    ]
    assert verdict == "dangerous" and "calls" in kinds(findings)


def test_unicode_escapes_in_module_names() -> None:
    # UNICODE is raw-unicode-escape and STRING backslash-escaped: both decode to "os".
    escaped_unicode = valid(b"V\\u006f\\u0073\nVsystem\n" + pickle.STACK_GLOBAL + b".")
    escaped_string = valid(b"S'\\x6fs'\nS'sys\\x74em'\n" + pickle.STACK_GLOBAL + b".")
    for data in (escaped_unicode, escaped_string):
        refs, _, verdict = scan(data)
        assert names(refs) == {("os", "system")} and verdict == "dangerous"
    # GLOBAL takes its line verbatim: an escape there names a module that cannot exist, but
    # a function called `system` is judged by its name in any module.
    refs, findings, verdict = scan(b"c\\u006fs\nsystem\n.")
    assert names(refs) == {("\\u006fs", "system")} and verdict == "dangerous"
    assert scan(b"c\\u006fs\nsystemd\n.")[2] == "unknown"
    # A look-alike module (Cyrillic o) is not on any list: unknown, never ok; dangerous when
    # the name itself is one that runs commands.
    assert scan(valid(b"\x80\x04" + text("\u043es") + text("sep") + b"\x93."))[2] == "unknown"
    assert scan(valid(b"\x80\x04" + text("\u043es") + text("system") + b"\x93."))[2] == "dangerous"


def test_nested_pickle_in_bytes_value() -> None:
    inner = pickle.dumps(SystemPayload(), protocol=4)
    data = pickle.dumps({"config": {"lr": 0.1}, "blob": inner}, protocol=4)
    refs, findings, verdict = scan(data)
    assert verdict == "dangerous" and "nested-pickle" in kinds(findings)
    [ref] = refs
    offset = data.index(inner) - 2  # the SHORT_BINBYTES opcode and its length byte
    assert ref.member == f"@{offset}" and (ref.module, ref.name) == ("posix", "system")


@pytest.mark.parametrize("encoding", ["latin-1 text", "base64 text", "hex text"])
def test_nested_pickle_in_text_values(encoding: str) -> None:
    inner = pickle.dumps(SubprocessPayload(), protocol=4)
    if encoding == "latin-1 text":  # protocols 0-2 write bytes as _codecs.encode(latin-1 text)
        data = pickle.dumps({"blob": inner}, protocol=2)
    elif encoding == "base64 text":
        data = pickle.dumps({"blob": base64.b64encode(inner).decode()}, protocol=4)
    else:
        data = pickle.dumps({"blob": inner.hex()}, protocol=4)
    _, findings, verdict = scan(data)
    assert verdict == "dangerous"
    assert any(f.kind == "nested-pickle" and encoding in f.detail for f in findings)


def test_nesting_deeper_than_max_depth_is_not_clean() -> None:
    def wrap(data: bytes, times: int) -> bytes:
        for _ in range(times):
            data = pickle.dumps({"inner": data}, protocol=4)
        return data

    payload = pickle.dumps(SystemPayload(), protocol=4)
    refs, findings, verdict = scan(wrap(payload, 3))
    assert verdict == "dangerous" and refs[0].member.count("@") == 3
    _, findings, verdict = scan(wrap(payload, 4))
    assert "depth-limit" in kinds(findings) and verdict == "unknown"


def test_bytes_that_merely_start_like_a_pickle_are_data() -> None:
    blob = b"\x80\x02" + bytes(range(256)) * 4  # PROTO 2, then 0x00: no pickle opcode
    _, findings, verdict = scan(pickle.dumps({"tensor": blob}, protocol=4))
    assert verdict == "ok" and "nested-pickle" not in kinds(findings)


def test_data_after_stop_is_scanned() -> None:
    data = pickle.dumps({"model": "safe"}, protocol=4) + pickle.dumps(EvalPayload(), protocol=4)
    refs, findings, verdict = scan(data)
    assert {"data-after-stop", "dangerous-global"} <= kinds(findings)
    assert verdict == "dangerous" and names(refs) == {("builtins", "eval")}
    _, findings, verdict = scan(pickle.dumps([1], protocol=4) + b"\xfftrailing junk")
    assert {"data-after-stop", "unknown-opcode"} <= kinds(findings) and verdict == "unknown"


def test_unknown_opcode_and_bad_protocol() -> None:
    _, findings, verdict = scan(proto() + b"\xff" + pickle.STOP)
    assert kinds(findings) == {"unknown-opcode"} and verdict == "unknown"
    _, findings, _ = scan(b"\x80\x09" + pickle.NONE + pickle.STOP)
    assert kinds(findings) == {"broken-opcode"}


@pytest.mark.parametrize(
    "data",
    [
        proto() + pickle.STOP,  # STOP on an empty stack
        proto() + pickle.MARK + pickle.MEMOIZE + pickle.STOP,  # MEMOIZE of a MARK
        proto() + pickle.NONE + pickle.APPENDS + pickle.STOP,  # APPENDS without a MARK
        proto() + pickle.TUPLE2 + pickle.STOP,
    ],
)
def test_stack_errors(data: bytes) -> None:
    _, findings, verdict = scan(data)
    assert "stack-error" in kinds(findings) and verdict == "unknown"


def test_broken_arguments() -> None:
    cases = [
        pickle.BINUNICODE + struct.pack("<I", 50) + b"short",
        pickle.BINSTRING + struct.pack("<i", -1),
        b"S'unquoted\n.",
        b"Vno newline",
        pickle.SHORT_BINUNICODE + b"\x02\xff\xfe.",
        b"pnot-a-number\n.",
        b"cos\n",
    ]
    for data in cases:
        _, findings, verdict = scan(data)
        assert "broken-opcode" in kinds(findings), data
        assert verdict != "ok"


def test_huge_declared_lengths_use_no_memory() -> None:
    cases = [
        proto() + pickle.BINBYTES8 + struct.pack("<Q", 2**62) + b"\x80\x04tiny",
        proto() + pickle.BINUNICODE8 + struct.pack("<Q", 2**62) + b"abc",
        proto() + pickle.LONG4 + struct.pack("<i", 2**31 - 1) + b"\x01",
        b"S'" + b"a" * 3_000_000,  # a line that never ends
    ]
    tracemalloc.start()
    try:
        for data in cases:
            _, findings, verdict = scan(data)
            assert "broken-opcode" in kinds(findings) and verdict == "unknown"
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20 * 2**20  # the 3 MB line is held once or twice, nothing near 2**62


# ---------------------------------------------------------------------------------------------
# Real torch.save output (committed; torch is not needed to run these)


def test_torch_state_dict_zip() -> None:
    result = scan_pickle_file(TORCH / "torch_state_dict.pt")
    assert result.format == "torch-zip" and result.verdict == "ok"
    assert result.members_scanned == ["torch_state_dict/data.pkl"]
    assert names(result.globals) == {
        ("collections", "OrderedDict"),
        ("torch._utils", "_rebuild_tensor_v2"),
        ("torch", "FloatStorage"),
    }
    assert all(ref.member == "torch_state_dict/data.pkl" for ref in result.globals)
    assert kinds(result.findings) == {"calls", "persistent-id"}
    assert 0 < result.bytes_read <= (TORCH / "torch_state_dict.pt").stat().st_size


def test_torch_legacy_format() -> None:
    path = TORCH / "torch_legacy_state_dict.pt"
    assert path.read_bytes()[:4] == b"\x80\x02\x8a\x0a"
    result = scan_pickle_file(path)
    assert result.format == "torch-legacy" and result.verdict == "ok"
    assert "data-after-stop" not in kinds(result.findings)
    [storage] = [f for f in result.findings if f.kind == "storage-data"]
    assert storage.detail.startswith("76 bytes")  # per storage: u64 count, then 12 or 3 floats
    assert ("torch._utils", "_rebuild_tensor_v2") in names(result.globals)


def test_torch_legacy_cut_short_and_with_a_payload(tmp_path: Path) -> None:
    data = (TORCH / "torch_legacy_state_dict.pt").read_bytes()
    short = tmp_path / "short.pt"
    short.write_bytes(data[:21])  # the magic-number and protocol-version pickles only
    result = scan_pickle_file(short)
    assert result.format == "torch-legacy" and "legacy-layout" in kinds(result.findings)
    assert result.verdict == "unknown"
    pieces = [0x1950A86A20F9469CFC6C, 1001, {"little_endian": True}, SystemPayload(), []]
    evil = tmp_path / "evil.pt"
    evil.write_bytes(b"".join(pickle.dumps(piece, protocol=2) for piece in pieces))
    result = scan_pickle_file(evil)
    assert result.format == "torch-legacy" and result.verdict == "dangerous"


def test_torch_checkpoint_with_parameters_dtypes_sizes_devices() -> None:
    result = scan_pickle_file(TORCH / "torch_checkpoint_misc.pt")
    assert result.verdict == "ok", result.findings
    assert {
        ("torch._utils", "_rebuild_parameter"),
        ("torch", "BFloat16Storage"),
        ("torch", "BoolStorage"),
        ("torch", "float16"),
        ("torch", "Size"),
        ("torch", "device"),
    } <= names(result.globals)


def test_whole_pickled_module_is_dangerous_as_weights_only_would_refuse() -> None:
    # Loading it imports torch.nn.modules.linear and instantiates Linear: a call off the list.
    result = scan_pickle_file(TORCH / "torch_full_module.pt")
    assert result.verdict == "dangerous"
    unknown = [f for f in result.findings if f.kind == "unknown-global"]
    assert any("torch.nn.modules.linear" in f.detail for f in unknown)
    calls = [f.detail for f in result.findings if f.kind == "dangerous-call"]
    assert any("torch.nn.modules.linear" in d and "Linear" in d for d in calls), calls


def test_torch_save_of_a_reduce_payload() -> None:
    result = scan_pickle_file(TORCH / "torch_malicious_reduce.pt")
    assert result.format == "torch-zip" and result.verdict == "dangerous"
    [ref] = [r for r in result.globals if r.module == "posix"]
    assert ref.name == "system" and ref.member == "torch_malicious_reduce/data.pkl"


def with_local_name_changed(source: Path, target: Path) -> Path:
    """A copy of a real torch.save archive whose local header calls `data.pkl` `data.txt`,
    its central directory untouched. torch finds members by the central directory (the
    edited benign archive loads with weights_only=True); Python's zipfile refuses it."""
    data = bytearray(source.read_bytes())
    with zipfile.ZipFile(source) as archive:
        [info] = [i for i in archive.infolist() if i.filename.endswith("/data.pkl")]
    start = info.header_offset + 30  # the local header's fixed part, then the name
    assert bytes(data[start:start + len(info.filename)]) == info.filename.encode()
    data[start + len(info.filename) - 3:start + len(info.filename)] = b"txt"
    target.write_bytes(bytes(data))
    with zipfile.ZipFile(target) as archive, pytest.raises(zipfile.BadZipFile, match="differ"):
        archive.read(info.filename)
    return target


def test_a_local_header_name_hides_nothing_torch_would_load(tmp_path: Path) -> None:
    evil = with_local_name_changed(TORCH / "torch_malicious_reduce.pt", tmp_path / "evil.pt")
    result = scan_pickle_file(evil)
    assert result.format == "torch-zip" and result.verdict == "dangerous"
    assert ("posix", "system") in names(result.globals)
    [renamed] = [f for f in result.findings if f.kind == "local-name-mismatch"]
    assert renamed.member == "torch_malicious_reduce/data.pkl"
    assert renamed.severity == "unknown" and "'torch_malicious_reduce/data.txt'" in renamed.detail
    benign = with_local_name_changed(TORCH / "torch_state_dict.pt", tmp_path / "benign.pt")
    found = scan_pickle_file(benign)
    assert found.verdict == "unknown" and names(found.globals) == names(
        scan_pickle_file(TORCH / "torch_state_dict.pt").globals)
    assert kinds(found.findings) == {"calls", "persistent-id", "local-name-mismatch"}


def test_inspect_fails_on_the_payload_behind_a_renamed_local_header(tmp_path: Path) -> None:
    from .conftest import Cli

    folder = tmp_path / "model"
    folder.mkdir()
    with_local_name_changed(TORCH / "torch_malicious_reduce.pt", folder / "pytorch_model.bin")
    cli = Cli(tmp_path / "unused-store")
    risks = cli.json("inspect", str(folder), code=1)["risks"]
    assert ("pytorch_model.bin", "dangerous") in {(r["file"], r["severity"]) for r in risks}
    verified = cli.json("verify", str(folder), code=1)
    assert verified["structure"]["ok"] and not verified["risks"]["ok"]


def test_hand_built_torch_layout_matches_the_real_writer(tmp_path: Path) -> None:
    path = write_zip(
        tmp_path / "model.pt", torch_like_members("model", torch_like_data_pkl(), bytes(48))
    )
    made = scan_pickle_file(path)
    real = scan_pickle_file(TORCH / "torch_state_dict.pt")
    real_members = member_shapes(TORCH / "torch_state_dict.pt")  # two tensors: data/0, data/1
    made_members = member_shapes(path)
    assert made_members == real_members
    assert (made.format, made.verdict) == (real.format, real.verdict) == ("torch-zip", "ok")
    assert names(made.globals) == names(real.globals)
    assert kinds(made.findings) == kinds(real.findings)


# ---------------------------------------------------------------------------------------------
# Real malicious and safe samples (modelaudit sdist, MIT)

MODELAUDIT_EXPECTED = {
    "posix_alias_attack.pkl": ("dangerous", {("posix", "system")}),
    "nt_alias_attack.pkl": ("dangerous", {("nt", "system")}),
    "memo_attack.pkl": ("dangerous", {("subprocess", "call")}),
    "multiple_stream_attack.pkl": ("dangerous", {("builtins", "eval")}),
    "exploit2_advanced_torch_bypass.pkl": ("dangerous", {("subprocess", "call")}),
    "exploit9_manual_construction.pkl": ("dangerous", {("os", "system")}),
    "nested_pickle_multistage.pkl": ("dangerous", {("builtins", "print")}),
    "nested_pickle_hex.pkl": ("dangerous", {("builtins", "print")}),
    "dill_func.pkl": ("dangerous", {("dill._dill", "_create_code")}),
    "safe_data.pkl": ("ok", set()),
    "simple_nested.pkl": ("ok", set()),
    "malicious_eval.pt": ("dangerous", {("builtins", "eval")}),
    "safe_model.pt": ("ok", set()),
    "path_traversal.zip": ("dangerous", {("posix", "system")}),
    "exploit6_ordereddict_bypass.pkl": ("dangerous", {("os", "system")}),
    "exploit7_nested_collections.pkl": ("dangerous", {("subprocess", "Popen")}),
    "stack_global_attack.pkl": ("dangerous", {("posix", "system")}),
    "decode_exec_chain.pkl": ("dangerous", {("builtins", "print")}),
    "nested_pickle_raw.pkl": ("dangerous", {("builtins", "print")}),
    "safe_model_with_encoding.pkl": ("ok", set()),
    "safe_model_with_binary.pkl": ("ok", set()),
}


@pytest.mark.parametrize("name", sorted(MODELAUDIT_EXPECTED))
def test_modelaudit_samples(name: str) -> None:
    verdict, expected = MODELAUDIT_EXPECTED[name]
    result = scan_pickle_file(MODELAUDIT / name)
    assert result.verdict == verdict, result.findings
    assert expected <= names(result.globals)


def test_modelaudit_samples_details() -> None:
    listed = {p.name for p in MODELAUDIT.iterdir()} - {"NOTICE.md"}
    assert listed == set(MODELAUDIT_EXPECTED)
    assert "data-after-stop" in kinds(
        scan_pickle_file(MODELAUDIT / "multiple_stream_attack.pkl").findings
    )
    multistage = scan_pickle_file(MODELAUDIT / "nested_pickle_multistage.pkl")
    members = {ref.member for ref in multistage.globals}
    assert len(members) == 2 and all(m and m.count("@") == 2 for m in members)  # raw and base64
    traversal = scan_pickle_file(MODELAUDIT / "path_traversal.zip")
    [slip] = [f for f in traversal.findings if f.kind == "zip-slip"]
    assert slip.member == "../../../etc/evil.txt" and slip.severity == "dangerous"
    assert scan_pickle_file(MODELAUDIT / "malicious_eval.pt").format == "torch-zip"


# ---------------------------------------------------------------------------------------------
# Zip archives


def test_large_storage_blob_is_never_read(tmp_path: Path) -> None:
    path = tmp_path / "big.pt"
    blob_size = 200 * 2**20
    write_sparse_zip(
        path,
        [
            ("big/data.pkl", torch_like_data_pkl()),
            ("big/byteorder", b"little"),
            ("big/data/0", blob_size),
            ("big/version", b"3\n"),
        ],
    )
    assert path.stat().st_size > blob_size
    result = scan_pickle_file(path)
    assert result.format == "torch-zip" and result.verdict == "ok", result.findings
    assert result.members_scanned == ["big/data.pkl"]
    assert result.bytes_read < 64 * 1024  # directory, data.pkl and a few sniffed bytes


def test_pickle_hidden_in_a_storage_member(tmp_path: Path) -> None:
    payload = pickle.dumps(SystemPayload(), protocol=2)
    path = write_zip(tmp_path / "m.pt", torch_like_members("m", torch_like_data_pkl(), payload))
    result = scan_pickle_file(path)
    assert result.verdict == "dangerous"
    assert "m/data/0" in result.members_scanned
    assert {r.member for r in result.globals if r.module == "posix"} == {"m/data/0"}


def test_storage_blob_starting_like_a_pickle_is_data(tmp_path: Path) -> None:
    blob = struct.pack("<4f", 1.5, 2.5, 3.5, 4.5)
    blob = b"\x80\x02" + blob  # what a float32 storage may start with by chance
    path = write_zip(tmp_path / "m.pt", torch_like_members("m", torch_like_data_pkl(), blob))
    result = scan_pickle_file(path)
    assert result.verdict == "ok"
    assert "pickle-like-data" in kinds(result.findings)
    assert result.members_scanned == ["m/data.pkl"]


def test_members_are_sniffed_by_content_not_name(tmp_path: Path) -> None:
    payload = pickle.dumps(EvalPayload(), protocol=3)
    path = write_zip(
        tmp_path / "a.zip",
        [
            ("weights.bin", payload),  # a pickle under another name
            ("notes.txt", b"just text"),
            ("legacy.pkl", pickle.dumps([1, 2], protocol=0)),  # no header: taken by its name
        ],
    )
    result = scan_pickle_file(path)
    assert result.format == "zip" and result.verdict == "dangerous"
    assert result.members_scanned == ["weights.bin", "legacy.pkl"]


@pytest.mark.parametrize("name", ["/etc/cron.d/x", "../../x.pkl", "a/../../x", "..\\evil", "C:/x"])
def test_zip_slip_names(tmp_path: Path, name: str) -> None:
    path = write_zip(tmp_path / "s.zip", [(name, b"data"), ("ok.pkl", pickle.dumps(1))])
    result = scan_pickle_file(path)
    assert "zip-slip" in kinds(result.findings) and result.verdict == "dangerous"


def test_encrypted_member(tmp_path: Path) -> None:
    path = write_zip(tmp_path / "e.zip", [("data.pkl", pickle.dumps([1]))])
    patch_member_headers(path, local={6: 0x1}, central={8: 0x1})
    result = scan_pickle_file(path)
    assert kinds(result.findings) == {"encrypted-member"} and result.verdict == "unknown"


def test_unsupported_compression(tmp_path: Path) -> None:
    path = write_zip(tmp_path / "u.zip", [("data.pkl", pickle.dumps([1]))])
    patch_member_headers(path, local={8: 99}, central={10: 99})  # 99: AES, unreadable here
    result = scan_pickle_file(path)
    assert kinds(result.findings) == {"unsupported-compression"} and result.verdict == "unknown"


def test_compression_bomb_is_declared_and_never_fully_inflated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inner = proto() + pickle.BINBYTES8 + struct.pack("<Q", 40 * 2**20) + bytes(40 * 2**20)
    inner += global_op("os", "system") + pickle.STOP  # beyond the cap: never reached
    path = write_zip(tmp_path / "bomb.zip", [("data.pkl", inner)], zipfile.ZIP_DEFLATED)
    inflated = 0
    real_read = zipfile.ZipExtFile.read

    def counting_read(self: zipfile.ZipExtFile, n: int = -1) -> bytes:
        nonlocal inflated
        data = real_read(self, n)
        inflated += len(data)
        return data

    monkeypatch.setattr(zipfile.ZipExtFile, "read", counting_read)
    cap = 2**20
    result = scan_pickle_file(path, max_member_bytes=cap)
    assert {"compression-bomb", "scan-limit"} <= kinds(result.findings)
    assert result.verdict == "unknown"
    assert inflated <= cap
    assert result.bytes_read < path.stat().st_size + 64 * 1024


def test_crc_mismatch_still_reports_the_globals(tmp_path: Path) -> None:
    data = pickle.dumps(SystemPayload(), protocol=2)
    path = write_zip(tmp_path / "c.zip", [("data.pkl", data)])
    raw = bytearray(path.read_bytes())
    at = raw.index(TOUCH.encode())
    raw[at] ^= 0x20  # inside the command string: opcodes intact, CRC wrong
    path.write_bytes(bytes(raw))
    result = scan_pickle_file(path)
    assert {"crc-mismatch", "dangerous-global"} <= kinds(result.findings)
    assert result.verdict == "dangerous"


def test_bad_zip_archive_and_bad_local_header(tmp_path: Path) -> None:
    path = write_zip(tmp_path / "b.zip", [("data.pkl", pickle.dumps([1]))])
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) - 30])  # the end record is gone
    result = scan_pickle_file(path)
    assert result.format == "zip" and kinds(result.findings) == {"bad-zip"}
    renamed = whole.replace(b"data.pkl", b"evil.pkl", 1)  # local header only: names differ
    path.write_bytes(renamed)
    result = scan_pickle_file(path)  # read as the central directory says, as torch does
    assert kinds(result.findings) == {"local-name-mismatch"} and result.verdict == "unknown"
    assert result.members_scanned == ["data.pkl"]



def test_central_directory_larger_than_the_cap(tmp_path: Path) -> None:
    path = write_zip(tmp_path / "d.zip", [("data.pkl", pickle.dumps([1]))])
    raw = bytearray(path.read_bytes())
    struct.pack_into("<L", raw, raw.rindex(b"PK\x05\x06") + 12, 0x7FFFFFFF)
    path.write_bytes(bytes(raw))
    result = scan_pickle_file(path)
    assert kinds(result.findings) == {"scan-limit"}


def test_duplicate_members_are_each_scanned(tmp_path: Path) -> None:
    path = write_zip(
        tmp_path / "d.pt",
        [
            ("d/data.pkl", torch_like_data_pkl()),
            ("d/data.pkl", pickle.dumps(SystemPayload(), protocol=2)),
        ],
    )
    result = scan_pickle_file(path)
    assert {"duplicate-member", "dangerous-global"} <= kinds(result.findings)
    assert result.members_scanned == ["d/data.pkl", "d/data.pkl"]


def test_nested_archives_to_max_depth(tmp_path: Path) -> None:
    def archive(members: list[tuple[str, bytes]]) -> bytes:
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as out:
            for name, data in members:
                out.writestr(name, data)
        return buffer.getvalue()

    level = archive([("data.pkl", pickle.dumps(SystemPayload(), protocol=2))])
    for name in ("c.zip", "b.zip"):
        level = archive([(name, level)])
    path = tmp_path / "a.zip"
    path.write_bytes(level)  # a.zip holds b.zip holds c.zip holds data.pkl
    result = scan_pickle_file(path)
    assert result.verdict == "dangerous"
    assert result.members_scanned == ["b.zip!c.zip!data.pkl"]
    assert "nested-archive" in kinds(result.findings)
    shallow = scan_pickle_file(path, max_depth=1)
    assert "depth-limit" in kinds(shallow.findings) and shallow.verdict == "unknown"


def test_member_and_total_byte_caps(tmp_path: Path) -> None:
    big = pickle.dumps([list(range(50_000))], protocol=2) + pickle.dumps(EvalPayload(), protocol=2)
    path = tmp_path / "big.pkl"
    path.write_bytes(big)
    assert scan_pickle_file(path).verdict == "dangerous"
    capped = scan_pickle_file(path, max_member_bytes=4096)
    assert "scan-limit" in kinds(capped.findings) and capped.verdict == "unknown"
    assert capped.bytes_read <= 4096
    zipped = write_zip(tmp_path / "big.zip", [("a.pkl", big), ("b.pkl", big)])
    total = scan_pickle_file(zipped, max_total_bytes=len(big) + 10)
    assert "scan-limit" in kinds(total.findings) and total.verdict == "dangerous"


# ---------------------------------------------------------------------------------------------
# API and hygiene


def test_file_that_cannot_be_opened(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="pickle file not found"):
        scan_pickle_file(tmp_path / "missing.pt")
    with pytest.raises(InputError, match="not-a-regular-file: a folder"):
        scan_pickle_file(tmp_path)
    os.mkfifo(tmp_path / "pipe.pt")  # refused at once, not waited on
    with pytest.raises(InputError, match="not-a-regular-file: a FIFO"):
        scan_pickle_file(tmp_path / "pipe.pt")


def test_empty_file_is_not_clean(tmp_path: Path) -> None:
    path = tmp_path / "empty.pkl"
    path.write_bytes(b"")
    result = scan_pickle_file(path)
    assert result.format == "pickle" and result.verdict == "unknown"
    assert kinds(result.findings) == {"broken-opcode"}


def test_result_types() -> None:
    result = scan_pickle_file(MODELAUDIT / "memo_attack.pkl")
    ref = result.globals[0]
    with pytest.raises(AttributeError):
        ref.module = "x"  # type: ignore[misc]
    assert ref == GlobalRef("subprocess", "call", "STACK_GLOBAL", 31, None)
    assert all(f.severity in SEVERITIES and f.kind in FINDING_KINDS for f in result.findings)
    assert verdict_of([PickleFinding(None, "calls", "info", "")]) == "ok"
    assert verdict_of([PickleFinding(None, "memo-trick", "unverifiable", "")]) == "unknown"


def test_documented_kinds_match_the_list() -> None:
    entry = re.compile(
        r"^    ([a-z-]+) +\((?:dangerous|unknown|unverifiable|info|worst[^)]*)\)", re.M
    )
    assert set(entry.findall(pickle_scan.__doc__ or "")) == set(FINDING_KINDS)


def test_allowlist_and_blocklist_do_not_overlap() -> None:
    for module, name in SAFE_GLOBALS:
        assert classify_global(module, name)[0] == "safe", (module, name)
    assert classify_global("os.path", "join")[0] == "dangerous"  # submodules of listed modules
    assert classify_global("torch", "load")[0] == "dangerous"
    assert classify_global("torch", "FloatTensor")[0] == "unknown"  # left off on purpose
    assert classify_global("copyreg", "__newobj__")[0] == "unknown"


def test_the_library_never_unpickles_nor_imports_model_libraries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the scanner tried to unpickle")

    for module in (pickle, _pickle):
        for attr in ("load", "loads", "Unpickler"):
            monkeypatch.setattr(module, attr, refuse)
    monkeypatch.setattr(pickle, "_Unpickler", refuse)
    for path in sorted(FIXTURES.rglob("*")):
        if path.suffix in (".pkl", ".pt", ".zip"):
            scan_pickle_file(path)
    parts = sorted(Path(pickle_scan.__file__).parent.glob("*.py"))  # the scanner's modules
    assert len(parts) > 1
    imported = {
        alias.name.split(".")[0]
        for part in parts
        for node in ast.walk(ast.parse(part.read_text()))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in (
            node.names if isinstance(node, ast.Import) else [ast.alias(node.module or "")]
        )
    }
    assert not imported & {"pickle", "_pickle", "torch", "numpy", "dill", "joblib"}
    code = (
        "import sys, lineage.formats.pickle_scan; "
        "print(sorted({'torch', 'numpy', 'dill'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------------------------------------
# Fuzzing: mutated real pickles and archives never raise, hang or blow up


def fuzz_seeds() -> list[bytes]:
    seeds = [
        p.read_bytes() for p in sorted(FIXTURES.rglob("*")) if p.suffix in (".pkl", ".pt", ".zip")
    ]
    seeds += [pickle.dumps(SAFE_OBJECTS["ordered"], protocol=p) for p in (0, 2, 5)]
    seeds.append(pickle.dumps({"blob": pickle.dumps(SystemPayload())}, protocol=4))
    deflated = io.BytesIO()
    with zipfile.ZipFile(deflated, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in torch_like_members("z", torch_like_data_pkl(), bytes(64)):
            archive.writestr(name, data)
    nested = io.BytesIO()
    with zipfile.ZipFile(nested, "w") as archive:
        archive.writestr("inner.zip", deflated.getvalue())
        archive.writestr("x.pkl", pickle.dumps([1], protocol=0))
    return [*seeds, deflated.getvalue(), nested.getvalue()]


SEEDS = fuzz_seeds()


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        action = draw(st.sampled_from(["cut", "flip", "insert", "delete", "repeat"]))
        if action == "cut":
            del data[at:]
        elif action == "flip" and at < len(data):
            data[at] = draw(st.integers(0, 255))
        elif action == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif action == "delete":
            del data[at : at + draw(st.integers(1, 16))]
        else:
            data[at:at] = data[at : at + draw(st.integers(1, 64))] * draw(st.integers(1, 8))
    return bytes(data)


def check_result(refs: list[GlobalRef], findings: list[PickleFinding]) -> None:
    assert all(isinstance(ref, GlobalRef) for ref in refs)
    assert all(f.severity in SEVERITIES and f.kind in FINDING_KINDS for f in findings)
    assert verdict_of(findings) in ("ok", "unknown", "dangerous")


@settings(max_examples=1000, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_fuzz_scan_bytes(data: bytes) -> None:
    check_result(*scan_pickle_bytes(data))


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@settings(max_examples=1000, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(data=mutated())
def test_fuzz_scan_file(fuzz_dir: Path, data: bytes) -> None:
    path = fuzz_dir / "sample"
    path.write_bytes(data)
    result = scan_pickle_file(path, max_member_bytes=2**20, max_total_bytes=4 * 2**20)
    check_result(result.globals, result.findings)
    assert result.bytes_read <= len(data) + 64 * 1024


def test_zz_no_payload_ever_ran() -> None:
    """Last on purpose: every scan above is done, and no marker file was created."""
    assert not any(marker.exists() for marker in MARKERS)
