"""Streaming mode: watch a landing directory, clean each file as it lands, windowed summaries.

``convnorm --streaming --input 'landing/*.jsonl' --output out/ --runner PrismRunner``::

    WatchLandingDirectory    poll the patterns (a splittable DoFn, like Beam's PeriodicImpulse
                             and MatchContinuously, but it can be told to stop); admit each
                             settled file not yet processed (pipeline.streaming.landing)
    window                   fixed windows (--window) of the time a file was admitted
    CleanLandedFiles         spread over workers; per file: decide its version (new, appended,
                             rewritten: pipeline.io.processed_files), read it in batches, normalize,
                             write its three outputs into the window's directory in one rename
    SummarizeWindows         per window, when it closes: OUT/<window>/summary.json from the
                             files on disk, and one console line

Output layout (``<window>`` is ``20261130T120000Z-20261130T120100Z``, the window's start and
end in UTC; ``<file>`` is the landed file's name without its suffix plus 16 hex digits of a
hash of its full path, and ``-v2``, ``-v3`` ... for later versions of the same path)::

    OUT/<window>/<file>/normalized.jsonl, drops.jsonl, dead_letter.jsonl, source.json
    OUT/<window>/summary.json        the window's totals and progress
    OUT/summary.json                 written when the run ends: every file's totals, summed
    OUT/_convnorm_files/             the record of processed files (pipeline.io.processed_files)

Exactly once, with no flag: every start reads every matching file that the record does not
list as processed, those present at start included (``--new-only`` leaves those alone). A file's
outputs are renamed into place in one step, which is what makes it processed; totals are
summed from the files on disk, so a crash at any point gives exact totals after a restart.

Stopping drains: SIGINT/SIGTERM, ``--stop-after`` or ``--stop-file`` make the watcher stop
polling and finish; the files in flight (at most ``--max-files-per-poll``) are finished within
``--drain-timeout`` (else the job is cancelled and they are read by the next start), the last
windows close, ``summary.json`` is written and the files left for the next start are listed;
exit status 0 (after Ctrl-C 130). A second signal aborts at once: 130 or 143 (SIGTERM), the
lock and the temporary directory removed, the windows already closed kept.
"""

from __future__ import annotations

import datetime
import hashlib
import logging
import os
import signal
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import NamedTuple

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.io.restriction_trackers import OffsetRange, OffsetRestrictionTracker
from apache_beam.io.watermark_estimators import ManualWatermarkEstimator
from apache_beam.options.pipeline_options import StandardOptions
from apache_beam.runners.runner import PipelineState
from apache_beam.transforms import window as beam_window
from apache_beam.utils.timestamp import Duration, Timestamp

from pipeline.config.options import ConvNormOptions, Job, parse_duration
from pipeline.console import print_error, print_line
from pipeline.execution import lock as locks
from pipeline.execution.interrupts import INTERRUPTED, interrupted_line
from pipeline.graph.shard_step import Observer, ShardWork, process_shard
from pipeline.io import files
from pipeline.io import ownership as owned
from pipeline.io import processed_files as processed
from pipeline.io.output_names import SUMMARY_FILE, TEMP_PREFIX
from pipeline.io.ownership import OutputError, claim_streaming_output
from pipeline.io.planning import canonical_path
from pipeline.io.processed_files import SOURCE_FILE, source_id
from pipeline.io.shard import Shard, Stamp, display_path, file_suffix
from pipeline.runners.job_service import TERMINAL, JobService
from pipeline.runners.prism import prism_services
from pipeline.streaming.landing import LandingRules, LandingWatch, Refused, match_landing, stamp_of
from pipeline.testhooks import pause_point
from transforms import summary as summaries
from transforms.console_text import console_text
from transforms.conversations import NORMALIZE, BatchCounters, freeze_gc
from transforms.counters import NAMESPACE
from transforms.inputs import Batch
from transforms.jsontext import document_bytes
from transforms.normalize import split_drops
from transforms.records import BatchResult
from transforms.settings import Settings

