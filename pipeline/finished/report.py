"""The run report: ``report.html`` beside ``summary.json``, one self-contained page.

Built from what a run leaves on disk, never from the pipeline: ``summary.json`` (totals),
``drops/`` (one drop-metrics line per conversation: worst sources, examples per reason),
``dead_letter/`` (dead letters per source, examples per reason), ``_convnorm_manifest.json``
(the options and versions), and, for a streaming output, every window's
``OUT/<window>/summary.json`` (the windows over time) with the files' lines under
``OUT/<window>/<file>/``. So the page a run writes and the page ``convnorm report OUT_DIR``
rebuilds are the same page; only the footer (when it was made, how long the run took) differs.

Charts are inline SVG drawn by ``pipeline.finished.charts`` (no library, no network): the page needs no
other file. Each example conversation comes with its repairs explained: the record is read
back from its source and normalized again with the core's trace on (``pipeline.finished.explain``),
before and after side by side, each entry dropped, moved, re-keyed or healed marked with its
reason.

Sections appear only when their data does: the dead-letter warning (past
``--warn-dead-letters``), repairs (``--profile lossless``), violations (``--check``), the
ledger of discarded fields, windows over time (streaming), and any other summary key this page
does not know yet (shown generically rather than hidden). Everything read from the data is
HTML-escaped.

Layout: plain functions that read (``scan_drops``, ``scan_dead_letters``, ``collect``), one
that renders (``render_html``, ``render_page``), one that writes again (``write_report``, for
``convnorm report``; a run writes its page as one of its outputs, ``pipeline.execution.execute``); no
Beam pipeline here.
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import platform
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Iterator

from pipeline.finished.charts import ALERT_COLOR, BAR_COLOR, OK_COLOR, bar_chart, line_chart
from pipeline.finished.html_page import (
    cell_text,
    count_table,
    counts_chart,
    escape,
    figure,
    is_number,
    number_text,
    page_html,
    short_text,
    tile,
)
from pipeline.finished.output_dir import DamagedRun, Window, json_lines, matched, read_json, windows
from pipeline.io.output_names import DEAD_LETTER_PATTERNS, MANIFEST_FILE, REPORT_FILE
from transforms.normalize import split_drops

if TYPE_CHECKING:
    from pipeline.finished.explain import Located, RunInputs

LOG = logging.getLogger("convnorm")

#: How a page this module wrote begins its title. Not a proof of anything: a user's page may
#: say the same; the manifest's sha256 is what makes a page convnorm's (pipeline/io/ownership.py).
TITLE_MARK = b"<title>convnorm report: "
#: Rows of the worst-sources table.
WORST_SOURCES = 10
#: Example conversations (or dead letters) shown per reason.
EXAMPLES_PER_REASON = 3
#: Rows of a table of unknown shape (windows of a long streaming run can be many).
GENERIC_ROWS = 200
#: Characters of a dead letter's raw input shown under it.
RAW_CHARS = 600
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

__all__ = ["ALERT_COLOR", "BAR_COLOR", "OK_COLOR", "REPORT_FILE", "collect", "render_html", "write_report"]


class ReportUnavailable(RuntimeError):
    """The report cannot be written here."""


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
    #: drops and dead letters as the per-record lines count them (the page checks them against summary.json)
    dropped: int = 0
    dead_letters: int = 0
    #: The first examples over --max-example-tokens (--tokens): drop metrics of those kept,
    #: dead letters of those dropped, in output order.
    over_limit: list[dict] = field(default_factory=list)

    def source(self, path: str) -> SourceStats:
        stats = self.sources.get(path)
        if stats is None:
            stats = self.sources[path] = SourceStats()
        return stats

    def examples(self, order: Iterable[str] = ()) -> list[tuple[dict, list[str]]]:
        """Each example conversation once, with the reasons it is an example of: in the order of
        ``order`` (summary.json's reasons), then any other reason."""
        reasons = list(order) + sorted(set(self.drop_examples) - set(order))
        shown: dict[str, tuple[dict, list[str]]] = {}
        for reason in reasons:
            for metrics in self.drop_examples.get(reason, []):
                key = f"{metrics.get('source')}\0{metrics.get('position')}"
                shown.setdefault(key, (metrics, []))[1].append(reason)
        return list(shown.values())


def scan_drops(metrics: Iterable[dict], details: RunDetails, examples: int = EXAMPLES_PER_REASON) -> None:
    """Fold drop-metrics records (one per normalized conversation) into ``details``."""
    for m in metrics:
        stats = details.source(str(m.get("source", "?")))
        stats.records += 1
        stats.messages_in += m.get("messages_in", 0)
        stats.dropped += m.get("dropped", 0)
        details.dropped += m.get("dropped", 0)
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
        details.dead_letters += 1
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


@dataclass
class ReportData:
    output: str
    summary: dict
    details: RunDetails
    #: The run's manifest (options, versions), or {} (a streaming output has none)
    manifest: dict
    #: What only the run itself knows (``run_seconds``), shown in the footer; {} when rebuilt
    run: dict
    #: A streaming output's windows, oldest first ([] for a batch run)
    windows: list[Window] = field(default_factory=list)
    #: (source, position) -> 1-based line, for the positions the page shows
    lines: dict[tuple[str, int], int] = field(default_factory=dict)
    #: example id -> its explanation (``pipeline.finished.explain.Located``) or why there is none
    explained: dict[str, Located | str] = field(default_factory=dict)


def collect(output: str, run: dict | None = None, explain_examples: bool = True) -> ReportData:
    """Read a finished run's outputs under ``output``. Raises FileNotFoundError without summary.json."""
    from apache_beam.io.filesystems import FileSystems

    from pipeline.finished.explain import run_inputs
    from pipeline.io.output_names import DROPS_PATTERNS

    summary = read_json(FileSystems.join(output, "summary.json"))
    if summary is None:
        raise FileNotFoundError(f"{output!r} holds no summary.json (is it a convnorm run's --output?)")
    details = RunDetails()
    scan_drops(json_lines(matched(output, DROPS_PATTERNS)), details)
    scan_dead_letters(json_lines(matched(output, DEAD_LETTER_PATTERNS)), details)
    manifest = read_json(FileSystems.join(output, MANIFEST_FILE)) or {}
    data = ReportData(output, summary, details, manifest, dict(run or {}), windows(output))
    # The examples' sources are opened only when the run read them (a drops/ line can name any file).
    inputs = run_inputs(output) if _example_sources(details) else None
    data.lines = _example_lines(details, inputs)
    if explain_examples:
        data.explained = _explain_examples(output, details, summary, inputs)
    return data


def _example_sources(details: RunDetails) -> dict[str, set[int]]:
    """Source -> the positions the examples show there."""
    wanted: dict[str, set[int]] = {}
    for records in (*details.drop_examples.values(), *details.dead_letter_examples.values(), details.over_limit):
        for record in records:
            wanted.setdefault(str(record.get("source")), set()).add(int(record.get("position", -1)))
    return wanted


def _read_by_the_run(inputs: RunInputs | None, source: str) -> bool:
    """Whether the run read ``source`` (``inputs``: ``run_inputs``; None: no example to ask for)."""
    from pipeline.finished.explain import Refused, check_source

    if inputs is None:
        return False
    try:
        check_source(inputs, source, None)
    except Refused:
        return False  # its example says why (``_explain_examples``); no line number shown
    return True


def _example_lines(details: RunDetails, inputs: RunInputs | None = None) -> dict[tuple[str, int], int]:
    """Line numbers of every position the examples show, one read per source file the run read
    (``inputs``: ``run_inputs``; None: none is read)."""
    from pipeline.io.reread import line_numbers

    return {
        (source, position): line
        for source, positions in _example_sources(details).items()
        if _read_by_the_run(inputs, source)
        for position, line in line_numbers(source, positions).items()
    }


def _explain_examples(
    output: str, details: RunDetails, summary: dict, inputs: RunInputs | None = None
) -> dict[str, Located | str]:
    """Each example conversation read back and explained, or the reason it could not be."""
    from pipeline.finished.explain import NotFound, locate

    explained: dict[str, Located | str] = {}
    for metrics, _ in details.examples(summary.get("dropped_by_reason", {})):
        rid = str(metrics.get("id"))
        try:
            explained[rid] = locate(output, rid, metrics=metrics, inputs=inputs)
        except NotFound as why:
            explained[rid] = str(why)
        except Exception as error:  # noqa: BLE001 — the page is still worth having without this block
            explained[rid] = f"could not be read back: {type(error).__name__}: {error}"
    return explained


def versions() -> dict[str, str]:
    """Versions of the software that made the report."""
    from importlib import metadata

    found = {"python": platform.python_version()}
    for name in ("convnorm", "apache-beam", "orjson", "pyarrow"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


# --------------------------------------------------------------------------------------------
# HTML pieces


def _where(record: dict, lines: dict) -> str:
    """``file.jsonl line 45 (byte 12,345)``, ``element 3`` of a .json, ``row 3`` of Parquet."""
    from pipeline.io.shard import where_text

    source, position = str(record.get("source", "?")), int(record.get("position", -1))
    return where_text(source, position, lines.get((source, position)))


# --------------------------------------------------------------------------------------------
# Sections


def render_html(data: ReportData, generated: str | None = None) -> str:
    """The whole page as one string (charts inline)."""
    s = data.summary
    parts = [
        _header_html(data),
        _windows_html(data),
        _messages_html(s),
        _drops_html(s),
        _opt_in_html({k: v for k, v in s.items() if not (k == "windows" and data.windows)}),
        _tokens_html(s.get("tokens"), data),
        _worst_sources_html(data.details),
        _examples_html(data),
        _run_html(data.manifest),
        _footer_html(data.run, generated),
    ]
    return page_html(f"convnorm report: {data.output}", "".join(parts))


def _warning_limit(manifest: dict):
    """``--warn-dead-letters`` of the run (its manifest's options; the default when not given)."""
    from pipeline.config.flags import DEFAULT_WARN_DEAD_LETTERS
    from transforms.summary import DeadLetterLimit

    options = manifest.get("options")
    options = options if isinstance(options, dict) else {}
    try:
        return DeadLetterLimit.parse(options.get("warn_dead_letters", DEFAULT_WARN_DEAD_LETTERS), "--warn-dead-letters")
    except ValueError:
        return None


def _header_html(data: ReportData) -> str:
    """Title line, the warnings a person must see first, and the tiles of totals."""
    from transforms.summary import changed_inputs, dead_letter_warning

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


def _messages_html(s: dict) -> str:
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


def _drops_html(s: dict) -> str:
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


#: The series of the windows chart: summary key -> legend.
WINDOW_SERIES = {"records_in": "records", "dropped": "drops", "dead_letters": "dead letters"}
#: A window summary's ``progress`` object (streaming): key -> legend.
PROGRESS_SERIES = {
    "rows_per_s": "records/s",
    "files_done": "files done",
    "files_pending": "files pending",
    "oldest_pending_age_s": "oldest pending (s)",
}


def _windows_html(data: ReportData) -> str:
    """A streaming run's windows over time: counts per window, progress, and whether they add up."""
    if not data.windows:
        return ""
    from transforms import summary as summaries

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


def _opt_in_html(s: dict) -> str:
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
    for key in s:
        if key not in KNOWN_KEYS:
            add(f'<h2>{escape(key)}</h2><div class="card">' + _generic(s[key], key, key) + "</div>")
    return "".join(parts)


def _tokens_html(t: dict | None, data: ReportData) -> str:
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
        f'<td class="mono">{escape(_where(item, data.lines))}</td>'
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
        columns = list(dict.fromkeys(k for row in value for k in row))
        numeric = [c for c in columns if all(is_number(row.get(c, 0)) for row in value)]
        labels = [c for c in columns if c not in numeric]
        chart = ""
        if numeric and len(value) > 1:
            xlabels = [str(row.get(labels[0], i)) if labels else str(i) for i, row in enumerate(value)]
            series = {c: [row.get(c, 0) for row in value] for c in numeric}
            chart = figure(
                line_chart(series, xlabels, title, x_title=labels[0] if labels else "row", y_title="value"), key
            )
        head = "".join(f"<th>{escape(c)}</th>" for c in columns)
        shown = value[:GENERIC_ROWS]
        body = "".join(
            "<tr>"
            + "".join(
                f'<td class="{"n" if c in numeric else ""}" data-key="{escape(key)}.{i}.{escape(c)}">'
                f"{escape(cell_text(row.get(c, '')))}</td>"
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
        return "".join(f"<h3>{escape(k)}</h3>" + _generic(v, f"{key}.{k}", f"{title}: {k}") for k, v in value.items())
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)
    return f'<pre data-key="{escape(key)}">{escape(text)}</pre>'


def _worst_sources_html(details: RunDetails) -> str:
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


def _examples_html(data: ReportData) -> str:
    """The first conversations with drops for each reason (each once), each with its repairs
    explained; then the first dead letters per reason, their details whole."""
    from pipeline.finished.explain import explanation_html

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
        located = data.explained.get(rid)
        if located is None:
            block = ""
        elif isinstance(located, str):
            block = f'<p class="none">{escape(located)}</p>'
        else:
            note = f'<p class="banner">{escape(located.mismatch)}</p>' if located.mismatch else ""
            block = (
                "<details><summary>before and after, each repair marked</summary>"
                f'{note}<div class="scroll">{explanation_html(located.explanation)}</div></details>'
            )
        parts.append(
            '<div class="example">'
            f'<div class="head"><span class="mono id">{escape(rid)}</span> '
            f'<span class="where">{escape(_where(metrics, data.lines))}</span></div>'
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
        f'<tr><td>{escape(reason)}</td><td class="mono">{escape(_where(letter, data.lines))}</td>'
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


def _run_html(manifest: dict) -> str:
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


def _footer_html(run: dict, generated: str | None) -> str:
    """When and by what the page was made, and how long the run took when it made it."""
    generated = generated or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    report_versions = ", ".join(f"{k} {v}" for k, v in versions().items())
    took = ""
    if isinstance(run.get("run_seconds"), (int, float)):
        from pipeline.cli.progress import duration_text

        took = f"The run took {duration_text(run['run_seconds'])}. "
    return (
        f'<footer class="none">{escape(took)}Report generated {escape(generated)} '
        f"by {escape(report_versions)}.</footer>"
    )


# --------------------------------------------------------------------------------------------
# Writing


def render_page(output: str, run: dict | None = None) -> bytes:
    """The page of the run whose outputs are under ``output``, as the bytes to write.

    ``run``: what only the run knows (``run_seconds``). Raises FileNotFoundError without
    summary.json, DamagedRun for a file of the run that cannot be read. A path that is not
    UTF-8 (a directory named in another encoding) is shown with its undecodable bytes
    replaced: the page is UTF-8.
    """
    page = render_html(collect(output, run))
    try:  # the path's undecodable bytes (held as surrogate escapes) back to bytes, shown as U+FFFD
        return page.encode("utf-8", "surrogateescape").decode("utf-8", "replace").encode("utf-8")
    except UnicodeEncodeError:
        return page.encode("utf-8", "replace")


def write_report(output: str, run: dict | None = None, *, locked: bool = False) -> str:
    """(Re)write ``output/report.html`` of a finished run, as ``convnorm report`` does; returns
    its path. Holds the run's lock (``locked``: the caller does); replaces a page only when the
    run's manifest (or a streaming output's marker) lists it with the size and sha256 it still
    has, and records the new one there (``pipeline.execution.finalize.rewrite_page``).

    Raises FileNotFoundError (no summary.json), DamagedRun, OutputError (a page that is not
    provably convnorm's is in the way), LockError (a run is using the directory).
    """
    from pipeline.execution.finalize import rewrite_page

    return rewrite_page(output, REPORT_FILE, lambda where: render_page(where, run), locked=locked)


def try_write_report(output: str, run: dict | None = None, *, locked: bool = False) -> str | None:
    """``write_report`` at the end of a streaming run (which holds the lock: ``locked``): a page
    that cannot be written is one warning line, never a failure; None then. (A batch run writes
    its page as one of its outputs: ``pipeline.execution.output_spec.Page``.)"""
    try:
        return write_report(output, run, locked=locked)
    except Exception as why:  # noqa: BLE001 — the run's outputs are whole without their page
        text = " ".join(str(why).split())[:300]
        LOG.warning("report skipped: %s: %s (convnorm report %s tries again)", type(why).__name__, text, output)
        return None


#: The command's name, in its usage and errors.
PROG = "convnorm report"


def report_command(argv: list[str]) -> int:
    """``convnorm report OUT_DIR``: (re)build report.html of a finished run. Exit 0, 1 or 2."""
    from pipeline.console import ArgumentParser, print_error, print_line

    parser = ArgumentParser(
        prog=PROG,
        description="Build OUT_DIR/report.html, one self-contained page with charts and examples, from a "
        "finished run's summary.json, drops/, dead_letter/ and _convnorm_manifest.json (a streaming run's "
        "window summaries too): the page the run wrote, rebuilt. Replaces only a report.html the run's "
        "manifest lists as convnorm's (and records the new one there); changes nothing else.",
        epilog="exit status: 0 written; 1 no summary.json in OUT_DIR, a report.html convnorm cannot prove "
        "it wrote is in the way, or the page could not be drawn; 2 bad arguments, a damaged summary.json or "
        "part file (named with its line), or another run using OUT_DIR",
    )
    parser.add_argument("output", metavar="OUT_DIR", help="the --output directory of a finished run")
    args = parser.parse_args(argv)
    from pipeline.execution.lock import LockError, in_use_text, running_holder  # after --help: these import Beam
    from pipeline.io.ownership import OutputError

    output = os.path.expanduser(args.output).rstrip("/") or "/"
    holder = running_holder(output)
    if holder is not None:  # a run finalizing there has no summary.json yet: say what is going on
        print_error(in_use_text(output, holder), PROG)
        return 2
    if "://" not in output and not os.path.isfile(os.path.join(output, "summary.json")):
        # Asked before the lock is taken: taking it would make a directory that is not there.
        print_error(f"{output!r} holds no summary.json (is it a convnorm run's --output?)", PROG)
        return 1
    try:
        path = write_report(output)
    except (ReportUnavailable, LockError, DamagedRun) as why:
        print_error(str(why), PROG)
        return 2
    except (FileNotFoundError, OutputError) as why:
        print_error(str(why), PROG)
        return 1
    except Exception as error:  # noqa: BLE001 — one line, as every error of this command
        text = " ".join(str(error).split())[:500]
        print_error(f"the page could not be drawn: {type(error).__name__}: {text}", PROG)
        return 1
    print_line(f"report: {path}")
    return 0
