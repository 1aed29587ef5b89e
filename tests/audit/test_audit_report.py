"""`lineage audit report`: the coverage page of a real run's real ledger agrees with
`audit status` and `audit who`, escapes what auditors wrote, and renders in headless
Chromium, for the 8 intervals of the test run and for the 810 of a run like Open-1B."""

from __future__ import annotations

import json
import re
import subprocess
from collections import defaultdict
from datetime import timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lineage.api import Store
from lineage.audit import records as R
from lineage.audit.answers import AuditReport
from lineage.audit.ledger import add_records, iter_records
from lineage.audit.report import RULE, SYMBOLS, coverage_report, render

from ..conftest import Cli
from ..test_report import _chromium, _png_is_blank
from .audit_run import NOW, RUN, Chain, copy_store, ledger
from .test_audit_status import EXPECTED_INTERVALS

HOSTILE = "<script>alert(\"x\")</script> & 'o'<b>|*x*|\x1b[31m \u202egnp.exe"
HOSTILE_DEVICE = "\" onmouseover=\"alert(1)\" x=\"<img src=x onerror=alert(2)>"



@pytest.fixture
def audited(base: Path, tmp_path: Path) -> Store:
    store = copy_store(base, tmp_path / "store")
    add_records(store, ledger(Chain.of(store)), source="test")
    return store


@pytest.fixture
def hostile(audited: Store) -> Store:
    """The ledger plus a replay and a claim by an auditor whose name and machine are
    markup, quotes and a terminal escape."""
    chain = Chain.of(audited)
    replay = chain.published(24, who="x")
    replay["auditor"] = R.auditor(HOSTILE)
    replay["machine"] = {**replay["machine"], "backend": "cuda", "device": HOSTILE_DEVICE}
    claim = chain.claim(28, 31, who="x", made=NOW - timedelta(hours=1))
    claim["auditor"] = R.auditor(HOSTILE)
    add_records(audited, [replay, claim], source="test")
    return audited


def _visible(name: str) -> str:
    """The name as the page writes it: a terminal escape and a bidi override spelled out."""
    return name.replace("\x1b", "\\x1b").replace("\u202e", "\\u202e")


def _all_intervals(status: dict[str, Any]) -> list[str]:
    listed = {row["interval"]: row["status"] for row in status["per_interval"]}
    return [listed.get(k, "untouched") for k in range(-(-status["steps"] // status["interval"]))]


def _machines_of(store: Store) -> list[dict[str, Any]]:
    """The machines, added up from the records themselves."""
    rows: dict[tuple[str, str, int], dict[str, Any]] = defaultdict(
        lambda: {"replays": 0, "seconds": 0.0, "swapped": 0})
    for record in iter_records(store, RUN, kind="attestation"):
        m = record["machine"]
        row = rows[(m["backend"], m["device"], m["memory_bytes"])]
        row["replays"] += 1
        row["seconds"] += record["duration_s"]
        row["swapped"] += m["swapped"]
    return [{"backend": b, "device": d, "memory_bytes": mem, "replays": r["replays"],
             "replay_hours": round(r["seconds"] / 3600, 3), "swapped": r["swapped"]}
            for (b, d, mem), r in sorted(rows.items())]


# -- JSON and Markdown agree with audit status ----------------------------------------


def test_json_is_audit_status_who_and_the_machines(audited: Store) -> None:
    cli = Cli(audited.root)
    data = json.loads(cli("audit", "report", RUN, "--format", "json").stdout)
    assert data["status"] == cli.json("audit", "status", RUN)
    assert data["participants"] == cli.json("audit", "who", RUN)["participants"]
    assert data["machines"] == _machines_of(audited) == [
        {"backend": "cpu", "device": "x86_64", "memory_bytes": 8 << 30, "replays": 16,
         "replay_hours": 8.0, "swapped": 2}]
    assert data["rule"] == RULE and "takes as given, not re-derives" in RULE
    assert data["chain_head"] == data["status"]["chain_head"] == Chain.of(audited).head
    # the typed answer prints exactly what the command printed, and reads back
    answer = coverage_report(audited, RUN, now=NOW)
    assert _all_intervals(answer.to_dict()["status"]) == EXPECTED_INTERVALS
    assert render(answer, "json") == answer.to_json() + "\n"
    assert AuditReport.from_dict(json.loads(answer.to_json())) == answer.to_dict()
    assert answer.at == "2026-12-01T12:00:00Z"


def _md_table(md: str, header: str) -> list[list[str]]:
    """The body rows of the Markdown table whose header line starts with `header`."""
    lines = md.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]])
    return rows


