"""Charts as inline SVG: what report.html draws, with no library and no network.

``bar_chart`` draws labelled counts as bars (horizontal for named categories, vertical for an
ordered axis such as a histogram's buckets) and ``line_chart`` draws series over an ordered
axis (a streaming run's windows). Both take a title and the titles of both axes, label every
bar with its value, and return an ``<svg>`` element sized by its ``viewBox``, so it scales
with the page. Every text is escaped. Plain functions of their arguments: the same data draws
the same bytes.
"""

from __future__ import annotations

import html
import math
from typing import Mapping, Sequence

from transforms.totals.console_text import console_text

BAR_COLOR = "#3b6ea5"
ALERT_COLOR = "#c0504d"
OK_COLOR = "#4f9a5b"
#: Colours of successive series in a line chart.
SERIES_COLORS = (BAR_COLOR, ALERT_COLOR, OK_COLOR, "#8064a2", "#d08b2c")

#: The drawing's width in SVG units (it scales to the space it is given).
WIDTH = 560
_FONT = 'font-family="system-ui,-apple-system,Segoe UI,Roboto,sans-serif"'
_CHAR = 6.6  # average width of a character at the labels' size, for laying labels out


def _e(text: object) -> str:
    # Control characters (a key name's ESC or BEL) shown as escapes, never drawn raw.
    return html.escape(console_text(str(text), keep_newlines=True), quote=True)


def _number(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.3g}"


def nice_ticks(top: float, most: int = 5, integer: bool = True) -> list[float]:
    """0 and round steps (1, 2 or 5 times a power of ten) up to at least ``top``; whole
    numbers only with ``integer`` (counts)."""
    if top <= 0:
        return [0.0, 1.0]
    rough = top / most
    power = 10 ** math.floor(math.log10(rough))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= rough)
    if integer:
        step = max(step, 1)
    count = math.ceil(top / step - 1e-9)
    return [i * step for i in range(count + 1)]


def _fit(text: str, width: float, size: float = 12) -> str:
    """``text`` cut with an ellipsis to about ``width`` units at font ``size`` (the tables
    beside the charts give every name whole)."""
    most = max(int(width / (_CHAR * size / 12)), 2)
    return text if len(text) <= most else text[: most - 1] + "…"


def _value_axis_left(ticks: list[float]) -> float:
    """Where a vertical value axis stands: past its rotated title and its widest tick label."""
    return max(58.0, 24 + max(len(_number(t)) for t in ticks) * _CHAR + 5)


def _frame(width: float, height: float, title: str, body: list[str]) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" role="img" '
        f'aria-label="{_e(title)}" {_FONT} font-size="12">'
        f"<title>{_e(title)}</title>"
        f'<text x="0" y="15" font-size="14" font-weight="600" fill="#222">{_e(title)}</text>' + "".join(body) + "</svg>"
    )


def bar_chart(
    counts: Mapping[str, float],
    title: str,
    *,
    value_title: str,
    label_title: str,
    horizontal: bool = True,
    color: str = BAR_COLOR,
) -> str:
    """Bars of ``counts`` in the dict's order, each labelled with its value.

    ``value_title`` names the axis of the values (``messages dropped``), ``label_title`` the
    axis of the labels (``reason``). Horizontal bars suit names; vertical bars an ordered scale.
    """
    labels, values = list(counts), [float(v) for v in counts.values()]
    ticks = nice_ticks(max(values, default=0), integer=all(v.is_integer() for v in values))
    top = ticks[-1]
    body: list[str] = []
    if horizontal:
        label_w = min(max((len(label) for label in (*labels, label_title)), default=4) * _CHAR + 8, 220)
        left: float = label_w + 10
        # Room on the right for the value beside the longest bar (the scale's top, at most).
        right = max(46, max((len(_number(v)) for v in values), default=1) * _CHAR + 8)
        row, top_y = 22, 42
        plot_w = WIDTH - left - right
        height = top_y + row * len(labels) + 46
        axis_y = top_y + row * len(labels)
        # The labels' axis title heads their column (rotated, it would not fit beside one bar).
        body.append(f'<text x="{left - 6}" y="{top_y - 6}" text-anchor="end" fill="#555">{_e(label_title)}</text>')
        for tick in ticks:
            x = left + plot_w * tick / top
            body.append(f'<line x1="{x:.1f}" y1="{top_y}" x2="{x:.1f}" y2="{axis_y}" stroke="#e5e5e5"/>')
            body.append(f'<text x="{x:.1f}" y="{axis_y + 15}" text-anchor="middle" fill="#555">{_number(tick)}</text>')
        for i, (label, value) in enumerate(zip(labels, values)):
            y = top_y + i * row
            w = plot_w * value / top
            body.append(
                f'<text x="{left - 6}" y="{y + row / 2 + 4:.1f}" text-anchor="end" fill="#222">'
                f"{_e(_fit(label, label_w - 8))}</text>"
            )
            body.append(f'<rect x="{left}" y="{y + 3}" width="{w:.1f}" height="{row - 6}" fill="{color}"/>')
            body.append(f'<text x="{left + w + 4:.1f}" y="{y + row / 2 + 4:.1f}" fill="#222">{_number(value)}</text>')
        body.append(f'<line x1="{left}" y1="{top_y}" x2="{left}" y2="{axis_y}" stroke="#888"/>')
        centre = f'x="{left + plot_w / 2:.0f}" y="{height - 6}" text-anchor="middle"'
        body.append(f'<text {centre} fill="#555">{_e(value_title)}</text>')
        return _frame(WIDTH, height, title, body)
    left, right, top_y, plot_h = _value_axis_left(ticks), 10, 34, 170
    plot_w = WIDTH - left - right
    slot = plot_w / max(len(labels), 1)
    axis_y = top_y + plot_h
    height = axis_y + 44
    body.append(
        f'<text transform="translate(12,{top_y + plot_h / 2:.0f}) rotate(-90)" text-anchor="middle" '
        f'fill="#555">{_e(value_title)}</text>'
    )
    for tick in ticks:
        tick_y = axis_y - plot_h * tick / top
        body.append(f'<line x1="{left}" y1="{tick_y:.1f}" x2="{WIDTH - right}" y2="{tick_y:.1f}" stroke="#e5e5e5"/>')
        body.append(f'<text x="{left - 5}" y="{tick_y + 4:.1f}" text-anchor="end" fill="#555">{_number(tick)}</text>')
    for i, (label, value) in enumerate(zip(labels, values)):
        h = plot_h * value / top
        x = left + i * slot
        bar = f'x="{x + slot * 0.15:.1f}" y="{axis_y - h:.1f}" width="{slot * 0.7:.1f}" height="{h:.1f}"'
        body.append(f'<rect {bar} fill="{color}"/>')
        middle = f'x="{x + slot / 2:.1f}" text-anchor="middle" fill="#222"'
        body.append(f'<text {middle} y="{axis_y - h - 4:.1f}">{_number(value)}</text>')
        body.append(
            f'<text x="{x + slot / 2:.1f}" y="{axis_y + 15}" text-anchor="middle" fill="#222">{_e(label)}</text>'
        )
    body.append(f'<line x1="{left}" y1="{axis_y}" x2="{WIDTH - right}" y2="{axis_y}" stroke="#888"/>')
    body.append(
        f'<text x="{left + plot_w / 2:.0f}" y="{height - 6}" text-anchor="middle" fill="#555">{_e(label_title)}</text>'
    )
    return _frame(WIDTH, height, title, body)


