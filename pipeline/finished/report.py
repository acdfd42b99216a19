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

import logging

from pipeline.finished.html_page import (
    page_html,
)
from pipeline.finished.report_data import ReportData, collect
from pipeline.finished.report_dataset import splits_html, training_html
from pipeline.finished.report_opt_in import opt_in_html, tokens_html, windows_html
from pipeline.finished.report_sections import (
    drops_html,
    examples_html,
    footer_html,
    header_html,
    messages_html,
    run_html,
    sample_html,
    worst_sources_html,
)
from pipeline.io.output_names import REPORT_FILE

LOG = logging.getLogger("convnorm")

#: How a page this module wrote begins its title. Not a proof of anything: a user's page may
#: say the same; the manifest's sha256 is what makes a page convnorm's (pipeline/io/ownership.py).
TITLE_MARK = b"<title>convnorm report: "


__all__ = ["REPORT_FILE", "TITLE_MARK", "collect", "render_html", "render_page", "try_write_report", "write_report"]


def render_html(data: ReportData, generated: str | None = None) -> str:
    """The whole page as one string (charts inline)."""
    s = data.summary
    options = data.manifest.get("options")
    split_by = options.get("split_by") if isinstance(options, dict) else None
    parts = [
        header_html(data),
        windows_html(data),
        messages_html(s),
        drops_html(s),
        splits_html(s, data.details.dataset, lambda metrics: sample_html(data, metrics), split_by),
        training_html(s, split_by),
        opt_in_html({k: v for k, v in s.items() if not (k == "windows" and data.windows)}),
        tokens_html(s.get("tokens"), data),
        worst_sources_html(data.details),
        examples_html(data),
        run_html(data.manifest),
        footer_html(data.run, generated),
    ]
    return page_html(f"convnorm report: {data.output}", "".join(parts))


def render_page(output: str, run: dict | None = None) -> bytes:
    """The page of the run whose outputs are under ``output``, as the bytes to write.

    ``run``: what only the run knows (``took``: how long it ran, in words). Raises
    FileNotFoundError without summary.json, DamagedRun for a file of the run that cannot be read. A path that is not
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
