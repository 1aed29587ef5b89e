"""The runtime versions of the interpreter the command runs with, not lineage's own.

The interpreter is the command's first argument resolved on the command's PATH when it
is a Python interpreter, or the interpreter named by a script's shebang line. It is asked
in an isolated subprocess (`python -I`: no current directory, no PYTHON* variables on its
path) for its version and, through `importlib.metadata`, the versions of the packages of
interest; nothing is imported, so a broken install cannot fail the probe. The entries the
command itself would see on top of that (`$PYTHONPATH`, the user site) are added to the
search path by the probe. A command that is not Python is recorded as "not probed":
guessing from lineage's own environment would be wrong exactly when it matters.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from lineage.exp.facts import RUNTIME_PACKAGES

PROBE_TIMEOUT_S = 30.0
NOT_PROBED = "not probed"
_PYTHON_NAME = re.compile(r"^(python|pypy)(\d+(\.\d+)*)?[a-z]?(\.exe)?$")
_SHEBANG_BYTES = 256

# Runs inside the command's interpreter with -I. Prints one JSON object.
_PROBE = r"""
import json, os, platform, sys
from importlib import metadata
extra = [p for p in json.loads(sys.argv[1]) if p]
if not os.environ.get("PYTHONNOUSERSITE"):
    import site
    extra.append(site.getusersitepackages())
sys.path[:0] = [p for p in extra if os.path.isdir(p)]
packages = {}
for name in json.loads(sys.argv[2]):
    try:
        packages[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
        pass
print(json.dumps({"python": platform.python_version(),
                  "implementation": sys.implementation.name,
                  "executable": sys.executable, "packages": packages}))
"""


def probe_runtime(argv: list[str], *, env: dict[str, str], cwd: Path) -> dict[str, Any]:
    """`{"status": "probed", "interpreter", "python", "packages", ...}` or why not."""
    argv, env = _through_env(argv, env)
    interpreter, reason = find_interpreter(argv, env=env, cwd=cwd)
    if interpreter is None:
        return {"status": NOT_PROBED, "reason": reason}
    extra = env.get("PYTHONPATH", "").split(os.pathsep)
    probe = [interpreter, "-I", "-c", _PROBE, json.dumps(extra), json.dumps(RUNTIME_PACKAGES)]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, env=env, cwd=cwd,
                              timeout=PROBE_TIMEOUT_S, check=False, stdin=subprocess.DEVNULL)
        found = json.loads(done.stdout) if done.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError, RecursionError) as exc:
        return {"status": "probe failed", "interpreter": interpreter,
                "reason": f"{type(exc).__name__}: {exc}"}
    if not isinstance(found, dict):
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"status": "probe failed", "interpreter": interpreter,
                "reason": f"exit {done.returncode}: {last}"}
    return {"status": "probed", "interpreter": interpreter, "via": reason, **found}


def _through_env(argv: list[str], env: dict[str, str]
                 ) -> tuple[list[str], dict[str, str]]:
    """`env [-i] [VAR=value ...] python ...` runs python with those variables."""
    if Path(argv[0]).name != "env":
        return argv, env
    rest, env = argv[1:], dict(env)
    while rest and ("=" in rest[0] or rest[0].startswith("-")):
        word, rest = rest[0], rest[1:]
        if word in ("-i", "--ignore-environment"):
            env = {}
        elif word in ("-u", "--unset") and rest:
            env.pop(rest[0], None)
            rest = rest[1:]
        elif not word.startswith("-"):
            name, _, value = word.partition("=")
            env[name] = value
    return (rest, env) if rest else (argv, env)


def find_interpreter(argv: list[str], *, env: dict[str, str], cwd: Path
                     ) -> tuple[str | None, str]:
    """(the Python interpreter that will run the command, how it was found) or
    (None, why there is none)."""
    program = _resolve(argv[0], env=env, cwd=cwd)
    if program is None:
        return None, f"{argv[0]} is not found on PATH"
    if _PYTHON_NAME.match(Path(program).name):
        return program, "the command's first argument"
    shebang = _shebang(Path(program))
    if shebang is None:
        return None, f"{argv[0]} is not a Python interpreter or a script"
    words = shebang.split()
    if Path(words[0]).name == "env":  # `#!/usr/bin/env [-S] python3 ...`
        words = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
    if not words or not _PYTHON_NAME.match(Path(words[0]).name):
        return None, f"{argv[0]} is a script for {shebang}, not Python"
    interpreter = _resolve(words[0], env=env, cwd=cwd)
    if interpreter is None:
        return None, f"the shebang's {words[0]} is not found"
    return interpreter, f"the shebang of {argv[0]}"


def _resolve(program: str, *, env: dict[str, str], cwd: Path) -> str | None:
    """As the command's exec will: a name with a slash relative to cwd, else PATH."""
    if "/" in program:
        path = Path(program) if Path(program).is_absolute() else cwd / program
        return str(path) if path.is_file() else None
    return shutil.which(program, path=env.get("PATH", os.defpath))


def _shebang(path: Path) -> str | None:
    try:
        with open(path, "rb") as handle:
            head = handle.read(_SHEBANG_BYTES)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    line = head[2:].split(b"\n", 1)[0].decode("utf-8", errors="replace").strip()
    return line or None