def test_markdown_holds_what_audit_status_says(audited: Store) -> None:
    cli = Cli(audited.root)
    md = cli("audit", "report", RUN, "--format", "md").stdout
    status, who = cli.json("audit", "status", RUN), cli.json("audit", "who", RUN)
    counts = {row[0].split(" ", 1)[1]: int(row[1]) for row in _md_table(md, "| status |")}
    assert counts == status["intervals"]
    by_symbol = {symbol: name for name, symbol in SYMBOLS.items()}
    grid = [by_symbol[cell] for row in _md_table(md, "| intervals |") for cell in row[1:]]
    assert grid == _all_intervals(status)
    touched = _md_table(md, "| interval |")
    assert [(int(k), state, v) for k, _, state, v in touched] == [
        (p["interval"], p["status"], f"{p['verified']} of {p['last_step'] - p['first_step'] + 1}")
        for p in status["per_interval"]]
    relays = [line.split(". ", 1)[1] for line in md.splitlines() if re.match(r"\d+\. step", line)]
    assert relays == [" → ".join(f"step {link['step']} by {link['auditor']}" for link in chain)
                      for chain in status["relays"]]
    assert relays[0] == "step 0 by ann → step 1 by bob → step 2 by cat → step 3 by dan"
    people = _md_table(md, "| name |")
    assert [row[0] for row in people] == [p["name"] for p in who["participants"]]
    assert [[int(n) for n in row[2:6]] + [float(row[6])] for row in people] == [
        [p["attestations"], p["steps"], p["claims"], p["checkpoints"], p["replay_hours"]]
        for p in who["participants"]]
    # a `_` inside a word is never emphasis: the shared rule (lineage.markup) leaves it
    assert _md_table(md, "| backend |") == [["cpu", "x86_64", "8.0 GiB", "16", "8", "2"]]
    assert f"(re-run with more memory): {', '.join(map(str, status['inconclusive']))}." in md
    assert ", ".join(map(str, status["next_unclaimed"])) in md and RULE in md


# -- what auditors wrote is text, never markup --------------------------------------------


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.attributes: set[str] = set()
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attributes.update(name for name, _ in attrs)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_auditor_names_and_machines_are_escaped(hostile: Store, tmp_path: Path) -> None:
    cli = Cli(hostile.root)
    page = tmp_path / "report.html"
    summary = cli("audit", "report", RUN, "--format", "html", "-o", str(page))
    assert summary.stdout.count("\n") == 1 and summary.stdout.startswith(f"wrote {page} (html)")
    text = page.read_text(encoding="utf-8")
    assert "\x1b" not in text and "\u202e" not in text
    assert "<script" not in text and "<img" not in text
    parsed = _Tags()
    parsed.feed(text)
    assert parsed.tags <= {"html", "head", "meta", "title", "style", "body", "h1", "h2", "p",
                           "code", "ul", "ol", "li", "b", "div", "span", "table", "tr", "th",
                           "td", "br", "footer"}
    assert not {a for a in parsed.attributes if a.startswith("on")}
    shown = "".join(parsed.text)
    name = _visible(HOSTILE)
    assert shown.count(name) == 1 and HOSTILE_DEVICE in shown  # as text, in full
    assert "default-src 'none'" in text  # and no script would run anyway
    md = cli("audit", "report", RUN, "--format", "md").stdout
    assert not re.search(r"(?<!\\)[<>&]", md) and "\x1b" not in md  # every one escaped
    assert "\\<script\\>" in md
    row = next(r for r in _md_table(md, "| name |") if "script" in r[0])
    assert len(row) == 8  # the name's pipes did not split the table row


