"""Output shows data as it is: no markup, emoji code or highlighting in a value is ever
interpreted, and characters a terminal would act on are shown escaped, in tables, lines,
errors and info messages, in process and through a real pipe."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from safetensors.numpy import save_file

from lineage.answer import json_text
from lineage.api import Store, init_store, open_store
from lineage.cli import output
from lineage.cli.main import app
from lineage.ingest import ingest_corpus
from lineage.ingest.steps import ingest_steps
from lineage.stream.build import build_stream

from .conftest import AppRunner
from .test_chain import WORLD, write_log

# Names a file, a shard id, a source or an experiment may carry, each a trap for a
# renderer that interprets: rich markup, emoji codes, links, ANSI escapes, line breaks.
DIR_SOURCE = "sub:x:[b]"
DIR_FILES = ("notes:x:[b]draft.txt", "[link=x.test]click[bold red]alarm:smile:.txt")
SHARD_IDS = ("a[/]b:x:", "[link=https://e.test/]l[/link]", "[bold red]x[/bold red]:smile:")
SHARD_SOURCE = "src:x:[b][/]"
EXP_NAME = "e:x:[b]\x1b[31m\nred[/]"
EXP_NAME_SHOWN = "e:x:[b]\\x1b[31m\\nred[/]"
ESCAPE = "\x1b"
# What an interpreting renderer would have printed instead of the characters.
RENDERED = ("❌", "😄", "\x1b", "\r")


@pytest.fixture(scope="module")
def weird(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A store whose doc_ids, sources, run and experiment carry every trap above."""
    root = tmp_path_factory.mktemp("weird")
    init_store(root / "store")
    store = open_store(root / "store")
    folder = root / "files" / DIR_SOURCE
    folder.mkdir(parents=True)
    for n, name in enumerate(DIR_FILES):
        (folder / name).write_text(f"file {n} has some words of its own\n")
    ingest_corpus(store, [root / "files"], corpus="files")
    shard = root / "shard.jsonl"
    shard.write_text("".join(json.dumps({"id": i, "text": f"text number {n} " * 6}) + "\n"
                             for n, i in enumerate(SHARD_IDS)))
    ingest_corpus(store, [shard], corpus="shard", source=SHARD_SOURCE)
    build_stream(store, corpus="shard", name="s", seed=1, seq_len=16, batch=2)
    log = write_log(store, root / "steps.jsonl", range(5), clip_at={1})
    ingest_steps(store, log, run="r", stream="s", world_size=WORLD)
    weights = root / "w:x:[b]"
    weights.mkdir()
    save_file({"bias": np.zeros(4, np.float32)}, str(weights / "model.safetensors"))
    _invoke(store, "exp", "run", "--weights", str(weights), "--revision", "rev[b]",
            "--name", EXP_NAME, "--", sys.executable, "-c", "pass")
    query = root / "q:x:[b]\x1b[31m\nq.txt"
    query.write_text("text number 0 " * 6, encoding="utf-8")
    return {"store": store, "root": root, "weights": weights, "query": query}


def _invoke(store: Store, *args: str, code: int = 0) -> Any:
    result = AppRunner().invoke(app, ["--store", str(store.root), *args])
    assert result.exit_code == code, (args, result.exit_code, result.stdout, result.stderr)
    return result


def _in_process(store: Store, *args: str, code: int = 0) -> tuple[str, str]:
    """stdout and stderr of the command in process, with nothing a terminal acts on."""
    inner = _invoke(store, *args, code=code)
    for text in (inner.stdout, inner.stderr):
        assert not any(mark in text for mark in RENDERED), (args, text)
        assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e]", text)
    return inner.stdout, inner.stderr


def _both(store: Store, *args: str, code: int = 0) -> tuple[str, str]:
    """stdout and stderr of the command in process and as a real process with pipes, which
    must agree character for character."""
    out, err = _in_process(store, *args, code=code)
    outer = subprocess.run([sys.executable, "-m", "lineage.cli", "--store", str(store.root),
                            *args], capture_output=True, env={**os.environ}, timeout=120)
    assert outer.returncode == code, outer.stderr
    # A report names the second it was written: the two runs may straddle one.
    stamp = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
    assert stamp.sub("T", outer.stdout.decode("utf-8")) == stamp.sub("T", out), args
    assert outer.stderr.decode("utf-8") == err, args
    return out, err


