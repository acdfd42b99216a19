"""The run report: ``report.html`` beside ``summary.json``, one self-contained page.

Built from what a run leaves on disk, never from the pipeline: ``summary.json`` (totals),
``drops/`` (one drop-metrics line per conversation: worst sources, examples per reason) and
``dead_letter/`` (dead letters per source, examples per reason), plus, when given, what the
caller knows about the run (options, versions, run time) or a ``manifest.json`` found beside
the outputs. So ``convnorm report OUT_DIR`` rebuilds the page of any finished run.

Charts are drawn by matplotlib as SVG and embedded inline: the page needs no network and no
other file. matplotlib is an optional extra (``pip install 'convnorm[report]'``); without it
the run still succeeds and says the report was skipped.

Sections appear only when their data does: repairs (``--profile lossless``), violations
(``--check``), the ledger of discarded fields (summary key ``ledger``), windows over time
(summary key ``windows``), and any other summary key this page does not know yet (shown
generically rather than hidden). Everything read from the data is HTML-escaped.

Layout: plain functions that read (``scan_drops``, ``scan_dead_letters``, ``collect``), one
that renders (``render_html``), one that writes (``write_report``); no Beam pipeline here.
"""

from __future__ import annotations

import datetime
import html
import io
import json
import logging
import os
import platform
from dataclasses import dataclass, field
from typing import Iterable, Iterator

import orjson

LOG = logging.getLogger("convnorm")

REPORT_FILE = "report.html"
#: How a page this module wrote begins its title (``convnorm report`` replaces only such a page).
TITLE_MARK = b"<title>convnorm report: "
#: Rows of the worst-sources table.
WORST_SOURCES = 10
#: Example conversations (or dead letters) shown per reason.
EXAMPLES_PER_REASON = 3
#: Rows of a table of unknown shape (windows of a long streaming run can be many).
GENERIC_ROWS = 200
#: Characters of an id, a path or a dead letter's detail shown in a table cell.
CELL_CHARS = 60
#: Examples over --max-example-tokens listed one by one (all are counted in summary.json).
OVER_LIMIT_LISTED = 20

#: The ledger of discarded fields in summary.json (transforms/summary.py, docs/ledger.md).
LEDGER_KEYS = ("discarded_fields", "discarded_chars", "discarded_by_name", "conversations_with_discards")

#: Summary keys this page lays out itself; any other key gets a generic section.
KNOWN_KEYS = frozenset(
    {
        "records_in",
        "records_out",
        "dead_letters",
        "dead_letters_by_reason",
        "blank_lines",
        "messages_in",
        "messages_out",
        "dropped",
        "dropped_by_reason",
        "healed",
        "conversations_with_drops",
        "drops_histogram",
        "profile",
        "repairs",
        "conversations_with_violations",
        "violations",
        "accounted",
        "ledger",
        "windows",
        "tokens",
        *LEDGER_KEYS,
    }
)

BAR_COLOR = "#3b6ea5"
ALERT_COLOR = "#c0504d"
OK_COLOR = "#4f9a5b"


class ReportUnavailable(RuntimeError):
    """The report cannot be drawn here (matplotlib is not installed)."""


# --------------------------------------------------------------------------------------------
# Reading a run's outputs


@dataclass
class SourceStats:
    records: int = 0
    dead_letters: int = 0
    conversations_with_drops: int = 0
    messages_in: int = 0
    dropped: int = 0

    @property
    def affected_rate(self) -> float:
        """Share of the source's records that lost messages or were dead-lettered."""
        return (self.dead_letters + self.conversations_with_drops) / self.records if self.records else 0.0


@dataclass
class RunDetails:
    """What the per-record outputs add to summary.json."""

    sources: dict[str, SourceStats] = field(default_factory=dict)
    #: drop reason -> the first conversations (in output order) that dropped for it
    drop_examples: dict[str, list[dict]] = field(default_factory=dict)
    #: dead-letter reason -> the first dead letters of that reason
    dead_letter_examples: dict[str, list[dict]] = field(default_factory=dict)
    #: The first examples over --max-example-tokens (--tokens): drop metrics of those kept,
    #: dead letters of those dropped, in output order.
    over_limit: list[dict] = field(default_factory=list)

    def source(self, path: str) -> SourceStats:
        stats = self.sources.get(path)
        if stats is None:
            stats = self.sources[path] = SourceStats()
        return stats


