"""The jobs' graphs: ``build(pipeline, job, temp_dir)`` applies ``convnorm run`` (read ->
normalize -> write) and ``build_validate`` its sibling ``convnorm validate`` (read -> check ->
write); each returns its PCollections, so tests can build it on a TestPipeline and ``main``
only parses and runs. ``run_spec`` / ``VALIDATE_SPEC`` say what each writes (``pipeline.execution.execute``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple, TypeVar

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from pipeline.config.flags import PER_SHARD
from pipeline.config.options import Job
from pipeline.graph.dataset_steps import ShapeDataset
from pipeline.graph.per_shard import ProcessShards
from pipeline.graph.read import ReadConversationLogs
from pipeline.graph.shard_step import ShardWork
from pipeline.graph.write import ListWrittenFiles, WriteShards, WriteSummary
from pipeline.io.file_formats import FILE_FORMATS
from pipeline.io.output_names import SUMMARY_FILE, VALIDATION_FILE
from pipeline.io.parts import DEFAULT_PART_BYTES
from pipeline.io.shard import Shard
from pipeline.runners.dask_cluster import plan_chunks
from transforms.conversations import (
    CHECK,
    NORMALIZE,
    CheckConversationBatches,
    CheckedOutputs,
    NormalizeConversationBatches,
    NormalizedOutputs,
    ProcessConversationBatches,
    RecordStep,
    Summarize,
    SummarizeRun,
    SummarizeValidation,
)
from transforms.dataset.dataset_keys import output_names, shapes_dataset, split_output
from transforms.record.inputs import DEFAULT_BATCH_BYTES, DEFAULT_BATCH_SIZE, DEFAULT_MAX_RECORD_BYTES
from transforms.record.record_settings import Settings


class NormalizedCollections(NamedTuple):
    records: beam.PCollection
    drops: beam.PCollection
    dead_letters: beam.PCollection
    read_stats: beam.PCollection
    #: The call-log assembly's partial summaries (``transforms.call_assembly``).
    assembly: beam.PCollection
    #: The outputs of the conversations assembled from call logs (a ``NormalizedOutputs``),
    #: written apart: a Flatten before a writer would stop the step and the writer fusing.
    assembled: NormalizedOutputs | None


class CheckedCollections(NamedTuple):
    reports: beam.PCollection
    dead_letters: beam.PCollection
    read_stats: beam.PCollection
    assembly: beam.PCollection
    assembled: CheckedOutputs | None


#: Input bytes per output shard of conversations assembled from call logs (``call_shards``):
#: each output shard's conversations are gathered in one worker to be sorted, so their number
#: grows with the input (measured: 87,178 call rows of 20,000 conversations in one shard held
#: 500 MiB; bench/bench_calllogs.py).
CALL_SHARD_INPUT_BYTES = 16 << 20
MAX_CALL_SHARDS = 4096


def call_shards(shards: list[Shard]) -> int:
    """How many output shards hold the conversations assembled from call logs: one per
    ``CALL_SHARD_INPUT_BYTES`` of input, at least one (from the plan alone: the same on every
    runner and rerun; a file of unknown size counts as one such share)."""
    total = sum((s.end if s.end is not None else (s.file_size or CALL_SHARD_INPUT_BYTES)) - s.start for s in shards)
    return max(1, min(-(-total // CALL_SHARD_INPUT_BYTES), MAX_CALL_SHARDS))


#: What ``ProcessConversationLogs`` gives: the run's or the validation's PCollections.
StepCollections = TypeVar("StepCollections", NormalizedCollections, CheckedCollections)


class ProcessConversationLogs(beam.PTransform[beam.pvalue.PBegin, StepCollections]):
    """Read -> parse -> a job's per-record step -> split: planned input shards to the step's
    outputs and the reader's statistics."""

    #: The step, its composite (``NormalizeConversationBatches``: the card's ``NormalizeConversation``
    #: over batches), and the result type: the step's outputs then ``read_stats``.
    STEP: RecordStep
    PROCESS: Callable[..., ProcessConversationBatches]
    RESULT: type[StepCollections]

    def __init__(
        self,
        shards: list[Shard],
        settings: Settings,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        batch_bytes: int = DEFAULT_BATCH_BYTES,
        lines_only: bool = False,
        part_bytes: int = DEFAULT_PART_BYTES,
        assemble: bool = True,
    ) -> None:
        super().__init__()
        self._part_bytes = part_bytes
        self._assemble = assemble
        self._shards = shards
        self._settings = settings
        self._batch_size = batch_size
        self._max_record_bytes = max_record_bytes
        self._batch_bytes = batch_bytes
        self._lines_only = lines_only

    def expand(self, pbegin):
        read = pbegin | "Read" >> ReadConversationLogs(
            self._shards, self._batch_size, self._max_record_bytes, self._batch_bytes, self._part_bytes
        )
        out = read.batches | self.STEP.label >> self.PROCESS(
            self._settings,
            self._lines_only,
            batch_size=self._batch_size,
            call_shards=call_shards(self._shards),
            first_call_shard=len(self._shards),
            join=False,
            assemble=self._assemble,
        )
        # The step's outputs, then ours, then the assembled conversations' outputs.
        return self.RESULT(*out[:-2], read.stats, out.assembly, out.assembled)


