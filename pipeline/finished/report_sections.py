"""The sections every report has: the header with its tiles and warnings, messages, drops, the
worst sources, the examples (before and after), the run's options and the footer."""

from __future__ import annotations

import datetime
import json
from typing import Iterator

from pipeline.finished.charts import ALERT_COLOR, OK_COLOR, bar_chart
from pipeline.finished.html_page import count_table, counts_chart, escape, figure, number_text, tile
from pipeline.finished.report_data import ReportData, RunDetails, versions, worst_sources
from transforms.core.normalize import split_drops

#: Characters of a dead letter's raw input shown under it.
RAW_CHARS = 600


def where(record: dict, lines: dict) -> str:
    """``file.jsonl line 45 (byte 12,345)``, ``element 3`` of a .json, ``row 3`` of Parquet."""
    from pipeline.io.shard import where_text

    source, position = str(record.get("source", "?")), int(record.get("position", -1))
    return where_text(source, position, lines.get((source, position)))


def _warning_limit(manifest: dict):
    """``--warn-dead-letters`` of the run (its manifest's options; the default when not given)."""
    from pipeline.config.flags import DEFAULT_WARN_DEAD_LETTERS
    from transforms.totals.summary import DeadLetterLimit

    options = manifest.get("options")
    options = options if isinstance(options, dict) else {}
    try:
        return DeadLetterLimit.parse(options.get("warn_dead_letters", DEFAULT_WARN_DEAD_LETTERS), "--warn-dead-letters")
    except ValueError:
        return None


def header_html(data: ReportData) -> str:
    """Title line, the warnings a person must see first, and the tiles of totals."""
    from transforms.totals.summary import changed_inputs, dead_letter_warning

    s = data.summary
    accounted = s.get("accounted")
    kind = "streaming run" if data.windows else "run"
    header = (
        f'<h1>convnorm {kind} report</h1><div class="sub">{escape(data.output)} · profile '
        f'<b data-key="profile">{escape(s.get("profile", "?"))}</b> · '
        f"{'every record accounted for' if accounted else 'NOT every record accounted for'}"
        f'<span hidden data-key="accounted">{number_text(accounted)}</span></div>'
    )
    banners = []
    warning = dead_letter_warning(s, _warning_limit(data.manifest)) if "dead_letters_by_reason" in s else None
    if warning:
        banners.append(f"Warning: {warning}. The examples below show each reason; dead_letter/ holds them all.")
    if not accounted:
        banners.append("Records in ≠ normalized + dead-lettered: some records are not accounted for (no _SUCCESS).")
    if changed_inputs(s):
        banners.append(
            "An input changed while the run read it (input_changed in dead_letter/): the outputs do not "
            "hold the files as planned (no _SUCCESS)."
        )
    d = data.details
    if (d.dropped, d.dead_letters) != (s.get("dropped", 0), s.get("dead_letters", 0)):
        banners.append(
            f"The per-conversation files hold {d.dropped:,} drops and {d.dead_letters:,} dead letters, "
            f"summary.json {s.get('dropped', 0):,} and {s.get('dead_letters', 0):,}: they were changed since the run."
        )
    r = reconciliation(s)
    tiles = [
        tile("records in", "records_in", s.get("records_in", 0)),
        tile("normalized", "records_out", s.get("records_out", 0)),
        tile("dead-lettered", "dead_letters", s.get("dead_letters", 0), "bad" if s.get("dead_letters") else "good"),
        # The message tiles in the order they add up: in - dropped + added = out.
        tile("messages in", "messages_in", r["messages in"]),
        tile("messages dropped", None, r["messages dropped"], "bad" if s.get("dropped") else ""),
        tile("results added (healed)", "healed", r["results added (healed)"]),
        tile("messages out", "messages_out", r["messages out"]),
        tile(
            "dropped, MEM-5's count",
            "dropped",
            r["MEM-5 drop count"],
            "bad" if s.get("dropped") else "good",
            "messages dropped plus calls dropped from turns that stayed",
        ),
        tile("conversations with drops", "conversations_with_drops", s.get("conversations_with_drops", 0)),
        tile("blank lines skipped", "blank_lines", s.get("blank_lines", 0)),
    ]
    return (
        header
        + "".join(f'<p class="banner">{escape(b)}</p>' for b in banners)
        + '<div class="tiles">'
        + "".join(tiles)
        + "</div>"
    )


def reconciliation(s: dict) -> dict[str, int]:
    """How the message counts add up: in - messages dropped + results added = out, and the
    calls dropped from turns that stayed, which MEM-5's drop count adds (it counts both)."""
    calls = sum(split_drops(s.get("dropped_by_reason", {}))[1].values())
    return {
        "messages in": s.get("messages_in", 0),
        "messages dropped": s.get("dropped", 0) - calls,
        "results added (healed)": s.get("healed", 0),
        "messages out": s.get("messages_out", 0),
        "calls dropped from turns that stayed": calls,
        "MEM-5 drop count": s.get("dropped", 0),
    }


