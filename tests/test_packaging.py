"""The layout promises: one namespace, every subpackage shipped, imports flow one way."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

from .conftest import REPO

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
    import subprocess
    import sys

    code = ("import sys; from lineage.cli.main import app; "
            "print(sorted(m for m in ('duckdb', 'pyarrow', 'polars') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "[]", out.stderr


def test_lock_file_pins_every_runtime_dependency() -> None:
    lock = (REPO / "requirements.lock").read_text(encoding="utf-8")
    for requirement in _pyproject()["project"]["dependencies"]:  # type: ignore[index]
        name = requirement.split(">")[0].split("=")[0].split("<")[0].strip().lower()
        assert f"\n{name}==" in lock, f"{name} is not pinned in requirements.lock"


def test_the_built_wheel_carries_every_module_and_schema(tmp_path: Path) -> None:
    import subprocess
    import sys
    import zipfile

    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--quiet", "-w", str(tmp_path), str(REPO)],
        capture_output=True, text=True,
    )
    assert built.returncode == 0, built.stderr
    wheel = next(tmp_path.glob("lineage-*.whl"))
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
