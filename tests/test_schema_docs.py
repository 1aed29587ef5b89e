"""docs/schemas.md is generated from the schema (python -m lineage.schemas.docgen): it
cannot name a column that does not exist or miss one that does."""

from __future__ import annotations

from pathlib import Path

import pytest

from lineage.schemas import BULK_TABLES, catalog_ddl, docgen

PAGE = Path(__file__).parents[1] / "docs" / "schemas.md"


def test_the_committed_page_is_the_generated_one() -> None:
    assert PAGE.read_text(encoding="utf-8") == docgen.render(), \
        "docs/schemas.md is stale: python -m lineage.schemas.docgen > docs/schemas.md"


def test_every_table_and_column_is_on_the_page_and_no_other() -> None:
    tables = [*docgen.catalog_tables(), *docgen.bulk_tables()]
    assert {t.name for t in docgen.bulk_tables()} == set(BULK_TABLES)
    assert all(c.note for t in tables for c in t.columns)
    assert docgen.stale_notes() == []
    page = PAGE.read_text(encoding="utf-8")
    headings = [line.split("`")[1] for line in page.splitlines() if line.startswith("### ")]
    assert headings == [t.name for t in docgen.bulk_tables()] + [
        t.name for t in docgen.catalog_tables()]


def test_a_column_without_a_description_stops_the_generator(
        monkeypatch: pytest.MonkeyPatch) -> None:
    ddl = catalog_ddl().replace("    name           VARCHAR PRIMARY KEY,\n",
                                "    name           VARCHAR PRIMARY KEY,\n"
                                "    colour         VARCHAR,\n", 1)
    monkeypatch.setattr(docgen, "catalog_ddl", lambda: ddl)
    with pytest.raises(ValueError, match="corpora.colour: no description"):
        docgen.render()


def test_a_note_for_a_column_that_is_gone_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    notes = {**docgen.NOTES, "corpora": {**docgen.NOTES["corpora"], "colour": "a hue"}}
    monkeypatch.setattr(docgen, "NOTES", notes)
    assert docgen.stale_notes() == ["corpora.colour"]


def test_sql_comments_are_read_per_table_and_column() -> None:
    found = docgen.sql_comments(
        "-- A table.\n-- Two lines.\nCREATE TABLE t (\n"
        "    a  VARCHAR NOT NULL,  -- first\n"
        "                          -- and more\n"
        "    b  BIGINT,\n    PRIMARY KEY (a)\n);\n")
    assert found == {"t": ("A table. Two lines.", {"a": "first and more", "b": ""})}