def messages_html(s: dict) -> str:
    """Messages in and out, reconciled."""
    r = reconciliation(s)
    adds_up = r["messages in"] - r["messages dropped"] + r["results added (healed)"] == r["messages out"]
    messages, calls = split_drops(s.get("dropped_by_reason", {}))
    message_reasons = ", ".join(f"{k} {n:,}" for k, n in messages.items() if n) or "none"
    call_reasons = ", ".join(f"{k} {n:,}" for k, n in calls.items() if n) or "none"
    rows = [
        ("messages in", r["messages in"], "", "as the readers produced them"),
        ("− messages dropped", r["messages dropped"], "derived.messages_dropped", message_reasons),
        ("+ results added (healed)", r["results added (healed)"], "", "a synthetic result for each unanswered call"),
        ("= messages out", r["messages out"], "", "" if adds_up else "DOES NOT ADD UP"),
        (
            "calls dropped from turns that stayed",
            r["calls dropped from turns that stayed"],
            "derived.calls_dropped",
            call_reasons,
        ),
        ("MEM-5 drop count (messages + calls)", r["MEM-5 drop count"], "", "summary.json's dropped"),
    ]
    table = "".join(
        f'<tr><td>{escape(label)}</td><td class="n" data-key="{escape(key)}">{number_text(value)}</td>'
        f"<td>{escape(note)}</td></tr>"
        if key
        else f'<tr><td>{escape(label)}</td><td class="n">{number_text(value)}</td><td>{escape(note)}</td></tr>'
        for label, value, key, note in rows
    )
    flow = {k: r[k] for k in ("messages in", "messages dropped", "results added (healed)", "messages out")}
    chart = figure(
        bar_chart(flow, "Messages in and out", value_title="messages", label_title="", color=OK_COLOR), "messages"
    )
    return (
        '<h2>Messages in and out</h2><div class="grid"><div class="card">'
        f'<table class="recon"><tr><th></th><th class="n">count</th><th>which</th></tr>{table}</table>'
        "<p>MEM-5 counts a call removed from a turn as a drop, as it counts a message removed from the list: "
        "its drop count is the messages dropped plus the calls dropped. The messages add up without the calls.</p>"
        f'</div><div class="card">{chart}</div></div>'
    )


def drops_html(s: dict) -> str:
    """What was dropped, what could not be read: charts and tables."""
    drops = s.get("dropped_by_reason", {})
    letters = s.get("dead_letters_by_reason", {})
    histogram = s.get("drops_histogram", {})
    return (
        '<h2>Drops and dead letters</h2><div class="grid">'
        + '<div class="card">'
        + counts_chart(
            drops,
            "dropped_by_reason",
            "Drops, by reason",
            "Nothing was dropped.",
            "drops (messages, or calls for unusable_call and redeclared_call)",
            "reason",
        )
        + count_table(drops, "dropped_by_reason", "drop reason", nonzero_only=True)
        + "</div>"
        + '<div class="card">'
        + counts_chart(
            letters,
            "dead_letters_by_reason",
            "Dead letters, by reason",
            "No record was dead-lettered.",
            "records",
            "reason",
            color=ALERT_COLOR,
        )
        + count_table(letters, "dead_letters_by_reason", "dead-letter reason", nonzero_only=True)
        + "</div>"
        + '<div class="card">'
        + figure(
            bar_chart(
                histogram,
                "Conversations by drops",
                value_title="conversations",
                label_title="drops in the conversation",
                horizontal=False,
            ),
            "drops_histogram",
        )
        + count_table(histogram, "drops_histogram", "drops in the conversation")
        + "</div></div>"
    )


def worst_sources_html(details: RunDetails) -> str:
    worst = worst_sources(details)
    if not worst:
        return '<h2>Worst sources</h2><p class="none">No file lost a message or a record.</p>'
    rows = "".join(
        f'<tr><td class="mono path" title="{escape(path)}">{escape(path)}</td>'
        f'<td class="n">{number_text(st.records)}</td>'
        f'<td class="n">{number_text(st.conversations_with_drops)}</td><td class="n">{number_text(st.dropped)}</td>'
        f'<td class="n">{number_text(st.dead_letters)}</td><td class="n">{st.affected_rate:.1%}</td></tr>'
        for path, st in worst
    )
    return (
        "<h2>Worst sources</h2>"
        "<p>Input files with the highest share of records that lost messages or were dead-lettered "
        f"(of {number_text(len(details.sources))} file(s)).</p>"
        '<div class="scroll"><table class="worst"><tr><th>file</th><th class="n">records</th>'
        '<th class="n">with drops</th><th class="n">drops</th><th class="n">dead letters</th>'
        '<th class="n">affected</th></tr>' + rows + "</table></div>"
    )


def explained_block(data: ReportData, rid: str, summary: str) -> str:
    """A conversation read back and explained, folded under ``summary`` (or why it could not be)."""
    from pipeline.finished.explain import explanation_html

    located = data.explained.get(rid)
    if located is None:
        return ""
    if isinstance(located, str):
        return f'<p class="none">{escape(located)}</p>'
    note = f'<p class="banner">{escape(located.mismatch)}</p>' if located.mismatch else ""
    return (
        f"<details><summary>{escape(summary)}</summary>"
        f'{note}<div class="scroll">{explanation_html(located.explanation)}</div></details>'
    )


