"""``CleanLandedFiles``: one landed file cleaned and committed. Its version is decided
(``pipeline.io.processed_files``: new, appended, rewritten), it is read in batches, normalized,
and its three outputs are written into its window's directory, renamed into place in one step
(the commit; ``COMMITS``, the gate the driver shuts once it stopped taking files). Its
call-log records are not assembled here: their pieces go into ``calls.jsonl`` beside the other
outputs, in the same rename, and the window's close assembles them
(``pipeline.streaming.assembled``)."""

from __future__ import annotations

import hashlib
import logging
import uuid
from dataclasses import dataclass

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from pipeline.graph.shard_step import Observer, ShardWork, process_shard
from pipeline.io import files
from pipeline.io import processed_files as processed
from pipeline.io.processed_files import CALLS_FILE, SOURCE_FILE, source_id
from pipeline.io.shard import Shard, Stamp, display_path, file_suffix
from pipeline.streaming.assembled import compact_document, keep_written, write_calls, write_in_flight
from pipeline.streaming.commits import COMMITS
from pipeline.streaming.landing import stamp_of
from pipeline.streaming.watch import Landed
from pipeline.streaming.windows import window_name
from pipeline.testhooks import pause_point
from transforms.conversations import BatchCounters, freeze_gc
from transforms.record.inputs import Batch
from transforms.record.record_settings import Settings
from transforms.record.records import BatchResult
from transforms.totals import summary as summaries

LOG = logging.getLogger("convnorm")


def shard_number(path: str) -> int:
    """A stable number for a landed file (batches carry a number, not a path)."""
    return int(hashlib.sha1(processed.path_key(path).encode()).hexdigest()[:12], 16)


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
        logged: list = []  # its call-log records, as their pieces
        result = process_shard(
            shard,
            plan.work,
            lambda name: FileSystems.join(temp, name + extension(name)),
            observe=observe,
            empty_files=True,
            on_calls=logged.extend,
        )
        part = result.partial
        # Its call-log pieces, for the window's close to assemble (pipeline.streaming.assembled).
        calls = write_calls(temp, logged)
        pause_point("streaming-commit")  # tests kill a run or outlast a drain here
        measures = {
            name: {"records": f.records, "bytes": f.size, "sha256": f.sha256} for name, f in result.files.items()
        }
        if calls is not None:
            measures["calls"] = calls.measure
        source = {
            "source": display_path(path),
            "window": window,
            **{k: entry[k] for k in ("version", "why", "size", "mtime_ns", "sha256", "start", "end")},
            "files": measures,
            "totals": summaries.finalize_run(part, plan.settings),
            "partial": part,
        }
        if calls is not None:
            source["call_groups"] = calls.groups
            # Where each group's lines are in calls.jsonl: a close parses its groups' alone.
            source["call_spans"] = calls.spans
            if calls.targets:
                # The ids its calls offer labels, for a later window's labels to find them.
                source["call_targets"] = calls.targets
        write_in_flight(FileSystems.join(temp, SOURCE_FILE), compact_document(source))
        now = stamp_of(path)
        if now != stamp:
            raise _ChangedWhileRead(now)
        if not COMMITS.rename(temp, output, f"{window}/{name}"):
            raise _NotCommitted
        if calls is not None and calls.kept is not None:
            # For the window's close, if it runs in this process: its pieces, not parsed again.
            keep_written(FileSystems.join(output, window, name, CALLS_FILE), calls.kept)
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
