"""`lineage export ai-act-summary` on real stores: the demo's corpus of examples/corpus
(file paths, no web URLs) with its stream `main` and a 200-step run `tiny` bound to it,
and a JSONL shard corpus whose records carry web URLs (the sonnets with real-looking
addresses on a dozen hosts, plus records from local files). Sizes, shares and the top
domains are compared with SQL over the store; the fields the store cannot know say so;
the md, json and html renderings are checked, and docs/exports.md's example is the demo
run's summary."""

from __future__ import annotations

import gzip
import html
import json
import math
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lineage.api import Store
from lineage.exports.ai_act import TO_COMPLETE, domain_of, size_range
from lineage.exports.ai_act_text import summary_html, summary_markdown
from lineage.exports.answers import AiActSummary
from lineage.ingest import ingest_corpus

from .conftest import EXAMPLES, REPO, Cli
from .demo_run import copy_demo_run

HOSTS = ["en.wikipedia.org", "www.gutenberg.org", "poetryfoundation.org", "archive.org",
         "news.example.com", "blog.example.net", "www.bbc.co.uk", "lit.example.org",
         "Docs.Python.org:443", "forum.example.de", "www.folger.edu", "quotes.example.io"]


def write_web_shard(path: Path) -> None:
    """The 154 sonnets, each given an https URL on one of HOSTS (round robin, so the sizes
    differ by host), and three records that came from local files."""
    with gzip.open(EXAMPLES / "shards" / "sonnets.jsonl.gz", "rt", encoding="utf-8") as f:
        sonnets = [json.loads(line) for line in f]
    records = [{"id": s["id"], "text": s["text"], "source": "web",
                "url": f"https://{HOSTS[i % len(HOSTS)]}/sonnets/{s['id']}?ref=1"}
               for i, s in enumerate(sonnets)]
    records += [{"id": f"local-{i}", "text": "Local text " * (i + 1), "source": "notes",
                 "url": url} for i, url in enumerate(["file:///srv/notes/a.txt",
                                                      "notes/b.txt", "ftp://mirror.org/c"])]
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