def test_markdown_escapes_what_markdown_acts_on_and_leaves_plain_punctuation(
        hostile: Store) -> None:
    """The one Markdown rule every report shares (lineage.markup): `.`, `-`, `(`, `[` and
    `"` mean nothing inside a line and stay as they are (this report used to escape them
    too), nor does a backslash before a letter; `<`, `|`, `*` and `&` are escaped and the
    bidi override is spelled out."""
    md = render(coverage_report(hostile, RUN, now=NOW), "md")
    row = next(r for r in _md_table(md, "| name |") if "script" in r[0])
    assert row[0] == ('\\<script\\>alert("x")\\</script\\> \\& \'o\'\\<b\\>\\|\\*x\\*\\|'
                      '\\x1b[31m \\u202egnp.exe')


def _timeless(text: str) -> str:
    """The report without the moment it was made at (its `at`), which two runs differ in."""
    return re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "AT", text)


def test_output_file_and_errors(audited: Store, tmp_path: Path) -> None:
    cli = Cli(audited.root)
    for fmt in ("md", "json"):
        out = tmp_path / f"report.{fmt}"
        line = cli("audit", "report", RUN, "--format", fmt, "-o", str(out)).stdout
        assert line.startswith(f"wrote {out} ({fmt}): {RUN}, 1 confirmed, 3 provisional")
        again = cli("audit", "report", RUN, "--format", fmt).stdout
        assert _timeless(out.read_text()) == _timeless(again)  # made a moment apart
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == [
        "report.json", "report.md"]  # no temporary file left behind
    bad = cli("audit", "report", RUN, "--format", "pdf", code=2)
    assert bad.stderr == "error: --format must be html, md or json, not 'pdf'\n"
    missing = cli("audit", "report", RUN, "-o", str(tmp_path / "no" / "r.md"), code=2)
    assert missing.stderr.startswith(f"error: {tmp_path / 'no' / 'r.md'}: cannot write")


# -- 810 intervals ------------------------------------------------------------------------


def _open_1b() -> AuditReport:
    """A status shaped like Open-1B's ledger three days after release: 80,957 steps in 810
    intervals, a few touched, with two every status so each colour shows."""
    touched = {1: "provisional", 121: "provisional", 5: "claimed", 6: "claimed",
               300: "confirmed", 301: "confirmed", 400: "disputed", 401: "disputed",
               809: "mismatch", 700: "mismatch"}
    steps, every = 80_957, 100
    per_interval = [{"interval": k, "first_step": k * every,
                     "last_step": min((k + 1) * every, steps) - 1, "status": state,
                     "verified": every if state == "confirmed" else 1}
                    for k, state in sorted(touched.items())]
    counts = {name: list(touched.values()).count(name) for name in SYMBOLS}
    counts["untouched"] = 810 - len(touched)
    status = {"run": "open-1b", "chain_head": "blake3:" + "ab" * 32, "interval": every,
              "steps": steps, "intervals": counts, "steps_verified": 200, "participants": 10,
              "replay_hours": 67.9, "longest_contiguous": 200, "relays": [],
              "inconclusive": [], "chain": {"verdict": "ok", "first_broken_step": None,
                                            "reason": None, "attestations_past_break": 0,
                                            "reduction": None},
              "next_unclaimed": list(range(1, 11)),
              "per_interval": per_interval, "spec": R.SPEC}
    return AuditReport.from_dict({
        "run": "open-1b", "chain_head": status["chain_head"], "at": "2026-12-01T12:00:00Z",
        "status": status, "participants": [], "machines": [], "rule": RULE,
        "lineage": "test", "spec": R.SPEC})


