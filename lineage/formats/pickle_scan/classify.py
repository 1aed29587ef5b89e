"""Which imported names a pickle may use: the allowlist, the blocklist, and attribute paths.

Decided from the names alone: a module named in an artifact is never imported to find out
(importing runs its code). `classify_global(module, name)` answers for one GLOBAL / INST /
STACK_GLOBAL name:

    dangerous  a known code-execution path: a module of DANGEROUS_MODULES (or a submodule),
               a name of DANGEROUS_NAMES, a last name that runs code in any module
               (DANGEROUS_LAST_NAMES: `system`, `popen`, `exec*`, `spawn*`, `eval`,
               `import_module`, `resolve_name`, `getattr`, `load` ...), an attribute path that
               walks through a module of DANGEROUS_MODULES (`posixpath.os.system` is
               `os.system`: posixpath imports os, and protocol 4 resolves dotted names
               attribute by attribute), or through a dunder (`X.__globals__` reaches anything)
    safe       exactly on SAFE_GLOBALS, a small allowlist modelled on torch's weights-only
               unpickler; an attribute path never is, whatever it reaches
    unknown    anything else: importing a module runs its code, so "not known bad" is not clean
"""

from __future__ import annotations

import _compat_pickle  # the stdlib's Python 2 -> 3 name table, as Unpickler(fix_imports=True)
import re

__all__ = [
    "DANGEROUS_LAST_NAMES",
    "DANGEROUS_MODULES",
    "DANGEROUS_NAMES",
    "SAFE_GLOBALS",
    "classify_global",
    "resolve_attribute_path",
]

# What is safe, what is dangerous


_TORCH_STORAGES = (
    "BFloat16Storage BoolStorage ByteStorage CharStorage ComplexDoubleStorage ComplexFloatStorage "
    "DoubleStorage FloatStorage HalfStorage IntStorage LongStorage QInt32Storage QInt8Storage "
    "QUInt2x4Storage QUInt4x2Storage QUInt8Storage ShortStorage"
).split()
_TORCH_DTYPES = (
    "bool uint8 uint16 uint32 uint64 int8 int16 int32 int64 float16 bfloat16 float32 float64 "
    "complex32 complex64 complex128 float8_e4m3fn float8_e4m3fnuz float8_e5m2 float8_e5m2fnuz "
    "float8_e8m0fnu qint8 quint8 qint32 quint4x2 quint2x4"
).split()
_TORCH_QSCHEMES = (
    "per_tensor_affine per_tensor_symmetric per_channel_affine per_channel_symmetric "
    "per_channel_affine_float_qparams"
).split()
_TORCH_REBUILDERS = (
    "_rebuild_tensor _rebuild_tensor_v2 _rebuild_tensor_v3 _rebuild_parameter "
    "_rebuild_parameter_with_state _rebuild_qtensor"
).split()

# A subset of torch 2.13's weights-only allowlist (torch/_weights_only_unpickler.py,
# _get_allowed_globals: what torch.load(weights_only=True), the default since 2.6, accepts):
# the containers, CPU storage classes, dtypes, qschemes and dense-tensor rebuild functions that
# torch.save writes for state dicts and training checkpoints. Left out: legacy *Tensor classes,
# torch.cuda.* / sparse / nested / wrapper-subclass rebuilders, sub-byte dtypes, Counter.
# Added: frozenset and bytes (plain pickles of those at protocol <= 3 need them) and numpy's
# array / scalar reconstructors (both numpy 1 `numpy.core` and numpy 2 `numpy._core` paths, as
# picklescan allows), common in .pkl / .pt files; torch leaves numpy off by default.
SAFE_GLOBALS: frozenset[tuple[str, str]] = frozenset(
    {
        ("collections", "OrderedDict"),
        ("builtins", "set"),
        ("builtins", "frozenset"),
        ("builtins", "bytearray"),
        ("builtins", "bytes"),
        ("builtins", "complex"),
        ("_codecs", "encode"),  # how protocols 0-2 write bytes: encode(latin-1 text)
        ("torch", "Size"),
        ("torch", "device"),
        ("torch.nn.parameter", "Parameter"),
        ("torch.storage", "TypedStorage"),
        ("torch.storage", "UntypedStorage"),
        *(("torch", name) for name in _TORCH_STORAGES),
        *(("torch", name) for name in _TORCH_DTYPES),
        *(("torch", name) for name in _TORCH_QSCHEMES),
        *(("torch._utils", name) for name in _TORCH_REBUILDERS),
        *(
            (f"numpy.{core}.{module}", name)
            for core in ("core", "_core")
            for module, name in (
                ("multiarray", "_reconstruct"),
                ("multiarray", "scalar"),
                ("numeric", "_frombuffer"),
            )
        ),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
    }
)

