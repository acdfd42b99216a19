"""The windows of a streaming run: their names (``window_name``: the window's start and end in
UTC), and ``SummarizeWindows``, which writes ``OUT/<window>/summary.json`` from the files on
disk when a window closes (after assembling the conversations of its call logs) and prints
its console line (``window_line``)."""

from __future__ import annotations

import datetime

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.transforms import window as beam_window
from apache_beam.utils.timestamp import Timestamp

from pipeline.graph.shard_step import ShardWork
from pipeline.io import processed_files as processed
from pipeline.io.output_names import SUMMARY_FILE
from pipeline.streaming.assembled import assemble_window
from pipeline.streaming.commits import COMMITS
from transforms.conversations import freeze_gc
from transforms.core.normalize import split_drops
from transforms.record.record_settings import Settings
from transforms.totals.console_text import console_text


def _utc(ts: Timestamp) -> str:
    return datetime.datetime.fromtimestamp(ts.micros / 1e6, tz=datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def window_name(window: beam_window.IntervalWindow) -> str:
    return f"{_utc(window.start)}-{_utc(window.end)}"


def running_total(output: str) -> dict:
    """The headline counts of every window summary in ``output`` (for the console line)."""
    total = dict.fromkeys(("records_in", "records_out", "dead_letters", "dropped"), 0)
    for window in processed.window_names(output):
        doc = processed.read_json(FileSystems.join(output, window, SUMMARY_FILE)) or {}
        for key in total:
            total[key] += doc.get(key, 0)
    return total


def window_line(doc: dict, total: dict) -> str:
    """A window's counts, progress and the running total; ``dropped`` is MEM-5's count, the
    messages and the calls it is made of said beside it (as the summary table does). Escaped
    for the terminal here: the DoFn that prints it may run in a worker process, past the
    command's console."""
    progress = doc["progress"]
    messages, calls = (sum(part.values()) for part in split_drops(doc.get("dropped_by_reason", {})))
    return console_text(
        f"window {doc['window']}: {doc['records_in']} records in, {doc['records_out']} normalized, "
        f"{doc['dead_letters']} dead letters, {doc['dropped']} dropped ({messages} messages, {calls} calls); "
        f"{progress['rows_per_s']:g} rows/s, {progress['files_done']} files done, "
        f"{progress['files_pending']} pending (oldest {progress['oldest_pending_age_s']:.1f} s) | running total: "
        f"{total['records_in']} in, {total['records_out']} normalized, {total['dead_letters']} dead letters, "
        f"{total['dropped']} dropped"
    )


class _WriteWindowSummary(beam.DoFn):
    """A window closed: assemble the conversations of the call logs it got
    (``pipeline.streaming.assembled``), write ``OUT/<window>/summary.json`` from its files on
    disk, with the watcher's files pending, and print the window's line with the running total."""

    def __init__(self, output: str, settings: Settings, work: ShardWork | None, run_temp: str | None) -> None:
        self._output = output
        self._settings = settings
        self._work = work
        self._run_temp = run_temp

    def setup(self) -> None:
        freeze_gc()  # as the job's other DoFns: a close allocates a group's pieces by the thousand

    def process(self, elements: int, window=beam.DoFn.WindowParam):
        name = window_name(window)
        if self._work is not None and self._run_temp is not None:
            if assemble_window(self._output, name, self._work, self._run_temp, COMMITS.rename) == "refused":
                return  # the run stopped committing: its end (or the next start) does both
        status = processed.read_watch_status(self._output)
        doc = processed.write_window_summary(self._output, name, self._settings, status)
        line = window_line(doc, running_total(self._output))
        print(line, flush=True)
        yield line


class KeepWindowsOpen(beam.PTransform):
    """PBegin -> one element in each of ``windows`` (left by an earlier run, still open, its
    call logs not assembled), so that each closes in this run, and is assembled then, even if
    no file of this run lands in it."""

    def __init__(self, windows: list[str], window_s: float) -> None:
        super().__init__()
        self._windows = windows
        self._window_s = window_s

    def expand(self, pbegin):
        return (
            pbegin
            | "Left" >> beam.Create(self._windows)
            | "InIt" >> beam.Map(lambda name: beam_window.TimestampedValue(name, processed.parse_window(name)[0]))
            | "Window" >> beam.WindowInto(beam_window.FixedWindows(self._window_s))
        )


class SummarizeWindows(beam.PTransform):
    """Names of the files done (and ``KeepWindowsOpen``'s), in their windows -> one summary per window when it closes
    (the conversations of its call logs assembled first, given the job's ``work`` and the run's
    temporary directory)."""

    def __init__(
        self, output: str, settings: Settings, work: ShardWork | None = None, run_temp: str | None = None
    ) -> None:
        super().__init__()
        self._output = output
        self._settings = settings
        self._work = work
        self._run_temp = run_temp

    def expand(self, done):
        return (
            done
            | "Count" >> beam.CombineGlobally(beam.combiners.CountCombineFn()).without_defaults()
            | "Write" >> beam.ParDo(_WriteWindowSummary(self._output, self._settings, self._work, self._run_temp))
        )