def test_810_intervals_make_a_compact_grid() -> None:
    report = _open_1b()
    page = render(report, "html")
    cells = re.findall(r'data-interval="(\d+)" data-status="(\w+)"', page)
    assert [int(k) for k, _ in cells] == list(range(810))
    assert [s for _, s in cells] == _all_intervals(report.to_dict()["status"])
    assert page.count('class="row"') == 17  # 50 intervals a row
    assert len(page.encode()) < 250_000
    md = render(report, "md")
    assert len(_md_table(md, "| intervals |")) == 41 and md.count("| ✗ ") + md.count(" ✗ |") >= 2


# -- headless Chromium ------------------------------------------------------------------------

_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
          "--disable-component-update", "--disable-sync", "--no-first-run"]


def _chromium_run(page: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([_chromium(), *_FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
                           *args, page.as_uri()], check=True, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.slow
def test_html_report_renders_in_headless_chromium(hostile: Store, tmp_path: Path) -> None:
    report = coverage_report(hostile, RUN)
    page = tmp_path / "report.html"
    page.write_text(render(report, "html"), encoding="utf-8")
    shot = tmp_path / "shot.png"
    _chromium_run(page, tmp_path, f"--screenshot={shot}", "--window-size=1100,1400")
    assert shot.stat().st_size > 5000 and not _png_is_blank(shot.read_bytes())
    dom = _chromium_run(page, tmp_path, "--dump-dom").stdout
    cells = re.findall(r'data-interval="(\d+)" data-status="(\w+)"', dom)
    assert [s for _, s in cells] == _all_intervals(report.to_dict()["status"])
    assert len(cells) == 8
    names = [p.name for p in report.participants]
    assert names == sorted(names) and len(names) == 8
    for name in names:
        escaped = _visible(name).replace("&", "&amp;").replace("<", "&lt;")
        assert f"<td>{escaped.replace('>', '&gt;')}</td>" in dom
    assert "<script" not in dom and RULE in dom
    assert "step 0 by <b>ann</b> → step 1 by <b>bob</b>" in dom


@pytest.mark.slow
def test_810_interval_grid_renders_at_a_sane_size(tmp_path: Path) -> None:
    import matplotlib.image

    page = tmp_path / "open-1b.html"
    page.write_text(render(_open_1b(), "html"), encoding="utf-8")
    shot = tmp_path / "shot.png"
    _chromium_run(page, tmp_path, f"--screenshot={shot}", "--window-size=1100,1200",
                  "--hide-scrollbars")
    pixels = np.asarray(matplotlib.image.imread(shot))[:, :, :3]
    untouched = np.all(np.abs(pixels - 0xE4 / 255) < 0.01, axis=2)  # the grey of untouched
    # 800 cells of 14 x 14 px, rounded (the legend's swatch adds one more), in the window,
    # in a block 50 cells wide and 17 rows high, 2 px apart
    assert 800 * 170 <= untouched.sum() <= 802 * 14 * 14  # corners are anti-aliased
    xs = np.flatnonzero(untouched.sum(axis=0) >= 100)  # the grid's columns of cells
    ys = np.flatnonzero(untouched.sum(axis=1) >= 100)  # and its rows
    assert 49 * 16 < xs.max() - xs.min() + 1 <= 50 * 16 and xs.max() < 1100
    assert 16 * 16 < ys.max() - ys.min() + 1 <= 17 * 16


def test_the_spec_states_the_rule_the_page_prints() -> None:
    page = (Path(__file__).parents[2] / "docs" / "audit-spec.md").read_text(encoding="utf-8")
    quoted = page.split("<!-- audit-report-rule -->\n", 1)[1].split("\n\n", 1)[0]
    assert " ".join(line.removeprefix("> ") for line in quoted.splitlines()) == RULE