# Whole modules (and their submodules) whose every export can run commands or code, do I/O,
# or load further pickles. Gathered from torch's blocklist (sys, os, posix, nt), picklescan's
# unsafe globals and the standard library modules that run commands, import or touch files.
DANGEROUS_MODULES: frozenset[str] = frozenset(
    {
        "os", "posix", "nt", "sys", "subprocess", "_posixsubprocess", "pty", "commands", "popen2",
        "runpy", "importlib", "imp", "zipimport", "pickle", "_pickle", "marshal", "dill",
        "shutil", "socket", "ssl", "http", "httplib", "urllib", "urllib2", "requests", "aiohttp",
        "ftplib", "smtplib", "telnetlib", "webbrowser", "antigravity", "code", "codeop", "pdb",
        "bdb", "ctypes", "_ctypes", "multiprocessing", "asyncio", "timeit", "cProfile", "profile",
        "trace", "pydoc", "pip", "venv", "ensurepip", "distutils", "torch.hub", "numpy.f2py",
        "numpy.testing._private.utils", "pkgutil", "doctest", "tempfile", "platform", "pathlib",
        "glob", "fileinput", "shelve", "dbm", "sqlite3", "zipfile", "tarfile", "linecache", "site",
        "sysconfig", "compileall", "py_compile", "inspect", "signal", "_thread", "threading",
        "concurrent", "mmap", "fcntl", "tkinter", "idlelib", "xmlrpc", "logging.config",
        "joblib", "cloudpickle",
    }
)  # fmt: skip

# Single names that call, compile, import, open files or reach arbitrary attributes.
DANGEROUS_NAMES: frozenset[tuple[str, str]] = frozenset(
    {
        *(
            ("builtins", name)
            for name in (
                "eval exec compile getattr setattr delattr __import__ open input breakpoint "
                "globals locals vars apply execfile file reload"
            ).split()
        ),
        *(("types", name) for name in ("FunctionType", "CodeType", "LambdaType", "MethodType")),
        *(("functools", name) for name in ("partial", "partialmethod", "reduce")),
        *(("_functools", name) for name in ("partial", "reduce")),
        *(("operator", name) for name in ("attrgetter", "methodcaller", "itemgetter")),
        *(("_operator", name) for name in ("attrgetter", "methodcaller", "itemgetter")),
        *(("io", name) for name in ("open", "open_code", "FileIO")),
        *(("_io", name) for name in ("open", "open_code", "FileIO")),
        ("torch", "load"),
        ("torch.serialization", "load"),
        ("torch._inductor.codecache", "compile_file"),
        ("torch.jit.unsupported_tensor_ops", "execWrapper"),
        ("torch.utils.collect_env", "run"),
        ("numpy", "load"),
        ("numpy.ctypeslib", "load_library"),
        ("pandas", "read_pickle"),
        ("pandas.io.pickle", "read_pickle"),
    }
)

