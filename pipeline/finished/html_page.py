"""The report page's shell and its HTML pieces: the page (``page_html``) with its style
(``STYLE``), and the escaped pieces every section builds on (``escape``, ``tile``, ``figure``,
``count_table``, ``counts_chart``, numbers and cells as text)."""

from __future__ import annotations

import html
import json

from pipeline.finished.charts import bar_chart
from transforms.totals.console_text import console_text

#: Characters of an id, a path or a value shown in a table cell.
CELL_CHARS = 60


def escape(value) -> str:
    """``value`` as HTML text: markup escaped, and control characters (an ESC, a BEL, a
    bidirectional override from a key name or a message) shown as escapes, never sent raw
    (``transforms.totals.console_text``)."""
    return html.escape(console_text(str(value), keep_newlines=True), quote=True)


def short_text(text, limit: int = CELL_CHARS) -> str:
    """A value cut at its end (an id, a path keeps its start; the cell's title has it whole)."""
    text = str(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def number_text(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.3g}"
    return str(value)


def figure(svg: str, name: str) -> str:
    return f'<figure class="chart" data-chart="{escape(name)}">{svg}</figure>'


def count_table(counts: dict, key: str, heading: str, nonzero_only: bool = False) -> str:
    """A table of counts (each number cell carries data-key="<key>.<name>"); with
    ``nonzero_only``, the names counted 0 follow in one line instead of a row each."""
    shown = {k: v for k, v in counts.items() if v or not nonzero_only}
    rows = "".join(
        f'<tr><td>{escape(name)}</td><td class="n" data-key="{escape(key)}.{escape(name)}">{number_text(n)}</td></tr>'
        for name, n in shown.items()
    )
    table = (
        f'<table class="counts"><tr><th>{escape(heading)}</th><th class="n">count</th></tr>{rows}</table>'
        if rows
        else ""
    )
    zeros = [name for name, n in counts.items() if not n] if nonzero_only else []
    if zeros:
        table += (
            '<p class="none">none for: '
            + ", ".join(f'{escape(name)} <span data-key="{escape(key)}.{escape(name)}">0</span>' for name in zeros)
            + "</p>"
        )
    return table


def counts_chart(counts: dict, name: str, title: str, nothing: str, value_title: str, label_title: str, **style) -> str:
    """A bar chart of the non-zero ``counts``, or a line saying there is nothing to chart."""
    nonzero = {k: v for k, v in counts.items() if v}
    if not nonzero:
        return f'<p class="none">{escape(nothing)}</p>'
    return figure(bar_chart(nonzero, title, value_title=value_title, label_title=label_title, **style), name)


def tile(label: str, key: str | None, value, cls: str = "", note: str = "") -> str:
    data = f' data-key="{escape(key)}"' if key else ""
    title = f' title="{escape(note)}"' if note else ""
    return (
        f'<div class="tile {cls}"{title}><div class="v"{data}>{number_text(value)}</div>'
        f'<div class="l">{escape(label)}</div></div>'
    )


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def cell_text(value) -> str:
    if is_number(value):
        return number_text(value)
    return short_text(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))


def page_html(title: str, body: str) -> str:
    """A self-contained page: ``title`` (escaped here), the report's style, ``body`` as given."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{STYLE}</style></head>"
        f"<body><main>{body}</main></body></html>\n"
    )


STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#222;margin:0;background:#f6f7f9}
main{max-width:1180px;margin:0 auto;padding:18px 24px 40px}
@media (max-width:700px){main{padding:12px 10px 30px}}
h1{font-size:22px;margin:6px 0 2px} h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
h3{font-size:14px;margin:14px 0 6px}
.sub{color:#666;margin-bottom:14px;overflow-wrap:anywhere}
.banner{background:#fff4e5;border:1px solid #f0c36d;border-radius:6px;padding:8px 12px;margin:8px 0}
.tiles{display:flex;flex-wrap:wrap;gap:10px}
.tile{background:#fff;border:1px solid #e2e4e8;border-radius:6px;padding:8px 14px;min-width:120px}
.tile .v{font-size:22px;font-weight:600} .tile .l{color:#666;font-size:12px}
.tile.bad{border-color:#e3b1b0;background:#fdf3f3} .tile.good{border-color:#b7d9bd;background:#f3faf4}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(100%,480px),1fr));gap:14px}
.card{background:#fff;border:1px solid #e2e4e8;border-radius:6px;padding:10px 14px;min-width:0}
figure.chart{margin:0;max-width:640px} figure.chart svg{width:100%;height:auto;display:block}
table{border-collapse:collapse;margin:6px 0;font-size:13px;background:#fff;max-width:100%}
th,td{border-bottom:1px solid #eee;padding:3px 10px;text-align:left;vertical-align:top;overflow-wrap:anywhere}
th{background:#f0f2f5;font-weight:600} td.n,th.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px}
td.detail{min-width:12em}
.scroll{overflow-x:auto;max-width:100%} pre{background:#fff;border:1px solid #e2e4e8;padding:8px;overflow-x:auto;
white-space:pre-wrap;overflow-wrap:anywhere}
.none{color:#888;font-style:italic}
.example{background:#fff;border:1px solid #e2e4e8;border-radius:6px;padding:8px 12px;margin:8px 0}
.example .head{overflow-wrap:anywhere} .example .id{font-weight:600} .example .where{color:#555}
.example .facts{color:#444;font-size:13px} details summary{cursor:pointer;color:#3b6ea5;margin-top:4px}
table.explain td{font-size:12px} table.explain tr.dropped td{background:#fdf3f3}
table.explain tr.healed td{background:#f3faf4}
table.explain tr.moved td,table.explain tr.rekeyed td,table.explain tr.mapped td{background:#f3f6fb}
.mark{display:inline-block;border-radius:4px;padding:0 6px;margin:1px 4px 1px 0;font-size:12px;white-space:nowrap}
.mark.dropped{background:#f6d6d5} .mark.healed{background:#d5ecd9} .mark.moved{background:#d9e4f3}
.mark.rekeyed{background:#f3e6c8} .mark.mapped{background:#e4ddf0}
footer{margin-top:28px;font-size:12px}
"""
