"""The AI Act summary as Markdown and as a self-contained HTML page.

Both are made from the summary's JSON object (lineage.exports.ai_act), row by row in the
template's order, so the two say the same thing; every value in the HTML is escaped.
"""

from __future__ import annotations

import html
import re
from typing import Any

Row = tuple[str, str]
Table = tuple[list[str], list[list[str]]]
Section = tuple[str, list[Row | Table]]

INTRO = ("Drafted by `lineage export ai-act-summary` from the records of a lineage store, "
         "on the template {title} ({issuer}, version of {version}), {legal_basis}. Every "
         "number is the store's; every field marked \"to be completed by the provider\" is "
         "one the store does not record.")


def sections(s: dict[str, Any]) -> list[Section]:
    g, d, p, subj = (s["general_information"], s["data_sources"], s["data_processing"],
                     s["subject"])
    size, web = g["text_size"], d["scraped"]
    drawn = [("Run", _code(subj["run"])), ("Stream", _code(subj["stream"])),
             ("Stream spec hash", _code(subj["stream_spec_hash"])),
             ("Corpus", _code(subj["corpus"])), ("Manifest hash", _code(subj["manifest_hash"]))]
    general: list[Row | Table] = [
        ("Provider", g["provider"]), ("Model name", g["model_name"]),
        ("Model dependencies", g["model_dependencies"]),
        ("Date placed on the Union market", g["placed_on_market"]),
        ("Modalities", ", ".join(g["modalities"])),
        ("Text size (template range)", size["range"]),
        ("Text size (recorded)", f"{size['tokens']} tokens (counted by `{size['tokenizer']}`), "
                                 f"{size['bytes']} bytes, {size['documents']} documents"),
        ("Tokens the run's stream orders", _num(size["stream_tokens"])),
        ("Types of content", g["types_of_content"]), ("Knowledge cut-off", g["knowledge_cutoff"])]
    sources: list[Row | Table] = [
        (["Source", "Documents", "Tokens", "Bytes", "Share of tokens", "Licences", "Kind"],
         [[x["source"], str(x["documents"]), str(x["tokens"]), str(x["bytes"]),
           f"{x['share']:.6f}", ", ".join(x["licenses"]) or "none recorded", x["kind"]]
          for x in d["recorded_sources"]]),
        ("2.1 Publicly available datasets", d["publicly_available_datasets"]),
        ("2.2 Private non-publicly available datasets", d["private_datasets"]),
        ("2.4 User data", d["user_data"]), ("2.5 Synthetic data", d["synthetic_data"]),
        ("2.6 Other sources", d["other_sources"])]
    scraped: list[Row | Table] = [
        ("Crawlers used", web["crawlers"]), ("Period of collection", web["collection_period"]),
        ("Documents with a web URL", f"{web['web_documents']} ({web['web_bytes']} bytes, "
                                     f"{web['web_tokens']} tokens) from {web['domains']} "
                                     "domain names"),
        ("Documents without a web URL", f"{web['other_documents']} ({web['other_bytes']} "
                                        "bytes): file paths and other URIs name no domain"),
        ("Top domain names", web["top_domains_rule"]),
        (["Domain name", "Documents", "Bytes", "Tokens", "Share of web bytes"],
         [[x["domain"], str(x["documents"]), str(x["bytes"]), str(x["tokens"]),
           f"{x['share_of_web_bytes']:.6f}"] for x in web["top_domains"]])]
    processing: list[Row | Table] = [
        ("Respect of reservations of rights (opt-outs)", p["opt_out_compliance"]),
        ("Removal of illegal content", p["illegal_content_removal"]),
        ("Other information", p["other_information"])]
    return [("Drawn from", list(drawn)), ("1. General information", general),
            ("2. List of data sources", sources),
            ("2.3 Data crawled and scraped from online sources", scraped),
            ("3. Data processing aspects", processing)]


def _code(value: str | None) -> str:
    return f"`{value}`" if value is not None else "none"


def _num(value: int | None) -> str:
    return str(value) if value is not None else "not applicable (drawn from a corpus)"


def summary_markdown(s: dict[str, Any]) -> str:
    lines = ["# Public summary of training content (draft)", "",
             INTRO.format(**s["template"])]
    for title, items in sections(s):
        lines += ["", f"## {title}", ""]
        for item in items:
            lines += _md_item(item)
    # A table's blank lines and a section's may meet: one blank line between blocks.
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).rstrip("\n") + "\n"


def _md_item(item: Row | Table) -> list[str]:
    if isinstance(item[0], str):
        return [f"- {item[0]}: {item[1]}"]
    head, rows = item
    if not rows:
        return ["", "(none)", ""]
    return (["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            + ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |"
               for row in rows] + [""])


def summary_html(s: dict[str, Any]) -> str:
    esc = html.escape
    body = ["<h1>Public summary of training content (draft)</h1>",
            f"<p>{_inline(INTRO.format(**s['template']))}</p>"]
    for title, items in sections(s):
        body.append(f"<h2>{esc(title)}</h2>")
        for item in items:
            body.append(_html_item(item))
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<title>Public summary of training content (draft)</title>\n<style>"
            "body{font-family:sans-serif;max-width:60em;margin:2em auto}"
            "table{border-collapse:collapse}td,th{border:1px solid #999;padding:.2em .5em}"
            "</style>\n</head>\n<body>\n" + "\n".join(body) + "\n</body>\n</html>\n")


def _html_item(item: Row | Table) -> str:
    if isinstance(item[0], str):
        return f"<p><b>{_inline(item[0])}</b>: {_inline(str(item[1]))}</p>"
    head, rows = item
    if not rows:
        return "<p>(none)</p>"
    cells = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
                   for row in rows)
    return f"<table><tr>{cells}</tr>{body}</table>"


def _inline(text: str) -> str:
    """Escape, then turn Markdown `code` spans into <code> (backticks are not escaped)."""
    parts = html.escape(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))