def _rows(table: str) -> list[list[str]]:
    """The cells of every body row of a printed table."""
    return [[cell.strip() for cell in line.split("│")] for line in table.splitlines()
            if "│" in line]


def _json(store: Store, *args: str, code: int = 0) -> Any:
    return json.loads(_invoke(store, *args, "--json", code=code).stdout)


# -- the one function every value goes through ------------------------------------------


@pytest.mark.parametrize(("value", "expected"), [
    ("notes:x:[b]draft.txt", "notes:x:[b]draft.txt"),
    ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),
    ("a\nb\tc\rd", "a\\nb\\tc\\rd"),
    ("\x00\x7f\x85\x9b", "\\x00\\x7f\\x85\\x9b"),
    ("right\u202eleft\u2066\u2028", "right\\u202eleft\\u2066\\u2028"),
    (os.fsdecode(b"bad\xffname"), "bad\\udcffname"),
    ("back\\slash é ✓ 日本", "back\\slash é ✓ 日本"),
    (1234567, "1,234,567"), (0.123456, "0.1235"), (None, ""), (True, "True"),
    (["a[b]", "c"], "a[b], c"),
])
def test_shown_escapes_what_a_terminal_would_act_on(value: Any, expected: str) -> None:
    assert output.shown(value) == expected


SAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
TRAPS = st.sampled_from(["[b]", "[/]", ":x:", ":smile:", "[link=http://e.test]", "[/link]",
                         "\x1b[31m", "\n", "\t", "\\", "[", "]", "\x85", "\u202e", "\udcff",
                         "http://e.test", "1.5", "True", "None", "'q'"])
VALUES = st.lists(st.one_of(TRAPS, st.text(max_size=5)), max_size=8).map("".join)


@given(VALUES)
def test_shown_leaves_nothing_a_terminal_acts_on_and_changes_nothing_else(value: str) -> None:
    shown = output.shown(value)
    assert not SAFE.search(shown)
    if not SAFE.search(value):
        assert shown == value


@given(st.dictionaries(VALUES, VALUES, max_size=3))
def test_json_is_exact_and_always_writable_as_utf8(value: dict[str, str]) -> None:
    text = json_text(value)
    text.encode("utf-8")  # a lone surrogate is written as its JSON escape
    assert json.loads(text) == value