def scan_drops(metrics: Iterable[dict], details: RunDetails, examples: int = EXAMPLES_PER_REASON) -> None:
    """Fold drop-metrics records (one per normalized conversation) into ``details``."""
    for m in metrics:
        stats = details.source(str(m.get("source", "?")))
        stats.records += 1
        stats.messages_in += m.get("messages_in", 0)
        stats.dropped += m.get("dropped", 0)
        stats.conversations_with_drops += m.get("dropped", 0) > 0
        for reason, n in (m.get("drops") or {}).items():
            shown = details.drop_examples.setdefault(reason, [])
            if n and len(shown) < examples:
                shown.append(m)
        if m.get("over_token_limit") and len(details.over_limit) < OVER_LIMIT_LISTED:
            details.over_limit.append(m)


def scan_dead_letters(letters: Iterable[dict], details: RunDetails, examples: int = EXAMPLES_PER_REASON) -> None:
    """Fold dead-letter records into ``details``."""
    for letter in letters:
        stats = details.source(str(letter.get("source", "?")))
        stats.records += 1
        stats.dead_letters += 1
        shown = details.dead_letter_examples.setdefault(str(letter.get("reason", "?")), [])
        if len(shown) < examples:
            shown.append(letter)
        if letter.get("reason") == "over_token_limit" and len(details.over_limit) < OVER_LIMIT_LISTED:
            details.over_limit.append(letter)


def worst_sources(details: RunDetails, limit: int = WORST_SOURCES) -> list[tuple[str, SourceStats]]:
    """Sources with any drop or dead letter, highest affected rate first (then most records, path)."""
    hit = [(path, s) for path, s in details.sources.items() if s.dead_letters or s.conversations_with_drops]
    hit.sort(key=lambda item: (-item[1].affected_rate, -item[1].records, item[0]))
    return hit[:limit]


def _read_json_lines(directory: str) -> Iterator[dict]:
    from apache_beam.io.filesystems import FileSystems  # any Beam filesystem, as the job's outputs

    pattern = FileSystems.join(directory, "part-*.jsonl")
    try:
        matched = FileSystems.match([pattern])[0].metadata_list
    except Exception:  # noqa: BLE001 — a missing directory is "no records" here
        return
    for meta in sorted(matched, key=lambda m: m.path):
        with FileSystems.open(meta.path) as handle:
            for line in handle:
                if line.strip():
                    yield orjson.loads(line)  # one line per conversation: millions in a big run


def _read_json(path: str) -> dict | None:
    from apache_beam.io.filesystems import FileSystems

    if not FileSystems.exists(path):
        return None
    with FileSystems.open(path) as handle:
        return json.loads(handle.read())


@dataclass
class ReportData:
    output: str
    summary: dict
    details: RunDetails
    #: options, versions, timing: from the caller, or from a manifest.json beside the outputs
    run: dict


def collect(output: str, run: dict | None = None) -> ReportData:
    """Read a finished run's outputs under ``output``. Raises FileNotFoundError without summary.json."""
    from apache_beam.io.filesystems import FileSystems

    summary = _read_json(FileSystems.join(output, "summary.json"))
    if summary is None:
        raise FileNotFoundError(f"{output!r} holds no summary.json (is it a convnorm run's --output?)")
    details = RunDetails()
    scan_drops(_read_json_lines(FileSystems.join(output, "drops")), details)
    scan_dead_letters(_read_json_lines(FileSystems.join(output, "dead_letter")), details)
    if run is None:
        run = _read_json(FileSystems.join(output, "manifest.json")) or {}
    return ReportData(output, summary, details, run)