LOG = logging.getLogger("convnorm")

#: Polls of the watcher before it gives up on a restriction (never reached in practice).
_MAX_POLLS = 1 << 62

#: Re-exported: tests and benchmarks name a landed file's outputs directory through here.
__all__ = ["SOURCE_FILE", "build_streaming", "run_streaming", "source_id"]


# --------------------------------------------------------------------------------------------
# Names (plain functions)


def shard_number(path: str) -> int:
    """A stable number for a landed file (batches carry a number, not a path)."""
    return int(hashlib.sha1(processed.path_key(path).encode()).hexdigest()[:12], 16)


def _utc(ts: Timestamp) -> str:
    return datetime.datetime.fromtimestamp(ts.micros / 1e6, tz=datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def window_name(window: beam_window.IntervalWindow) -> str:
    return f"{_utc(window.start)}-{_utc(window.end)}"


# --------------------------------------------------------------------------------------------
# Watching


@dataclass(frozen=True)
class WatchPlan:
    """What the watcher looks at, how much it admits, and when it stops (built before the
    pipeline)."""

    rules: LandingRules
    output: str
    poll_interval_s: float
    #: Files admitted per poll and in flight at once.
    max_files: int
    stop_files: tuple[str, ...]
    #: Seconds since the epoch; None: no time limit.
    stop_at: float | None
    #: --new-only: the files present at start, as they were then (path -> stamp).
    ignored_at_start: dict[str, Stamp] = field(default_factory=dict)


class Landed(NamedTuple):
    """A file the watcher admitted, with the stamp it had then (``landing.Stamp``)."""

    path: str
    size: int
    mtime_ns: int
    ctime_ns: int = 0


class _PollTracker(OffsetRestrictionTracker):
    """Poll numbers; refuses runner splits (one watcher per pattern set), allows checkpoints."""

    def try_split(self, fraction_of_remainder):
        if fraction_of_remainder > 0:
            return None
        return super().try_split(0)

    def is_bounded(self):
        return False


class _PollRestrictions(beam.transforms.core.RestrictionProvider):
    def initial_restriction(self, element):
        return OffsetRange(0, _MAX_POLLS)

    def create_tracker(self, restriction):
        return _PollTracker(restriction)

    def restriction_size(self, element, restriction):
        return 1

    def truncate(self, element, restriction):
        return None  # a runner's drain (Dataflow): stop polling at once


def should_stop(plan: WatchPlan, now: float) -> bool:
    if plan.stop_at is not None and now >= plan.stop_at:
        return True
    return any(FileSystems.exists(path) for path in plan.stop_files)


def handled_now(output: str, path: str, stamp: Stamp) -> bool:
    """Whether the record of processed files says this content of ``path`` was handled."""
    return processed.handled(output, processed.read_record(output, path), stamp)


class _WatchLanding(beam.DoFn):
    """Splittable DoFn: poll the patterns every interval; emit the files ``LandingWatch``
    admits, stamped with the poll's time; advance the watermark to that time; write the
    watcher's status (files pending) for the window summaries; finish when told to stop."""

    def __init__(self, plan: WatchPlan) -> None:
        self._plan = plan

    def setup(self) -> None:
        output = self._plan.output
        self._watch = LandingWatch(
            handled=lambda path, stamp: handled_now(output, path, stamp),
            max_files=self._plan.max_files,
            ignored_at_start=dict(self._plan.ignored_at_start),
        )

    @beam.DoFn.unbounded_per_element()
    def process(
        self,
        element,
        tracker=beam.DoFn.RestrictionParam(_PollRestrictions()),
        watermark=beam.DoFn.WatermarkEstimatorParam(ManualWatermarkEstimator.default_provider()),
    ):
        poll = tracker.current_restriction().start
        stopping = should_stop(self._plan, time.time())
        if not tracker.try_claim(poll):
            return
        now = Timestamp.now()
        if watermark.current_watermark() is not None and now < watermark.current_watermark():
            # The clock stepped back (an NTP correction): a file stamped behind the watermark
            # this watcher set would land in a closed window, with no summary or line.
            now = watermark.current_watermark()
        for path, stamp in self._watch.poll(match_landing(self._plan.rules), stopping):
            yield beam.window.TimestampedValue(Landed(path, *stamp), now)
        status = self._watch.status()
        processed.write_json(
            FileSystems.join(self._plan.output, processed.WATCH_STATUS_FILE),
            {"time": time.time(), **status._asdict()},
            self._plan.output,
        )
        if stopping:
            # This poll was the last: claiming the rest of the range finishes the watcher, and
            # its watermark goes to the end of time once what it emitted is processed.
            LOG.info("watcher: stop requested; draining %d file(s) in flight", status.in_flight)
            tracker.try_claim(tracker.current_restriction().stop - 1)
            return
        watermark.set_watermark(now)  # never behind the last one (above)
        tracker.defer_remainder(Duration(self._plan.poll_interval_s))


class WatchLandingDirectory(beam.PTransform):
    """PBegin -> the landed files to read (``Landed``), timestamped with the poll that admitted them."""

    def __init__(self, plan: WatchPlan) -> None:
        super().__init__()
        self._plan = plan

    def expand(self, pbegin):
        return pbegin | "Start" >> beam.Impulse() | "Poll" >> beam.ParDo(_WatchLanding(self._plan))


# --------------------------------------------------------------------------------------------
# Cleaning one landed file


class _CommitGate:
    """The one step that makes a file processed (renaming its outputs into place), shut by the
    driver once it has cancelled the job: the workers of a Prism run are threads of this
    process, and no file may land in the outputs after the totals were summed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._closed = False

    def rename(self, temp: str, output: str, relative: str) -> bool:
        with self._lock:
            if self._closed:
                return False
            # Below the output never through a symbolic link, never over a name (docs/outputs.md).
            files.make_directories(output, relative.rsplit("/", 1)[0])
            files.move_into(temp, output, relative)
            return True

    def close(self) -> None:
        with self._lock:
            self._closed = True

    def open(self) -> None:
        with self._lock:
            self._closed = False


COMMITS = _CommitGate()


@dataclass(frozen=True)
class CleanPlan:
    """What cleaning a landed file needs besides the file (built before the pipeline)."""

    output: str
    run_id: str
    #: The run's temporary directory (OUTPUT/_convnorm_temp-<run>): files in flight are written here.
    run_temp: str
    #: The batch job's per-shard work: the step, the record settings, the limits.
    work: ShardWork
    changed_files: str = "new-version"

    @property
    def settings(self) -> Settings:
        return self.work.settings


class _ChangedWhileRead(Exception):
    """The landed file changed while it was read (its stamp now, None if it is gone): its
    outputs are dropped, it is read again once it has settled."""


class _NotCommitted(Exception):
    """The run stopped committing (a drain that outlasted --drain-timeout): the file's outputs
    are dropped and it stays unprocessed, for the next start."""


def clean_landed_file(landed: Landed, window: str, plan: CleanPlan, observe: Observer | None = None) -> str | None:
    """Process one admitted file: the name of its new outputs directory, or None when there
    was nothing to read (content already processed, reported, changed since, or in flight).

    The file is read, normalized and written by the batch job's per-shard step
    (``shard_step.process_shard``: the same step, writers, limits and partial summary), from the
    byte its version starts at; ``observe`` sees each batch (the DoFn's counters)."""
    path, stamp, output = landed.path, Stamp(*landed[1:]), plan.output
    record = processed.read_record(output, path)
    if processed.handled(output, record, stamp):
        return None  # admitted twice (a watcher that started over): done already
    if processed.in_flight_elsewhere(output, record, plan.run_id):
        LOG.warning("%s is being read by another worker of this run; not read twice", display_path(path))
        return None
    try:
        version = processed.plan_version(output, path, record, plan.changed_files)
    except FileNotFoundError:
        version = processed.Plan("gone", "gone", 0, 0, -1, "")
        LOG.warning("%s was removed before it was read: nothing to read", display_path(path))
    except OSError as error:
        # Read all the same: the reader turns what it cannot read into an unreadable_file dead
        # letter with the reason, which is what this file becomes (one file never stops the job).
        version = processed.unreadable_plan(record, stamp.size)
        LOG.warning("%s cannot be read (%s): it becomes a dead letter", display_path(path), error)
    if version.action != "read" or version.size != stamp.size:
        if version.action == "report":
            LOG.warning(
                "%s was rewritten after it was processed: not read (--changed-files report)", display_path(path)
            )
        record["seen"] = stamp._asdict()
        processed.write_record(output, path, record)
        return None
    name = source_id(path, version.version)
    entry = {
        "version": version.version,
        "why": version.why,
        "size": stamp.size,
        "mtime_ns": stamp.mtime_ns,
        "ctime_ns": stamp.ctime_ns,
        "sha256": version.sha256,
        "start": version.start,
        "end": version.size,
        "dir": f"{window}/{name}",
        "run": plan.run_id,
    }
    # Recorded before the outputs are renamed into place: a crash leaves an entry whose
    # directory is missing, which the next start reads again under the same version number.
    record["versions"] = [v for v in record["versions"] if v["version"] != version.version] + [entry]
    processed.write_record(output, path, record)
    # Two levels down, so that OUTPUT/*/*/normalized.jsonl never matches a file being written.
    temp = FileSystems.join(
        plan.run_temp, "in-flight", f"{processed.path_key(path)}-v{version.version}-{uuid.uuid4().hex[:8]}"
    )
    processed.make_dirs(temp)
    try:
        shard = Shard(shard_number(path), path, file_suffix(path) or "", version.start, None)
        extension = plan.work.extension
        result = process_shard(
            shard,
            plan.work,
            lambda name: FileSystems.join(temp, name + extension(name)),
            observe=observe,
            empty_files=True,
        )
        part = result.partial
        pause_point("streaming-commit")  # tests kill a run or outlast a drain here
        source = {
            "source": display_path(path),
            "window": window,
            **{k: entry[k] for k in ("version", "why", "size", "mtime_ns", "sha256", "start", "end")},
            "files": {
                name: {"records": f.records, "bytes": f.size, "sha256": f.sha256} for name, f in result.files.items()
            },
            "totals": summaries.finalize_run(part, plan.settings),
            "partial": part,
        }
        files.write_in_place(FileSystems.join(temp, SOURCE_FILE), document_bytes(source))
        now = stamp_of(path)
        if now != stamp:
            raise _ChangedWhileRead(now)
        if not COMMITS.rename(temp, output, f"{window}/{name}"):
            raise _NotCommitted
    except _ChangedWhileRead as changed:
        files.delete(temp, tree=True)
        record["versions"] = [v for v in record["versions"] if v is not entry]
        # Handled as it was admitted: the watcher, waiting for that, looks at the change now.
        record["seen"] = stamp._asdict()
        processed.write_record(output, path, record)
        if changed.args[0] is None:
            LOG.warning(
                "%s was removed (or moved away) while it was read: its outputs are discarded, it is not processed",
                display_path(path),
            )
        else:
            LOG.info("%s changed while it was read: read again once it has settled", display_path(path))
        return None
    except _NotCommitted:
        # The run was cancelled: no "seen", so that the next start reads this content.
        files.delete(temp, tree=True)
        record["versions"] = [v for v in record["versions"] if v is not entry]
        processed.write_record(output, path, record)
        LOG.info("%s was read after the run stopped committing: the next start reads it", display_path(path))
        return None
    except BaseException:
        files.delete(temp, tree=True)
        record["versions"] = [v for v in record["versions"] if v is not entry]
        processed.write_record(output, path, record)
        raise
    LOG.info(
        "%s (%s, version %d): %d records -> %s/%s",
        display_path(path),
        version.why,
        version.version,
        part["records_in"],
        window,
        name,
    )
    return name


class _CleanLandedFile(beam.DoFn):
    """Thin: ``clean_landed_file`` in the element's window, counting as the batch job counts;
    emits the outputs directory's name."""

    def __init__(self, plan: CleanPlan) -> None:
        self._plan = plan

    def setup(self) -> None:
        freeze_gc()
        self._counters = BatchCounters(self._plan.work.step)

    def _count(self, batch: Batch, result: BatchResult) -> None:
        self._counters.count(len(batch.items), result)

    def process(self, landed: Landed, window=beam.DoFn.WindowParam):
        name = clean_landed_file(landed, window_name(window), self._plan, self._count)
        if name is not None:
            yield name


class CleanLandedFiles(beam.PTransform):
    """Admitted files -> each file's outputs in its window's directory; the names of the
    directories written (in the file's window)."""

    def __init__(self, plan: CleanPlan) -> None:
        super().__init__()
        self._plan = plan

    def expand(self, landed):
        return (
            landed
            # Spread files over workers: without it, a file would be read inside the watcher's call.
            | "Spread" >> beam.Reshuffle()
            | "Clean" >> beam.ParDo(_CleanLandedFile(self._plan))
        )


# --------------------------------------------------------------------------------------------
# Window summaries


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
    """A window closed: write ``OUT/<window>/summary.json`` from its files on disk, with the
    watcher's files pending, and print the window's line with the running total."""

    def __init__(self, output: str, settings: Settings) -> None:
        self._output = output
        self._settings = settings

    def process(self, files_done: int, window=beam.DoFn.WindowParam):
        status = processed.read_watch_status(self._output)
        doc = processed.write_window_summary(self._output, window_name(window), self._settings, status)
        line = window_line(doc, running_total(self._output))
        print(line, flush=True)
        yield line


class SummarizeWindows(beam.PTransform):
    """Names of the files done, in their windows -> one summary per window when it closes."""

    def __init__(self, output: str, settings: Settings) -> None:
        super().__init__()
        self._output = output
        self._settings = settings

    def expand(self, done):
        return (
            done
            | "Count" >> beam.CombineGlobally(beam.combiners.CountCombineFn()).without_defaults()
            | "Write" >> beam.ParDo(_WriteWindowSummary(self._output, self._settings))
        )


def build_streaming(pipeline: beam.Pipeline, watch: WatchPlan, clean: CleanPlan, window_s: float):
    """Apply the streaming job to ``pipeline``; the PCollection of window lines."""
    landed = pipeline | "Watch" >> WatchLandingDirectory(watch)
    windowed = landed | "Window" >> beam.WindowInto(beam_window.FixedWindows(window_s))
    done = windowed | "CleanLanded" >> CleanLandedFiles(clean)
    return done | "SummarizeWindows" >> SummarizeWindows(clean.output, clean.settings)


# --------------------------------------------------------------------------------------------
# Running


def plan_watch(job: Job, output: str, stop_marker: str) -> WatchPlan:
    ours = job.options.view_as(ConvNormOptions)
    rules = LandingRules(tuple(job.inputs), canonical_path(output), bool(ours.follow_symlinks))
    ignored: dict[str, Stamp] = {}
    if ours.new_only:
        ignored = {path: found for path, found in match_landing(rules).items() if isinstance(found, Stamp)}
        LOG.info("--new-only: %d file(s) present at start are left alone", len(ignored))
    stop_after = parse_duration(ours.stop_after) if ours.stop_after else None
    return WatchPlan(
        rules=rules,
        output=output,
        poll_interval_s=parse_duration(ours.poll_interval),
        max_files=ours.max_files_per_poll,
        stop_files=tuple(p for p in (ours.stop_file, stop_marker) if p),
        stop_at=None if stop_after is None else time.time() + stop_after,
        ignored_at_start=ignored,
    )


def plan_clean(job: Job, output: str, run_id: str, run_temp: str) -> CleanPlan:
    ours = job.options.view_as(ConvNormOptions)
    work = ShardWork(
        NORMALIZE,
        job.settings,
        batch_size=job.batch_size,
        max_record_bytes=job.max_record_bytes,
        batch_bytes=job.batch_bytes,
    )
    return CleanPlan(output=output, run_id=run_id, run_temp=run_temp, work=work, changed_files=ours.changed_files)


class _StopOnSignal:
    """SIGINT/SIGTERM -> create the run's stop marker (the watcher drains); a second signal
    goes to the command's own handler (``pipeline.execution.interrupts.handling_signals``), for a user
    who does not want to wait: the run unwinds at once, its lock and temporary directory
    removed, and exits 130 (Ctrl-C) or 143 (SIGTERM)."""

    def __init__(self, marker: str) -> None:
        self._marker = marker
        self.signalled = threading.Event()
        #: The signal that asked for the drain (SIGINT: Ctrl-C, whose exit status is 130).
        self.signum: int | None = None

    def __enter__(self):
        self._previous = {s: signal.signal(s, self._handle) for s in (signal.SIGINT, signal.SIGTERM)}
        return self

    def _handle(self, signum, frame):
        if self.signalled.is_set():
            signal.signal(signum, self._previous[signum])
            os.kill(os.getpid(), signum)
            return
        self.signalled.set()
        self.signum = signum
        print(
            f"convnorm: {signal.Signals(signum).name}: draining (the files in flight are finished, the last "
            "windows close); signal again to abort",
            flush=True,
        )
        files.write_in_place(self._marker, b"stop\n", replace=True)

    def __exit__(self, *exc):
        for s, handler in self._previous.items():
            signal.signal(s, handler)
        return False


#: The Beam counters shown while the job runs (all are in the runner's metrics).
LIVE_COUNTERS = ("records_in", "records_out", "dead_letters", "dropped", "healed")


def counters_line(values: dict[str, int]) -> str:
    return "counters: " + ", ".join(f"{name} {values.get(name, 0)}" for name in LIVE_COUNTERS)


class _RunningJob:
    """The running job, asked through its job service when it has one (Prism, Flink: no
    deadline of Beam's ends the run, counters are asked afresh), else through Beam's result."""

    def __init__(self, result) -> None:
        self._result = result
        self._service = JobService.of(result)

    def state(self) -> str:
        return self._service.state() if self._service else self._result.state

    def counters(self) -> dict[str, int] | None:
        try:
            if self._service:
                return self._service.counters(NAMESPACE)
            from apache_beam.metrics import MetricsFilter

            found = self._result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))["counters"]
            return {c.key.metric.name: c.committed or c.attempted or 0 for c in found}
        except Exception:  # noqa: BLE001 — metrics are a nicety; some runners do not serve them live
            return None

    def cancel(self) -> None:
        if self._service:
            self._service.cancel()
        else:
            self._result.cancel()

    def errors(self) -> list[str]:
        return self._service.errors() if self._service else []


