"""The jobs' graph: ``build(pipeline, job, temp_dir)`` applies ``convnorm run`` (read ->
normalize -> write) and ``build_validate`` its sibling ``convnorm validate`` (read -> check ->
write), so tests can build it on a TestPipeline and ``main`` only parses and runs. One graph runs
on every runner (FnApiRunner in one process or several, Prism, DaskRunner): the per-shard graph
(``pipeline.graph.per_shard``). ``run_spec`` / ``VALIDATE_SPEC`` say what each writes
(``pipeline.execution.execute``).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from pipeline.config.options import Job
from pipeline.graph.per_shard import ProcessShards
from pipeline.graph.shard_step import ShardWork
from pipeline.io.output_names import SUMMARY_FILE, VALIDATION_FILE
from pipeline.io.shard import Shard
from pipeline.runners.dask_cluster import plan_chunks
from transforms.dataset.dataset_keys import output_names
from transforms.totals.record_step import CHECK, NORMALIZE, RecordStep

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


class JobOutputs(NamedTuple):
    #: The summary document (a PCollection of one); the records never leave the step that
    #: writes them.
    summary: beam.PCollection


def shard_work(job: Job, step: RecordStep, calls: bool = False) -> ShardWork:
    """What the per-shard step needs of a job: the step, the settings, the file formats, the
    limits; ``calls``: call-log records handed on to be assembled (``Settings.calls``)."""
    # The records' outputs (normalized/, and each --split's) take the job's file format.
    formats = dict.fromkeys(output_names(job.settings.splits), job.output_format) if step is NORMALIZE else {}
    settings = dataclasses.replace(job.settings, calls=calls)
    return ShardWork(step, settings, formats, job.batch_size, job.max_record_bytes, job.batch_bytes)


def _build(pipeline: beam.Pipeline, job: Job, temp_dir: str, step: RecordStep, summary_file: str) -> JobOutputs:
    """The graph (``pipeline.graph.per_shard``): the files, their lists and the summary."""
    summary = pipeline | step.label + "Shards" >> ProcessShards(
        job.shards,
        shard_work(job, step, calls=job.call_logs),
        temp_dir,
        FileSystems.join(temp_dir, summary_file),
        plan_chunks(job),
        call_shards(job.shards),
        part_bytes=job.part_bytes,
    )
    return JobOutputs(summary)


def build(pipeline: beam.Pipeline, job: Job, temp_dir: str) -> JobOutputs:
    """Apply ``convnorm run`` to ``pipeline``: files and summary under ``temp_dir`` (the run's
    temporary directory; ``pipeline.execution.finalize.finalize`` moves them into ``job.output``)."""
    return _build(pipeline, job, temp_dir, NORMALIZE, SUMMARY_FILE)


def build_validate(pipeline: beam.Pipeline, job: Job, temp_dir: str) -> JobOutputs:
    """Apply ``convnorm validate`` to ``pipeline``: violation reports, dead letters and
    ``validation.json`` under ``temp_dir``."""
    return _build(pipeline, job, temp_dir, CHECK, VALIDATION_FILE)
