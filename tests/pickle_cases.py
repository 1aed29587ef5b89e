"""Pickles that would run a payload if loaded, and pickles that must stay clean: the regression
corpus of the scanner, built at test time.

Every payload, if anything ever unpickled it, would create the file `marker` (the tests assert it
never appears). Nothing here loads a pickle: `pickle.dumps` and `numpy.save` only record the
callable and its arguments, and the rest is assembled opcode by opcode. Each case is a file name
(some chosen to hide what the file is), its bytes, and the verdict the scanner must give.
"""

from __future__ import annotations

import base64
import bz2
import functools
import gzip
import io
import lzma
import operator
import os
import pickle
import struct
import subprocess
import zipfile
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Case:
    name: str  # also the file name the case is written under
    data: bytes
    verdict: str  # what PickleScan.verdict must say
    note: str


class Reduce:
    """An object whose pickle calls `func(*args)` when loaded."""

    def __init__(self, func: object, *args: object) -> None:
        self.func = func
        self.args = args

    def __reduce__(self) -> tuple[object, ...]:
        return (self.func, self.args)


# -- opcode assembly ---------------------------------------------------------------------------


def text(value: str) -> bytes:
    raw = value.encode("utf-8")
    if len(raw) < 256:
        return pickle.SHORT_BINUNICODE + bytes([len(raw)]) + raw
    return pickle.BINUNICODE + struct.pack("<I", len(raw)) + raw


def value(obj: object) -> bytes:
    """Opcodes pushing a plain value (str, int, bytes, list or tuple of those)."""
    if isinstance(obj, str):
        return text(obj)
    if isinstance(obj, bool) or not isinstance(obj, int | bytes | list | tuple):
        raise TypeError(obj)
    if isinstance(obj, int):
        return pickle.BININT + struct.pack("<i", obj)
    if isinstance(obj, bytes):
        return pickle.SHORT_BINBYTES + bytes([len(obj)]) + obj
    items = b"".join(value(item) for item in obj)
    if isinstance(obj, list):
        return pickle.EMPTY_LIST + pickle.MARK + items + pickle.APPENDS
    return pickle.MARK + items + pickle.TUPLE


def stack_global(module: str, name: str) -> bytes:
    return text(module) + text(name) + pickle.STACK_GLOBAL


def global_op(module: str, name: str) -> bytes:
    return pickle.GLOBAL + module.encode() + b"\n" + name.encode() + b"\n"


def call(callee: bytes, *args: object) -> bytes:
    """Opcodes calling what `callee` pushes with plain arguments (REDUCE)."""
    return callee + value(tuple(args)) + pickle.REDUCE


def framed(body: bytes, protocol: int = 4) -> bytes:
    return pickle.PROTO + bytes([protocol]) + body + pickle.STOP


def dumps(func: object, *args: object, protocol: int = 4) -> bytes:
    return pickle.dumps(Reduce(func, *args), protocol=protocol)


