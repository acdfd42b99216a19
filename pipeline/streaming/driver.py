"""Streaming mode: watch a landing directory, clean each file as it lands, windowed summaries.

``convnorm --streaming --input 'landing/*.jsonl' --output out/ --runner PrismRunner``::

    WatchLandingDirectory    poll the patterns (a splittable DoFn, like Beam's PeriodicImpulse
                             and MatchContinuously, but it can be told to stop); admit each
                             settled file not yet processed (pipeline.streaming.landing)
    window                   fixed windows (--window) of the time a file was admitted
    CleanLandedFiles         spread over workers; per file: decide its version (new, appended,
                             rewritten: pipeline.io.processed_files), read it in batches, normalize,
                             write its three outputs into the window's directory in one rename
    SummarizeWindows         per window, when it closes: the conversations of the call logs
                             it got, assembled (pipeline.streaming.assembled), then
                             OUT/<window>/summary.json from the files on disk, and one console line
                             (a window a dead run left open with call logs closes here too)

Output layout (``<window>`` is ``20261130T120000Z-20261130T120100Z``, the window's start and
end in UTC; ``<file>`` is the landed file's name without its suffix plus 16 hex digits of a
hash of its full path, and ``-v2``, ``-v3`` ... for later versions of the same path)::

    OUT/<window>/<file>/normalized.jsonl, drops.jsonl, dead_letter.jsonl, source.json
                                     (and calls.jsonl: the file's call-log pieces)
    OUT/<window>/assembled/          the conversations assembled from call logs at the close
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

import dataclasses
import logging
import os
import signal
import sys
import threading
import time
import uuid
from typing import NamedTuple, Sequence

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import StandardOptions
from apache_beam.runners.runner import PipelineState
from apache_beam.transforms import window as beam_window

from pipeline.config.options import ConvNormOptions, Job, parse_duration
from pipeline.console import print_error, print_line
from pipeline.execution import lock as locks
from pipeline.execution.interrupts import INTERRUPTED, interrupted_line
from pipeline.graph.shard_step import ShardWork
from pipeline.io import files
from pipeline.io import ownership as owned
from pipeline.io import processed_files as processed
from pipeline.io.output_names import SUMMARY_FILE, TEMP_PREFIX
from pipeline.io.ownership import OutputError, claim_streaming_output
from pipeline.io.planning import canonical_path
from pipeline.io.shard import Stamp, display_path
from pipeline.runners.job_service import TERMINAL, JobService
from pipeline.runners.prism import prism_services
from pipeline.streaming.assembled import assemble_left_windows, left_windows, sealed_until, still_open
from pipeline.streaming.clean import COMMITS, CleanLandedFiles, CleanPlan
from pipeline.streaming.landing import LandingRules, Refused, match_landing
from pipeline.streaming.watch import WatchLandingDirectory, WatchPlan, handled_now, should_stop
from pipeline.streaming.windows import KeepWindowsOpen, SummarizeWindows
from transforms.totals import summary as summaries
from transforms.totals.console_text import console_text
from transforms.totals.counters import NAMESPACE
from transforms.totals.record_step import NORMALIZE

LOG = logging.getLogger("convnorm")


__all__ = ["build_streaming", "run_streaming"]


# --------------------------------------------------------------------------------------------
# Window summaries


def build_streaming(
    pipeline: beam.Pipeline, watch: WatchPlan, clean: CleanPlan, window_s: float, open_windows: Sequence[str] = ()
):
    """Apply the streaming job to ``pipeline``; the PCollection of window lines. ``open_windows``:
    windows an earlier run left open with call logs, which this run's close assembles."""
    landed = pipeline | "Watch" >> WatchLandingDirectory(watch)
    windowed = landed | "Window" >> beam.WindowInto(beam_window.FixedWindows(window_s))
    done = windowed | "CleanLanded" >> CleanLandedFiles(clean)
    if open_windows:
        kept = pipeline | "KeepOpen" >> KeepWindowsOpen(list(open_windows), window_s)
        done = (done, kept) | "WithLeft" >> beam.Flatten()
    return done | "SummarizeWindows" >> SummarizeWindows(clean.output, clean.settings, clean.work, clean.run_temp)


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
        # Call-log records handed on: their pieces kept, assembled when their window closes.
        dataclasses.replace(job.settings, calls=job.call_logs),
        batch_size=job.batch_size,
        max_record_bytes=job.max_record_bytes,
        batch_bytes=job.batch_bytes,
    )
    return CleanPlan(output=output, run_id=run_id, run_temp=run_temp, work=work, changed_files=ours.changed_files)


def rebuild_windows(output: str, clean: CleanPlan, keep_open: Sequence[str] = ()) -> list[str]:
    """What a dead (or cancelled) run left undone in the windows: their call logs' conversations
    assembled (but in the windows ``keep_open`` names: still open, the run assembles them at
    their close), then their summaries rewritten; the windows rewritten."""
    assembled = assemble_left_windows(output, clean.work, clean.run_temp, keep_open)
    return processed.rebuild_windows(output, clean.settings, force=assembled)


def open_left_windows(output: str, window_s: float, now: float) -> list[str]:
    """The windows a dead run left with call logs unassembled that are still open at ``now``:
    a start leaves them open (files landing now are committed into them) and its close of
    each assembles it, from every piece; one whose end passed while no run was alive is closed,
    and the start assembles it."""
    return [w for w in left_windows(output) if still_open(w, now, window_s)]


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


def streaming_refusal(output: str, holder: dict) -> str:
    """Why a streaming start leaves a dead run's stale lock alone (its command not in ``TAKEN_OVER``)."""
    return (
        f"--output {output!r} has a stale lock of a dead `convnorm {holder.get('command')}` run "
        f"({locks.describe(holder)}); --streaming takes over only a streaming run's lock: recover that run "
        "(rerun it with --overwrite --break-stale-lock) or choose another directory; nothing was deleted"
    )


def _take_over(output: str, holder: dict) -> None:
    if holder.get("command") not in TAKEN_OVER:
        raise OutputError(streaming_refusal(output, holder))
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
    clean = plan_clean(job, output, run_id, run_temp)
    window_s = parse_duration(ours.window)
    open_windows = open_left_windows(output, window_s, time.time())
    rebuilt = rebuild_windows(output, clean, keep_open=open_windows)
    if rebuilt:
        LOG.warning("rebuilt the summaries of %d window(s) an earlier run left without one", len(rebuilt))
    if open_windows:
        LOG.info("%d window(s) left open with call logs: assembled at their close", len(open_windows))
    stop_marker = FileSystems.join(run_temp, "stop")
    watch = dataclasses.replace(plan_watch(job, output, stop_marker), not_before=sealed_until(output))
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
        build_streaming(pipeline, watch, clean, window_s, open_windows)
        result = pipeline.run()
        end = _monitor(_RunningJob(result), watch, stop, window_s, parse_duration(ours.drain_timeout))
    for error in end.errors:
        LOG.error("the streaming job: %s", error)
    rebuild_windows(output, clean)  # the run's end closes every window it left open
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
    if not total["accounted"]:
        print_error(processed.not_assembled_line(total) or "some records are not accounted for (summary.json)")
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
