"""Exit codes hold for every command: naming something that does not exist is an error
(exit 2, one line on stderr, nothing on stdout), never a "no" (exit 1).

The table below lists the missing-object cases of each command; `iter_commands` walks the
real command tree, so a command added without a row here fails the test until it has one.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import typer

from lineage.cli.docgen import iter_commands
from lineage.cli.main import app

from .conftest import AppRunner, Cli, run_lineage

# {STORE}: an existing empty store; {NOSTORE}: a store path that does not exist;
# {MISSING}: a path that does not exist; {FILE}: a regular file; {DIR}: an empty folder.
S, NS = ("--store", "{STORE}"), ("--store", "{NOSTORE}")
MISSING_OBJECTS: dict[str, list[tuple[str, ...]]] = {
    **{f"attest {kind}": [(*S, "attest", kind, "nope", "--key", "{MISSING}", "-o",
                           "{DIR}/a.json"),
                          (*NS, "attest", kind, "nope", "--key", "{MISSING}", "-o",
                           "{DIR}/a.json")]
       for kind in ("corpus", "stream", "run", "audit", "exp")},
    "attest checkpoint": [(*S, "attest", "checkpoint", "nope", "--step", "1", "--key",
                           "{MISSING}", "-o", "{DIR}/a.sig"),
                          (*NS, "attest", "checkpoint", "nope", "--step", "1", "--key",
                           "{MISSING}", "-o", "{DIR}/a.sig")],
    "attest verify": [(*S, "attest", "verify", "{MISSING}", "--key", "{FILE}"),
                      (*NS, "attest", "verify", "{FILE}", "--key", "{FILE}")],
    "audit replay": [(*S, "audit", "replay", "nope", "--step", "1", "--replayer", "json:loads"),
                     (*NS, "audit", "replay", "nope", "--step", "1", "--replayer",
                      "json:loads", "--from", "{MISSING}")],
    "audit export": [(*S, "audit", "export", "nope", "-o", "{DIR}/out.zip"),
                     (*NS, "audit", "export", "nope", "-o", "{DIR}/out.zip")],
    "audit import": [(*S, "audit", "import", "{MISSING}"),
                     (*S, "audit", "import", "{DIR}", "--allowed-signers", "{MISSING}"),
                     (*NS, "audit", "import", "{MISSING}")],
    "audit sign": [("audit", "sign", "{MISSING}", "--key", "{FILE}"),
                   ("audit", "sign", "{DIR}", "--key", "{MISSING}")],
    "audit claim": [(*S, "audit", "claim", "nope", "--steps", "0-1", "--auditor", "a"),
                    (*NS, "audit", "claim", "nope", "--steps", "0-1", "--auditor", "a")],
    "audit record": [(*S, "audit", "record", "{MISSING}")],
    "audit show": [(*S, "audit", "show", "nope", "--step", "0"),
                   (*NS, "audit", "show", "nope", "--step", "0")],
    "audit status": [(*S, "audit", "status", "nope"), (*NS, "audit", "status", "nope")],
    "audit report": [(*S, "audit", "report", "nope"),
                     (*NS, "audit", "report", "nope", "--format", "html")],
    "audit who": [(*S, "audit", "who", "nope"), (*NS, "audit", "who", "nope")],
    "audit requirements": [(*S, "audit", "requirements", "nope"),
                           (*NS, "audit", "requirements", "nope")],
    "chain verify": [(*S, "chain", "verify", "nope"), (*NS, "chain", "verify", "nope")],
    "corpus list": [(*NS, "corpus", "list")],
    "corpus show": [(*S, "corpus", "show", "nope"), (*NS, "corpus", "show", "nope")],
    "corpus duplicates": [(*S, "corpus", "duplicates", "nope"),
                          (*NS, "corpus", "duplicates", "nope")],
    "corpus status": [(*S, "corpus", "status", "nope", "{DIR}"),
                      (*NS, "corpus", "status", "nope", "{DIR}"),
                      (*S, "corpus", "status", "--manifest", "{MISSING}", "{DIR}"),
                      (*S, "corpus", "status", "--manifest", "{FILE}", "{MISSING}")],
    "docs": [(*S, "docs", "--step", "0", "--stream", "nope"),
             (*S, "docs", "--step", "0", "--stream", "nope", "--json"),
             (*NS, "docs", "--step", "0", "--json")],
    "exp compare-outputs": [("exp", "compare-outputs", "{MISSING}", "{MISSING}", "--input",
                             "{FILE}")],
    "exp diff": [(*S, "exp", "diff", "nope", "nada")],
    "exp export": [(*S, "exp", "export", "nope", "-o", "{DIR}/out.bundle")],
    "exp import": [(*S, "exp", "import", "{MISSING}")],
    "exp list": [(*NS, "exp", "list")],
    "exp logs": [(*S, "exp", "logs", "nope"), (*NS, "exp", "logs", "nope")],
    "exp providers": [("exp", "providers", "{MISSING}", "--request", "CPUExecutionProvider")],
    "exp ort-sweep": [("exp", "ort-sweep", "{MISSING}", "--input", "{FILE}")],
    "exp run": [(*S, "exp", "run", "--weights", "{MISSING}", "--revision", "r", "--", "true"),
                (*NS, "exp", "run", "--weights", "{DIR}", "--revision", "r", "--", "true")],
    "exp show": [(*S, "exp", "show", "nope"), (*NS, "exp", "show", "nope")],
    "export ai-act-summary": [(*S, "export", "ai-act-summary", "--run", "nope"),
                              (*NS, "export", "ai-act-summary", "--corpus", "nope")],
    "export croissant": [(*S, "export", "croissant", "--corpus", "nope"),
                         (*NS, "export", "croissant", "--corpus", "nope", "--json")],
    "export model-card": [(*S, "export", "model-card", "--run", "nope", "--checkpoint", "0"),
                          (*NS, "export", "model-card", "--run", "nope", "--checkpoint", "0")],
    "export openlineage": [(*S, "export", "openlineage", "--run", "nope"),
                           (*NS, "export", "openlineage", "--exp", "nope")],
    "ingest openlineage": [(*S, "ingest", "openlineage", "{MISSING}"),
                           (*NS, "ingest", "openlineage", "{FILE}")],
    "ingest checkpoint": [(*S, "ingest", "checkpoint", "{MISSING}", "--run", "r", "--step", "0")],
    "ingest corpus": [(*S, "ingest", "corpus", "{MISSING}", "--corpus", "c"),
                      (*NS, "ingest", "corpus", "{DIR}", "--corpus", "c")],
    "ingest order megatron": [
        (*S, "ingest", "order", "megatron", "--data", "{MISSING}", "--docs", "{FILE}",
         "--cache", "{MISSING}", "--corpus", "c", "--stream", "s", "--global-batch-size", "8",
         "--micro-batch-size", "1"),
        (*NS, "ingest", "order", "megatron", "--data", "{DIR}", "--docs", "{FILE}",
         "--cache", "{DIR}", "--corpus", "c", "--stream", "s", "--global-batch-size", "8",
         "--micro-batch-size", "1")],
    "ingest steps": [(*S, "ingest", "steps", "{MISSING}", "--run", "r", "--stream", "s",
                      "--world-size", "1")],
    "ingest order olmo-core": [
        (*S, "ingest", "order", "olmo-core", "{MISSING}", "--corpus", "c", "--stream", "s",
         "--sequence-length", "8", "--global-batch-size", "16", "--eos-token-id", "0"),
        (*NS, "ingest", "order", "olmo-core", "{FILE}", "--corpus", "c", "--stream", "s",
         "--sequence-length", "8", "--global-batch-size", "16", "--eos-token-id", "0")],
    "ingest order open-transformers": [
        (*S, "ingest", "order", "open-transformers", "{FILE}", "--manifest", "{MISSING}",
         "--shards", "{DIR}", "--corpus", "c", "--stream", "s"),
        (*NS, "ingest", "order", "open-transformers", "{MISSING}", "--manifest", "{FILE}",
         "--shards", "{DIR}", "--corpus", "c", "--stream", "s")],
    "ingest windows": [(*S, "ingest", "windows", "{MISSING}", "--stream", "s", "--corpus", "c",
                        "--seq-len", "8", "--batch", "1"),
                       (*S, "ingest", "windows", "{FILE}", "--stream", "s", "--corpus", "nope",
                        "--seq-len", "8", "--batch", "1")],
    "init": [("--store", "{FILE}/store", "init")],
    "inspect": [("inspect", "{MISSING}")],
    "report": [("report", "{MISSING}")],
    "run checkpoints": [(*S, "run", "checkpoints", "nope"),
                        (*NS, "run", "checkpoints", "nope")],
    "run list": [(*NS, "run", "list")],
    "corpus remove": [(*NS, "corpus", "remove", "nope")],
    "stream remove": [(*NS, "stream", "remove", "nope")],
    "run remove": [(*NS, "run", "remove", "nope", "--cascade")],
    "exp remove": [(*NS, "exp", "remove", "nope")],
    "run show": [(*S, "run", "show", "nope"), (*NS, "run", "show", "nope")],
    "serve": [(*NS, "serve"), (*S, "serve", "--token-file", "{MISSING}")],
    "sql": [(*NS, "sql", "SELECT 1"), (*S, "sql", "SELECT * FROM nope")],
    "store gc": [(*NS, "store", "gc")],
    "store migrate": [(*NS, "store", "migrate")],
    "store repair": [(*NS, "store", "repair")],
    "store verify": [(*NS, "store", "verify")],
    "stream build": [(*S, "stream", "build", "--corpus", "nope", "--name", "s", "--seed", "1",
                      "--seq-len", "8", "--batch", "1")],
    "stream list": [(*NS, "stream", "list")],
    "stream show": [(*S, "stream", "show", "nope"), (*NS, "stream", "show", "nope")],
    "sums": [("sums", "{MISSING}")],  # a file is a model file: listed
    "trace": [(*S, "trace", "--run", "nope", "--clipped"),
              (*NS, "trace", "--run", "nope", "--step", "0")],
    "trained-on": [(*S, "trained-on", "{MISSING}"), (*S, "trained-on", "{MISSING}", "--json"),
                   (*S, "trained-on", "--text", "words", "--run", "nope"),
                   (*S, "trained-on", "--text", "words", "--stream", "nope"),
                   (*NS, "trained-on", "{FILE}", "--json")],
    "verify": [("verify", "{MISSING}"), ("verify", "--cache", "{MISSING}"),
               ("verify", "{DIR}", "--sums", "{MISSING}")],
}


def test_every_command_has_missing_object_cases() -> None:
    commands = {" ".join(path) for path, command in
                iter_commands(typer.main.get_command(app)) if not hasattr(command, "commands")}
    assert commands == set(MISSING_OBJECTS), (
        f"without cases: {sorted(commands - set(MISSING_OBJECTS))}; "
        f"not commands: {sorted(set(MISSING_OBJECTS) - commands)}")


@pytest.fixture
def places(cli: Cli, tmp_path: Path) -> dict[str, str]:
    file = tmp_path / "a-file.txt"
    file.write_text("some words\n")
    folder = tmp_path / "empty-folder"
    folder.mkdir()
    return {"{STORE}": str(cli.store_path), "{NOSTORE}": str(tmp_path / "no-store"),
            "{MISSING}": str(tmp_path / "no-such-thing"), "{FILE}": str(file),
            "{DIR}": str(folder)}


def _fill(args: tuple[str, ...], places: dict[str, str]) -> list[str]:
    filled = []
    for arg in args:
        for key, value in places.items():
            arg = arg.replace(key, value)
        filled.append(arg)
    return filled


@pytest.mark.parametrize(("name", "index"), [(name, i) for name, cases in
                                             MISSING_OBJECTS.items() for i in range(len(cases))])
def test_a_missing_object_is_an_error_of_one_line(
    places: dict[str, str], name: str, index: int
) -> None:
    args = _fill(MISSING_OBJECTS[name][index], places)
    result = AppRunner().invoke(app, args)
    assert result.exit_code == 2, (args, result.exit_code, result.stdout, result.stderr)
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert not (Path(places["{NOSTORE}"])).exists(), "an error created the store"
    named = [places[k] for k in ("{MISSING}", "{NOSTORE}", "{FILE}") if k in " ".join(
        MISSING_OBJECTS[name][index])] + ["nope"]
    assert any(thing in result.stderr for thing in named), result.stderr  # says what is missing


@pytest.mark.parametrize("args", [
    ("docs", "--step", "0", "--stream", "nope", "--json"),
    ("trained-on", "{MISSING}", "--json"),
    ("trained-on", "{FILE}", "--run", "nope", "--json"),
    ("verify", "{MISSING}"),
])
def test_the_console_script_agrees(places: dict[str, str], args: tuple[str, ...]) -> None:
    """The lean path (docs/trained-on --json) and the full one give the same error."""
    result = run_lineage("--store", places["{STORE}"], *_fill(args, places))
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert result.stdout == ""


def test_a_no_is_still_exit_1(cli: Cli, example_shards: Path, tmp_path: Path) -> None:
    """Asked about things that exist, a lookup that finds nothing answers no (exit 1)."""
    cli("ingest", "corpus", str(example_shards / "sonnets.jsonl.gz"), "--corpus", "c")
    cli("stream", "build", "--corpus", "c", "--name", "s", "--seed", "1", "--seq-len", "64",
        "--batch", "2")
    stranger = tmp_path / "stranger.txt"
    stranger.write_text("nothing like any sonnet at all\n")
    answer = cli.json("trained-on", str(stranger), code=1)
    assert [r["verdict"] for r in answer["results"]] == ["not-found"]


@pytest.mark.parametrize(("args", "line"), [
    (("docs", "--step", "x"), "error: Invalid value for '--step': 'x' is not a valid integer "
     "range. (see `lineage docs -h`)"),
    (("docs", "--step", "1", "--rank", "\x1b[31m"), "error: Invalid value for '--rank': "
     "'\\x1b[31m' is not a valid integer range. (see `lineage docs -h`)"),
    (("--bogus",), "error: No such option '--bogus'. (see `lineage -h`)"),
    (("no[b]pe:x:",), "error: No such command 'no[b]pe:x:'. (see `lineage -h`)"),
    (("corpus", "show"), "error: Missing argument 'NAME'. (see `lineage corpus show -h`)"),
])
def test_a_usage_error_is_one_line_too(args: tuple[str, ...], line: str) -> None:
    result = AppRunner().invoke(app, list(args))
    assert (result.exit_code, result.stderr, result.stdout) == (2, line + "\n", "")


def test_a_group_without_a_command_still_shows_its_help() -> None:
    result = AppRunner().invoke(app, ["corpus"])
    assert "list" in result.stdout and "show" in result.stdout and "error" not in result.stderr