class RunEnd(NamedTuple):
    state: str
    #: The drain took longer than --drain-timeout and the job was cancelled.
    cancelled: bool
    errors: list[str]


def _monitor(
    job_handle: _RunningJob, plan: WatchPlan, stop: _StopOnSignal, window_s: float, drain_timeout: float
) -> RunEnd:
    """Wait for the job to end; print the live counters once per window when they moved; cancel
    it when a drain lasts longer than ``drain_timeout``."""
    shown, next_counters = "", time.monotonic() + window_s
    drain_started = None
    cancelled = False
    state = PipelineState.RUNNING
    while state not in TERMINAL:
        try:
            state = job_handle.state()
        except Exception as error:  # noqa: BLE001 — the runner is gone: the files on disk still count
            COMMITS.close()
            return RunEnd(PipelineState.FAILED, cancelled, [f"the runner stopped answering: {error}"])
        time.sleep(0.5)  # interruptible: the signal handler runs between sleeps
        now = time.monotonic()
        if now >= next_counters:
            next_counters = now + window_s
            values = job_handle.counters()
            line = counters_line(values) if values is not None else ""
            if line and line != shown:
                print(line, flush=True)
                shown = line
        if drain_started is None and (stop.signalled.is_set() or should_stop(plan, time.time())):
            drain_started = now
        if drain_started is not None and not cancelled and now - drain_started > drain_timeout:
            print(
                f"convnorm: the drain took longer than --drain-timeout ({drain_timeout:g} s): cancelling the "
                "job; the files not finished are read by the next start",
                flush=True,
            )
            COMMITS.close()
            job_handle.cancel()
            cancelled = True
    COMMITS.close()  # nothing lands in the outputs once the totals are summed
    errors = job_handle.errors() if state == PipelineState.FAILED else []
    return RunEnd(state, cancelled, errors)


