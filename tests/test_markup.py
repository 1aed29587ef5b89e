"""lineage.markup, the one way text is written into HTML and Markdown: what an escaped
value can never do (break a table, open a tag, carry a control or bidi character), read
back through real parsers (Python's html.parser and the GFM table rule of splitting a row
on its unescaped pipes), and the rule's cases one by one."""

from __future__ import annotations

import html
import re
import sys
import unicodedata
from html.parser import HTMLParser

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lineage.charts import bars
from lineage.markup import Markup, escape, html_text, md_code, md_table, md_text, printable

TEXT = st.text(st.characters(exclude_categories=["Cs"]))
# Characters the rule is about, so that the examples hit them often.
HOSTILE = st.text(st.sampled_from(list("|\\`*_[]<>&#~-+=.)1 \n\r\t\"'")
                                  + ["\x1b", "\u202e", "\u200b", "\u2028", "\x85", "\ufeff",
                                     "\U000e0041"]))
ANY = st.one_of(TEXT, HOSTILE)


def _invisible(ch: str) -> bool:
    return ch != "\t" and unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp")


def _cells(line: str) -> list[str]:
    """A table row split as GFM does: on the pipes no backslash escapes."""
    assert line.startswith("| ") and line.endswith(" |")
    return re.split(r"(?<!\\)\|", line)[1:-1]


@given(st.lists(st.lists(ANY, min_size=3, max_size=3), max_size=5), st.lists(ANY, min_size=3,
                                                                              max_size=3))
def test_a_table_keeps_its_rows_and_columns_whatever_its_cells_hold(
        rows: list[list[str]], header: list[str]) -> None:
    lines = md_table(header, rows, align="-rc")
    assert len(lines) == 2 + len(rows)
    assert all("\n" not in line and "\r" not in line for line in lines)
    assert lines[1] == "|---|---:|:---:|"
    for line in [lines[0], *lines[2:]]:
        assert len(_cells(line)) == 3


@given(ANY)
def test_markdown_text_has_no_raw_control_or_bidi_character(text: str) -> None:
    for written in (md_text(text), md_code(text), printable(text), str(html_text(text))):
        assert not any(_invisible(ch) for ch in written), ascii(written)