def _printed(write: Any, *args: Any, **kwargs: Any) -> tuple[str, str]:
    """What one output function wrote to stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        write(*args, **kwargs)
    return out.getvalue(), err.getvalue()


@given(VALUES)
@example("\U0001f3fb")  # zero columns wide alone; the label of an error line is not
def test_a_line_prints_exactly_as_shown(value: str) -> None:
    assert _printed(output.emit_lines, [value]) == (output.shown(value) + "\n", "")
    assert _printed(output.error, value) == ("", f"error: {output.shown(value)}\n")
    assert _printed(output.info, value) == ("", f"{output.shown(value)}\n")


def test_a_value_of_only_zero_width_characters_is_escaped() -> None:
    """docs/cli.md: it would look empty; a combining mark after a letter stays as it is."""
    assert output.shown("\u200b") == "\\u200b"
    assert output.shown("\u07eb\u2060") == "\\u07eb\\u2060"
    assert output.shown("e\u0301") == "e\u0301"
    assert output.shown("\u200bx") == "\u200bx"
    assert output.shown("\U0001f3fb") == "\\U0001f3fb"  # past U+FFFF: eight digits


@given(VALUES.filter(lambda v: v.strip() == v != "" and not {"│", "┃"} & set(v)))
@example("\u07eb")  # a lone combining mark: zero columns wide, so a table dropped it
@example("\u200b\u2060")  # zero-width characters alone
def test_a_table_cell_and_title_print_exactly_as_shown(value: str) -> None:
    printed, _ = _printed(output.emit_table, ("n", value), [[1000, value]], title=value)
    title, header, _, row = printed.splitlines()
    assert title == output.shown(value)
    assert [c.strip() for c in header.split("┃")] == ["n", output.shown(value)]
    assert [c.strip() for c in row.split("│")] == ["1,000", output.shown(value)]


# -- every command that prints a name ---------------------------------------------------


def test_sql_shows_cells_headers_and_control_characters_as_they_are(weird: dict) -> None:
    store = weird["store"]
    out, _ = _both(store, "sql", "SELECT doc_id, source FROM documents ORDER BY doc_id")
    records = _json(store, "sql", "SELECT doc_id, source FROM documents ORDER BY doc_id")
    assert _rows(out) == [[r["doc_id"], r["source"]] for r in records]
    assert {r["doc_id"] for r in records} == {*SHARD_IDS, *(f"{DIR_SOURCE}/{f}"
                                                           for f in DIR_FILES)}
    query = ("SELECT chr(27) || '[31mred' || chr(10) || 'x' || chr(9) || '[/]' || chr(133) "
             "|| chr(8238) || chr(127) AS \"h:x:[b]\u001b\"")
    out, _ = _both(store, "sql", query)
    header, _, row = out.splitlines()
    assert header.rstrip() == "h:x:[b]\\x1b"
    assert row.rstrip() == "\\x1b[31mred\\nx\\t[/]\\x85\\u202e\\x7f"
    assert _json(store, "sql", query) == [{"h:x:[b]\x1b": "\x1b[31mred\nx\t[/]\x85\u202e\x7f"}]


def test_corpus_show_and_list(weird: dict) -> None:
    store = weird["store"]
    for corpus, source in (("files", DIR_SOURCE), ("shard", SHARD_SOURCE)):
        out, _ = _both(store, "corpus", "show", corpus)
        assert f"corpus      {corpus}" in out.splitlines()
        assert [row[0] for row in _rows(out)] == [source]
    out, _ = _both(store, "corpus", "list")
    assert [row[0] for row in _rows(out)] == ["files", "shard"]


def test_docs_and_trace_tables(weird: dict) -> None:
    store = weird["store"]
    seen: set[str] = set()
    for step in range(_json(store, "stream", "show", "s")["steps"]):
        answer = _json(store, "docs", "--step", str(step))
        ids = {d["doc_id"] for d in answer["documents"]}
        # Every step in process; a step that shows an id for the first time through a real
        # pipe too, so every id goes through one.
        show = _both if ids - seen else _in_process
        out, _ = show(store, "docs", "--step", str(step))
        assert [row[2:4] for row in _rows(out)] == [[d["doc_id"], d["source"]]
                                                    for d in answer["documents"]]
        seen |= ids
    assert seen == set(SHARD_IDS)
    out, _ = _both(store, "trace", "--run", "r", "--step", "1")
    answer = _json(store, "trace", "--run", "r", "--step", "1")
    assert out.splitlines()[0] == "step 1: loss 2.9900, grad norm 1.5000 (clipped)"
    assert [row[:2] for row in _rows(out)] == [[d["doc_id"], d["source"]]
                                               for d in answer["steps"][0]["documents"]]


def test_trained_on_lines(weird: dict) -> None:
    store, query = weird["store"], weird["query"]
    out, _ = _both(store, "trained-on", str(query))
    answer = _json(store, "trained-on", str(query))
    [result] = answer["results"]
    assert result["file"] == str(query)  # exact in JSON
    lines = out.splitlines()
    label = str(query).replace("\x1b", "\\x1b").replace("\n", "\\n")
    assert lines[0] == f"{label}: {result['verdict']} (blake3 {result['content_hash']})"
    match = result["matches"][0]
    assert lines[1].startswith(f"  shard/{SHARD_IDS[0]} ({SHARD_SOURCE}): stream s: steps ")
    assert match["doc_id"] == SHARD_IDS[0]


def test_trained_on_escapes_a_name_of_only_zero_width_characters(tmp_path: Path) -> None:
    """Inside a line, such a doc_id or source would print as nothing at all."""
    init_store(tmp_path / "store")
    store = open_store(tmp_path / "store")
    shard = tmp_path / "zw.jsonl"
    shard.write_text(json.dumps({"id": "\u200b\u2060", "text": "zero width named",
                                 "source": "\u200b"}) + "\n", encoding="utf-8")
    ingest_corpus(store, [shard], corpus="zw")
    (tmp_path / "q.txt").write_text("zero width named", encoding="utf-8")
    out, _ = _both(store, "trained-on", str(tmp_path / "q.txt"), code=1)
    assert out.splitlines()[1] == "  zw/\\u200b\\u2060 (\\u200b): in no stream"
    match = _json(store, "trained-on", str(tmp_path / "q.txt"), code=1)["results"][0]
    assert (match["matches"][0]["doc_id"], match["matches"][0]["source"]) == (
        "\u200b\u2060", "\u200b")  # exact in JSON


def test_stream_and_run_show_and_list(weird: dict) -> None:
    store = weird["store"]
    out, _ = _both(store, "stream", "show", "s")
    assert "corpus              shard" in out.splitlines()
    assert _rows(_both(store, "stream", "list")[0])[0][:2] == ["s", "shard"]
    out, _ = _both(store, "run", "show", "r")
    assert out.splitlines()[0] == f"run         r (stream s, world size {WORLD})"
    assert _rows(_both(store, "run", "list")[0])[0][:2] == ["r", "s"]


def test_experiment_list_and_show(weird: dict) -> None:
    store = weird["store"]
    records = _json(store, "exp", "list")
    assert [r["name"] for r in records] == [EXP_NAME]
    out, _ = _both(store, "exp", "list")
    [row] = _rows(out)
    assert row[1:5] == [EXP_NAME_SHOWN, "1", "passed", "rev[b]"]
    out, _ = _both(store, "exp", "show", records[0]["id"])
    lines = out.splitlines()
    assert any(line.startswith("revision    rev[b]  ") for line in lines)
    assert any(line.startswith(f"weights     {weird['weights']} (1 files, blake3:")
               for line in lines)
    out, _ = _both(store, "exp", "show", EXP_NAME)  # by name, newline and escape included
    assert out.splitlines()[0].startswith(f"experiment  {records[0]['id']} (passed")


def test_verify_and_inspect_name_a_file_as_it_is(weird: dict, tmp_path: Path) -> None:
    folder = tmp_path / "m[b]"
    folder.mkdir()
    save_file({"w": np.zeros(2, np.float32)}, str(folder / "good:x:.safetensors"))
    (folder / "bad:x:[b]\x1b[2J\n.safetensors").write_bytes(b"\x10\x00")
    out, _ = _both(weird["store"], "verify", str(folder), code=1)
    assert "  bad:x:[b]\\x1b[2J\\n.safetensors: short-prefix: " in out  # relative to the folder
    report = _json(weird["store"], "verify", str(folder), code=1)
    assert report["folder"] == str(folder)
    assert "bad:x:[b]\x1b[2J\n.safetensors" in {e["file"] for e in report["structure"]["errors"]}
    out, _ = _both(weird["store"], "inspect", str(folder))
    assert f"# Model report: {folder}" in out.splitlines()
    assert "bad:x:[b]\\x1b[2J\\n.safetensors" in out


def test_errors_and_info_name_things_as_they_are(weird: dict, tmp_path: Path) -> None:
    store = weird["store"]
    _, err = _both(store, "corpus", "show", "no[b]pe:x:", code=2)
    assert err == "error: no corpus named 'no[b]pe:x:' (known: files, shard)\n"
    corpus = tmp_path / "c[b]"
    corpus.mkdir()
    (corpus / "a\x1b[31mred").write_text("text")
    _, err = _both(store, "ingest", "corpus", str(corpus), "--corpus", "c", code=2)
    assert err == f"error: {corpus}/a\\x1b[31mred: doc_id contains a control character\n"
    missing = tmp_path / "gone:x:[b]\x1b]8;;e.test\x1b\\\n"  # an OSC 8 link, a newline
    _, err = _both(store, "trained-on", str(missing), code=2)
    shown = f"{tmp_path}/gone:x:[b]\\x1b]8;;e.test\\x1b\\\\n"
    assert err == (f"error: {shown}: no such file or folder (trained-on takes files and "
                   "folders)\n")
    sums = tmp_path / "out[b]\x1b.sums"
    _, err = _both(store, "sums", str(weird["weights"]), "-o", str(sums))
    assert err == f"wrote {tmp_path}/out[b]\\x1b.sums\n"


def test_an_undecodable_file_name_is_shown_escaped(weird: dict, tmp_path: Path) -> None:
    raw = os.fsencode(tmp_path) + b"/q\xff[b].txt"
    with open(raw, "wb") as handle:
        handle.write(b"text number 1 " * 6)
    out, _ = _both(weird["store"], "trained-on", os.fsdecode(raw))
    assert out.splitlines()[0].startswith(f"{tmp_path}/q\\udcff[b].txt: ")
    answer = subprocess.run([sys.executable, "-m", "lineage.cli", "--store",
                             str(weird["store"].root), "trained-on", raw, "--json"],
                            capture_output=True, timeout=120)
    assert json.loads(answer.stdout)["results"][0]["file"] == os.fsdecode(raw)