def run_streaming(job: Job) -> int:
    """Run the streaming job until it is stopped and drained; write summary.json; exit status.

    The run holds the output directory's lock for as long as it runs; a lock left by a run that
    died on this host is taken over, and that run's temporary directory deleted. It writes only
    into a directory that is empty or that an earlier streaming run marked as its own."""
    job.options.view_as(StandardOptions).streaming = True
    output = job.output
    if not output:
        raise ValueError("--output is required")  # options.load_job refuses a job without one
    run_id = uuid.uuid4().hex
    run_temp = FileSystems.join(output, TEMP_PREFIX + run_id)
    proof, proof_entry = owned.new_temp_proof(run_id)
    try:
        lock = locks.acquire(
            output,
            run_id=run_id,
            command="streaming",
            temp_dir=TEMP_PREFIX + run_id,  # by its name: the lock lies beside it
            break_stale=True,
            clean_up=lambda holder: _take_over(output, holder),
            temp_proof=proof_entry,
        )
    except (locks.LockError, OutputError) as error:
        print_error(str(error))
        return 2
    try:
        claim_streaming_output(output)
        owned.claim_temp(run_temp, proof)  # proves the folder this run's to the next start
        processed.make_dirs(run_temp)
        return _watch(job, output, run_id, run_temp)
    except OutputError as error:
        print_error(str(error))
        return 2
    finally:
        owned.remove_temp(run_temp)
        lock.release()