class NormalizeConversationLogs(ProcessConversationLogs[NormalizedCollections]):
    """Read -> parse -> normalize -> split: planned input shards to the three outputs."""

    STEP, PROCESS, RESULT = NORMALIZE, NormalizeConversationBatches, NormalizedCollections


class CheckConversationLogs(ProcessConversationLogs[CheckedCollections]):
    """Read -> parse -> check as they are -> split: planned input shards to reports and dead letters."""

    STEP, PROCESS, RESULT = CHECK, CheckConversationBatches, CheckedCollections


class JobOutputs(NamedTuple):
    #: ``NormalizedCollections`` (run) or ``CheckedCollections`` (validate); None for the per-shard graph,
    #: whose records never leave the step that writes them.
    collections: NormalizedCollections | CheckedCollections | None
    summary: beam.PCollection


def _logs(
    pipeline: beam.Pipeline,
    job: Job,
    label: str,
    logs: type[ProcessConversationLogs[StepCollections]],
    lines_only: bool = False,
) -> StepCollections:
    return pipeline | label >> logs(
        job.shards,
        job.settings,
        job.batch_size,
        job.max_record_bytes,
        job.batch_bytes,
        lines_only,
        job.part_bytes,
        job.call_logs,
    )


def _write(label: str, outputs: tuple, write: Callable[[], WriteShards]):
    """Each of ``outputs`` (the step's and the assembled conversations') written by a writer of
    its own, the files joined (a Flatten after the writers, never before one)."""
    files = [batches | f"{label}{n or ''}" >> write() for n, batches in enumerate(outputs)]
    return files[0] if len(files) == 1 else files | f"{label}Files" >> beam.Flatten()


def _summarize(
    temp_dir: str,
    written: dict,
    read_stats,
    summarized: tuple,
    dead_letters: tuple,
    assembly,
    summarize: Summarize,
    summary_file: str,
):
    """What every job ends with: its dead letters written, the lists of every output's files
    (``written``: the step's outputs' files, by name), its totals summarized and written."""
    letters = _write("WriteDeadLetters", dead_letters, lambda: WriteShards(temp_dir, "dead_letter"))
    written = {**written, "dead_letter": letters}
    written | "ListFiles" >> ListWrittenFiles(temp_dir)
    # The assembly's partials, unless --call-logs off left the assembly out.
    inputs = (read_stats, summarized, dead_letters, *((assembly,) if assembly is not None else ()))
    summary = inputs | "Summarize" >> summarize
    summary | "WriteSummary" >> WriteSummary(FileSystems.join(temp_dir, summary_file))
    return summary


def shard_work(job: Job, step: RecordStep, calls: bool = False) -> ShardWork:
    """What the per-shard step needs of a job: the step, the settings, the file formats, the
    limits; ``calls``: call-log records handed on to be assembled (``Settings.calls``)."""
    # The records' outputs (normalized/, and each --split's) take the job's file format.
    formats = dict.fromkeys(output_names(job.settings.splits), job.output_format) if step is NORMALIZE else {}
    settings = dataclasses.replace(job.settings, calls=calls)
    return ShardWork(step, settings, formats, job.batch_size, job.max_record_bytes, job.batch_bytes)


