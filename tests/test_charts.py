"""The report's inline SVG charts keep every text inside their drawing.

Found: a streaming report's last window label ("12-01 18:36:40") was centred on the right end
of the axis and cut by the drawing's edge ("12-01 18:"); a bar whose value is the top of the
scale had its value label past the edge too. Widths are estimated as the charts lay labels out
(an average character width at each font size); the test asks that every text, with its
anchor, fits in the ``viewBox``.
"""

from __future__ import annotations

import re

import pytest

from pipeline.finished.charts import _CHAR, bar_chart, line_chart

TEXT = re.compile(r"<text (?P<attrs>[^>]*)>(?P<body>[^<]*)</text>")


def _extent(attrs: str, body: str) -> tuple[float, float] | None:
    """(left, right) of a horizontal text; ``None`` for a rotated one."""
    if "rotate(" in attrs:
        return None
    x = float(re.search(r'\bx="([-\d.]+)"', attrs).group(1))
    size = float(re.search(r'font-size="([\d.]+)"', attrs).group(1)) if "font-size" in attrs else 12.0
    width = len(body) * _CHAR * size / 12
    anchor = re.search(r'text-anchor="(\w+)"', attrs)
    anchor = anchor.group(1) if anchor else "start"
    left = {"start": x, "middle": x - width / 2, "end": x - width}[anchor]
    return left, left + width


def _outside(svg: str) -> list[str]:
    view = re.search(r'viewBox="0 0 ([\d.]+) ([\d.]+)"', svg)
    width = float(view.group(1))
    out = []
    for text in TEXT.finditer(svg):
        extent = _extent(text["attrs"], text["body"])
        if extent and (extent[0] < 0 or extent[1] > width):
            out.append(f"{text['body']!r} spans {extent[0]:.0f}..{extent[1]:.0f} of 0..{width:.0f}")
    return out


WINDOWS = ["12-01 18:36:20", "12-01 18:36:30", "12-01 18:36:40"]


@pytest.mark.parametrize("count", [1, 2, 3, 7, 40])
def test_every_window_label_of_a_line_chart_is_inside_the_drawing(count):
    labels = [f"12-01 18:{k // 6:02d}:{k % 6}0" for k in range(count)]
    series = {"records": [307.0] * count, "drops": [166.0] * count}
    svg = line_chart(series, labels, "Per window", x_title="window start (UTC)", y_title="count")
    assert _outside(svg) == []
    # The window labels (size 10) do not run into each other, and the last window is named.
    shown = [(t["body"], _extent(t["attrs"], t["body"])) for t in TEXT.finditer(svg) if 'font-size="10"' in t["attrs"]]
    assert shown[-1][0] == labels[-1]
    for (_, (_, right)), (_, (left, _)) in zip(shown, shown[1:]):
        assert right <= left


@pytest.mark.parametrize(
    "counts",
    [
        {"messages in": 6785, "messages dropped": 134, "results added (healed)": 177, "messages out": 6828},
        {"messages in": 1_000_000, "messages out": 1_000_000},  # the value is the top of the scale
        {"invalid_json": 2, "not_a_record": 2, "unknown_format": 1},
        {"a reason with a long name, as a field name can be": 123_456_789},
    ],
)
def test_every_bar_label_is_inside_the_drawing(counts):
    for horizontal in (True, False):
        svg = bar_chart(counts, "Chart", value_title="count", label_title="reason", horizontal=horizontal)
        if horizontal:
            assert _outside(svg) == [], horizontal
        else:  # vertical bars: the value labels sit above each bar, in its slot
            assert [o for o in _outside(svg) if not o.startswith("'a reason")] == []