@pytest.fixture(scope="module")
def demo(demo_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Store:
    root = tmp_path_factory.mktemp("aiact") / "demo"
    store = copy_demo_run(demo_run, root)
    write_web_shard(root / "web.jsonl")
    ingest_corpus(store, [root / "web.jsonl"], corpus="web",
                  license=["web=CC-BY-SA-4.0", "notes=CC0-1.0"], fingerprints=False)
    return store


def summary(store: Store, **which: str) -> AiActSummary:
    answer = store.ai_act_summary(**which)
    assert isinstance(answer, AiActSummary)
    return answer


def test_run_summary_sizes_and_sources_are_the_stores(demo: Store) -> None:
    s = summary(demo, run="tiny")
    with demo.reader() as con:
        tokens, size, docs = con.execute("SELECT sum(n_tokens), sum(n_bytes), count(*) FROM "
                                         "documents WHERE corpus = 'example'").fetchone()
        per_source = con.execute("SELECT source, count(*), sum(n_tokens), sum(n_bytes) FROM "
                                 "documents WHERE corpus = 'example' GROUP BY source "
                                 "ORDER BY source").fetchall()
        stream_tokens = con.execute("SELECT tokens FROM streams WHERE name = 'main'").fetchone()
    size_facts = s.general_information.text_size
    assert (size_facts.tokens, size_facts.bytes, size_facts.documents) == (tokens, size, docs)
    assert size_facts.range == "less than 1 billion tokens"
    assert size_facts.stream_tokens == stream_tokens[0]
    assert s.general_information.modalities == ("text",)
    got = [(x.source, x.documents, x.tokens, x.bytes) for x in s.data_sources.recorded_sources]
    assert got == per_source
    for x in s.data_sources.recorded_sources:
        assert x.share == round(x.tokens / tokens, 6) and x.kind == TO_COMPLETE
    assert {x.source: x.licenses for x in s.data_sources.recorded_sources} == {
        "debian-copyright": ("NOASSERTION",), "python-stdlib": ("PSF-2.0",),
        "shakespeare": ("LicenseRef-PublicDomain",)}
    assert s.subject.run == "tiny" and s.subject.stream == "main"
    assert s.subject.manifest_hash == demo.corpus("example")["manifest_hash"]


def test_file_paths_name_no_domain(demo: Store) -> None:
    web = summary(demo, run="tiny").data_sources.scraped
    assert (web.web_documents, web.domains, web.top_domains) == (0, 0, ())
    assert web.other_documents == summary(demo, run="tiny").general_information.text_size.documents


def test_top_domains_are_the_top_tenth_by_bytes(demo: Store) -> None:
    web = summary(demo, corpus="web").data_sources.scraped
    with demo.reader() as con:
        rows = con.execute("SELECT lower(regexp_extract(uri, '^https?://([^/:?]+)', 1)) AS h, "
                           "count(*), sum(n_bytes), sum(n_tokens) FROM documents "
                           "WHERE corpus = 'web' AND uri LIKE 'http%' GROUP BY h "
                           "ORDER BY sum(n_bytes) DESC, h").fetchall()
        other = con.execute("SELECT count(*), sum(n_bytes) FROM documents WHERE corpus = 'web' "
                            "AND uri NOT LIKE 'http%'").fetchone()
    assert len(rows) == len(HOSTS) == web.domains
    web_bytes = sum(r[2] for r in rows)
    assert web.web_bytes == web_bytes and web.web_documents == 154
    expected = [(h, n, b, t, round(b / web_bytes, 6))
                for h, n, b, t in rows[:math.ceil(0.1 * len(rows))]]
    assert [(d.domain, d.documents, d.bytes, d.tokens, d.share_of_web_bytes)
            for d in web.top_domains] == expected
    assert len(web.top_domains) == 2  # 10% of 12 names, rounded up
    assert (web.other_documents, web.other_bytes) == other == (3, sum(
        len("Local text " * (i + 1)) for i in range(3)))


def test_every_field_the_store_cannot_know_is_left_to_the_provider(demo: Store) -> None:
    s = summary(demo, run="tiny")
    g, d, p = s.general_information, s.data_sources, s.data_processing
    unknown = [g.provider, g.model_name, g.model_dependencies, g.placed_on_market,
               g.types_of_content, g.knowledge_cutoff, d.publicly_available_datasets,
               d.private_datasets, d.user_data, d.synthetic_data, d.other_sources,
               d.scraped.crawlers, d.scraped.collection_period, p.opt_out_compliance,
               p.illegal_content_removal, p.other_information]
    assert unknown == [TO_COMPLETE] * len(unknown)
    text = summary_markdown(s)
    # each field once, each source's kind once, and the introduction that explains it
    assert text.count(TO_COMPLETE) == len(unknown) + len(d.recorded_sources) + 1
    assert s.template.version == "2025-07-24" and "53(1)(d)" in s.template.legal_basis


def test_the_same_store_gives_the_same_bytes(demo: Store, tmp_path: Path) -> None:
    cli = Cli(demo.root)
    for fmt in ("md", "json", "html"):
        first, second = tmp_path / f"a.{fmt}", tmp_path / f"b.{fmt}"
        cli("export", "ai-act-summary", "--run", "tiny", "--format", fmt, "-o", str(first))
        cli("export", "ai-act-summary", "--run", "tiny", "--format", fmt, "-o", str(second))
        assert first.read_bytes() == second.read_bytes()
        assert not re.search(r"\d{4}-\d\d-\d\dT\d\d", first.read_text(encoding="utf-8"))


def test_cli_formats(demo: Store) -> None:
    cli = Cli(demo.root)
    answer = summary(demo, corpus="web")
    printed = cli("export", "ai-act-summary", "--corpus", "web", "--format", "json")
    assert printed.stdout == answer.to_json() + "\n"
    assert AiActSummary.from_dict(json.loads(printed.stdout)) == answer
    assert Cli(demo.root).json("export", "ai-act-summary", "--corpus", "web") == answer
    md = cli("export", "ai-act-summary", "--corpus", "web")
    assert md.stdout == summary_markdown(answer)
    for top in answer.data_sources.scraped.top_domains:
        assert f"| {top.domain} | {top.documents} | {top.bytes} |" in md.stdout
    page = cli("export", "ai-act-summary", "--corpus", "web", "--format", "html").stdout
    assert page == summary_html(answer)
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page and "src=" not in page


def test_html_escapes_what_the_store_holds(demo: Store) -> None:
    data = summary(demo, corpus="web").to_dict()
    data["data_sources"]["recorded_sources"][0]["source"] = "<script>alert(1)</script>"
    page = summary_html(AiActSummary.from_dict(data))
    assert "<script>" not in page and html.escape("<script>alert(1)</script>") in page


@pytest.mark.parametrize("args", [
    ("--run", "nope"), ("--corpus", "nope"), (), ("--run", "tiny", "--corpus", "web"),
    ("--corpus", "web", "--format", "pdf")])
def test_cli_errors_exit_2(demo: Store, args: tuple[str, ...]) -> None:
    result = Cli(demo.root)("export", "ai-act-summary", *args, code=2)
    assert "Traceback" not in result.stderr and result.stderr.strip()


def test_docs_example_is_the_demo_runs_summary(demo: Store) -> None:
    page = (REPO / "docs" / "exports.md").read_text(encoding="utf-8")
    section = page.split("\n## AI Act summary of training content\n", 1)[1]
    example = section.split("\n````markdown\n", 1)[1].split("````\n", 1)[0]
    assert example == summary_markdown(summary(demo, run="tiny"))


@given(st.integers(min_value=0, max_value=10**15))
def test_size_range_is_the_templates(tokens: int) -> None:
    label = size_range(tokens)
    if tokens < 10**9:
        assert label == "less than 1 billion tokens"
    elif tokens < 10**13:
        assert label == "1 billion to 10 trillion tokens"
    else:
        assert label == "more than 10 trillion tokens"


@pytest.mark.parametrize(("uri", "domain"), [
    ("https://Docs.Python.org:443/3/x", "docs.python.org"), ("http://a.b/", "a.b"),
    ("file:///srv/a.txt", None), ("notes/b.txt", None), ("ftp://mirror.org/c", None),
    ("https://user:pw@host.example./p", "host.example"), ("", None), (None, None),
    ("https://[::1", None)])
def test_domain_of(uri: str | None, domain: str | None) -> None:
    assert domain_of(uri) == domain


def test_markdown_escapes_what_the_store_holds(demo: Store) -> None:
    """The one Markdown rule (lineage.markup): a source name's `|`, `<` and line feed
    stay in its cell as text (today's summary escaped only `|`, and a line feed broke the
    table), a provider's answer is text, and a tokenizer's name is code."""
    data = summary(demo, corpus="web").to_dict()
    data["data_sources"]["recorded_sources"][0]["source"] = "<b>web_x</b>|\nnext"
    data["general_information"]["provider"] = "- *Acme* `Labs`"
    data["general_information"]["text_size"]["tokenizer"] = "tok`en"
    text = summary_markdown(AiActSummary.from_dict(data))
    row = next(line for line in text.splitlines() if line.startswith("| \\<b"))
    assert row.startswith("| \\<b\\>web_x\\</b\\>\\|\\nnext | ")
    assert len(re.split(r"(?<!\\)\|", row)) == 9  # seven cells
    assert "- Provider: \\- \\*Acme\\* \\`Labs\\`" in text
    assert "(counted by ``tok`en``)" in text
    page = summary_html(AiActSummary.from_dict(data))
    assert "&lt;b&gt;web_x&lt;/b&gt;|\\nnext" in page and "<code>tok`en</code>" in page
