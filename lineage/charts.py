"""Charts as inline SVG, drawn from numbers already computed (no plotting library, no
script): a line plot with linked marks, stacked columns of shares, and horizontal bars.

A leaf module (it imports only `lineage.markup`), so the due-diligence report and the web
explorer draw with the same code. Every label is written by `lineage.markup.html_text`
and every link by `lineage.markup.escape`: text from a store or an artifact is never
markup.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from lineage.markup import Markup, escape, html_text

PALETTE = ("#1d5fa8", "#e07b24", "#2a9d55", "#b3261e", "#7b4fb3", "#8c6d31", "#d4569b",
           "#5a6b7b", "#17a2b8", "#9aa32b")
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 26, 34
Scale = Callable[[float], float]
MAX_POINTS = 2000  # points of a line plot's path


@dataclass(frozen=True)
class Mark:
    """A point drawn over a line plot, linked to the page that explains it."""

    x: float
    y: float
    href: str | None  # None: a dot without a link
    label: str
    color: str


def color(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def _text(value: object) -> str:
    return str(html_text(value))


def _href(value: str) -> str:
    return str(escape(value))


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    if high <= low:
        return [low]
    step = (high - low) / (count - 1)
    return [low + i * step for i in range(count)]


def _number(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 or value == int(value) else f"{value:.3g}"


def line_plot(xs: Sequence[float], ys: Sequence[float | None], *, title: str, y_label: str,
              marks: Sequence[Mark] = (), width: int = 900, height: int = 240) -> Markup:
    """`ys` over `xs` (a None leaves a gap), with `marks` as linked dots over the line."""
    xs, ys = _thinned(xs, ys)
    known = [y for y in ys if y is not None and math.isfinite(y)]
    if not xs or not known:
        return Markup(f'<p class="muted">{_text(title)}: nothing recorded.</p>')
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(0.0, min(known)), max(known)
    plot_w, plot_h = width - LEFT - RIGHT, height - TOP - BOTTOM

    def sx(x: float) -> float:
        return LEFT + (x - x0) / ((x1 - x0) or 1) * plot_w

    def sy(y: float) -> float:
        return TOP + plot_h - (y - y0) / ((y1 - y0) or 1) * plot_h

    parts = [_frame(width, height, title, y_label)]
    x_ticks = sorted({round(x) for x in _ticks(x0, x1)})  # steps are whole numbers
    parts += _axes(x_ticks, _ticks(y0, y1), sx, sy, width, height)
    parts.append(f'<path d="{_path(xs, ys, sx, sy)}" fill="none" stroke="{PALETTE[0]}" '
                 'stroke-width="1.5"/>')
    for mark in marks:
        dot = (f'<circle cx="{sx(mark.x):.1f}" cy="{sy(mark.y):.1f}" r="3.5" '
               f'fill="{mark.color}"><title>{_text(mark.label)}</title></circle>')
        parts.append(dot if mark.href is None else f'<a href="{_href(mark.href)}">{dot}</a>')
    parts.append("</svg>")
    return Markup("".join(parts))


def _thinned(xs: Sequence[float], ys: Sequence[float | None]
             ) -> tuple[Sequence[float], Sequence[float | None]]:
    """At most about MAX_POINTS points of the line: every k-th one and the last (the marks
    are drawn whole; the page's JSON has every value)."""
    if len(xs) <= MAX_POINTS:
        return xs, ys
    stride = math.ceil(len(xs) / MAX_POINTS)
    keep = [*range(0, len(xs), stride), len(xs) - 1] if (len(xs) - 1) % stride else \
        list(range(0, len(xs), stride))
    return [xs[i] for i in keep], [ys[i] for i in keep]


def _frame(width: int, height: int, title: str, y_label: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{width}" '
            f'height="{height}" viewBox="0 0 {width} {height}"><title>{_text(title)}</title>'
            f'<text x="{LEFT}" y="16" font-weight="600">{_text(title)}</text>'
            f'<text x="12" y="{TOP + 4}" transform="rotate(-90 12 {TOP + 4})" '
            f'text-anchor="end">{_text(y_label)}</text>')


def _axes(x_ticks: Sequence[float], y_ticks: Sequence[float], sx: Scale, sy: Scale,
          width: int, height: int) -> list[str]:
    out = [f'<line x1="{LEFT}" y1="{height - BOTTOM}" x2="{width - RIGHT}" '
           f'y2="{height - BOTTOM}" stroke="#999"/>']
    for y in y_ticks:
        out.append(f'<line x1="{LEFT}" y1="{sy(y):.1f}" x2="{width - RIGHT}" y2="{sy(y):.1f}" '
                   f'stroke="#eee"/><text x="{LEFT - 6}" y="{sy(y) + 4:.1f}" '
                   f'text-anchor="end">{_text(_number(y))}</text>')
    for x in x_ticks:
        out.append(f'<text x="{sx(x):.1f}" y="{height - BOTTOM + 16}" '
                   f'text-anchor="middle">{_text(_number(x))}</text>')
    return out


def _path(xs: Sequence[float], ys: Sequence[float | None], sx: Scale, sy: Scale) -> str:
    commands, pen_down = [], False
    for x, y in zip(xs, ys, strict=True):
        if y is None or not math.isfinite(y):
            pen_down = False
            continue
        commands.append(f"{'L' if pen_down else 'M'}{sx(x):.1f},{sy(y):.1f}")
        pen_down = True
    return " ".join(commands)


def stacked_columns(labels: Sequence[str], series: Sequence[tuple[str, Sequence[float]]], *,
                    hrefs: Sequence[str], title: str, width: int = 900,
                    height: int = 260) -> Markup:
    """One column per label, split by the shares of each series (shares of a column add
    up to 1); each column links to `hrefs[i]`. The legend names the series' colours."""
    if not labels:
        return Markup(f'<p class="muted">{_text(title)}: nothing to show.</p>')
    plot_w, plot_h = width - LEFT - RIGHT, height - TOP - BOTTOM
    column = plot_w / len(labels)
    parts = [_frame(width, height, title, "share of tokens")]
    for share in (0.0, 0.5, 1.0):
        y = TOP + plot_h * (1 - share)
        parts.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">'
                     f'{share:.0%}</text>')
    for i, (label, href) in enumerate(zip(labels, hrefs, strict=True)):
        parts.append(f'<a href="{_href(href)}">{_column(i, label, series, column, plot_h)}</a>')
    for i, anchor in ((0, "start"), (len(labels) - 1, "end")):
        x = LEFT + (i + (0 if anchor == "start" else 1)) * column
        parts.append(f'<text x="{x:.1f}" y="{height - BOTTOM + 16}" '
                     f'text-anchor="{anchor}">{_text(labels[i])}</text>')
    parts.append("</svg>")
    return Markup("".join(parts)) + legend([name for name, _ in series])


