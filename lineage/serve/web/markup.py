"""HTML built in code: every value from the store is escaped on the way in.

`Markup` (lineage.markup's, markupsafe's) is HTML already safe to send; anything else given
to these builders is text and is escaped by `lineage.markup.escape`, as it is, so a page
gives back exactly the text it was given. No template engine: nothing from an artifact is
ever rendered as a template.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, urlencode

from lineage.markup import Markup, escape

__all__ = ["Markup", "capped", "code", "document", "esc", "facts", "join", "link", "section",
           "short_hash", "table", "tag", "url"]


def esc(value: Any) -> Markup:
    """`value` as HTML: Markup passes through, None reads as an em dash, the rest is text."""
    if isinstance(value, Markup):
        return value
    if value is None:
        return Markup("—")
    if isinstance(value, bool):
        return Markup("yes" if value else "no")
    if isinstance(value, float):
        return escape(f"{value:.6g}")
    if isinstance(value, int):
        return Markup(f"{value:,}")
    return escape(str(value))


def join(parts: Iterable[Any], sep: str = "") -> Markup:
    return Markup(sep.join(esc(part) for part in parts))


def url(*segments: str | int, **query: Any) -> str:
    """The page at a path on this server: each segment percent-encoded, then the query
    string (parameters that are None are left out)."""
    path = "/" + "/".join(quote(str(s), safe="") for s in segments)
    params = {k: v for k, v in query.items() if v is not None}
    if path.endswith(".json"):  # a name ending in .json: its page (docs/explorer.md)
        path, params = path + ".json", {**params, "format": "html"}
    return path + ("?" + urlencode(params) if params else "")


def link(href: str, text: Any, *, title: str | None = None) -> Markup:
    """A link; a number as its text is an identifier (a step, a window): no separators."""
    extra = f' title="{escape(title)}"' if title else ""
    shown = str(text) if isinstance(text, int) and not isinstance(text, bool) else text
    return Markup(f'<a href="{escape(href)}"{extra}>{esc(shown)}</a>')


def capped(items: list[Markup], *, at: int = 200, sep: str = ", ") -> Markup:
    """The first `at` items, then how many more there are (the page's JSON has them all)."""
    more = [esc(f"… {len(items) - at:,} more in this page's JSON")] if len(items) > at else []
    return join(items[:at] + more, sep)


def tag(name: str, content: Any = "", **attrs: Any) -> Markup:
    """`<name attrs>content</name>`; attribute names use `_` for `-`, `cls` for class."""
    shown = "".join(f' {_attr(k)}="{escape(str(v))}"' for k, v in attrs.items()
                    if v is not None and v is not False)
    return Markup(f"<{name}{shown}>{esc(content)}</{name}>")


def _attr(name: str) -> str:
    return "class" if name == "cls" else name.rstrip("_").replace("_", "-")


def table(headers: Iterable[str], rows: Iterable[Iterable[Any]], *,
          cls: str | None = None) -> Markup:
    head = join(tag("th", h) for h in headers)
    body = join(tag("tr", join(tag("td", cell) for cell in row)) for row in rows)
    return tag("table", Markup(f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody>"),
               cls=cls)


def facts(pairs: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> Markup:
    """A definition list of (label, value) pairs."""
    items = pairs.items() if isinstance(pairs, Mapping) else pairs
    return tag("dl", join(Markup(f"{tag('dt', k)}{tag('dd', v)}") for k, v in items),
               cls="facts")


def section(title: str, *content: Any) -> Markup:
    return tag("section", Markup(tag("h2", title) + join(content)))


def code(value: Any) -> Markup:
    return tag("code", value)


def short_hash(value: str | None) -> Markup:
    """A hash shown by its first 16 hex digits, in full on hover."""
    if value is None:
        return esc(None)
    head, _, hex_part = value.rpartition(":")
    shown = (head + ":" if head else "") + hex_part[:16] + ("…" if len(hex_part) > 16 else "")
    return tag("code", shown, title=value, cls="hash")


STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 0; color: #1d232b; background: #fafafa; }
header { background: #1d3557; color: #fff; padding: .6em 1.5em; display: flex; gap: 1.5em;
         align-items: baseline; }
header a { color: #fff; text-decoration: none; }
header .brand { font-weight: 700; font-size: 1.1em; }
main { padding: 1em 1.5em 3em; max-width: 1100px; }
h1 { font-size: 1.5em; margin: .3em 0 .6em; word-break: break-all; }
h2 { font-size: 1.15em; margin: 1.6em 0 .5em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: .4em 0; font-size: .92em; }
th, td { text-align: left; padding: .25em .7em; border-bottom: 1px solid #e4e4e4;
         vertical-align: top; }
th { background: #eef1f5; }
dl.facts { display: grid; grid-template-columns: max-content auto; gap: .2em 1em; }
dl.facts dt { color: #555; } dl.facts dd { margin: 0; word-break: break-all; }
code { font: .88em ui-monospace, monospace; background: #eef1f5; padding: 0 .25em; }
pre { background: #eef1f5; padding: .8em; overflow-x: auto; font-size: .85em; }
a { color: #1d5fa8; }
.ok { color: #137a2f; font-weight: 600; } .bad { color: #b3261e; font-weight: 600; }
.muted { color: #777; }
mark { background: #ffe58a; }
.verdict { font-size: 1.2em; font-weight: 700; }
svg { background: #fff; border: 1px solid #ddd; margin: .4em 0; }
svg text { font: 11px system-ui, sans-serif; fill: #333; }
form.inline { display: flex; gap: .6em; align-items: end; flex-wrap: wrap; margin: .6em 0; }
label { display: block; font-size: .9em; color: #444; }
textarea { width: 100%; max-width: 900px; font: .9em ui-monospace, monospace; }
footer { color: #777; font-size: .85em; margin-top: 3em; }
header form.account { margin-left: auto; }
"""

# No script, no request beyond this server: the icon is inline, styles are inline.
PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>{title} · lineage</title><style>{style}</style></head>
<body><header><a class="brand" href="/">lineage</a><a href="/">store</a>
<a href="/trained-on">was this trained on?</a>{account}</header>
<main><h1>{title}</h1>{body}
{footer}</main>
</body></html>
"""
# A POST, not a link: a GET never changes anything (docs/serve.md, signing in).
SIGN_OUT = ('<form class="account" method="post" action="/sign-out">'
            '<button type="submit">sign out</button></form>')


def document(title: str, body: Markup, *, json_href: str | None,
             signed_in: bool = False) -> str:
    """A whole page: the layout around `body`, with a link to the page's JSON (where it
    has one) and, for a browser signed in to a server with a token, a sign-out button."""
    footer = "" if json_href is None else (
        f'<footer>This page as JSON: <a href="{escape(json_href)}">'
        f"{esc(json_href)}</a></footer>")
    return PAGE.format(title=esc(title), style=STYLE, body=body, footer=footer,
                       account=SIGN_OUT if signed_in else "")
