"""``WatchLandingDirectory``: the landing directory polled by a splittable DoFn (like Beam's
PeriodicImpulse and MatchContinuously, but it can be told to stop), each settled file not yet
processed admitted once (``pipeline.streaming.landing`` says which files, when)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import NamedTuple

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.io.restriction_trackers import OffsetRange, OffsetRestrictionTracker
from apache_beam.io.watermark_estimators import ManualWatermarkEstimator
from apache_beam.utils.timestamp import Duration, Timestamp

from pipeline.io import processed_files as processed
from pipeline.io.shard import Stamp
from pipeline.streaming.landing import LandingRules, LandingWatch, match_landing

LOG = logging.getLogger("convnorm")


#: Polls of the watcher before it gives up on a restriction (never reached in practice).
_MAX_POLLS = 1 << 62


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
    #: Seconds since the epoch: no file is stamped before it (the end of the latest window an
    #: earlier run assembled: nothing may be committed into a window after its assembly).
    not_before: float = 0.0


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
        if now < Timestamp.of(self._plan.not_before):
            # A window an earlier run assembled (its drain closed it early): the next one.
            now = Timestamp.of(self._plan.not_before)
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
