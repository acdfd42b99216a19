"""Streaming mode: watch a landing directory, clean each file as it lands, windowed summaries.

``convnorm --streaming --input 'landing/*.jsonl' --output out/ --runner PrismRunner``::

    WatchLandingDirectory    poll the patterns (a splittable DoFn, like Beam's PeriodicImpulse
                             and MatchContinuously, but it can be told to stop); each file once
    window                   fixed windows (--window) of the time a file was found
    CleanLandedFiles         per file, in one call: read it in batches, normalize each with the
                             batch job's RouteConversations, write its three outputs into
                             the window's directory in one rename; emit its partial summary
    SummarizeWindows         per window, when it closes: OUT/<window>/summary.json, and the
                             running total printed on the console

Output layout (``<window>`` is ``20261130T120000Z-20261130T120100Z``, the window's start and
end in UTC; ``<file>`` is the landed file's name without its suffix plus 8 hex digits of a
hash of its full path, so two ``a.jsonl`` in different directories do not collide)::

    OUT/<window>/<file>/normalized.jsonl, drops.jsonl, dead_letter.jsonl, source.json
    OUT/<window>/summary.json        the window's totals (same fields as summary.json)
    OUT/summary.json                 written when the run ends: the sum of every window summary

A file's directory is written under a temporary dot-name and renamed into place in one step,
so a reader of OUT sees a file's outputs complete or not at all. ``source.json`` holds the
landed file's path and its totals; its presence is what "this file has output" means when a
restart with ``--include-existing`` decides which files to process again.

Landing convention: write a file elsewhere (or under a dot-name or a ``.tmp`` suffix in the
directory), then rename it into place. Dot-files and ``*.tmp`` are never read; a file must
also keep its size and modification time over two polls before it is read.

Stopping drains: SIGINT/SIGTERM, ``--stop-after`` or ``--stop-file`` make the watcher stop
polling and finish; every file already seen is processed to the end, the watermark moves to
the end of time, the last windows close and are summarized, and ``summary.json`` is written.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import logging
import os
import signal
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from typing import NamedTuple, Tuple

import apache_beam as beam
from apache_beam.coders import BooleanCoder
from apache_beam.io.filesystems import FileSystems
from apache_beam.io.restriction_trackers import OffsetRange, OffsetRestrictionTracker
from apache_beam.io.watermark_estimators import ManualWatermarkEstimator
from apache_beam.options.pipeline_options import StandardOptions
from apache_beam.pvalue import TaggedOutput
from apache_beam.runners.runner import PipelineState
from apache_beam.transforms import window as beam_window
from apache_beam.transforms.userstate import ReadModifyWriteStateSpec
from apache_beam.utils.timestamp import Duration, Timestamp

from pipeline import lock as locks
from pipeline.interrupts import INTERRUPTED, interrupted_line
from pipeline.options import ConvNormOptions, Job, parse_duration
from pipeline.outputs import OutputError, claim_streaming_output
from pipeline.prism import prism_services
from pipeline.sinks import FILE_FORMATS, SUMMARY_FILE
from pipeline.sources import FILE_KINDS, Shard, file_suffix, iter_batches
from transforms import summary as summaries
from transforms.conversations import DEAD_LETTER, DROPS, NORMALIZE, MergeSummaries, RouteConversations
from transforms.counters import NAMESPACE
from transforms.jsontext import document_bytes
from transforms.settings import Settings

LOG = logging.getLogger("convnorm")

OUTPUT_KINDS = ("normalized", "drops", "dead_letter")
SOURCE_FILE = "source.json"
#: Polls of the watcher before it gives up on a restriction (never reached in practice).
_MAX_POLLS = 1 << 62


# --------------------------------------------------------------------------------------------
# Names (plain functions)


def canonical_path(path: str) -> str:
    """A landed file's path as convnorm names it: absolute for local files."""
    return path if "://" in path else os.path.abspath(path)


def source_id(path: str) -> str:
    """The output name of a landed file: its name without its suffix, and a hash of its path."""
    path = canonical_path(path)
    name = path.rstrip("/").rsplit("/", 1)[-1]
    suffix = file_suffix(name)
    if suffix:
        name = name[: -len(suffix)]
    return f"{name}-{hashlib.sha1(path.encode()).hexdigest()[:8]}"