def line_chart(
    series: Mapping[str, Sequence[float]], labels: list[str], title: str, *, x_title: str, y_title: str
) -> str:
    """Lines of ``series`` over ``labels`` (an ordered axis), with a legend; every point marked."""
    values = [v for points in series.values() for v in points]
    ticks = nice_ticks(max(values, default=0), integer=all(float(v).is_integer() for v in values))
    top = ticks[-1]
    left, right, top_y, plot_h = _value_axis_left(ticks), 10, 52, 170
    plot_w = WIDTH - left - right
    axis_y = top_y + plot_h
    height = axis_y + 42
    n = max(len(labels), 1)
    step = plot_w / max(n - 1, 1)
    body = [
        f'<text transform="translate(12,{top_y + plot_h / 2:.0f}) rotate(-90)" text-anchor="middle" '
        f'fill="#555">{_e(y_title)}</text>'
    ]
    x_legend = 0.0
    for k, name in enumerate(series):
        color = SERIES_COLORS[k % len(SERIES_COLORS)]
        body.append(f'<rect x="{x_legend:.0f}" y="26" width="10" height="10" fill="{color}"/>')
        body.append(f'<text x="{x_legend + 14:.0f}" y="35" fill="#222">{_e(name)}</text>')
        x_legend += 14 + len(name) * _CHAR + 16
    for tick in ticks:
        y = axis_y - plot_h * tick / top
        body.append(f'<line x1="{left}" y1="{y:.1f}" x2="{WIDTH - right}" y2="{y:.1f}" stroke="#e5e5e5"/>')
        body.append(f'<text x="{left - 5}" y="{y + 4:.1f}" text-anchor="end" fill="#555">{_number(tick)}</text>')
    # Labels at size 10, centred on their point; the last one ends at its point (centred, it
    # would pass the drawing's edge), and a label too close to it is left out.
    label_w = max((len(label) for label in labels), default=0) * _CHAR * 10 / 12
    shown_every = max(1, math.ceil(n / 6), math.ceil(label_w * 1.1 / step) if n > 1 else 1)
    for i, label in enumerate(labels):
        last = i == n - 1
        if not last and (i % shown_every or (n > 1 and (n - 1 - i) * step < label_w * 1.6)):
            continue
        x = left + (i * step if n > 1 else plot_w / 2)
        anchor = "end" if last and n > 1 else "middle"
        where = f'x="{x:.1f}" y="{axis_y + 15}" text-anchor="{anchor}"'
        body.append(f'<text {where} fill="#222" font-size="10">{_e(label)}</text>')
    for k, points in enumerate(series.values()):
        color = SERIES_COLORS[k % len(SERIES_COLORS)]
        xy = [(left + (i * step if n > 1 else plot_w / 2), axis_y - plot_h * v / top) for i, v in enumerate(points)]
        body.append(
            f'<polyline fill="none" stroke="{color}" stroke-width="2" points="'
            + " ".join(f"{x:.1f},{y:.1f}" for x, y in xy)
            + '"/>'
        )
        body += [f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{color}"/>' for x, y in xy]
    body.append(f'<line x1="{left}" y1="{axis_y}" x2="{WIDTH - right}" y2="{axis_y}" stroke="#888"/>')
    body.append(
        f'<text x="{left + plot_w / 2:.0f}" y="{height - 8}" text-anchor="middle" fill="#555">{_e(x_title)}</text>'
    )
    return _frame(WIDTH, height, title, body)
