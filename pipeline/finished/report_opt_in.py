"""The report's sections that appear only when their data does: windows over time (streaming),
repairs (``--profile lossless``), violations (``--check``), tokens, examples over
``--max-example-tokens``, the ledger of discarded fields, and any other summary key this page
does not know yet (shown generically rather than hidden)."""

from __future__ import annotations

import json

from pipeline.finished.charts import ALERT_COLOR, OK_COLOR, bar_chart, line_chart
from pipeline.finished.html_page import (
    cell_text,
    count_table,
    counts_chart,
    escape,
    figure,
    is_number,
    number_text,
    short_text,
    tile,
)
from pipeline.finished.report_data import ReportData
from pipeline.finished.report_sections import where

#: Rows of a table of unknown shape (windows of a long streaming run can be many).
GENERIC_ROWS = 200


#: The ledger of discarded fields in summary.json (transforms/totals/summary.py, docs/ledger.md).
LEDGER_KEYS = ("discarded_fields", "discarded_chars", "discarded_by_name", "conversations_with_discards")


#: Summary keys this page lays out itself; any other key gets a generic section.
KNOWN_KEYS = frozenset(
    {
        "call_logs",
        "labels",
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
        # The training set's sections (pipeline.finished.report_dataset)
        "training",
        "dedupe",
        "splits",
        "redacted",
        *LEDGER_KEYS,
    }
)


#: The series of the windows chart: summary key -> legend.
WINDOW_SERIES = {"records_in": "records", "dropped": "drops", "dead_letters": "dead letters"}


#: A window summary's ``progress`` object (streaming): key -> legend.
PROGRESS_SERIES = {
    "rows_per_s": "records/s",
    "files_done": "files done",
    "files_pending": "files pending",
    "oldest_pending_age_s": "oldest pending (s)",
}


def windows_html(data: ReportData) -> str:
    """A streaming run's windows over time: counts per window, progress, and whether they add up."""
    if not data.windows:
        return ""
    from transforms.totals import summary as summaries

    labels = [_window_label(w.name) for w in data.windows]
    counts = {legend: [w.summary.get(key, 0) for w in data.windows] for key, legend in WINDOW_SERIES.items()}
    parts = [
        '<h2>Windows over time</h2><div class="grid"><div class="card">',
        figure(line_chart(counts, labels, "Per window", x_title="window start (UTC)", y_title="count"), "windows"),
        "</div>",
    ]
    progress = [w.summary.get("progress") for w in data.windows]
    if any(isinstance(p, dict) for p in progress):
        series = {
            legend: [float((p or {}).get(key) or 0) for p in progress]
            for key, legend in PROGRESS_SERIES.items()
            if any(isinstance(p, dict) and key in p for p in progress)
        }
        parts.append(
            '<div class="card">'
            + figure(
                line_chart(series, labels, "Progress per window", x_title="window start (UTC)", y_title="value"),
                "progress",
            )
            + "</div>"
        )
    parts.append("</div>")
    total: dict = {}
    for w in data.windows:
        total = summaries.merge(total, {k: v for k, v in w.summary.items() if is_number(v) or k.endswith("_by_reason")})
    checked = ("records_in", "records_out", "dead_letters", "dropped", "healed", "messages_in", "messages_out")
    differ = [k for k in checked if total.get(k, 0) != data.summary.get(k, 0)]
    if differ:
        parts.append(
            '<p class="banner">The windows do not add up to summary.json for '
            + ", ".join(f"{k} ({total.get(k, 0):,} vs {data.summary.get(k, 0):,})" for k in differ)
            + ": a window may still be open, or the run stopped before its last summary.</p>"
        )
    else:
        parts.append(f"<p>{len(data.windows):,} windows; their totals are summary.json's (the tiles above).</p>")
    head = "".join(f'<th class="n">{escape(legend)}</th>' for legend in WINDOW_SERIES.values())
    rows = "".join(
        f'<tr><td class="mono">{escape(w.name)}</td>'
        + "".join(f'<td class="n">{number_text(w.summary.get(key, 0))}</td>' for key in WINDOW_SERIES)
        + "</tr>"
        for w in data.windows[-GENERIC_ROWS:]
    )
    parts.append(f'<div class="scroll"><table><tr><th>window</th>{head}</tr>{rows}</table></div>')
    return "".join(parts)