def sample_html(data: ReportData, metrics: dict) -> str:
    """One conversation of a split's sample: where it is, its size, and the conversation."""
    rid = str(metrics.get("id", "?"))
    facts = [f"messages {number_text(metrics.get('messages_out', 0))}"]
    if isinstance(metrics.get("tool_calls"), int):
        facts.append(f"tool calls {number_text(metrics['tool_calls'])}")
    if isinstance(metrics.get("tokens"), int):
        facts.append(f"tokens {number_text(metrics['tokens'])}")
    return (
        '<div class="example sample">'
        f'<div class="head"><span class="mono id">{escape(rid)}</span> '
        f'<span class="where">{escape(where(metrics, data.lines))}</span></div>'
        f'<div class="facts">{" · ".join(facts)}</div>'
        f"{explained_block(data, rid, 'read it: as read and as written')}</div>"
    )


def examples_html(data: ReportData) -> str:
    """The first conversations with drops for each reason (each once), each with its repairs
    explained; then the first dead letters per reason, their details whole."""
    s, details = data.summary, data.details
    parts = [
        "<h2>Examples</h2><p>The first conversations (in output order) with drops for each reason, each "
        "shown once. Open one to see it before and after, side by side: every entry dropped, moved, "
        "re-keyed or healed is marked with its reason (<code>convnorm explain OUT --id ID</code> prints "
        "the same on a terminal).</p>"
    ]
    examples = details.examples(s.get("dropped_by_reason", {}))
    for metrics, reasons in examples:
        rid = str(metrics.get("id", "?"))
        drops = ", ".join(f"{r} {n:,}" for r, n in (metrics.get("drops") or {}).items())
        block = explained_block(data, rid, "before and after, each repair marked")
        parts.append(
            '<div class="example">'
            f'<div class="head"><span class="mono id">{escape(rid)}</span> '
            f'<span class="where">{escape(where(metrics, data.lines))}</span></div>'
            f'<div class="facts">example of {escape(", ".join(reasons))} · messages '
            f"{number_text(metrics.get('messages_in', 0))} → {number_text(metrics.get('messages_out', 0))} · "
            f"dropped: {escape(drops or 'none')} · healed {number_text(metrics.get('healed', 0))}</div>"
            f"{block}</div>"
        )
    if not examples:
        parts.append('<p class="none">No conversation lost a message.</p>')
    letters = s.get("dead_letters_by_reason", {})
    reasons = [r for r in letters if letters.get(r)] + sorted(set(details.dead_letter_examples) - set(letters))
    rows = [
        f'<tr><td>{escape(reason)}</td><td class="mono">{escape(where(letter, data.lines))}</td>'
        f'<td class="detail">{escape(letter.get("detail", ""))}'
        + (
            "<details><summary>raw input</summary>"
            f"<pre>{escape(str(letter.get('raw', ''))[:RAW_CHARS])}</pre></details>"
            if letter.get("raw")
            else ""
        )
        + "</td></tr>"
        for reason in reasons
        for letter in details.dead_letter_examples.get(reason, [])
    ]
    if rows:
        parts.append(
            '<h3>Dead letters</h3><div class="scroll"><table class="examples"><tr><th>reason</th><th>where</th>'
            "<th>detail</th></tr>" + "".join(rows) + "</table></div>"
        )
    return "".join(parts)


def _flat_items(value, prefix: str = "") -> Iterator[tuple[str, object]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _flat_items(v, f"{prefix}.{k}" if prefix else str(k))
    else:
        yield prefix, value


def run_html(manifest: dict) -> str:
    """The run's options and versions, from its manifest."""
    parts = ["<h2>Run</h2>"]
    if manifest:
        shown = {
            "command": manifest.get("command"),
            "options": manifest.get("options"),
            "versions": manifest.get("versions"),
        }
        rows = "".join(
            f'<tr><td>{escape(k)}</td><td class="mono">{escape(v if isinstance(v, str) else json.dumps(v))}</td></tr>'
            for k, v in _flat_items({k: v for k, v in shown.items() if v is not None})
        )
        parts.append(
            "<p>From the run's manifest: the options given (the others took their defaults; "
            "<code>convnorm --help</code> lists them) and the versions that ran.</p>"
            f'<div class="scroll"><table class="run">{rows}</table></div>'
        )
    else:
        parts.append('<p class="none">No manifest: the options of the run are not recorded in its outputs.</p>')
    return "".join(parts)


def footer_html(run: dict, generated: str | None) -> str:
    """When and by what the page was made, and how long the run took when it made it."""
    generated = generated or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    report_versions = ", ".join(f"{k} {v}" for k, v in versions().items())
    took = f"The run took {run['took']}. " if isinstance(run.get("took"), str) else ""
    return (
        f'<footer class="none">{escape(took)}Report generated {escape(generated)} '
        f"by {escape(report_versions)}.</footer>"
    )