def versions() -> dict[str, str]:
    """Versions of the software that made the run (and the report)."""
    from importlib import metadata

    found = {"python": platform.python_version()}
    for name in ("convnorm", "apache-beam", "orjson", "pyarrow", "matplotlib"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


# --------------------------------------------------------------------------------------------
# Charts (matplotlib -> inline SVG)


def _pyplot():
    """matplotlib's ``Figure`` and ``MaxNLocator`` with the report's style set. Not pyplot: a
    figure drawn straight to SVG needs no backend or figure manager, and pyplot's import is a
    measurable part of a small run's time (bench/bench_startup.py); the SVG is the same."""
    try:
        import matplotlib
    except ImportError:
        raise ReportUnavailable(
            "matplotlib is not installed; install the report extra: pip install 'convnorm[report]'"
        ) from None
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    matplotlib.rcParams.update(
        {
            "svg.fonttype": "none",  # text stays text: smaller, selectable, searchable
            "svg.hashsalt": "convnorm",  # stable element ids: the same data draws the same SVG
            "font.size": 10,
            "axes.spines.top": False,
            "axes.spines.right": False,
        }
    )
    return Figure, MaxNLocator


def _subplots(figsize: tuple[float, float]):
    figure, _ = _pyplot()
    fig = figure(figsize=figsize)
    return fig, fig.subplots()


def _svg(fig) -> str:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = buffer.getvalue()
    return text[text.index("<svg") :]  # drop the XML prolog and doctype: the SVG sits inside HTML


def bar_chart(counts: dict[str, int], title: str, *, horizontal: bool = True, color: str = BAR_COLOR) -> str:
    """An SVG bar chart of ``counts`` (in the dict's order), each bar labelled with its value."""
    _, max_n_locator = _pyplot()
    labels, values = list(counts), list(counts.values())
    if horizontal:
        fig, ax = _subplots((5.6, 0.32 * max(len(labels), 3) + 0.8))
        bars = ax.barh(labels, values, color=color)
        ax.invert_yaxis()  # first reason on top, as in the tables
        ax.set_xlim(0, max(values + [1]) * 1.15)
        ax.xaxis.set_major_locator(max_n_locator(integer=True))
    else:
        fig, ax = _subplots((5.6, 2.8))
        bars = ax.bar(labels, values, color=color)
        ax.set_ylim(0, max(values + [1]) * 1.15)
        ax.yaxis.set_major_locator(max_n_locator(integer=True))
    ax.bar_label(bars, labels=[f"{v:,}" for v in values], padding=3, fontsize=9)
    ax.set_title(title, loc="left", fontsize=11)
    return _svg(fig)


def line_chart(series: dict[str, list[float]], xlabels: list[str], title: str) -> str:
    fig, ax = _subplots((7.5, 2.8))
    for name, values in series.items():
        ax.plot(range(len(values)), values, marker="o", markersize=3, label=name)
    step = max(1, len(xlabels) // 8)
    ax.set_xticks(
        range(0, len(xlabels), step),
        [xlabels[i] for i in range(0, len(xlabels), step)],
        rotation=20,
        ha="right",
        fontsize=8,
    )
    ax.legend(fontsize=8, frameon=False)
    ax.set_title(title, loc="left", fontsize=11)
    return _svg(fig)


# --------------------------------------------------------------------------------------------
# HTML


def _e(value) -> str:
    return html.escape(str(value), quote=True)


def _short(text, limit: int = CELL_CHARS) -> str:
    text = str(text)
    if len(text) <= limit:
        return text
    half = (limit - 1) // 2
    return text[:half] + "…" + text[-(limit - 1 - half) :]


def _num(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.3g}"
    return str(value)


def _count_table(counts: dict, key: str, heading: str) -> str:
    """A two-column table of counts; each number cell carries data-key="<key>.<name>"."""
    rows = "".join(
        f'<tr><td>{_e(name)}</td><td class="n" data-key="{_e(key)}.{_e(name)}">{_num(n)}</td></tr>'
        for name, n in counts.items()
    )
    return f'<table class="counts"><tr><th>{_e(heading)}</th><th class="n">count</th></tr>{rows}</table>'


def _figure(svg: str, name: str) -> str:
    return f'<figure class="chart" data-chart="{_e(name)}">{svg}</figure>'


def _counts_chart(counts: dict, name: str, title: str, nothing: str, **style) -> str:
    """A bar chart of ``counts``, or a line saying there is nothing to chart (all zero)."""
    if not any(counts.values()):
        return f'<p class="none">{_e(nothing)}</p>'
    return _figure(bar_chart(counts, title, **style), name)


def _ledger_section(s: dict) -> str:
    """What coercion discarded beside the drops: fields by name and the text they held."""
    by_name = s["discarded_by_name"]
    rows = "".join(
        f'<tr><td>{_e(name)}</td><td class="n" data-key="discarded_by_name.{_e(name)}.fields">'
        f'{_num(n["fields"])}</td><td class="n" data-key="discarded_by_name.{_e(name)}.chars">'
        f"{_num(n['chars'])}</td></tr>"
        for name, n in by_name.items()
    )
    return (
        '<h2>Ledger of discarded fields</h2><div class="card">'
        "<p>Not message drops: fields the flat message shape does not keep (MEM-5 rule 1), and the "
        'characters of text they held.</p><div class="tiles">'
        + _tile("fields discarded", "discarded_fields", s.get("discarded_fields", 0))
        + _tile("characters in them", "discarded_chars", s.get("discarded_chars", 0))
        + _tile("conversations with discards", "conversations_with_discards", s.get("conversations_with_discards", 0))
        + "</div>"
        + _counts_chart(
            {k: v["fields"] for k, v in by_name.items()},
            "discarded_by_name",
            "Discarded fields, by name",
            "Coercion discarded nothing.",
        )
        + f"<table><tr><th>field</th><th>fields</th><th>characters</th></tr>{rows}</table></div>"
    )


def _tile(label: str, key: str, value, cls: str = "") -> str:
    return (
        f'<div class="tile {cls}"><div class="v" data-key="{_e(key)}">{_num(value)}</div>'
        f'<div class="l">{_e(label)}</div></div>'
    )


def _where(record: dict) -> str:
    return f"{_short(record.get('source', '?'), 40)} @ {record.get('position', '?')}"


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _cell(value) -> str:
    if _is_number(value):
        return _num(value)
    return _short(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))


def _generic(value, key: str, title: str) -> str:
    """A section for summary data whose shape this page does not know in advance.

    Counts (a mapping of numbers) are a bar chart and a table; rows (a list of mappings, or a
    mapping of mappings such as windows by start time) are a line chart of their numeric
    columns and a table of at most ``GENERIC_ROWS`` rows; anything else is shown as JSON.
    """
    if isinstance(value, dict) and value and all(_is_number(v) for v in value.values()):
        return _figure(bar_chart(value, title), key) + _count_table(value, key, "name")
    if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
        value = [{"key": k, **v} for k, v in value.items()]
    if isinstance(value, list) and value and all(isinstance(row, dict) for row in value):
        columns = list(dict.fromkeys(k for row in value for k in row))
        numeric = [c for c in columns if all(_is_number(row.get(c, 0)) for row in value)]
        labels = [c for c in columns if c not in numeric]
        chart = ""
        if numeric and len(value) > 1:
            xlabels = [str(row.get(labels[0], i)) if labels else str(i) for i, row in enumerate(value)]
            chart = _figure(line_chart({c: [row.get(c, 0) for row in value] for c in numeric}, xlabels, title), key)
        head = "".join(f"<th>{_e(c)}</th>" for c in columns)
        shown = value[:GENERIC_ROWS]
        body = "".join(
            "<tr>"
            + "".join(
                f'<td class="{"n" if c in numeric else ""}" data-key="{_e(key)}.{i}.{_e(c)}">'
                f"{_e(_cell(row.get(c, '')))}</td>"
                for c in columns
            )
            + "</tr>"
            for i, row in enumerate(shown)
        )
        more = (
            (f'<p class="none">The first {GENERIC_ROWS:,} of {len(value):,} rows; all of them are in summary.json.</p>')
            if len(value) > GENERIC_ROWS
            else ""
        )
        return chart + f'<div class="scroll"><table><tr>{head}</tr>{body}</table></div>' + more
    if isinstance(value, dict) and value:
        return "".join(f"<h3>{_e(k)}</h3>" + _generic(v, f"{key}.{k}", f"{title}: {k}") for k, v in value.items())
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)
    return f'<pre data-key="{_e(key)}">{_e(text)}</pre>'