def shard_number(path: str) -> int:
    """A stable number for a landed file (batches carry a number, not a path)."""
    return int(hashlib.sha1(canonical_path(path).encode()).hexdigest()[:12], 16)


def _utc(ts: Timestamp) -> str:
    return datetime.datetime.fromtimestamp(ts.micros / 1e6, tz=datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def window_name(window: beam_window.IntervalWindow) -> str:
    return f"{_utc(window.start)}-{_utc(window.end)}"


def is_ignored(path: str) -> bool:
    """Files still being written by the landing convention: dot-files and ``*.tmp``."""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    return name.startswith(".") or name.endswith(".tmp")


def processed_sources(output: str) -> set[str]:
    """Source ids that already have complete outputs under ``output`` (their source.json)."""
    pattern = FileSystems.join(output, "*", "*", SOURCE_FILE)
    found = FileSystems.match([pattern])[0].metadata_list
    return {meta.path.rsplit("/", 2)[-2] for meta in found}


def window_summaries(output: str) -> list[str]:
    pattern = FileSystems.join(output, "*", SUMMARY_FILE)
    return sorted(meta.path for meta in FileSystems.match([pattern])[0].metadata_list)


def _as_partial(doc: dict) -> dict:
    # A finished summary document, minus its labels, adds up like a partial summary.
    return {k: v for k, v in doc.items() if k not in ("profile", "accounted", "source", "window")}


def _read_json(path: str) -> dict:
    with FileSystems.open(path) as handle:
        return json.loads(handle.read())


def _write_json_atomically(doc: dict, path: str) -> None:
    directory, name = path.rsplit("/", 1)
    temp = FileSystems.join(directory, f".{name}.{uuid.uuid4().hex}.tmp")
    with FileSystems.create(temp, mime_type="application/json") as handle:
        handle.write(document_bytes(doc))
    if FileSystems.exists(path):
        FileSystems.delete([path])  # convnorm's own summary, about to be replaced by a superset
    FileSystems.rename([temp], [path])


def window_total(output: str, window: str, settings: Settings) -> dict:
    """A window's summary: the sum of its files' totals (their source.json) on disk, so a
    restart that adds files to a window, or a retried write, gives the right total."""
    total: dict = {}
    pattern = FileSystems.join(output, window, "*", SOURCE_FILE)
    for meta in sorted(FileSystems.match([pattern])[0].metadata_list, key=lambda m: m.path):
        total = summaries.merge(total, _as_partial(_read_json(meta.path)))
    return summaries.finalize(total, profile=settings.profile, check=settings.check)


def total_of_windows(output: str, settings: Settings) -> dict:
    """``summary.json`` of a streaming output: the sum of every window summary in it."""
    total: dict = {}
    for path in window_summaries(output):
        total = summaries.merge(total, _as_partial(_read_json(path)))
    return summaries.finalize(total, profile=settings.profile, check=settings.check)


# --------------------------------------------------------------------------------------------
# Watching


@dataclass(frozen=True)
class WatchPlan:
    """What the watcher looks at and when it stops (built before the pipeline)."""

    patterns: tuple[str, ...]
    output: str
    poll_interval_s: float
    #: Files present at start that are not to be read (without --include-existing: all of them).
    skipped_at_start: frozenset
    stop_files: tuple[str, ...]
    #: Seconds since the epoch; None: no time limit.
    stop_at: float | None


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


def ready_files(plan: WatchPlan, previous: dict, current: dict) -> list[str]:
    """Paths worth emitting this poll: readable kind, not ignored, settled since the last poll."""
    ready = []
    for path, stamp in sorted(current.items()):
        if path in plan.skipped_at_start or is_ignored(path) or file_suffix(path) is None:
            continue
        if previous.get(path) == stamp:
            ready.append(path)
    return ready


class _WatchLanding(beam.DoFn):
    """Splittable DoFn: poll the patterns every interval; emit each settled file, stamped with
    the poll's time; advance the watermark to that time; finish when told to stop."""

    def __init__(self, plan: WatchPlan) -> None:
        self._plan = plan

    def setup(self) -> None:
        self._previous: dict = {}  # path -> (size, mtime) at the last poll
        self._emitted: set = set()  # saves emitting a path every poll; _FirstSight is the guarantee
        self._warned: set = set()

    def _match(self) -> dict:
        current = {}
        output = canonical_path(self._plan.output).rstrip("/") + "/"
        for pattern in self._plan.patterns:
            for meta in FileSystems.match([pattern])[0].metadata_list:
                path = canonical_path(meta.path)
                if path.startswith(output):
                    continue  # never read convnorm's own outputs back
                current[path] = (meta.size_in_bytes, meta.last_updated_in_seconds)
        return current

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
        current = self._match()
        now = Timestamp.now()
        for path in ready_files(self._plan, self._previous, current):
            if path not in self._emitted:
                self._emitted.add(path)
                yield beam.window.TimestampedValue(path, now)
        for path in current:
            if path not in self._warned and not is_ignored(path) and file_suffix(path) is None:
                self._warned.add(path)
                LOG.warning(
                    "watcher: %s matches --input but its kind is unknown (want one of %s); not read",
                    path,
                    ", ".join(FILE_KINDS),
                )
        self._previous = current
        if stopping:
            # This poll was the last: claiming the rest of the range finishes the watcher, and
            # its watermark goes to the end of time once what it emitted is processed.
            LOG.info("watcher: stop requested; draining")
            tracker.try_claim(tracker.current_restriction().stop - 1)
            return
        if watermark.current_watermark() is None or now > watermark.current_watermark():
            watermark.set_watermark(now)
        tracker.defer_remainder(Duration(self._plan.poll_interval_s))


class _FirstSight(beam.DoFn):
    """Keyed by path: pass each path on the first time only (the exactly-once guarantee)."""

    SEEN = ReadModifyWriteStateSpec("seen", BooleanCoder())

    def process(self, keyed, seen=beam.DoFn.StateParam(SEEN)):
        path, _ = keyed
        if not seen.read():
            seen.write(True)
            yield path


class WatchLandingDirectory(beam.PTransform):
    """PBegin -> landed file paths, each once, timestamped with the poll that found it."""

    def __init__(self, plan: WatchPlan) -> None:
        super().__init__()
        self._plan = plan

    def expand(self, pbegin):
        return (
            pbegin
            | "Start" >> beam.Impulse()
            | "Poll" >> beam.ParDo(_WatchLanding(self._plan))
            | "KeyByPath" >> beam.Map(lambda path: (path, None)).with_output_types(Tuple[str, None])
            | "FirstSight" >> beam.ParDo(_FirstSight())
        )


# --------------------------------------------------------------------------------------------
# Reading, writing, summarizing


class _OutputDirectory:
    """One landed file's outputs, written as they come into a temporary dot-directory, then
    renamed into ``OUTPUT/<window>/<source id>/`` in one step."""

    def __init__(self, output: str, window: str, path: str, settings: Settings) -> None:
        self._settings = settings
        self._path = path
        self._window = window
        name = source_id(path)
        self.final = FileSystems.join(output, window, name)
        self._window_dir = FileSystems.join(output, window)
        self._temp = FileSystems.join(output, f".tmp-{name}-{uuid.uuid4().hex}")
        FileSystems.mkdirs(self._temp)
        jsonl = FILE_FORMATS["jsonl"]
        self._writers = {
            kind: jsonl.open(
                FileSystems.join(self._temp, kind + jsonl.extension), settings.id_field, settings.messages_field
            )
            for kind in OUTPUT_KINDS
        }
        self.totals: dict = {}

    def write(self, kind: str, items: list) -> None:
        self._writers[kind].write(items)
        if kind == "drops":
            self.totals = summaries.merge(self.totals, summaries.partial(0, items))
        elif kind == "dead_letter":
            self.totals = summaries.merge(self.totals, summaries.partial(0, (), items))

    def commit(self, records: int, blank_lines: int) -> dict:
        """Close the files, add source.json, rename into place; the file's partial summary."""
        for writer in self._writers.values():
            writer.close()
        part = summaries.merge(self.totals, summaries.partial(records, blank_lines=blank_lines))
        source = {
            "source": self._path,
            "window": self._window,
            **summaries.finalize(part, profile=self._settings.profile, check=self._settings.check),
        }
        with FileSystems.create(FileSystems.join(self._temp, SOURCE_FILE), mime_type="application/json") as handle:
            handle.write(document_bytes(source))
        if not FileSystems.exists(self._window_dir):
            try:
                FileSystems.mkdirs(self._window_dir)
            except OSError:
                pass  # created meanwhile by another file's write
        FileSystems.rename([self._temp], [self.final])
        return part

    def abandon(self) -> None:
        for writer in self._writers.values():
            try:
                writer.close()
            except Exception:  # noqa: BLE001 — cleaning up after another error
                pass
        if FileSystems.exists(self._temp):
            FileSystems.delete([self._temp])


def has_output(output: str, path: str) -> bool:
    """Whether a landed file already has its outputs in some window of ``output``."""
    pattern = FileSystems.join(output, "*", source_id(path), SOURCE_FILE)
    return bool(FileSystems.match([pattern])[0].metadata_list)


_KIND_OF_TAG = {DROPS: "drops", DEAD_LETTER: "dead_letter"}


class _CleanLandedFile(beam.DoFn):
    """Thin: read one landed file in batches, normalize each with the batch job's
    ``RouteConversations`` (same code, same counters), write the outputs as they come,
    commit them in one rename, and emit the file's partial summary.

    One file is one element and is done within one call, so its outputs need no state and no
    shuffle. (A first version shuffled the batches to a stateful DoFn keyed by file; on Prism,
    a split bundle's remainder could run before the first part's state was committed, and a
    file's outputs were lost. Measured with 10 files of 2,000 records landing at once.)
    """

    def __init__(self, output: str, settings: Settings, batch_size: int) -> None:
        self._output = output
        self._settings = settings
        self._batch_size = batch_size

    def setup(self) -> None:
        self._normalize = RouteConversations(NORMALIZE, self._settings)
        self._normalize.setup()

    def process(self, path: str, window=beam.DoFn.WindowParam):
        if has_output(self._output, path):
            LOG.warning("%s has output already (a second sighting); not read again", path)
            return
        suffix = file_suffix(path)
        assert suffix is not None  # the watcher passes on only files of a kind convnorm reads
        shard = Shard(shard_number(path), path, suffix, 0, None)
        stats = {"records": 0, "blank_lines": 0}
        target = _OutputDirectory(self._output, window_name(window), path, self._settings)
        self._normalize.start_bundle()  # one output file per landed file: a unique field starts afresh
        try:
            for batch in iter_batches(shard, self._batch_size, stats):
                for out in self._normalize.process(batch):
                    if isinstance(out, TaggedOutput):
                        target.write(_KIND_OF_TAG[out.tag], out.value.items)
                    else:
                        target.write("normalized", out.items)
            part = target.commit(stats["records"], stats["blank_lines"])
        except Exception:
            target.abandon()
            raise
        LOG.info("%s: %d records -> %s", path, stats["records"], target.final)
        yield part


class CleanLandedFiles(beam.PTransform):
    """Landed file paths -> each file's outputs in its window's directory; per-file partial
    summaries (in the file's window)."""

    def __init__(self, output: str, settings: Settings, batch_size: int) -> None:
        super().__init__()
        self._output = output
        self._settings = settings
        self._batch_size = batch_size

    def expand(self, paths):
        return paths | "Clean" >> beam.ParDo(_CleanLandedFile(self._output, self._settings, self._batch_size))


class _WriteWindowSummary(beam.DoFn):
    """A window closed: write ``OUT/<window>/summary.json`` (``window_total``) and print the
    window's line with the running total of the output directory (every window summary in it,
    so no state is needed: the files on disk are the total)."""

    def __init__(self, output: str, settings: Settings) -> None:
        self._output = output
        self._settings = settings

    def process(self, doc: dict, window=beam.DoFn.WindowParam):
        name = window_name(window)
        _write_json_atomically(
            window_total(self._output, name, self._settings), FileSystems.join(self._output, name, SUMMARY_FILE)
        )
        line = running_total_line(name, doc, total_of_windows(self._output, self._settings))
        print(line, flush=True)
        yield line


def running_total_line(window: str, doc: dict, total: dict) -> str:
    return (
        f"window {window}: {doc['records_in']} records in, {doc['records_out']} normalized, "
        f"{doc['dead_letters']} dead letters, {doc['dropped']} messages dropped | running total: "
        f"{total['records_in']} in, {total['records_out']} normalized, {total['dead_letters']} dead letters, "
        f"{total['dropped']} dropped"
    )


class SummarizeWindows(beam.PTransform):
    """Per-file partial summaries -> one summary per window when it closes (written, and the
    running total printed)."""

    def __init__(self, output: str, settings: Settings) -> None:
        super().__init__()
        self._output = output
        self._settings = settings

    def expand(self, partials):
        return (
            partials
            | "Merge" >> beam.CombineGlobally(MergeSummaries(_finisher(self._settings))).without_defaults()
            | "Write" >> beam.ParDo(_WriteWindowSummary(self._output, self._settings))
        )


class _Finisher:
    # A picklable stand-in for functools.partial(summaries.finalize, ...).
    def __init__(self, profile: str, check: bool) -> None:
        self._profile = profile
        self._check = check

    def __call__(self, total: dict) -> dict:
        return summaries.finalize(total, profile=self._profile, check=self._check)


def _finisher(settings: Settings) -> _Finisher:
    return _Finisher(settings.profile, settings.check)


class StreamingOutputs(NamedTuple):
    partials: beam.PCollection
    console: beam.PCollection


def build_streaming(
    pipeline: beam.Pipeline, job: Job, plan: WatchPlan, window_s: float, batch_size: int
) -> StreamingOutputs:
    """Apply the streaming job to ``pipeline``."""
    paths = pipeline | "Watch" >> WatchLandingDirectory(plan)
    windowed = paths | "Window" >> beam.WindowInto(beam_window.FixedWindows(window_s))
    partials = windowed | "CleanLanded" >> CleanLandedFiles(job.output, job.settings, batch_size)
    console = partials | "SummarizeWindows" >> SummarizeWindows(job.output, job.settings)
    return StreamingOutputs(partials, console)


# --------------------------------------------------------------------------------------------
# Running


def plan_watch(job: Job, stop_marker: str) -> WatchPlan:
    ours = job.options.view_as(ConvNormOptions)
    present: set[str] = set()
    for pattern in job.inputs:
        present |= {canonical_path(m.path) for m in FileSystems.match([pattern])[0].metadata_list}
    if ours.include_existing:
        done = processed_sources(job.output) if FileSystems.exists(job.output) else set()
        skipped = {path for path in present if source_id(path) in done}
        LOG.info("%d file(s) present at start: %d already have output, the rest are read", len(present), len(skipped))
    else:
        skipped = present
        if present:
            LOG.info("%d file(s) present at start are not read (pass --include-existing to read them)", len(present))
    stop_after = parse_duration(ours.stop_after) if ours.stop_after else None
    return WatchPlan(
        patterns=tuple(job.inputs),
        output=job.output,
        poll_interval_s=parse_duration(ours.poll_interval),
        skipped_at_start=frozenset(skipped),
        stop_files=tuple(p for p in (ours.stop_file, stop_marker) if p),
        stop_at=None if stop_after is None else time.time() + stop_after,
    )


class _StopOnSignal:
    """SIGINT/SIGTERM -> create the run's stop marker (the watcher drains); a second signal
    gets the default behaviour, for a user who does not want to wait."""

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
            f"convnorm: {signal.Signals(signum).name}: draining (every file seen is finished, the last "
            "windows close); signal again to abort",
            flush=True,
        )
        with FileSystems.create(self._marker) as handle:
            handle.write(b"stop\n")

    def __exit__(self, *exc):
        for s, handler in self._previous.items():
            signal.signal(s, handler)
        return False


