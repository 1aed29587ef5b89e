"""The layout promises: one namespace, every subpackage shipped, imports flow one way."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

from .conftest import EXAMPLES, REPO

FOLDERS = {"lineage": "lineage", "ingest": "lineage.ingest", "cli": "lineage.cli",
           "schemas": "lineage.schemas"}


def _pyproject() -> dict[str, object]:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def test_every_package_folder_is_listed_for_the_wheel() -> None:
    setuptools = _pyproject()["tool"]["setuptools"]  # type: ignore[index]
    listed = set(setuptools["packages"])
    mapping = setuptools["package-dir"]
    for top, package in FOLDERS.items():
        for init in (REPO / top).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO / top).parts
            name = ".".join((package, *rel))
            assert name in listed, f"{init.parent} is missing from [tool.setuptools] packages"
            assert mapping[name] == "/".join((top, *rel))


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_imports_go_cli_to_ingest_to_core() -> None:
    rules = {
        "lineage": ("lineage.ingest", "lineage.cli", "typer", "rich"),
        "schemas": ("lineage.ingest", "lineage.cli", "typer", "rich"),
        "ingest": ("lineage.cli", "typer", "rich"),
    }
    for folder, banned in rules.items():
        for path in (REPO / folder).rglob("*.py"):
            for name in _imports(path):
                assert not name.startswith(banned), f"{path} imports {name}"
    for top in ("lineage", "ingest", "cli", "schemas", "tests"):
        for path in (REPO / top).rglob("*.py"):
            for name in _imports(path):
                root = name.split(".")[0]
                assert root not in ("ingest", "cli", "schemas"), f"{path}: import {name}"


def test_help_does_not_import_the_heavy_libraries() -> None:
    code = ("import sys; from lineage.cli.main import app; "
            "print(sorted(m for m in ('duckdb', 'pyarrow', 'polars') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "[]", out.stderr


def test_lock_file_pins_every_runtime_dependency() -> None:
    lock = (REPO / "requirements.lock").read_text(encoding="utf-8")
    for requirement in _pyproject()["project"]["dependencies"]:  # type: ignore[index]
        name = requirement.split(">")[0].split("=")[0].split("<")[0].strip().lower()
        assert f"\n{name}==" in lock, f"{name} is not pinned in requirements.lock"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel pip builds from this checkout."""
    out = tmp_path_factory.mktemp("wheel")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--quiet", "-w", str(out), str(REPO)],
        capture_output=True, text=True,
    )
    assert built.returncode == 0, built.stderr
    return next(out.glob("lineage-*.whl"))


def test_the_built_wheel_carries_every_module_and_schema(wheel: Path, tmp_path: Path) -> None:
    import zipfile

    names = set(zipfile.ZipFile(wheel).namelist())
    for top, package in FOLDERS.items():
        for source in (REPO / top).rglob("*.py"):
            inside = "/".join((*package.split("."), *source.relative_to(REPO / top).parts))
            assert inside in names, f"{inside} is missing from the wheel"
    assert {"lineage/schemas/catalog.sql", "lineage/py.typed"} <= names
    unpacked = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(unpacked)
    check = ("import sys; sys.path.insert(0, sys.argv[1]); import lineage, lineage.ingest, "
             "lineage.cli.main, lineage.schemas as s; assert lineage.__file__.startswith("
             "sys.argv[1]); print(len(s.catalog_ddl()) > 0)")
    ran = subprocess.run([sys.executable, "-c", check, str(unpacked)], capture_output=True,
                         text=True, cwd=tmp_path)
    assert ran.stdout.strip() == "True", ran.stderr


def test_the_wheel_installed_in_a_new_virtualenv_answers(wheel: Path, tmp_path: Path) -> None:
    """What only a real install shows (the package-dir mapping, package data, the console
    script): pip installs the wheel into a fresh virtualenv, whose `lineage` then answers
    --help and a lookup. The dependencies come from this environment, by a path file, so
    nothing is downloaded; the checkout itself is never on the new environment's path."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True).stdout.strip())
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
         "--no-index", "--quiet", "--disable-pip-version-check", str(wheel)],
        capture_output=True, text=True)
    assert installed.returncode == 0, installed.stderr
    lineage = venv / "bin" / "lineage"

    def run(*args: str, code: int = 0) -> str:
        done = subprocess.run([lineage, *args], capture_output=True, text=True,
                              cwd=tmp_path, env={"PATH": f"{venv / 'bin'}:/usr/bin:/bin"})
        assert done.returncode == code, (args, done.stderr)
        return done.stdout

    assert "trained-on" in run("--help")
    where = subprocess.run([python, "-c", "import lineage.cli.main as m; print(m.__file__)"],
                           capture_output=True, text=True, check=True, cwd=tmp_path).stdout
    assert where.startswith(str(site)), where  # the wheel's module, not the checkout's
    texts = tmp_path / "texts"
    texts.mkdir()
    play = texts / "macbeth.txt"
    play.write_bytes((EXAMPLES / "corpus" / "shakespeare" / "macbeth.txt").read_bytes())
    store = str(tmp_path / "store")
    run("--store", store, "init")
    run("--store", store, "ingest", "corpus", str(texts), "--corpus", "plays")
    # in a corpus, in no stream: exit 1 (not trained on)
    answer = json.loads(run("--store", store, "trained-on", str(play), "--json", code=1))
    assert [r["verdict"] for r in answer["results"]] == ["in-corpus-only"]