#: The stale locks a streaming start takes over without a flag: its own kind's (and a killed
#: ``convnorm report``'s, which records nothing to clean up). A dead batch run's lock records
#: that run's own recovery (``--overwrite --break-stale-lock``); streaming leaves it alone.
TAKEN_OVER = frozenset({"streaming", "report"})


def _take_over(output: str, holder: dict) -> None:
    if holder.get("command") not in TAKEN_OVER:
        raise OutputError(
            f"--output {output!r} has a stale lock of a dead `convnorm {holder.get('command')}` run "
            f"({locks.describe(holder)}); --streaming takes over only a streaming run's lock: recover that run "
            "(rerun it with --overwrite --break-stale-lock) or choose another directory; nothing was deleted"
        )
    done = owned.clean_dead_run(output, holder)
    # What was kept is said too: a temporary directory its lock does not prove the dead run's.
    LOG.warning(
        "took over the lock of a streaming run that died (%s): %s; the files it had not finished are read again",
        locks.describe(holder),
        done.describe(output),
    )


def _watch(job: Job, output: str, run_id: str, run_temp: str) -> int:
    ours = job.options.view_as(ConvNormOptions)
    settings = job.settings
    rebuilt = processed.rebuild_windows(output, settings)
    if rebuilt:
        LOG.warning("rebuilt the summaries of %d window(s) an earlier run left without one", len(rebuilt))
    stop_marker = FileSystems.join(run_temp, "stop")
    watch = plan_watch(job, output, stop_marker)
    window_s = parse_duration(ours.window)
    print_line(
        f"convnorm: watching {', '.join(job.inputs)} every {watch.poll_interval_s:g} s; windows of "
        f"{window_s:g} s under {output}/; stop with Ctrl-C / SIGTERM"
        + (f", --stop-file {ours.stop_file}" if ours.stop_file else "")
        + (f", after {ours.stop_after}" if ours.stop_after else ""),
        flush=True,
    )
    COMMITS.open()
    with prism_services(job.options), _StopOnSignal(stop_marker) as stop:
        pipeline = beam.Pipeline(options=job.options)
        build_streaming(pipeline, watch, plan_clean(job, output, run_id, run_temp), window_s)
        result = pipeline.run()
        end = _monitor(_RunningJob(result), watch, stop, window_s, parse_duration(ours.drain_timeout))
    for error in end.errors:
        LOG.error("the streaming job: %s", error)
    processed.rebuild_windows(output, settings)
    total = processed.final_summary(output, settings)
    processed.write_json(FileSystems.join(output, SUMMARY_FILE), total, output)
    print(summaries.format_table(total))
    print_line(
        f"outputs: {output}/<window>/<file>/{{normalized,drops,dead_letter}}.jsonl, "
        f"{output}/<window>/{SUMMARY_FILE} and {output}/{SUMMARY_FILE}"
    )
    print(left_for_next_start(watch))
    if ours.report:  # the windows over time, the examples (pipeline/finished/report.py)
        from pipeline.finished.report import try_write_report

        report = try_write_report(output, locked=True)  # this run holds the lock
        if report:
            print_line(f"report:  {report}")
    if end.state != PipelineState.DONE and not (end.cancelled and end.state == PipelineState.CANCELLED):
        print_error(f"the streaming job ended in state {end.state}")
        return 1
    if stop.signum is not None:
        print(interrupted_line("the streaming run", output, drained=True, signum=stop.signum), file=sys.stderr)
    if stop.signum == signal.SIGINT:  # Ctrl-C drained the run: its status says so
        return INTERRUPTED
    # SIGTERM is how a service manager (systemd, Kubernetes) stops a streaming run: a finished
    # drain is a clean stop, exit 0 (143 would mark every orderly stop of the unit failed).
    return 0 if total["accounted"] else 1