def _unescaped(written: str) -> str:
    """What CommonMark makes of backslash escapes: a backslash before ASCII punctuation
    stands for that character, any other backslash is itself."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", written)


@given(ANY)
def test_every_character_markdown_acts_on_is_escaped(text: str) -> None:
    written = md_text(text)
    bare = re.sub(r"\\[!-/:-@\[-`{-~]", "\0", written)  # each escaped pair set aside
    assert not set(bare) & set("`*<>&|~#")
    assert not re.search(r"\][(\[]", bare)  # no link
    assert not re.search(r"(?<![^\W_])_|_(?![^\W_])", bare)  # a `_` only inside a word
    assert not bare.endswith("\\")  # no hard line break
    # and it opens no block: no list mark, heading underline, break or link definition
    assert not re.match(r"([-+=])(\s|$|\1)|\d{1,9}[.)](\s|$)|\[", written)


@given(ANY)
def test_markdown_text_reads_back_as_the_printable_text(text: str) -> None:
    """Undoing Markdown's backslash escapes gives the text with its invisibles spelled
    out: the escaping adds nothing and drops nothing."""
    assert _unescaped(md_text(text)) == printable(text)


@given(ANY)
def test_html_escaping_leaves_no_tag_no_raw_ampersand_and_no_quote(text: str) -> None:
    for written in (str(escape(text)), str(html_text(text))):
        assert "<" not in written and ">" not in written
        assert '"' not in written and "'" not in written
        assert not re.search(r"&(?!(amp|lt|gt|quot|#x27);)", written)
    assert html.unescape(str(escape(text))) == text  # escape alone keeps every character
    assert html.unescape(str(html_text(text))) == printable(text)


@given(ANY)
def test_a_code_span_holds_the_text_whatever_its_backticks(text: str) -> None:
    span = md_code(text)
    fence = re.match("`+", span)
    assert fence is not None and span.endswith(fence.group())
    inner = span[len(fence.group()):-len(fence.group())]
    assert fence.group() not in inner  # no run of backticks as long as the fence inside
    shown = printable(text)
    assert inner in (shown, f" {shown} ")


def test_the_invisible_set_is_every_control_format_and_separator_character() -> None:
    missed = [hex(cp) for cp in range(sys.maxunicode + 1)
              if 0xD800 > cp or cp > 0xDFFF
              if _invisible(chr(cp)) and printable(chr(cp)) == chr(cp)]
    assert missed == []


@pytest.mark.parametrize(("text", "written"), [
    ("en.wikipedia.org", "en.wikipedia.org"),  # the punctuation a name holds stays
    ("CC-BY-SA-4.0", "CC-BY-SA-4.0"),
    ("fits (about 36.00 GiB)!", "fits (about 36.00 GiB)!"),
    ("/tmp/m[b]/object_array.npz", "/tmp/m[b]/object_array.npz"),
    ("-1", "-1"), ("1.5", "1.5"), ("x86_64", "x86_64"),
    ("__init__.py", "\\_\\_init\\_\\_.py"), ("_x_", "\\_x\\_"),
    ("a|b", "a\\|b"), ("a*b*c", "a\\*b\\*c"),
    ("<b>&amp;</b>", "\\<b\\>\\&amp;\\</b\\>"),
    ("~~gone~~ `x` [l](u) #1", "\\~\\~gone\\~\\~ \\`x\\` [l\\](u) \\#1"),
    ("[ref]: /url", "\\[ref]: /url"),
    ("- item", "\\- item"), ("+", "\\+"), ("---", "\\---"), ("===", "\\==="),
    ("1. first", "1\\. first"), ("2) second", "2\\) second"),
    ("C:\\dir", "C:\\dir"), ("a\\*", "a\\\\\\*"), ("end\\", "end\\\\"),
    ("two\nlines", "two\\nlines"),
    ("\x1b[31m\u202egnp.exe", "\\x1b[31m\\u202egnp.exe"),
    ("tag\U000e0041", "tag\\U000e0041"),
    ("a\tb", "a\tb"),
])
def test_the_markdown_rule(text: str, written: str) -> None:
    assert md_text(text) == written


def test_a_code_span_widens_its_fence_and_spells_out_a_line_feed() -> None:
    assert md_code("plain") == "`plain`"
    assert md_code("a`b") == "``a`b``"
    assert md_code("``x") == "``` ``x ```"
    assert md_code("a\nb") == "`a\\nb`"


def test_markup_is_not_escaped_twice_and_text_added_to_it_is() -> None:
    fragment = Markup("<b>") + "<i \"'>" + Markup("</b>")
    assert fragment == "<b>&lt;i &quot;&#x27;&gt;</b>" and isinstance(fragment, Markup)
    assert escape(fragment) == fragment
    assert Markup("<p>{}</p>").format("'&") == "<p>&#x27;&amp;</p>"
    assert Markup(", ").join(["<a>", Markup("<b>")]) == "&lt;a&gt;, <b>"


class _Texts(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


@given(st.lists(st.tuples(ANY, st.integers(0, 10**12)), min_size=1, max_size=6))
def test_chart_labels_are_text(items: list[tuple[str, int]]) -> None:
    svg = bars([(label, value, f"{value:,}") for label, value in items], title="sizes",
               label_width=10_000)
    parsed = _Texts()
    parsed.feed(svg)
    assert set(parsed.tags) == {"svg", "title", "text", "g", "rect"}
    shown = "".join(parsed.text)
    for label, _ in items:
        assert printable(label) in shown
    assert not any(_invisible(ch) for ch in svg)
