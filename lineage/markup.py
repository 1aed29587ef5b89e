r"""Text into HTML and Markdown: one escaping rule for each, so every report, export and
page writes what a store or an artifact holds the same way.

A leaf module (it imports nothing of lineage): any layer may write HTML or Markdown with it.

HTML: `escape` is markupsafe's (`&`, `<`, `>`, `"` and `'` become references; the
quotes spelled `&quot;` and `&#x27;`, as the pages have always written them) and `Markup`
is markupsafe's, HTML already safe to send (adding text to it escapes the text the same
way). `html_text` escapes a value after `printable`, for the reports, whose reader must
see every character of a name; a page that gives text back to its user (a text box) uses
`escape` alone.

Markdown (`md_text`), the rule for a value from a store or an artifact:
- control characters and invisible ones (Unicode categories Cc, Cf, Zl and Zp: terminal
  escapes, bidi overrides, zero-width characters) are written as `\xNN`, `\uNNNN` or
  `\UNNNNNNNN`, and a line feed as `\n` (`printable`), so a value never breaks a line, a
  list item or a table row, and reads the same in a terminal, a file and a browser; a tab
  stays;
- the characters that mean something anywhere in a line are backslash-escaped:
  `` ` * < > & | ~ # ``; so are a `_` that could open or close emphasis (one not between
  two letters or digits: `snake_case` stays), a `]` that a `(` or `[` follows (a link),
  and a backslash that would escape what follows it (before ASCII punctuation or at the
  end: `\x1b` stays);
- a value that would open a block at the start of a line (`-`, `+` or `=` followed by a
  space, the end or another of itself; digits then `.` or `)` and a space or the end; a
  `[`, a link definition) has that mark escaped too.
Other punctuation (`.`, `-`, `(`, `!`, `[`...) means nothing in the middle of a line and
is left as it is, so names, paths, hashes and domain names read as they do; undoing
Markdown's backslash escapes gives back the `printable` text.

`md_code` writes a value as a code span and `md_table` writes a table with every cell
through `md_text`.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Sequence
from typing import Any

import markupsafe

__all__ = ["Markup", "escape", "html_text", "md_code", "md_table", "md_text", "printable"]

# Unicode's control (Cc), format (Cf: bidi marks and overrides, zero-width characters, the
# soft hyphen, tags), line separator (Zl) and paragraph separator (Zp) characters; the tab
# is left out, it only moves the text along.
_INVISIBLE = re.compile(
    "[\x00-\x08\x0a-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2"
    "\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb\U000110bd"
    "\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0001\U000e0020-\U000e007f]")
_MD_INLINE = re.compile(r"_+|\\|\](?=[(\[])|[`*<>&|~#]")
_MD_BLOCK_START = re.compile(r"^([-+=])(?=\s|$|\1)|^(\d{1,9})([.)])(?=\s|$)|^(\[)")
_ASCII_PUNCTUATION = frozenset(string.punctuation)
_ALIGN = {"-": "---", "l": ":---", "r": "---:", "c": ":---:"}


class Markup(markupsafe.Markup):
    """HTML safe to send as it is; text joined, added or formatted into it is escaped by
    `escape`."""

    __slots__ = ()

    @classmethod
    def escape(cls, s: Any) -> Markup:
        return escape(s)


def escape(value: Any) -> Markup:
    """`value` as HTML text (Markup passes through as it is)."""
    if hasattr(value, "__html__"):
        return Markup(value.__html__())
    # an `&` in the text is already `&amp;`, so these references can only be its quotes
    return Markup(str(markupsafe.escape(value)).replace("&#34;", "&quot;")
                  .replace("&#39;", "&#x27;"))


def printable(value: object) -> str:
    """`value` as text with its control and invisible characters spelled out: a line feed
    as `\\n`, the rest as `\\xNN`, `\\uNNNN` or `\\UNNNNNNNN` by code point."""
    return _INVISIBLE.sub(_spelled, str(value))


def _spelled(match: re.Match[str]) -> str:
    point = ord(match.group())
    if point == 0x0A:
        return "\\n"
    if point <= 0xFF:
        return f"\\x{point:02x}"
    return f"\\u{point:04x}" if point <= 0xFFFF else f"\\U{point:08x}"


def html_text(value: object) -> Markup:
    """A value as HTML text: `printable`, then escaped (quotes included)."""
    return escape(printable(value))


def md_text(value: object) -> str:
    """A value as literal Markdown text by the rule in this module's docstring."""
    text = printable(value)

    def inline(match: re.Match[str]) -> str:
        mark, start, end = match.group(), match.start(), match.end()
        if mark[0] == "_" and 0 < start and end < len(text) and \
                text[start - 1].isalnum() and text[end].isalnum():
            return mark  # inside a word: never emphasis
        if mark == "\\" and end < len(text) and text[end] not in _ASCII_PUNCTUATION:
            return mark  # escapes nothing: Markdown shows it as it is
        return "".join("\\" + ch for ch in mark)

    return _MD_BLOCK_START.sub(_block_mark, _MD_INLINE.sub(inline, text), count=1)


def _block_mark(match: re.Match[str]) -> str:
    if match.group(2):
        return match.group(2) + "\\" + match.group(3)
    return "\\" + match.group()


def md_code(value: object) -> str:
    """A value as an inline code span (for a list item or a paragraph, not a table cell):
    `printable`, and a backtick inside widens the fence."""
    text = printable(value)
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def md_table(header: Sequence[object], rows: Iterable[Sequence[object]], *,
             align: str | None = None) -> list[str]:
    """A Markdown table as its lines, every header and body cell through `md_text` (so a
    `|` in a value is escaped and a line feed spelled out). `align` has one letter per
    column: `-` the reader's default, `l` left, `r` right, `c` centred."""
    marks = align or "-" * len(header)
    if len(marks) != len(header) or set(marks) - set(_ALIGN):
        raise ValueError(f"align {marks!r} does not fit {len(header)} columns")

    def line(cells: Iterable[str]) -> str:
        return "| " + " | ".join(cells) + " |"

    return [line(md_text(h) for h in header), "|" + "".join(_ALIGN[m] + "|" for m in marks),
            *(line(md_text(cell) for cell in row) for row in rows)]