#: The Beam counters shown while the job runs (all are in the runner's metrics).
LIVE_COUNTERS = ("records_in", "records_out", "dead_letters", "dropped", "healed")


def live_counters(result) -> str:
    """The job's convnorm counters so far, as one console line ("" where the runner has none)."""
    from apache_beam.metrics import MetricsFilter

    try:
        counters = result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))["counters"]
    except Exception:  # noqa: BLE001 — metrics are a nicety; some runners do not serve them live
        return ""
    values = {name: 0 for name in LIVE_COUNTERS}
    for counter in counters:
        name = counter.key.metric.name
        if name in values:
            values[name] += counter.committed or counter.attempted or 0
    return "counters: " + ", ".join(f"{name} {value}" for name, value in values.items())


_TERMINAL = {
    PipelineState.DONE,
    PipelineState.FAILED,
    PipelineState.CANCELLED,
    PipelineState.UPDATED,
    PipelineState.DRAINED,
}


def run_streaming(job: Job) -> int:
    """Run the streaming job until it is stopped and drained; write summary.json; exit status.

    The run holds the output directory's lock, and writes only into a directory that is empty
    or that an earlier streaming run marked as its own."""
    job.options.view_as(StandardOptions).streaming = True
    try:
        lock = locks.acquire(
            job.output,
            run_id=uuid.uuid4().hex,
            command="streaming",
            temp_dir="",
            break_stale=job.break_stale_lock,
            clean_up=_nothing_to_clean,
        )
    except (locks.LockError, OutputError) as error:
        print(f"convnorm: error: {error}", file=sys.stderr)
        return 2
    try:
        claim_streaming_output(job.output)
        return _watch(job)
    except OutputError as error:
        print(f"convnorm: error: {error}", file=sys.stderr)
        return 2
    finally:
        lock.release()