def _build_per_shard(pipeline: beam.Pipeline, job: Job, temp_dir: str, step: RecordStep, summary_file: str):
    """The per-shard graph (``pipeline.graph.per_shard``): the same files, lists and summary."""
    summary = pipeline | step.label + "Shards" >> ProcessShards(
        job.shards,
        shard_work(job, step, calls=job.call_logs),
        temp_dir,
        FileSystems.join(temp_dir, summary_file),
        plan_chunks(job),
        call_shards(job.shards),
        part_bytes=job.part_bytes,
    )
    return JobOutputs(None, summary)


def build(pipeline: beam.Pipeline, job: Job, temp_dir: str) -> JobOutputs:
    """Apply ``convnorm run`` to ``pipeline``: files and summary under ``temp_dir`` (the run's
    temporary directory; ``pipeline.execution.finalize.finalize`` moves them into ``job.output``).
    ``job.graph`` chooses the graph: the card's (``NormalizeConversation``'s tagged outputs,
    each written by ``WriteShards``) or the per-shard one."""
    if job.graph == PER_SHARD:
        return _build_per_shard(pipeline, job, temp_dir, NORMALIZE, SUMMARY_FILE)
    # A JSON Lines file takes the lines the per-record guard made: the records need not live on.
    lines_only = FILE_FORMATS[job.output_format].takes_lines
    normalized = _logs(pipeline, job, "CleanLogs", NormalizeConversationLogs, lines_only)
    settings = job.settings
    # The step's outputs and the assembled conversations' (none with --call-logs off), each
    # written by a writer of its own.
    assembled = [normalized.assembled] if normalized.assembled is not None else []
    records: tuple[Any, ...] = (normalized.records, *(a.records for a in assembled))
    drops: tuple[Any, ...] = (normalized.drops, *(a.drops for a in assembled))
    dead_letters: tuple[Any, ...] = (normalized.dead_letters, *(a.dead_letters for a in assembled))
    by_split: dict[str, tuple[Any, ...]] = {"normalized": records}
    if shapes_dataset(settings):  # --dedupe, --split: pipeline.graph.dataset_steps (shuffles: join first)
        joined = [
            parts | f"Join{label}" >> beam.Flatten()
            for label, parts in (("Records", records), ("Drops", drops), ("DeadLetters", dead_letters))
        ]
        shaped = tuple(joined) | "ShapeDataset" >> ShapeDataset(settings)
        by_split = {split_output(name): (split,) for name, split in shaped.records.items()}
        drops, dead_letters = (shaped.drops,), (shaped.dead_letters,)
        normalized = normalized._replace(
            records=by_split["normalized"][0], drops=shaped.drops, dead_letters=shaped.dead_letters
        )

    def writer(name: str) -> Callable[[], WriteShards]:
        return lambda: WriteShards(
            temp_dir,
            name,
            job.output_format,
            id_field=settings.id_field,
            messages_field=settings.messages_field,
            sink=settings.sink,
        )

    written = {name: _write(f"Write{name.capitalize()}", parts, writer(name)) for name, parts in by_split.items()}
    written["drops"] = _write("WriteDrops", drops, lambda: WriteShards(temp_dir, "drops"))
    summary = _summarize(
        temp_dir,
        written,
        normalized.read_stats,
        drops,
        dead_letters,
        normalized.assembly,
        SummarizeRun(settings),
        SUMMARY_FILE,
    )
    return JobOutputs(normalized, summary)


def build_validate(pipeline: beam.Pipeline, job: Job, temp_dir: str) -> JobOutputs:
    """Apply ``convnorm validate`` to ``pipeline``: violation reports, dead letters and
    ``validation.json`` under ``temp_dir``."""
    if job.graph == PER_SHARD:
        return _build_per_shard(pipeline, job, temp_dir, CHECK, VALIDATION_FILE)
    checked = _logs(pipeline, job, "CheckLogs", CheckConversationLogs)
    assembled = [checked.assembled] if checked.assembled is not None else []
    reports = (checked.reports, *(a.reports for a in assembled))
    written = {"violations": _write("WriteReports", reports, lambda: WriteShards(temp_dir, "violations"))}
    summary = _summarize(
        temp_dir,
        written,
        checked.read_stats,
        reports,
        (checked.dead_letters, *(a.dead_letters for a in assembled)),
        checked.assembly,
        SummarizeValidation(),
        VALIDATION_FILE,
    )
    return JobOutputs(checked, summary)
