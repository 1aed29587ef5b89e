"""The README's command transcripts are real output: run them and compare.

When this fails because the output changed on purpose (a new schema version, a changed
chain or message), regenerate the transcripts with one command and commit README.md:

    make readme        # .venv/bin/python examples/readme.py --write
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[1] / "examples" / "readme.py"


def _readme_module():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("lineage_readme_transcripts", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def test_the_transcripts_are_found_with_their_commands_and_output() -> None:
    readme = _readme_module()
    lines = readme.README.read_text(encoding="utf-8").splitlines()
    steps = readme.parse(lines)
    shown = [s for s in steps if s.shown]
    assert shown[0].command == "lineage init"
    assert any(s.command.startswith("python examples/tiny_run.py") and not s.shown
               for s in steps)
    (python,) = [s for s in steps if s.must_succeed]
    assert "store = lineage.open(\"lineage-store\")" in python.command
    sql = next(s for s in shown if s.command.startswith("lineage sql"))
    assert sql.command.endswith("--json") and sql.command_lines == 2
    for step in shown:  # output ends before the next command or the block's end
        assert lines[step.output_end] == "```" or lines[step.output_end].startswith("$ ")


def test_durations_alone_do_not_count_as_a_change() -> None:
    readme = _readme_module()
    lines = ["```console", "$ lineage stream build", "built: 782 steps, 0.2 s", "```"]
    steps = readme.parse(lines)
    assert readme.rewritten(lines, steps, [["built: 782 steps, 1.7 s"]]) == lines
    assert readme.rewritten(lines, steps, [["built: 781 steps, 0.2 s"]])[2] == \
        "built: 781 steps, 0.2 s"


@pytest.mark.slow
def test_the_readme_shows_what_the_commands_print_now() -> None:
    diff = _readme_module().stale_lines()
    assert not diff, "README.md is stale; run `make readme`:\n" + "\n".join(diff)


def test_a_python_example_that_fails_is_reported() -> None:
    readme = _readme_module()
    steps = readme.parse(["```python", "import sys", "sys.exit(3)", "```"])
    with pytest.raises(RuntimeError, match="README example failed \\(exit 3\\)"):
        readme.run(steps)