def _nothing_to_clean(holder: dict) -> None:
    # A dead streaming run leaves only dot-directories of files in flight, which readers of
    # the output never see, and its stop marker: nothing a new run must delete.
    LOG.warning("taking over the stale lock of a dead run (%s)", locks.describe(holder))


def _watch(job: Job) -> int:
    ours = job.options.view_as(ConvNormOptions)
    if not FileSystems.exists(job.output):
        FileSystems.mkdirs(job.output)
    stop_marker = FileSystems.join(job.output, f".stop-{uuid.uuid4().hex}")
    plan = plan_watch(job, stop_marker)
    window_s = parse_duration(ours.window)
    print(
        f"convnorm: watching {', '.join(job.inputs)} every {plan.poll_interval_s:g} s; windows of "
        f"{window_s:g} s under {job.output}/; stop with Ctrl-C / SIGTERM"
        + (f", --stop-file {ours.stop_file}" if ours.stop_file else "")
        + (f", after {ours.stop_after}" if ours.stop_after else ""),
        flush=True,
    )
    try:
        with prism_services(job.options), _StopOnSignal(stop_marker) as stop:
            pipeline = beam.Pipeline(options=job.options)
            build_streaming(pipeline, job, plan, window_s, job.batch_size)
            result = pipeline.run()
            state = result.state
            shown, next_counters = "", time.monotonic() + window_s
            while state not in _TERMINAL:
                time.sleep(0.5)  # interruptible: the signal handler runs between sleeps
                state = result.state
                if time.monotonic() >= next_counters:
                    next_counters += window_s
                    line = live_counters(result)
                    if line and line != shown:
                        print(line, flush=True)
                        shown = line
            state = result.wait_until_finish()
    finally:
        if FileSystems.exists(stop_marker):
            FileSystems.delete([stop_marker])
    if state != PipelineState.DONE:
        LOG.error("the streaming pipeline ended in state %s", state)
        return 1
    total = total_of_windows(job.output, job.settings)
    _write_json_atomically(total, FileSystems.join(job.output, SUMMARY_FILE))
    print(summaries.format_table(total))
    print(
        f"outputs: {job.output}/<window>/<file>/{{normalized,drops,dead_letter}}.jsonl, "
        f"{job.output}/<window>/{SUMMARY_FILE} and {job.output}/{SUMMARY_FILE}"
    )
    if ours.report and job.output:  # the windows over time, the examples (pipeline/report.py)
        from pipeline.report import try_write_report

        report = try_write_report(job.output)
        if report:
            print(f"report:  {report}")
    if stop.signum == signal.SIGINT:  # Ctrl-C drained the run: its status says so (SIGTERM: 0)
        print(interrupted_line("the streaming run", job.output, drained=True), file=sys.stderr)
        return INTERRUPTED
    return 0 if total["accounted"] else 1