# Function names that run commands or code, import, resolve names or load more pickles,
# whatever module they are reached in: a name the tables above miss (`uuid._get_command_stdout`,
# `doctest.debug_script`, `somepackage.utils.os_system`) is caught by its last name.
DANGEROUS_LAST_NAMES = re.compile(
    r"(system|popen\d?|Popen|exec\w*|spawn\w*|fork\w*|posix_spawnp?|eval|compile|__import__"
    r"|import_module|reload|resolve_name|getattr|setattr|delattr|attrgetter|methodcaller"
    r"|run|run_path|run_module|runcode|runsource|call|check_call|check_output|getoutput"
    r"|getstatusoutput|_get_command_stdout|_syscmd_\w+|\w*_getnode|debug_script|debug_src"
    r"|load|loads|load_library|LoadLibrary|CDLL|PyDLL|WinDLL|dlopen|read_pickle|open"
    r"|open_code|breakpoint|interact|start_new_thread|kill|killpg|startfile|write\w*)"
)

_HARMLESS_DUNDERS = frozenset({"__newobj__", "__newobj_ex__"})  # copyreg's cls.__new__ helpers
# Module names an attribute path may step through: reaching one of these as an object is
# reaching everything it exports (builtins is blocked name by name, but never as an object).
_MODULE_ROOTS = frozenset({module.split(".")[0] for module in DANGEROUS_MODULES} | {"builtins"})


def classify_global(module: str, name: str) -> tuple[str, str]:
    """("dangerous" | "safe" | "unknown", why) for one imported name.

    Both spellings count: Unpickler(fix_imports=True) maps Python 2 names (`__builtin__.eval`)
    to Python 3 ones before importing.
    """
    spellings = {(module, name), _python3_spelling(module, name)}
    for mod, attr in sorted(spellings):
        reason = _danger(mod, attr)
        if reason:
            return "dangerous", reason
    if spellings & SAFE_GLOBALS:
        return "safe", "on the allowlist"
    if "." in name:
        return "unknown", (
            "an attribute path through a module object: not on the allowlist, whatever it "
            "reaches; importing runs the module's code and loading may call it"
        )
    return (
        "unknown",
        "not on the allowlist: importing runs the module's code and loading may call it",
    )


def resolve_attribute_path(module: str, name: str) -> tuple[str, str]:
    """(module, name) that a dotted name reaches, as far as can be told without importing.

    Each step of `a.b.c` through a name that is, or spells with leading underscores, a module
    of DANGEROUS_MODULES moves to that module (`tempfile._os` is `os`, `posixpath.os` is `os`);
    any other step is taken as a submodule, which is what the unpickler's attribute walk reaches
    when the attribute is one.
    """
    *steps, last = name.split(".")
    for step in steps:
        bare = step.lstrip("_")
        module = bare if bare in _MODULE_ROOTS else f"{module}.{step}"
    return module, last


def _python3_spelling(module: str, name: str) -> tuple[str, str]:
    mapped = _compat_pickle.NAME_MAPPING.get((module, name))
    if mapped is not None:
        return mapped
    return _compat_pickle.IMPORT_MAPPING.get(module, module), name


def _danger(module: str, name: str) -> str | None:
    parts = name.split(".")
    # Protocol 4+ resolves dotted names attribute by attribute: `X.__globals__` reaches anything.
    if name not in _HARMLESS_DUNDERS and any(_is_dunder(part) for part in parts):
        return "the name walks through a dunder attribute, a way to reach arbitrary objects"
    target, last = resolve_attribute_path(module, name)
    via = f" ({module}.{name} reaches {target}.{last} through module attributes)" if (
        len(parts) > 1
    ) else ""
    reason = _danger_of(target, last)
    return reason + via if reason else None


def _danger_of(module: str, name: str) -> str | None:
    pieces = module.split(".")
    for end in range(1, len(pieces) + 1):
        prefix = ".".join(pieces[:end])
        if prefix in DANGEROUS_MODULES:
            return f"module {prefix} can run commands or code, do I/O or load more pickles"
    if (module, name) in DANGEROUS_NAMES:
        return "a known way to run code, import modules, open files or reach any attribute"
    if name.lstrip("_") in _MODULE_ROOTS:
        return f"the name is module {name.lstrip('_')} itself, whose attributes run code"
    if DANGEROUS_LAST_NAMES.fullmatch(name):
        return f"a function named {name} runs code, imports, loads or opens, in any module"
    return None


def _is_dunder(part: str) -> bool:
    return len(part) > 4 and part.startswith("__") and part.endswith("__")