def _window_label(name: str) -> str:
    """``20261130T120000Z-...`` -> ``11-30 12:00:00``."""
    start = name.split("-", 1)[0]
    if len(start) == 16 and start[8] == "T":
        return f"{start[4:6]}-{start[6:8]} {start[9:11]}:{start[11:13]}:{start[13:15]}"
    return name


def opt_in_html(s: dict) -> str:
    """The counts only some runs have (repairs, --check, the ledger, windows, unknown keys)."""
    parts: list[str] = []
    add = parts.append
    if "repairs" in s:
        add(
            '<h2>Repairs (opt-in profile)</h2><div class="card">'
            + counts_chart(
                s["repairs"], "repairs", "Repairs, by kind", "No repair was needed.", "repairs", "kind", color=OK_COLOR
            )
            + count_table(s["repairs"], "repairs", "repair")
            + "</div>"
        )
    if "violations" in s:
        add(
            '<h2>Sendability violations in the output (--check)</h2><div class="card">'
            + counts_chart(
                s["violations"],
                "violations",
                "Violations, by kind",
                "No output conversation breaks a provider's pairing rules.",
                "violations",
                "kind",
                color=ALERT_COLOR,
            )
            + count_table(s["violations"], "violations", "violation")
            + f'<p>conversations with violations: <b data-key="conversations_with_violations">'
            f"{number_text(s.get('conversations_with_violations', 0))}</b></p></div>"
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
    if "call_logs" in s:
        add(_call_logs_section(s["call_logs"]))
    if "labels" in s:
        add(_labels_section(s["labels"]))
    for key in s:
        if key not in KNOWN_KEYS:
            add(f'<h2>{escape(key)}</h2><div class="card">' + _generic(s[key], key, key) + "</div>")
    return "".join(parts)


def _labels_section(labels: dict) -> str:
    """How many labels were read and where each ended (docs/call-logs.md)."""
    counts = {name: n for name, n in labels.items() if not isinstance(n, dict)}
    unmatched = labels.get("label_unmatched") or {}
    return (
        '<h2>Labels joined to their conversations</h2><div class="card">'
        + count_table(counts, "labels", "labels")
        + count_table(
            unmatched,
            "labels.label_unmatched",
            "labels unmatched (no conversation holds their call or trace), by source",
        )
        + "<p>Each label (a score, a feedback, an annotation, a rating) is joined to the conversation "
        "holding the call or the trace it judges, and kept in its metadata (labels, scores); a stale "
        "version of a label is superseded by its latest.</p></div>"
    )


def _call_logs_section(calls: dict) -> str:
    """How many call-log records became how many conversations (docs/call-logs.md)."""
    counts = {name: n for name, n in calls.items() if not isinstance(n, dict)}
    skipped = calls.get("skipped_by_kind") or {}
    return (
        '<h2>Conversations assembled from call logs</h2><div class="card">'
        + count_table(counts, "call_logs", "call logs")
        + count_table(skipped, "call_logs.skipped_by_kind", "parts skipped (no call, no tool result), by kind")
        + "<p>Each call-log record holds LLM calls (and tool results recorded apart); the calls of one "
        "conversation collapse into it when their history is a prefix of it, and a history that is not "
        "becomes a branch of its own. Each assembled conversation is in the normalized output or the "
        "dead letters; its drops/ line lists the calls that made it.</p></div>"
    )


def tokens_html(t: dict | None, data: ReportData) -> str:
    """Fine-tuning readiness (--tokens): the figures, the histogram, the examples over the limit."""
    if t is None:
        return ""
    key = "tokens."
    limit = t.get("max_example_tokens")
    tiles = [
        tile("examples counted", key + "examples", t["examples"]),
        tile(f"tokens ({t['encoding']})", key + "total", t["total"]),
        *(tile(f"{name} tokens per example", key + name, t[name]) for name in ("min", "p50", "p90", "p99", "max")),
        tile(
            "without an assistant message",
            key + "without_assistant",
            t["without_assistant"],
            "bad" if t["without_assistant"] else "good",
        ),
    ]
    if limit is not None:
        tiles.append(
            tile(f"over {limit:,} tokens", key + "over_limit", t["over_limit"], "bad" if t["over_limit"] else "good")
        )
    tiles += [
        tile("training tokens per epoch", key + "training_tokens_per_epoch", t["training_tokens_per_epoch"]),
        tile("epochs" + (" (default)" if t.get("epochs_default") else ""), key + "epochs", t["epochs"]),
        tile("training tokens", key + "training_tokens", t["training_tokens"]),
        *(
            tile(
                f"{name} split tokens per epoch (not billed)",
                f"{key}splits.{name}.tokens_per_epoch",
                split["tokens_per_epoch"],
            )
            for name, split in t.get("splits", {}).items()
            if name != "train"
        ),
    ]
    if "estimated_cost" in t:
        tiles.append(
            f'<div class="tile"><div class="v" data-key="tokens.estimated_cost">{t["estimated_cost"]:,.2f}</div>'
            '<div class="l">estimated cost at '
            f'<span data-key="tokens.price_per_mtok">{escape(t["price_per_mtok"])}</span>'
            " per 1M training tokens</div></div>"
        )
    histogram = t["histogram"]
    # Buckets past the longest example are empty: the chart stops at the last one in use.
    used = [label for label, n in histogram.items() if n]
    shown = dict(list(histogram.items())[: list(histogram).index(used[-1]) + 1]) if used else histogram
    chart = bar_chart(
        shown,
        "Examples by tokens per example",
        value_title="examples",
        label_title="tokens per example",
        horizontal=False,
    )
    return (
        '<h2>Fine-tuning readiness (--tokens)</h2><div class="card"><p>Tokens per example as the sink writes '
        f'it, in <b data-key="tokens.encoding">{escape(t["encoding"])}</b>; quantiles by nearest rank. Training tokens '
        "cover the examples written, each billed up to the limit, for the epochs shown (docs/fine-tuning.md)."
        '</p><div class="tiles">'
        + "".join(tiles)
        + "</div>"
        + figure(chart, "tokens_histogram")
        + count_table(histogram, "tokens.histogram", "tokens per example")
        + _over_limit_html(t, data)
        + "</div>"
    )


def _over_limit_html(t: dict, data: ReportData) -> str:
    over = data.details.over_limit
    limit = t.get("max_example_tokens")
    if limit is None:
        return '<p class="none">No --max-example-tokens: no limit checked.</p>'
    model = f" ({escape(t['limit_model'])})" if t.get("limit_model") else ""
    head = (
        f'<h3>Examples over <span data-key="tokens.max_example_tokens">{number_text(limit)}</span> tokens{model}</h3>'
        f'<p>kept in the output: <b data-key="tokens.over_limit_kept">{number_text(t["over_limit_kept"])}</b> · '
        "dead-lettered (over_token_limit): "
        f'<b data-key="tokens.over_limit_dropped">{number_text(t["over_limit_dropped"])}</b></p>'
    )
    if not over:
        return head + '<p class="none">No example is over the limit.</p>'
    rows = "".join(
        f'<tr><td class="mono">{escape(short_text(item.get("id", "—"), 40))}</td>'
        f'<td class="mono">{escape(where(item, data.lines))}</td>'
        f'<td class="n">{number_text(item.get("tokens", 0))}</td>'
        f"<td>{'dead-lettered' if 'reason' in item else 'kept'}</td></tr>"
        for item in over
    )
    more = t["over_limit"] - len(over)
    tail = f'<p class="none">The first {len(over):,}; {more:,} more are counted above.</p>' if more > 0 else ""
    return (
        head + '<div class="scroll"><table class="examples"><tr><th>id</th><th>where</th><th class="n">tokens</th>'
        "<th>fate</th></tr>" + rows + "</table></div>" + tail
    )


def _ledger_section(s: dict) -> str:
    """What coercion discarded beside the drops: fields by name and the text they held."""
    by_name = s["discarded_by_name"]
    rows = "".join(
        f'<tr><td>{escape(name)}</td><td class="n" data-key="discarded_by_name.{escape(name)}.fields">'
        f'{number_text(n["fields"])}</td><td class="n" data-key="discarded_by_name.{escape(name)}.chars">'
        f"{number_text(n['chars'])}</td></tr>"
        for name, n in by_name.items()
    )
    return (
        '<h2>Ledger of discarded fields</h2><div class="card">'
        "<p>Not message drops: fields the flat message shape does not keep (MEM-5 rule 1), and the "
        'characters of text they held.</p><div class="tiles">'
        + tile("fields discarded", "discarded_fields", s.get("discarded_fields", 0))
        + tile("characters in them", "discarded_chars", s.get("discarded_chars", 0))
        + tile("conversations with discards", "conversations_with_discards", s.get("conversations_with_discards", 0))
        + "</div>"
        + counts_chart(
            {k: v["fields"] for k, v in by_name.items()},
            "discarded_by_name",
            "Discarded fields, by name",
            "Coercion discarded nothing.",
            "fields",
            "field name",
        )
        + f'<table><tr><th>field</th><th class="n">fields</th><th class="n">characters</th></tr>{rows}</table></div>'
    )


def _generic(value, key: str, title: str) -> str:
    """A section for summary data whose shape this page does not know in advance.

    Counts (a mapping of numbers) are a bar chart and a table; rows (a list of mappings, or a
    mapping of mappings such as windows by start time) are a line chart of their numeric
    columns and a table of at most ``GENERIC_ROWS`` rows; anything else is shown as JSON.
    """
    if isinstance(value, dict) and value and all(is_number(v) for v in value.values()):
        chart = bar_chart(value, title, value_title="count", label_title="name")
        return figure(chart, key) + count_table(value, key, "name")
    if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
        value = [{"key": k, **v} for k, v in value.items()]
    if isinstance(value, list) and value and all(isinstance(row, dict) for row in value):
        return _generic_rows(value, key, title)
    if isinstance(value, dict) and value:
        return "".join(f"<h3>{escape(k)}</h3>" + _generic(v, f"{key}.{k}", f"{title}: {k}") for k, v in value.items())
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)
    return f'<pre data-key="{escape(key)}">{escape(text)}</pre>'