#: Files named one by one in the report of what is left.
SHOWN_FILES = 5


def left_for_next_start(plan: WatchPlan) -> str:
    """What the landing directory holds that this run did not handle: files the next start
    reads, and files refused."""
    pending, refused, left_alone = [], [], 0
    for path, found in sorted(match_landing(plan.rules).items()):
        if isinstance(found, Refused):
            refused.append(f"{display_path(path)} ({found.reason.split(';')[0]})")
        elif isinstance(found, Stamp) and not handled_now(plan.output, path, found):
            if plan.ignored_at_start.get(path) == found:
                left_alone += 1
            else:
                pending.append(display_path(path))
    lines: list[str] = []
    if pending:
        shown = ", ".join(pending[:SHOWN_FILES]) + (" ..." if len(pending) > SHOWN_FILES else "")
        lines.append(f"left pending: {len(pending)} file(s) not read yet; the next start reads them: {shown}")
    else:
        lines.append("left pending: none (every matching file is processed)")
    if left_alone:
        lines.append(
            f"--new-only: {left_alone} file(s) present at start were left alone (a start without it reads them)"
        )
    if refused:
        shown = ", ".join(refused[:SHOWN_FILES]) + (" ..." if len(refused) > SHOWN_FILES else "")
        lines.append(f"refused: {len(refused)} file(s) that are not read: {shown}")
    return "\n".join(map(console_text, lines))  # one line each, whatever the file names hold