def _flat_items(value, prefix: str = "") -> Iterator[tuple[str, object]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _flat_items(v, f"{prefix}.{k}" if prefix else str(k))
    else:
        yield prefix, value


STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#222;margin:0;background:#f6f7f9}
main{max-width:1180px;margin:0 auto;padding:18px 24px 40px}
h1{font-size:22px;margin:6px 0 2px} h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
h3{font-size:14px;margin:14px 0 6px}
.sub{color:#666;margin-bottom:14px}
.tiles{display:flex;flex-wrap:wrap;gap:10px}
.tile{background:#fff;border:1px solid #e2e4e8;border-radius:6px;padding:8px 14px;min-width:120px}
.tile .v{font-size:22px;font-weight:600} .tile .l{color:#666;font-size:12px}
.tile.bad{border-color:#e3b1b0;background:#fdf3f3} .tile.good{border-color:#b7d9bd;background:#f3faf4}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(520px,1fr));gap:14px}
.card{background:#fff;border:1px solid #e2e4e8;border-radius:6px;padding:10px 14px;overflow:hidden}
figure.chart{margin:0} figure.chart svg{max-width:100%;height:auto}
table{border-collapse:collapse;margin:6px 0;font-size:13px;background:#fff}
th,td{border-bottom:1px solid #eee;padding:3px 10px;text-align:left;vertical-align:top}
th{background:#f0f2f5;font-weight:600} td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
code,td.mono{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px}
.scroll{overflow-x:auto} pre{background:#fff;border:1px solid #e2e4e8;padding:8px;overflow-x:auto}
.none{color:#888;font-style:italic}
"""


def render_html(data: ReportData, generated: str | None = None) -> str:
    """The whole page as one string (charts inline). Raises ReportUnavailable without matplotlib."""
    s = data.summary
    _pyplot()  # fail early, before any work, when charts cannot be drawn
    parts = [
        _header_html(data.output, s),
        _drops_html(s),
        _tokens_html(s.get("tokens"), data.details),
        _opt_in_html(s),
        _worst_sources_html(data.details),
        _examples_html(s, data.details),
        _run_html(data.run, generated),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"{TITLE_MARK.decode()}{_e(data.output)}</title><style>{STYLE}</style></head>"
        f"<body><main>{''.join(parts)}</main></body></html>\n"
    )


def _header_html(output: str, s: dict) -> str:
    """Title line and the tiles of totals."""
    accounted = s.get("accounted")
    header = (
        f'<h1>convnorm run report</h1><div class="sub">{_e(output)} · profile '
        f'<b data-key="profile">{_e(s.get("profile", "?"))}</b> · '
        f"{'every record accounted for' if accounted else 'NOT every record accounted for'}"
        f'<span hidden data-key="accounted">{_num(accounted)}</span></div>'
    )
    tiles = [
        _tile("records in", "records_in", s.get("records_in", 0)),
        _tile("normalized", "records_out", s.get("records_out", 0)),
        _tile("dead-lettered", "dead_letters", s.get("dead_letters", 0), "bad" if s.get("dead_letters") else "good"),
        _tile("messages in", "messages_in", s.get("messages_in", 0)),
        _tile("messages out", "messages_out", s.get("messages_out", 0)),
        _tile("messages dropped", "dropped", s.get("dropped", 0), "bad" if s.get("dropped") else "good"),
        _tile("calls healed", "healed", s.get("healed", 0)),
        _tile("conversations with drops", "conversations_with_drops", s.get("conversations_with_drops", 0)),
        _tile("blank lines skipped", "blank_lines", s.get("blank_lines", 0)),
    ]
    return header + '<div class="tiles">' + "".join(tiles) + "</div>"


def _drops_html(s: dict) -> str:
    """What was dropped, what could not be read: charts and tables."""
    parts = ['<h2>Drops and dead letters</h2><div class="grid">']
    add = parts.append
    drops = s.get("dropped_by_reason", {})
    add(
        '<div class="card">'
        + _counts_chart(drops, "dropped_by_reason", "Messages dropped, by reason", "No message was dropped.")
        + _count_table(drops, "dropped_by_reason", "drop reason")
        + "</div>"
    )
    letters = s.get("dead_letters_by_reason", {})
    add(
        '<div class="card">'
        + _counts_chart(
            letters,
            "dead_letters_by_reason",
            "Dead letters, by reason",
            "No record was dead-lettered.",
            color=ALERT_COLOR,
        )
        + _count_table(letters, "dead_letters_by_reason", "dead-letter reason")
        + "</div>"
    )
    histogram = s.get("drops_histogram", {})
    add(
        '<div class="card">'
        + _figure(bar_chart(histogram, "Conversations by messages dropped", horizontal=False), "drops_histogram")
        + _count_table(histogram, "drops_histogram", "messages dropped")
        + "</div>"
    )
    flow = {
        "messages in": s.get("messages_in", 0),
        "dropped": s.get("dropped", 0),
        "healed (synthetic results added)": s.get("healed", 0),
        "messages out": s.get("messages_out", 0),
    }
    add(
        '<div class="card">'
        + _figure(bar_chart(flow, "Messages in and out", color=OK_COLOR), "messages")
        + '<p class="none">Readers count messages as they produce them; healing adds one result per '
        "unanswered call.</p></div>"
    )
    add("</div>")
    return "".join(parts)


def _tokens_html(t: dict | None, details: RunDetails) -> str:
    """Fine-tuning readiness (--tokens): the figures, the histogram, the examples over the limit."""
    if t is None:
        return ""
    key = "tokens."
    limit = t.get("max_example_tokens")
    tiles = [
        _tile("examples counted", key + "examples", t["examples"]),
        _tile(f"tokens ({t['encoding']})", key + "total", t["total"]),
        *(_tile(f"{name} tokens per example", key + name, t[name]) for name in ("min", "p50", "p90", "p99", "max")),
        _tile(
            "without an assistant message",
            key + "without_assistant",
            t["without_assistant"],
            "bad" if t["without_assistant"] else "good",
        ),
    ]
    if limit is not None:
        tiles.append(
            _tile(f"over {limit:,} tokens", key + "over_limit", t["over_limit"], "bad" if t["over_limit"] else "good")
        )
    tiles += [
        _tile("training tokens per epoch", key + "training_tokens_per_epoch", t["training_tokens_per_epoch"]),
        _tile("epochs" + (" (default)" if t.get("epochs_default") else ""), key + "epochs", t["epochs"]),
        _tile("training tokens", key + "training_tokens", t["training_tokens"]),
    ]
    if "estimated_cost" in t:
        tiles.append(
            f'<div class="tile"><div class="v" data-key="tokens.estimated_cost">{t["estimated_cost"]:,.2f}</div>'
            f'<div class="l">estimated cost at <span data-key="tokens.price_per_mtok">{_e(t["price_per_mtok"])}</span>'
            " per 1M training tokens</div></div>"
        )
    histogram = t["histogram"]
    # Buckets past the longest example are empty: the chart stops at the last one in use.
    used = [label for label, n in histogram.items() if n]
    shown = dict(list(histogram.items())[: list(histogram).index(used[-1]) + 1]) if used else histogram
    chart = _figure(bar_chart(shown, "Examples by tokens per example"), "tokens_histogram")
    return (
        '<h2>Fine-tuning readiness (--tokens)</h2><div class="card"><p>Tokens per example as the sink writes '
        f'it, in <b data-key="tokens.encoding">{_e(t["encoding"])}</b>; quantiles by nearest rank. Training tokens '
        "cover the examples written, each billed up to the limit, for the epochs shown (docs/fine-tuning.md)."
        '</p><div class="tiles">'
        + "".join(tiles)
        + "</div>"
        + chart
        + _count_table(histogram, "tokens.histogram", "tokens per example")
        + _over_limit_html(t, details)
        + "</div>"
    )


def _over_limit_html(t: dict, details: RunDetails) -> str:
    limit = t.get("max_example_tokens")
    if limit is None:
        return '<p class="none">No --max-example-tokens: no limit checked.</p>'
    model = f" ({_e(t['limit_model'])})" if t.get("limit_model") else ""
    head = (
        f'<h3>Examples over <span data-key="tokens.max_example_tokens">{_num(limit)}</span> tokens{model}</h3>'
        f'<p>kept in the output: <b data-key="tokens.over_limit_kept">{_num(t["over_limit_kept"])}</b> · '
        "dead-lettered (over_token_limit): "
        f'<b data-key="tokens.over_limit_dropped">{_num(t["over_limit_dropped"])}</b></p>'
    )
    if not details.over_limit:
        return head + '<p class="none">No example is over the limit.</p>'
    rows = "".join(
        f'<tr><td class="mono">{_e(_short(item.get("id", "—"), 40))}</td><td class="mono">{_e(_where(item))}</td>'
        f'<td class="n">{_num(item.get("tokens", 0))}</td>'
        f"<td>{'dead-lettered' if 'reason' in item else 'kept'}</td></tr>"
        for item in details.over_limit
    )
    more = t["over_limit"] - len(details.over_limit)
    tail = (
        f'<p class="none">The first {len(details.over_limit):,}; {more:,} more are counted above.</p>'
        if more > 0
        else ""
    )
    return (
        head + '<table class="examples"><tr><th>id</th><th>source @ position</th><th class="n">tokens</th>'
        "<th>fate</th></tr>" + rows + "</table>" + tail
    )


def _opt_in_html(s: dict) -> str:
    """The counts only some runs have (repairs, --check, the ledger, windows, unknown keys)."""
    parts: list[str] = []
    add = parts.append
    if "repairs" in s:
        add(
            '<h2>Repairs (opt-in profile)</h2><div class="card">'
            + _counts_chart(s["repairs"], "repairs", "Repairs, by kind", "No repair was needed.", color=OK_COLOR)
            + _count_table(s["repairs"], "repairs", "repair")
            + "</div>"
        )
    if "violations" in s:
        add(
            '<h2>Sendability violations in the output (--check)</h2><div class="card">'
            + _counts_chart(
                s["violations"],
                "violations",
                "Violations, by kind",
                "No output conversation breaks a provider's pairing rules.",
                color=ALERT_COLOR,
            )
            + _count_table(s["violations"], "violations", "violation")
            + f'<p>conversations with violations: <b data-key="conversations_with_violations">'
            f"{_num(s.get('conversations_with_violations', 0))}</b></p></div>"
        )
    if "discarded_by_name" in s:
        add(_ledger_section(s))
    if "ledger" in s:
        add(
            '<h2>Ledger of discarded fields</h2><div class="card">'
            + _generic(s["ledger"], "ledger", "Ledger")
            + "</div>"
        )
    if "windows" in s:
        add('<h2>Windows over time</h2><div class="card">' + _generic(s["windows"], "windows", "Windows") + "</div>")
    for key in s:
        if key not in KNOWN_KEYS:
            add(f'<h2>{_e(key)}</h2><div class="card">' + _generic(s[key], key, key) + "</div>")
    return "".join(parts)


def _worst_sources_html(details) -> str:
    worst = worst_sources(details)
    if not worst:
        return '<h2>Worst sources</h2><p class="none">No file lost a message or a record.</p>'
    rows = "".join(
        f'<tr><td class="mono" title="{_e(path)}">{_e(_short(path))}</td>'
        f'<td class="n">{_num(st.records)}</td>'
        f'<td class="n">{_num(st.conversations_with_drops)}</td><td class="n">{_num(st.dropped)}</td>'
        f'<td class="n">{_num(st.dead_letters)}</td><td class="n">{st.affected_rate:.1%}</td></tr>'
        for path, st in worst
    )
    return (
        "<h2>Worst sources</h2>"
        "<p>Input files with the highest share of records that lost messages or were dead-lettered "
        f"(of {_num(len(details.sources))} file(s)).</p>"
        '<table class="worst"><tr><th>file</th><th class="n">records</th>'
        '<th class="n">with drops</th><th class="n">messages dropped</th><th class="n">dead letters</th>'
        '<th class="n">affected</th></tr>' + rows + "</table>"
    )


def _examples_html(s: dict, details) -> str:
    """The first conversations that lost messages, per reason, and the first dead letters."""
    drops = s.get("dropped_by_reason", {})
    letters = s.get("dead_letters_by_reason", {})
    parts = [
        "<h2>Examples</h2><p>The first conversations (in output order) that lost messages for each reason: "
        "messages before → after normalizing. Look them up by id in <code>normalized/</code> and "
        "<code>drops/</code>, or by position in the input.</p>"
    ]
    rows = []
    for reason in list(drops) + sorted(set(details.drop_examples) - set(drops)):
        for m in details.drop_examples.get(reason, []):
            others = ", ".join(f"{r} {n}" for r, n in m.get("drops", {}).items() if r != reason)
            rows.append(
                f'<tr><td>{_e(reason)}</td><td class="mono">{_e(_short(m.get("id", "?"), 40))}</td>'
                f'<td class="mono">{_e(_where(m))}</td><td class="n">{_num(m["drops"][reason])}</td>'
                f'<td class="n">{_num(m.get("messages_in", 0))} → {_num(m.get("messages_out", 0))}</td>'
                f'<td class="n">{_num(m.get("healed", 0))}</td><td>{_e(others)}</td></tr>'
            )
    if rows:
        parts.append(
            '<table class="examples"><tr><th>reason</th><th>id</th><th>source @ position</th>'
            '<th class="n">dropped</th><th class="n">messages</th><th class="n">healed</th>'
            "<th>other drops</th></tr>" + "".join(rows) + "</table>"
        )
    else:
        parts.append('<p class="none">No conversation lost a message.</p>')
    rows = [
        f'<tr><td>{_e(reason)}</td><td class="mono">{_e(_where(letter))}</td>'
        f"<td>{_e(_short(letter.get('detail', ''), 90))}</td></tr>"
        for reason in list(letters) + sorted(set(details.dead_letter_examples) - set(letters))
        for letter in details.dead_letter_examples.get(reason, [])
    ]
    if rows:
        parts.append(
            '<h3>Dead letters</h3><table class="examples"><tr><th>reason</th><th>source @ position</th>'
            "<th>detail</th></tr>" + "".join(rows) + "</table>"
        )
    return "".join(parts)


def _run_html(run: dict | None, generated: str | None) -> str:
    """The run's options and versions, and when the page was made."""
    parts = ["<h2>Run</h2>"]
    if run:
        rows = "".join(
            f'<tr><td>{_e(k)}</td><td class="mono">'
            f"{_e(_short(v if isinstance(v, str) else json.dumps(v), 120))}</td></tr>"
            for k, v in _flat_items(run)
        )
        parts.append(f'<table class="run">{rows}</table>')
    else:
        parts.append(
            '<p class="none">No record of the run\'s options (this report was rebuilt from the outputs alone).</p>'
        )
    generated = generated or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    report_versions = ", ".join(f"{k} {v}" for k, v in versions().items())
    parts.append(f'<p class="none">Report generated {_e(generated)} by {_e(report_versions)}.</p>')
    return "".join(parts)


def write_report(output: str, run: dict | None = None) -> str:
    """Write ``output/report.html`` from the run's outputs; returns its path.

    Raises ReportUnavailable without matplotlib, FileNotFoundError without summary.json.
    """
    from apache_beam.io.filesystems import FileSystems

    _pyplot()
    page = render_html(collect(output, run))
    path = FileSystems.join(output, REPORT_FILE)
    with FileSystems.create(path, mime_type="text/html") as handle:
        handle.write(page.encode("utf-8"))
    return path


def try_write_report(output: str, run: dict | None = None) -> str | None:
    """``write_report`` for the end of a run: a missing extra is a message, not a failure."""
    try:
        return write_report(output, run)
    except ReportUnavailable as why:
        LOG.warning("report skipped: %s", why)
        return None


def _ours_or_absent(output: str) -> bool:
    """True when OUT_DIR/report.html is missing or a page this module wrote (safe to replace)."""
    from apache_beam.io.filesystems import FileSystems

    path = FileSystems.join(output, REPORT_FILE)
    if not FileSystems.exists(path):
        return True
    with FileSystems.open(path) as handle:
        return TITLE_MARK in handle.read(4096)


def report_command(argv: list[str]) -> int:
    """``convnorm report OUT_DIR``: (re)build report.html of a finished run. Exit 0, 1 or 2."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(
        prog="convnorm report",
        description="Build OUT_DIR/report.html, one self-contained page with charts, from a finished run's "
        "summary.json, drops/ and dead_letter/ (and manifest.json when present). Replaces a "
        "report.html that convnorm wrote; changes nothing else.",
        epilog="exit status: 0 written; 1 no summary.json in OUT_DIR, or a report.html convnorm did not "
        "write is in the way; 2 bad arguments or matplotlib missing (pip install 'convnorm[report]')",
    )
    parser.add_argument("output", metavar="OUT_DIR", help="the --output directory of a finished run")
    args = parser.parse_args(argv)
    output = os.path.expanduser(args.output).rstrip("/") or "/"
    if not _ours_or_absent(output):
        print(
            f"convnorm report: error: {output}/{REPORT_FILE} exists and convnorm did not write it; move it away first",
            file=sys.stderr,
        )
        return 1
    try:
        path = write_report(output)
    except ReportUnavailable as why:
        print(f"convnorm report: error: {why}", file=sys.stderr)
        return 2
    except FileNotFoundError as why:
        print(f"convnorm report: error: {why}", file=sys.stderr)
        return 1
    print(f"report: {path}")
    return 0
