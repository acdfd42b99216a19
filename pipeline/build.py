"""The job's graph: ``build(pipeline, job)`` applies read -> normalize -> write and returns
the PCollections, so tests can build it on a TestPipeline and ``main`` only parses and runs.
"""

from __future__ import annotations

from typing import NamedTuple

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from pipeline.options import Job
from pipeline.sinks import SUMMARY_FILE, WriteShards, WriteSummary
from pipeline.sources import (
    DEFAULT_BATCH_BYTES,
    DEFAULT_BATCH_SIZE,
    DEFAULT_MAX_RECORD_BYTES,
    ReadConversationLogs,
    Shard,
)
from transforms.conversations import NormalizeConversations, SummarizeRun
from transforms.records import Settings


class CleanedLogs(NamedTuple):
    records: beam.PCollection
    drops: beam.PCollection
    dead_letters: beam.PCollection
    read_stats: beam.PCollection


class CleanConversationLogs(beam.PTransform):
    """Read -> parse -> normalize -> split: planned input shards to the three outputs."""

    def __init__(self, shards: list[Shard], settings: Settings, batch_size: int = DEFAULT_BATCH_SIZE,
                 max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES, batch_bytes: int = DEFAULT_BATCH_BYTES) -> None:
        super().__init__()
        self._shards = shards
        self._settings = settings
        self._batch_size = batch_size
        self._max_record_bytes = max_record_bytes
        self._batch_bytes = batch_bytes

    def expand(self, pbegin):
        read = pbegin | "Read" >> ReadConversationLogs(self._shards, self._batch_size, self._max_record_bytes,
                                                       self._batch_bytes)
        out = read.batches | "Normalize" >> NormalizeConversations(self._settings)
        return CleanedLogs(out.records, out.drops, out.dead_letters, read.stats)


class JobOutputs(NamedTuple):
    cleaned: CleanedLogs
    summary: beam.PCollection


def build(pipeline: beam.Pipeline, job: Job, temp_dir: str) -> JobOutputs:
    """Apply the whole job to ``pipeline``: files and summary under ``temp_dir`` (the run's
    temporary directory; ``pipeline.outputs.finalize`` moves them into ``job.output``)."""
    cleaned = pipeline | "CleanLogs" >> CleanConversationLogs(job.shards, job.settings, job.batch_size,
                                                             job.max_record_bytes, job.batch_bytes)
    settings = job.settings
    cleaned.records | "WriteNormalized" >> WriteShards(
        temp_dir, "normalized", job.output_format,
        id_field=settings.id_field, messages_field=settings.messages_field)
    cleaned.drops | "WriteDrops" >> WriteShards(temp_dir, "drops")
    cleaned.dead_letters | "WriteDeadLetters" >> WriteShards(temp_dir, "dead_letter")
    summary = (cleaned.read_stats, cleaned.drops, cleaned.dead_letters) | "Summarize" >> SummarizeRun(settings)
    summary | "WriteSummary" >> WriteSummary(FileSystems.join(temp_dir, SUMMARY_FILE))
    return JobOutputs(cleaned, summary)
