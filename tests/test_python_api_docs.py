"""docs/python-api.md runs: every ```python block, in order, in one namespace, in a fresh
folder holding a copy of examples/. A block that raises fails the test with its line in
the page and its first line."""

from __future__ import annotations

import re
import shutil
import traceback
from dataclasses import dataclass
from pathlib import Path

import pytest

from .conftest import EXAMPLES, REPO

PAGE = REPO / "docs" / "python-api.md"
FENCE = re.compile(r"^```(\S*)\s*$")


@dataclass(frozen=True)
class Block:
    line: int  # the page's line number of the block's first line of code
    code: str

    @property
    def first_line(self) -> str:
        return self.code.splitlines()[0] if self.code else ""


def python_blocks(text: str) -> list[Block]:
    """The page's ```python blocks, with where each starts."""
    blocks: list[Block] = []
    inside: str | None = None
    start, lines = 0, list[str]()
    for number, line in enumerate(text.splitlines(), start=1):
        fence = FENCE.match(line)
        if fence and inside is None:
            inside, start, lines = fence.group(1), number + 1, []
        elif fence and not fence.group(1):
            if inside == "python":
                blocks.append(Block(start, "\n".join(lines) + "\n"))
            inside = None
        elif inside is not None:
            lines.append(line)
    assert inside is None, f"a ``` block opened at line {start - 1} is never closed"
    return blocks


def run_blocks(blocks: list[Block], page: str) -> dict[str, object]:
    """Execute the blocks in order in one namespace; AssertionError naming the first block
    that raised (its line in the page and first line), with its traceback."""
    namespace: dict[str, object] = {"__name__": "python_api_docs"}
    for block in blocks:
        try:
            exec(compile(block.code, f"{page}:{block.line}", "exec"), namespace)
        except Exception as exc:
            detail = "".join(traceback.format_exception(exc)[-6:])
            raise AssertionError(
                f"{page}: the block at line {block.line} ({block.first_line!r}) raised "
                f"{type(exc).__name__}: {exc}\n{detail}") from exc
    return namespace


def test_every_python_block_of_the_page_runs_in_order(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = python_blocks(PAGE.read_text(encoding="utf-8"))
    shutil.copytree(EXAMPLES, tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    namespace = run_blocks(blocks, "docs/python-api.md")
    store = namespace["store"]
    assert store.root == Path("lineage-store")  # type: ignore[attr-defined]
    assert (tmp_path / "lineage-store" / "catalog.duckdb").is_file()
    assert (tmp_path / "unigram-run" / "steps.jsonl").is_file()


def test_the_first_block_builds_the_demo_corpus_and_stream() -> None:
    """What the page's other sections (and the branch sections appended to it) rely on."""
    first = python_blocks(PAGE.read_text(encoding="utf-8"))[0].code
    for wanted in ('lineage.init_store("lineage-store")',
                   'store = lineage.open("lineage-store")',
                   'ingest_corpus(store, ["examples/corpus"], corpus="example"',
                   '"shakespeare=LicenseRef-PublicDomain", "python-stdlib=PSF-2.0"',
                   '"debian-copyright=NOASSERTION"', 'name="main", seed=42',
                   'seq_len=1024, batch=4'):
        assert wanted in first, wanted


def test_a_block_that_raises_is_named_by_its_line_and_first_line() -> None:
    page = "\n".join(["# Page", "", "```python", "x = 1", "```", "", "```console",
                      "$ lineage init", "```", "```python", "assert x == 1",
                      "y = x / 0", "```"])
    blocks = python_blocks(page)
    assert [(b.line, b.first_line) for b in blocks] == [(4, "x = 1"), (11, "assert x == 1")]
    with pytest.raises(AssertionError, match=r"page\.md: the block at line 11 "
                       r"\('assert x == 1'\) raised ZeroDivisionError") as exc:
        run_blocks(blocks, "page.md")
    assert "page.md:11" in str(exc.value) or 'File "page.md"' in str(exc.value)


def test_the_public_names_are_the_documented_ones():
    """`lineage.__all__` is the page's "Public names" list, and every name resolves."""
    import lineage

    section = PAGE.read_text(encoding="utf-8").split("## Public names", 1)[1]
    documented = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", section))
    assert documented == set(lineage.__all__)
    for name in lineage.__all__:
        assert getattr(lineage, name) is not None, name
