"""The package layout is a contract: layers import downwards only, and no module imports
itself back through others.

Each package under lineage/ says in its docstring what it may import ("May import:
lineage.store, ..."); this test reads those lines and every import statement (including
the ones inside functions, which still tie the modules together), so a new upward import
or a new import circle fails here with the modules that form it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Installed names of the requested top-level folders (see pyproject.toml).
FOLDERS = {"lineage": ROOT / "lineage", "lineage.ingest": ROOT / "ingest",
           "lineage.cli": ROOT / "cli", "lineage.schemas": ROOT / "schemas"}
# Leaves import nothing of lineage, and anyone may use them.
LEAVES = {"lineage.errors", "lineage.version", "lineage.answer", "lineage.jsonout",
          "lineage.userfiles", "lineage.markup", "lineage.charts"}
BOTTOM = LEAVES | {"lineage.schemas"}  # the DDL package, below the whole core
TOP = {"lineage", "lineage.api"}  # the public face: may import every package of the core
MAY_IMPORT = re.compile(r"May import:\s*(.*?)\.\s*$", re.S | re.M)


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package, folder in FOLDERS.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join((package, *parts))
            if package == "lineage" and len(parts) and parts[0] in ("ingest", "cli", "schemas"):
                continue
            found[name] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """Every lineage module `name` imports, at module level or inside a function."""
    targets: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1]
                                + ([base] if base else []))
            candidates = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        targets.update(c for c in candidates if c in MODULES and c != name)
    return targets


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _package(module: str) -> str:
    """The unit a layer rule is about: lineage.<package>, or a top-level module."""
    parts = module.split(".")
    if parts[0] != "lineage" or len(parts) == 1:
        return module
    if parts[1] in ("ingest", "cli", "schemas"):
        return ".".join(parts[:2])
    if (ROOT / "lineage" / parts[1]).is_dir():
        return ".".join(parts[:2])
    return module


def _allowed(package: str) -> set[str] | None:
    """What a core package's docstring says it may import; None for the unrestricted."""
    if package in TOP or package in ("lineage.ingest", "lineage.cli"):
        return None
    if package in LEAVES:  # a leaf may raise the project's errors, nothing more
        return {"lineage.errors"}
    if package == "lineage.schemas":
        return {"lineage.errors"}
    path = MODULES[package]
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    match = MAY_IMPORT.search(docstring)
    assert match, f"{path}: the package docstring must say what it may import ('May import: ...')"
    return {name.strip() for name in match.group(1).replace("\n", " ").split(",")}


def test_every_core_package_says_its_job_and_what_it_may_import():
    packages = {_package(m) for m in MODULES if m.startswith("lineage.")} - TOP
    for package in sorted(packages):
        if package.startswith(("lineage.ingest", "lineage.cli")) or package in LEAVES:
            continue
        assert ast.get_docstring(ast.parse(MODULES[package].read_text())), package
        _allowed(package)


def test_imports_go_downwards_only():
    upward = []
    for module, targets in sorted(GRAPH.items()):
        package = _package(module)
        allowed = _allowed(package)
        for target in sorted(targets):
            other = _package(target)
            if other == package:
                continue
            if package.startswith("lineage.ingest") and other == "lineage.cli":
                upward.append(f"{module} -> {target} (ingest never imports the CLI)")
            elif allowed is not None and other not in allowed and other not in BOTTOM:
                upward.append(f"{module} -> {target} ({package} may import: "
                              f"{', '.join(sorted(allowed)) or 'nothing of lineage'})")
    assert not upward, "imports against the layering:\n" + "\n".join(upward)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_circles():
    assert _cycles(GRAPH) == []


def test_the_circle_check_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


@pytest.mark.parametrize("upward", ["lineage.api", "lineage.text.trained_on"])
def test_the_layer_check_names_an_upward_import(upward):
    allowed = _allowed("lineage.store")
    assert _package(upward) not in allowed


def test_the_architecture_page_names_every_package_and_leaf():
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    packages = {f"lineage.{p.parent.name}" for p in (ROOT / "lineage").glob("*/__init__.py")}
    missing = sorted(name for name in packages | LEAVES if f"`{name}`" not in page)
    assert not missing, f"docs/architecture.md does not describe {missing}"


def _home(module: str) -> str:
    """The package whose business a module's underscore names are: the innermost one
    (lineage.formats.pickle_scan for its modules, not the lineage.formats layer)."""
    path = MODULES.get(module)
    return module if path is not None and path.name == "__init__.py" else module.rpartition(".")[0]


def _private_imports(name: str, path: Path) -> list[str]:
    """Underscore names `name` imports from a module of another package, a subpackage
    included ("from lineage.x.y import _z"), and underscore methods it calls on a store."""
    own = _home(name)
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in MODULES:
            if _home(node.module) == own:
                continue
            found += [f"{node.module}.{a.name}" for a in node.names if _private(a.name)]
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            owner = ast.unparse(node.value)  # a store's own methods use `self._x`
            if owner.rpartition(".")[2].endswith("store"):
                found.append(f"{owner}.{node.attr}")
    return found


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_private_name_is_used_across_packages() -> None:
    """A leading underscore means "this package's business": another package that needs
    the name needs it public, with a docstring that says what it promises."""
    crossing = {name: hits for name, path in MODULES.items()
                if (hits := _private_imports(name, path))}
    assert crossing == {}


def test_the_private_name_check_finds_one(tmp_path: Path) -> None:
    module = tmp_path / "probe.py"
    module.write_text("from lineage.stream.query import _segments_of\n"
                      "def f(store):\n    store._catalog()\n", encoding="utf-8")
    assert _private_imports("lineage.runs.probe", module) == [
        "lineage.stream.query._segments_of", "store._catalog"]


def test_the_private_name_check_counts_a_subpackage_as_another_package(tmp_path: Path) -> None:
    module = tmp_path / "probe.py"
    module.write_text("from lineage.formats.pickle_scan.sniff import _zip_kind\n"
                      "from lineage.formats.pickle_scan.sniff import ZIP_MAGICS\n",
                      encoding="utf-8")
    assert _private_imports("lineage.formats.probe", module) == [
        "lineage.formats.pickle_scan.sniff._zip_kind"]
    assert _private_imports("lineage.formats.pickle_scan.probe", module) == []
