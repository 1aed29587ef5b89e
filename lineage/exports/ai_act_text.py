"""The AI Act summary as Markdown and as a self-contained HTML page.

Both are made from the summary (lineage.exports.ai_act), row by row in the template's
order, so the two say the same thing. A row's value is text and code pieces, never
markup: each format writes them with `lineage.markup` (text escaped, names and hashes as
code), so a value from the store is only ever an escaped value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lineage.exports.answers import AiActSummary
from lineage.markup import html_text, md_code, md_table, md_text


@dataclass(frozen=True)
class Code:
    """A name or a hash, shown as code."""

    value: str


Piece = str | Code
Value = Piece | tuple[Piece, ...]
Row = tuple[str, Value]
Table = tuple[list[str], list[list[str]]]
Section = tuple[str, list[Row | Table]]

INTRO = ("Drafted by ", Code("lineage export ai-act-summary"),
         " from the records of a lineage store, on the template {title} ({issuer}, version "
         "of {version}), {legal_basis}. Every number is the store's; every field marked "
         "\"to be completed by the provider\" is one the store does not record.")


def sections(s: AiActSummary) -> list[Section]:
    g, d, p, subj = s.general_information, s.data_sources, s.data_processing, s.subject
    size, web = g.text_size, d.scraped
    drawn: list[Row | Table] = [
        ("Run", _code(subj.run)), ("Stream", _code(subj.stream)),
        ("Stream spec hash", _code(subj.stream_spec_hash)), ("Corpus", _code(subj.corpus)),
        ("Manifest hash", _code(subj.manifest_hash))]
    general: list[Row | Table] = [
        ("Provider", g.provider), ("Model name", g.model_name),
        ("Model dependencies", g.model_dependencies),
        ("Date placed on the Union market", g.placed_on_market),
        ("Modalities", ", ".join(g.modalities)),
        ("Text size (template range)", size.range),
        ("Text size (recorded)", (f"{size.tokens} tokens (counted by ", Code(size.tokenizer),
                                  f"), {size.bytes} bytes, {size.documents} documents")),
        ("Tokens the run's stream orders", _num(size.stream_tokens)),
        ("Types of content", g.types_of_content), ("Knowledge cut-off", g.knowledge_cutoff)]
    sources: list[Row | Table] = [
        (["Source", "Documents", "Tokens", "Bytes", "Share of tokens", "Licences", "Kind"],
         [[x.source, str(x.documents), str(x.tokens), str(x.bytes), f"{x.share:.6f}",
           ", ".join(x.licenses) or "none recorded", x.kind] for x in d.recorded_sources]),
        ("2.1 Publicly available datasets", d.publicly_available_datasets),
        ("2.2 Private non-publicly available datasets", d.private_datasets),
        ("2.4 User data", d.user_data), ("2.5 Synthetic data", d.synthetic_data),
        ("2.6 Other sources", d.other_sources)]
    scraped: list[Row | Table] = [
        ("Crawlers used", web.crawlers), ("Period of collection", web.collection_period),
        ("Documents with a web URL", f"{web.web_documents} ({web.web_bytes} bytes, "
                                     f"{web.web_tokens} tokens) from {web.domains} "
                                     "domain names"),
        ("Documents without a web URL", f"{web.other_documents} ({web.other_bytes} "
                                        "bytes): file paths and other URIs name no domain"),
        ("Top domain names", web.top_domains_rule),
        (["Domain name", "Documents", "Bytes", "Tokens", "Share of web bytes"],
         [[x.domain, str(x.documents), str(x.bytes), str(x.tokens),
           f"{x.share_of_web_bytes:.6f}"] for x in web.top_domains])]
    processing: list[Row | Table] = [
        ("Respect of reservations of rights (opt-outs)", p.opt_out_compliance),
        ("Removal of illegal content", p.illegal_content_removal),
        ("Other information", p.other_information)]
    return [("Drawn from", drawn), ("1. General information", general),
            ("2. List of data sources", sources),
            ("2.3 Data crawled and scraped from online sources", scraped),
            ("3. Data processing aspects", processing)]


def _code(value: str | None) -> Piece:
    return Code(value) if value is not None else "none"


def _num(value: int | None) -> str:
    return str(value) if value is not None else "not applicable (drawn from a corpus)"


def _intro(s: AiActSummary) -> Value:
    return tuple(p.format(**s.template) if isinstance(p, str) else p for p in INTRO)


def summary_markdown(s: AiActSummary) -> str:
    lines = ["# Public summary of training content (draft)", "", _md_value(_intro(s))]
    for title, items in sections(s):
        lines += ["", f"## {title}", ""]
        for item in items:
            lines += _md_item(item)
    # A table's blank lines and a section's may meet: one blank line between blocks.
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).rstrip("\n") + "\n"


def _md_item(item: Row | Table) -> list[str]:
    if isinstance(item[0], str):
        return [f"- {md_text(item[0])}: {_md_value(item[1])}"]
    head, rows = item
    if not rows:
        return ["", "(none)", ""]
    return ["", *md_table(head, rows), ""]


def _md_value(value: Value) -> str:
    pieces = value if isinstance(value, tuple) else (value,)
    return "".join(md_code(p.value) if isinstance(p, Code) else md_text(p) for p in pieces)


def summary_html(s: AiActSummary) -> str:
    body = ["<h1>Public summary of training content (draft)</h1>",
            f"<p>{_html_value(_intro(s))}</p>"]
    for title, items in sections(s):
        body.append(f"<h2>{html_text(title)}</h2>")
        for item in items:
            body.append(_html_item(item))
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<title>Public summary of training content (draft)</title>\n<style>"
            "body{font-family:sans-serif;max-width:60em;margin:2em auto}"
            "table{border-collapse:collapse}td,th{border:1px solid #999;padding:.2em .5em}"
            "</style>\n</head>\n<body>\n" + "\n".join(body) + "\n</body>\n</html>\n")


def _html_item(item: Row | Table) -> str:
    if isinstance(item[0], str):
        return f"<p><b>{html_text(item[0])}</b>: {_html_value(item[1])}</p>"
    head, rows = item
    if not rows:
        return "<p>(none)</p>"
    cells = "".join(f"<th>{html_text(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{html_text(c)}</td>" for c in row) + "</tr>"
                   for row in rows)
    return f"<table><tr>{cells}</tr>{body}</table>"


def _html_value(value: Value) -> str:
    pieces = value if isinstance(value, tuple) else (value,)
    return "".join(f"<code>{html_text(p.value)}</code>" if isinstance(p, Code)
                   else html_text(p) for p in pieces)