def _generic_rows(rows: list[dict], key: str, title: str) -> str:
    """Rows of unknown shape: a line chart of their numeric columns against the first label
    column (or the row number), then a table of the first ``GENERIC_ROWS`` rows."""
    columns = list(dict.fromkeys(k for row in rows for k in row))
    numeric = [c for c in columns if all(is_number(row.get(c, 0)) for row in rows)]
    labels = [c for c in columns if c not in numeric]
    chart = ""
    if numeric and len(rows) > 1:
        xlabels = [str(row.get(labels[0], i)) if labels else str(i) for i, row in enumerate(rows)]
        series = {c: [row.get(c, 0) for row in rows] for c in numeric}
        chart = figure(line_chart(series, xlabels, title, x_title=labels[0] if labels else "row", y_title="value"), key)
    return chart + _generic_table(rows, columns, numeric, key)


def _generic_table(rows: list[dict], columns: list[str], numeric: list[str], key: str) -> str:
    """The table of ``_generic_rows``: at most ``GENERIC_ROWS`` rows, and a line saying so."""
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="{"n" if c in numeric else ""}" data-key="{escape(key)}.{i}.{escape(c)}">'
            f"{escape(cell_text(row.get(c, '')))}</td>"
            for c in columns
        )
        + "</tr>"
        for i, row in enumerate(rows[:GENERIC_ROWS])
    )
    more = (
        (f'<p class="none">The first {GENERIC_ROWS:,} of {len(rows):,} rows; all of them are in summary.json.</p>')
        if len(rows) > GENERIC_ROWS
        else ""
    )
    return f'<div class="scroll"><table><tr>{head}</tr>{body}</table></div>' + more