def _column(i: int, label: str, series: Sequence[tuple[str, Sequence[float]]],
            column: float, plot_h: float) -> str:
    out, y = [], float(TOP + plot_h)
    for k, (name, shares) in enumerate(series):
        h = shares[i] * plot_h
        if h <= 0:
            continue
        y -= h
        out.append(f'<rect x="{LEFT + i * column:.1f}" y="{y:.1f}" '
                   f'width="{max(column - 1, 1):.1f}" '
                   f'height="{h:.1f}" fill="{color(k)}"><title>{_text(label)}: {_text(name)} '
                   f'{shares[i]:.1%}</title></rect>')
    return "".join(out)


def legend(names: Sequence[str]) -> Markup:
    items = "".join(f'<span style="margin-right:1.2em"><span style="display:inline-block;'
                    f'width:.8em;height:.8em;background:{color(k)}"></span> {_text(name)}</span>'
                    for k, name in enumerate(names))
    return Markup(f'<div class="legend">{items}</div>')


def bars(items: Sequence[tuple[str, float, str]], *, title: str | None = None,
         top: float | None = None, width: int = 600, label_width: int = 160,
         at_most: int | None = 40) -> Markup:
    """Horizontal bars, one per (label, value, text shown after the bar), the first
    `at_most` of them (None: all). A bar's length is its value over `top` (the largest value when
    None) of the bar area; a label too long for its column is cut, and whole on hover."""
    if not items:
        return Markup('<p class="muted">none</p>')
    items = items[:at_most] if at_most is not None else items
    top = top if top is not None else max(value for _, value, _ in items)
    row, head = 24, TOP if title else 4
    height = head + row * len(items) + 8
    bar_w = width - label_width - 70
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{width}" '
             f'height="{height}" viewBox="0 0 {width} {height}">']
    if title:
        parts.append(f'<title>{_text(title)}</title>'
                     f'<text x="8" y="16" font-weight="600">{_text(title)}</text>')
    fits = max(label_width // 7 - 1, 1)  # characters of about 7 px at 11 px
    for k, (label, value, shown) in enumerate(items):
        y = head + k * row
        length = max(value, 0) / (top or 1) * bar_w
        cut = label if len(label) <= fits else label[:fits - 1] + "…"
        parts.append(f'<g><title>{_text(label)}</title><text x="8" y="{y + 15}">'
                     f'{_text(cut)}</text>'
                     f'<rect x="{label_width}" y="{y + 3}" width="{length:.1f}" '
                     f'height="{row - 8}" fill="{color(k)}"/>'
                     f'<text x="{label_width + length + 6:.1f}" y="{y + 15}">'
                     f'{_text(shown)}</text></g>')
    parts.append("</svg>")
    return Markup("".join(parts))


def share_bars(items: Sequence[tuple[str, float]], *, title: str, width: int = 600) -> Markup:
    """Horizontal bars, one per (label, share in 0..1), each as long as its share."""
    return bars([(label, share, f"{share:.1%}") for label, share in items], title=title,
                top=1.0, width=width, at_most=None)
