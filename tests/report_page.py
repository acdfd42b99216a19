"""Reading report.html back: the numbers it shows (by data-key), its charts, its URLs."""

from __future__ import annotations

from html.parser import HTMLParser


class Page(HTMLParser):
    """Collects data-key -> text, the chart names with whether each holds an SVG, and every URL."""

    def __init__(self) -> None:
        super().__init__()
        self.values: dict[str, str] = {}
        self.charts: dict[str, bool] = {}
        self.urls: list[str] = []
        self.headings: list[str] = []
        self._open: list[tuple[str, str | None]] = []
        self._chart: str | None = None
        self._heading = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for name in ("src", "href"):
            if attrs.get(name):
                self.urls.append(attrs[name])
        if tag == "figure" and "data-chart" in attrs:
            self._chart = attrs["data-chart"]
            self.charts[self._chart] = False
        if tag == "svg" and self._chart:
            self.charts[self._chart] = True
        if tag == "link" or (tag == "script" and "src" in attrs):
            self.urls.append(f"<{tag}>")
        self._open.append((tag, attrs.get("data-key")))
        self._heading = tag == "h2"
        if self._heading:
            self.headings.append("")

    def handle_endtag(self, tag):
        while self._open:
            open_tag, _ = self._open.pop()
            if open_tag == tag:
                break
        if tag == "figure":
            self._chart = None
        if tag == "h2":
            self._heading = False

    def handle_data(self, data):
        if self._open and self._open[-1][1] is not None:
            key = self._open[-1][1]
            self.values[key] = self.values.get(key, "") + data
        if self._heading:
            self.headings[-1] += data


def parse(page: str) -> Page:
    parsed = Page()
    parsed.feed(page)
    return parsed


def shown(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return f"{value:,}" if isinstance(value, int) else str(value)


def flat(doc: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in doc.items():
        name = f"{prefix}.{key}" if prefix else key
        out.update(flat(value, name) if isinstance(value, dict) else {name: value})
    return out