def npy(array: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.save(out, array, allow_pickle=True)  # saving pickles the objects; it never loads them
    return out.getvalue()


def npz(**arrays: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.savez(out, **arrays)
    return out.getvalue()


def zipped(members: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return out.getvalue()


# -- the cases ---------------------------------------------------------------------------------


def dangerous_cases(marker: Path) -> list[Case]:
    """Payloads that would touch `marker` (or run, import, open what an attacker chose)."""
    touch = f"touch {marker}"
    cases = _direct(marker, touch) + _evasions(marker, touch) + _tricks(touch)
    return cases + _opcodes(touch) + _containers(touch)


def _direct(marker: Path, touch: str) -> list[Case]:
    py = f"open({str(marker)!r}, 'w')"
    direct = [
        ("os_system.pkl", dumps(os.system, touch), "posix.system via REDUCE"),
        ("posix_system.pkl", framed(call(stack_global("posix", "system"), touch)), "posix"),
        ("nt_system.pkl", framed(call(stack_global("nt", "system"), touch)), "Windows alias"),
        ("os_popen.pkl", framed(call(stack_global("os", "popen"), touch)), "os.popen"),
        ("os_execv.pkl", framed(call(stack_global("os", "execv"), "/bin/sh", ["sh", "-c", touch])),
         "os.execv"),
        ("os_spawnlp.pkl", framed(call(stack_global("os", "spawnlp"), 0, "sh", "sh", "-c", touch)),
         "os.spawnlp"),
        ("subprocess_call.pkl", dumps(subprocess.call, ["sh", "-c", touch]), "subprocess.call"),
        ("subprocess_popen.pkl", dumps(subprocess.Popen, ["sh", "-c", touch]), "Popen"),
        ("subprocess_check_output.pkl", dumps(subprocess.check_output, ["sh", "-c", touch]),
         "check_output"),
        ("subprocess_run.pkl", dumps(subprocess.run, ["sh", "-c", touch]), "subprocess.run"),
        ("subprocess_getoutput.pkl", dumps(subprocess.getoutput, touch), "getoutput"),
        ("builtins_eval.pkl", dumps(eval, f"__import__('os').system({touch!r})"), "eval"),
        ("builtins_exec.pkl", dumps(exec, f"import os; os.system({touch!r})"), "exec"),
        ("builtins_compile.pkl", dumps(compile, py, "<x>", "exec"), "compile"),
        ("builtins_import.pkl", dumps(__import__, "os"), "__import__"),
        ("builtins_open.pkl", dumps(open, str(marker), "w"), "open for writing"),
        ("builtin_eval_py2.pkl", framed(call(global_op("__builtin__", "eval"), py), 2),
         "Python 2 spelling, mapped by fix_imports"),
        ("importlib_import_module.pkl", framed(call(stack_global("importlib", "import_module"),
                                                    "os")), "importlib"),
        ("runpy_run_path.pkl", framed(call(stack_global("runpy", "run_path"), "/tmp/x.py")),
         "runpy"),
        ("code_interpreter.pkl", framed(call(stack_global("code", "InteractiveInterpreter"))),
         "code"),
        ("pty_spawn.pkl", framed(call(stack_global("pty", "spawn"), ["sh", "-c", touch])), "pty"),
        ("shutil_rmtree.pkl", framed(call(stack_global("shutil", "rmtree"), "/tmp/x")), "shutil"),
        ("socket_connect.pkl", framed(call(stack_global("socket", "create_connection"),
                                           ("127.0.0.1", 9))), "socket"),
        ("webbrowser_open.pkl", framed(call(stack_global("webbrowser", "open"), "file:///x")),
         "webbrowser"),
        ("ctypes_cdll.pkl", framed(call(stack_global("ctypes", "CDLL"), "libc.so.6")), "ctypes"),
        ("marshal_loads.pkl", framed(call(stack_global("marshal", "loads"), b"\xe3")), "marshal"),
        ("types_functiontype.pkl", framed(call(stack_global("types", "FunctionType"), 1, 2)),
         "types.FunctionType"),
        ("types_codetype.pkl", framed(call(stack_global("types", "CodeType"), 0)), "CodeType"),
        ("pickle_loads.pkl", dumps(pickle.loads, dumps(os.system, touch)), "a pickle loading one"),
        ("timeit.pkl", framed(call(stack_global("timeit", "timeit"), f"__import__('os').system"
                                                                     f"({touch!r})")),
         "timeit runs a statement"),
        ("torch_load.pkl", framed(call(stack_global("torch", "load"), "/tmp/x.pt")), "torch.load"),
        ("numpy_load.pkl", framed(call(stack_global("numpy", "load"), "/tmp/x.npy")), "numpy.load"),
    ]
    wrappers = [
        ("functools_partial.pkl", dumps(functools.partial(os.system, touch)),
         "partial(os.system, cmd)()"),
        ("functools_reduce.pkl", framed(call(stack_global("functools", "reduce"), 1, 2)),
         "functools.reduce"),
        ("operator_attrgetter.pkl", _attrgetter_chain(touch), "attrgetter(system)(posixpath.os)"),
        ("operator_methodcaller.pkl", _methodcaller_chain(touch), "methodcaller(system, cmd)(os)"),
        ("getattr_import_chain.pkl", _getattr_chain("builtins", "__import__", touch),
         "getattr(__import__('os'), 'system')(cmd)"),
    ]
    return [Case(n, d, "dangerous", note) for n, d, note in direct + wrappers]


def _attrgetter_chain(touch: str) -> bytes:
    # attrgetter("system")(posixpath.os)(cmd)
    getter = call(stack_global("operator", "attrgetter"), "system")
    system = getter + pickle.MARK + stack_global("posixpath", "os") + pickle.TUPLE + pickle.REDUCE
    return framed(system + value((touch,)) + pickle.REDUCE)


def _methodcaller_chain(touch: str) -> bytes:
    caller = call(stack_global("_operator", "methodcaller"), "system", touch)
    target = pickle.MARK + stack_global("posixpath", "os") + pickle.TUPLE
    return framed(caller + target + pickle.REDUCE)


def _getattr_chain(module: str, name: str, touch: str) -> bytes:
    os_module = call(stack_global(module, name), "os")
    getattr_ = stack_global("builtins", "getattr")
    system = getattr_ + pickle.MARK + os_module + text("system") + pickle.TUPLE + pickle.REDUCE
    return framed(system + value((touch,)) + pickle.REDUCE)


def _evasions(marker: Path, touch: str) -> list[Case]:
    """Names reached through other modules' attributes, resolvers, NumPy, misnamed files."""
    cases = [
        ("posixpath_os_system.pkl", framed(call(stack_global("posixpath", "os.system"), touch)),
         "STACK_GLOBAL posixpath + os.system"),
        ("tempfile_os_system.pkl", framed(call(stack_global("tempfile", "_os.system"), touch)),
         "tempfile._os is os"),
        ("platform_os_system.pkl", framed(call(stack_global("platform", "os.system"), touch)),
         "platform.os"),
        ("pathlib_os_system.pkl", framed(call(stack_global("pathlib", "os.system"), touch)),
         "pathlib.os"),
        ("glob_os_popen.pkl", framed(call(stack_global("glob", "os.popen"), touch)), "glob.os"),
        ("posixpath_os_system_global.pkl",
         framed(call(global_op("posixpath", "os.system"), touch)), "GLOBAL with a dotted name"),
        ("ntpath_os_system_global.pkl", framed(call(global_op("ntpath", "os.system"), touch), 2),
         "GLOBAL, protocol 2 header"),
        ("getattr_posixpath_os.pkl", _getattr_module_chain("posixpath", "os", touch),
         "getattr(posixpath.os, 'system')"),
        ("getattr_tempfile_os.pkl", _getattr_module_chain("tempfile", "_os", touch),
         "getattr(tempfile._os, 'system')"),
        ("pkgutil_resolve_name.pkl", _resolver(touch), "pkgutil.resolve_name('os:system')(cmd)"),
        ("uuid_command_stdout.pkl",
         framed(call(stack_global("uuid", "_get_command_stdout"), "touch", str(marker))),
         "uuid helper runs a command"),
        ("doctest_debug_script.pkl",
         framed(call(stack_global("doctest", "debug_script"), f"import os; os.system({touch!r})")),
         "doctest runs a script"),
        ("object_array.npy", npy(np.array([1, Reduce(os.system, touch)], dtype=object)),
         ".npy with an object array"),
        ("object_field.npy", npy(_structured_with_object(touch)), "structured dtype, object field"),
        ("object_array.npz", npz(weights=np.arange(3.0), extra=np.array(
            [Reduce(os.system, touch)], dtype=object)), ".npz holding an object array"),
        ("payload", dumps(os.system, touch), "no extension"),
        ("payload.dat", dumps(os.system, touch, protocol=2), ".dat"),
        ("model.joblib", dumps(os.system, touch, protocol=0), "protocol 0 named .joblib"),
        ("config.json", dumps(os.system, touch, protocol=1), "protocol 1 named like JSON"),
        ("weights.safetensors", dumps(os.system, touch, protocol=3), "named like safetensors"),
        ("notes.txt", global_op("os", "system") + b"(S'" + touch.encode() + b"'\ntR.",
         "hand-written protocol 0 named .txt"),
        ("garbage_after_call.dat", global_op("os", "system") + b"(S'" + touch.encode()
         + b"'\ntR" + b"\xff not a pickle any more", "the call runs before loading fails"),
        ("mark_left_over.dat", b"(" + global_op("os", "system") + b"(S'" + touch.encode()
         + b"'\ntR.", "a MARK left on the stack at STOP (the unpickler ignores it)"),
        ("safetensors_shaped.bin", b"NNX" + struct.pack("<I", 32) + b"\x00{" + b"a" * 30
         + b"000" + global_op("os", "system") + b"(S'" + touch.encode() + b"'\ntR.",
         "first bytes shaped like a safetensors header (length < 2**32, then '{')"),
        ("hex_int_first.dat", b"I0x10\n0I010\n0F1e3\n0" + global_op("os", "system") + b"(S'"
         + touch.encode() + b"'\ntR.", "INT and FLOAT lines in forms the unpickler accepts"),
    ]
    return [Case(n, d, "dangerous", note) for n, d, note in cases]


def _getattr_module_chain(module: str, attr: str, touch: str) -> bytes:
    getattr_ = stack_global("builtins", "getattr")
    system = (getattr_ + pickle.MARK + stack_global(module, attr) + text("system")
              + pickle.TUPLE + pickle.REDUCE)
    return framed(system + value((touch,)) + pickle.REDUCE)


def _resolver(touch: str) -> bytes:
    system = call(stack_global("pkgutil", "resolve_name"), "os:system")
    return framed(system + value((touch,)) + pickle.REDUCE)


def _structured_with_object(touch: str) -> np.ndarray:
    array = np.zeros(1, dtype=[("x", "<f4"), ("o", "O")])
    array["o"][0] = Reduce(os.system, touch)
    return array


def _tricks(touch: str) -> list[Case]:
    """Memo, nesting and stream tricks."""
    memo_callee = framed(
        stack_global("os", "system") + pickle.MEMOIZE + pickle.POP
        + pickle.BINGET + b"\x00" + value((touch,)) + pickle.REDUCE
    )
    long_get = framed(
        stack_global("subprocess", "call") + pickle.LONG_BINPUT + struct.pack("<I", 7)
        + pickle.POP + pickle.LONG_BINGET + struct.pack("<I", 7) + value((["sh", "-c", touch],))
        + pickle.REDUCE
    )
    memo_names = framed(
        text("os") + pickle.MEMOIZE + text("system") + pickle.MEMOIZE + pickle.POP + pickle.POP
        + pickle.BINGET + b"\x00" + pickle.BINGET + b"\x01" + pickle.STACK_GLOBAL
        + value((touch,)) + pickle.REDUCE
    )
    text_memo = b"cos\nsystem\np0\n0g0\n(S'" + touch.encode() + b"'\ntR."
    dup = framed(stack_global("os", "system") + pickle.DUP + pickle.POP + value((touch,))
                 + pickle.REDUCE)
    payload = dumps(os.system, touch)
    inner = pickle.dumps({"blob": payload}, protocol=4)
    cases = [
        ("memo_callee.pkl", memo_callee, "callable fetched back from the memo"),
        ("memo_long_binget.pkl", long_get, "LONG_BINPUT / LONG_BINGET"),
        ("memo_names.pkl", memo_names, "STACK_GLOBAL operands from the memo"),
        ("memo_text.pkl", text_memo, "protocol 0 PUT / GET"),
        ("dup_callee.pkl", dup, "DUP of the callable"),
        ("nested_bytes.pkl", pickle.dumps({"blob": payload}, protocol=4), "pickle in bytes"),
        ("nested_base64.pkl", pickle.dumps({"b": base64.b64encode(payload).decode()}, protocol=4),
         "base64 text"),
        ("nested_hex.pkl", pickle.dumps({"h": payload.hex()}, protocol=2), "hex text"),
        ("nested_twice.pkl", pickle.dumps([inner], protocol=4), "two levels deep"),
        ("consecutive.pkl", pickle.dumps({"w": [1.0]}, protocol=4) + payload,
         "payload in the second pickle of the stream"),
        ("consecutive_three.pkl", pickle.dumps(1) + pickle.dumps("x", protocol=0) + payload,
         "payload in the third pickle"),
    ]
    cases += [
        (f"protocol_{p}.pkl", dumps(os.system, touch, protocol=p), f"protocol {p}")
        for p in range(6)
    ]
    return [Case(n, d, "dangerous", note) for n, d, note in cases]


def _opcodes(touch: str) -> list[Case]:
    """Every way of calling: BUILD, INST, OBJ, NEWOBJ, NEWOBJ_EX, and unknown callables."""
    cases = [
        ("inst_os_system.pkl", b"(S'" + touch.encode() + b"'\nios\nsystem\n.", "INST"),
        ("inst_unknown_class.pkl", b"(imaliciouspkg\nLoader\n.", "INST of a class off the list"),
        ("obj_os_system.pkl", framed(pickle.MARK + stack_global("os", "system") + text(touch)
                                     + pickle.OBJ, 2), "OBJ"),
        ("obj_unknown_class.pkl", framed(pickle.MARK + stack_global("helpers", "Runner")
                                         + pickle.OBJ, 2), "OBJ of a class off the list"),
        ("newobj_popen.pkl", framed(stack_global("subprocess", "Popen")
                                    + value((["sh", "-c", touch],)) + pickle.NEWOBJ), "NEWOBJ"),
        ("newobj_ex_popen.pkl", framed(
            stack_global("subprocess", "Popen") + value((["sh", "-c", touch],))
            + pickle.EMPTY_DICT + text("shell") + pickle.NEWFALSE + pickle.SETITEM
            + pickle.NEWOBJ_EX), "NEWOBJ_EX"),
        ("newobj_unknown_class.pkl", framed(stack_global("evilpkg.models", "Model")
                                            + pickle.EMPTY_TUPLE + pickle.NEWOBJ),
         "NEWOBJ of a class off the list"),
        ("reduce_unknown_function.pkl",
         framed(call(stack_global("evilpkg.tools", "fetch"), "http://x")),
         "REDUCE of a function off the list"),
        ("build_setstate.pkl", framed(
            stack_global("evilpkg.models", "Stateful") + pickle.EMPTY_TUPLE + pickle.NEWOBJ
            + pickle.EMPTY_DICT + text("cmd") + text(touch) + pickle.SETITEM + pickle.BUILD),
         "BUILD on an object whose class is off the list (__setstate__)"),
        ("build_on_global.pkl", framed(
            stack_global("collections", "OrderedDict") + pickle.NONE + pickle.EMPTY_DICT
            + text("__reduce__") + text(touch) + pickle.SETITEM + pickle.TUPLE2 + pickle.BUILD
            + pickle.POP + pickle.NONE, 2),
         "BUILD setting attributes on an imported class"),
        ("reconstructor_protocol0.pkl",
         b"ccopy_reg\n_reconstructor\n(cevilpkg\nThing\nc__builtin__\nobject\nNtR(dS'x'\n"
         b"I1\nsb.", "copyreg._reconstructor of a class off the list, protocol 0"),
        ("call_a_call_result.pkl", framed(
            call(stack_global("collections", "OrderedDict")) + value((touch,)) + pickle.REDUCE),
         "calls what another call returned"),
        ("ext_registry.pkl", framed(pickle.EXT1 + b"\x01" + value((touch,)) + pickle.REDUCE, 2),
         "EXT1: a name from copyreg's registry"),
        ("stack_global_from_call.pkl", framed(
            call(stack_global("builtins", "str"), "os") + text("system") + pickle.STACK_GLOBAL
            + value((touch,)) + pickle.REDUCE), "module name built by a call"),
    ]
    return [Case(n, d, "dangerous", note) for n, d, note in cases]


def _containers(touch: str) -> list[Case]:
    payload = dumps(os.system, touch, protocol=2)
    torch_like = zipped({
        "archive/data.pkl": payload, "archive/version": b"3\n", "archive/byteorder": b"little",
    })
    legacy = b"".join(pickle.dumps(x, protocol=2) for x in (0x1950A86A20F9469CFC6C, 1001, {}))
    cases = [
        ("torch_zip_payload.pt", torch_like, "torch zip layout with a payload in data.pkl"),
        ("torch_zip_payload.bin", torch_like, "the same named .bin"),
        ("torch_zip_renamed", torch_like, "the same with no extension"),
        ("torch_legacy_payload.pt", legacy + payload, "legacy layout, payload as the object"),
        ("zip_member_payload.zip", zipped({"notes.txt": b"hi", "state": payload}),
         "archive member that is a pickle by content"),
        ("nested_zip_payload.zip", zipped({"inner.zip": zipped({"x.pkl": payload})}),
         "archive inside an archive"),
        # joblib.dump(compress=...) writes these streams; joblib.load inflates and unpickles
        ("zlib_payload.joblib", zlib.compress(payload), "zlib, joblib's default compressor"),
        ("gzip_payload.pkl.gz", gzip.compress(payload), "gzip"),
        ("bz2_payload.dat", bz2.compress(payload), "bz2, misnamed"),
        ("xz_payload", lzma.compress(payload), "xz, no extension"),
        ("lzma_payload.joblib", lzma.compress(payload, format=lzma.FORMAT_ALONE), "lzma alone"),
        ("zlib_split.joblib", zlib.compress(payload[:9]) + zlib.compress(payload[9:]),
         "one pickle split over two concatenated streams"),
    ]
    return [Case(n, d, "dangerous", note) for n, d, note in cases]


def clean_cases() -> list[Case]:
    """Plain data: must be "ok" (every global on the allowlist, nothing else called)."""
    state = OrderedDict(
        [("layer.weight", [[0.5, -1.0], [2.0, 0.25]]), ("layer.bias", [0.0, 1.0]),
         ("step", 12), ("name", "adam"), ("betas", (0.9, 0.999)), ("raw", b"\x00\x01"),
         ("tags", {"a", "b"}), ("frozen", frozenset({1}))]
    )
    cases = [Case(f"state_p{p}.pkl", pickle.dumps(state, protocol=p), "ok", f"protocol {p}")
             for p in range(6)]
    arrays = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "i": np.arange(3),
              "s": np.float64(1.5)}
    cases += [Case(f"numpy_p{p}.pkl", pickle.dumps(arrays, protocol=p), "ok", "numpy arrays")
              for p in (2, 4, 5)]
    cases += [
        Case("numeric.npy", npy(np.arange(12, dtype=np.float16).reshape(3, 4)), "ok", "npy"),
        Case("structured.npy", npy(np.zeros(2, dtype=[("a", "<f4", (3,)), ("b", "S3")])), "ok",
             "structured, no objects"),
        Case("numeric.npz", npz(a=np.arange(3), b=np.ones((2, 2))), "ok", "npz"),
        Case("state_no_extension", pickle.dumps(state, protocol=0), "ok", "protocol 0, no name"),
        Case("state_zlib.joblib", zlib.compress(pickle.dumps(state, protocol=4)), "ok", "zlib"),
        Case("state_xz.joblib", lzma.compress(pickle.dumps(state, protocol=2)), "ok", "xz"),
    ]
    return cases


def unknown_cases() -> list[Case]:
    """Non-allowlisted names that are only referenced, never called: unknown, never ok."""
    return [
        Case("class_reference.pkl", framed(stack_global("evilpkg.models", "Model")), "unknown",
             "a class stored by name"),
        Case("function_reference.pkl", pickle.dumps(operator.add, protocol=2), "unknown",
             "a function stored by name"),
    ]
