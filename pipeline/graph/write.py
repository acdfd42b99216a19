"""Writing outputs: one file per input shard, named by the shard, byte-identical on reruns.

``WriteShards`` writes batches that become ``DIR/<name>/part-<shard>.<ext>``. Every batch carries the
shard it was read from; batches of one shard arrive together and in input order, because
reading, normalizing and writing are fused into one stage (no shuffle between them), so each
file's content and name depend only on the input, never on worker scheduling. A runner that
split a shard over bundles would give it several files, ``part-<shard>-<start>``, still in
order. Files are written under temporary names in the run's temporary directory
(``<shard>-<offset>-<uuid>``: ``pipeline.io.written_files.temp_name``) and reported
(path, records, bytes), every output's in one list per output (``ListWrittenFiles``, one
combine for all); ``pipeline.execution.finalize`` renames them once the whole pipeline succeeded and
checks each one, so a failed run leaves no half-written part files.

The run's summary is written by ``WriteSummary``; the file formats are ``pipeline.io.file_formats``.
"""

from __future__ import annotations

import uuid
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue

from pipeline.graph.tally import Tally
from pipeline.io.file_formats import FILE_FORMATS
from pipeline.io.object_store import WorkerFilesystems
from pipeline.io.written_files import WrittenFile, temp_name, write_reports, write_summary
from pipeline.testhooks import pause_point
from transforms.record.inputs import Batch


class _WriteShardFiles(beam.DoFn):
    """Writes each shard's batches to a temporary file; emits one ``WrittenFile`` per file.

    One file is open at a time: a shard's batches arrive together, so the file closes when the
    next shard begins, or the next scope of the normalizer's state (``Batch.scope``: a unique
    field is unique within one; the two agree whether or not the runner fuses the steps). Keeping one open per
    shard ran out of file handles with a few hundred input files.
    """

    def __init__(
        self,
        temp_dir: str,
        file_format: str,
        id_field: str,
        messages_field: str,
        progress_name: str = "",
        sink: str = "flat",
    ) -> None:
        self._sink = sink
        self._temp_dir = temp_dir
        self._file_format = file_format
        self._id_field = id_field
        self._messages_field = messages_field
        self._progress_name = progress_name
        self._filesystems = WorkerFilesystems()

    def setup(self) -> None:
        self._filesystems.apply()
        self._tally = Tally(self._progress_name or "written")  # live progress of local runs

    def start_bundle(self) -> None:
        self._current: list[Any] | None = None  # [shard, start, temp path, writer]

    def _close(self) -> WrittenFile:
        assert self._current is not None  # called with a file open
        shard, start, temp, writer = self._current
        self._current = None
        return WrittenFile(shard, start, temp, *writer.close())

    def process(self, batch):
        # A new file per shard and per normalizer scope (``Batch.scope``): one writer bundle may
        # hold batches of two normalizer bundles where the runner did not fuse the two steps.
        if self._current is not None and (self._current[0], self._scope) != (batch.shard, batch.scope):
            yield self._close()
        self._scope = batch.scope
        if self._current is None:
            # A unique temporary name per attempt: a retried bundle never clobbers another.
            temp = FileSystems.join(self._temp_dir, temp_name(batch.shard, batch.start, uuid.uuid4().hex))
            writer = FILE_FORMATS[self._file_format].open(temp, self._id_field, self._messages_field, self._sink)
            self._current = [batch.shard, batch.start, temp, writer]
        self._current[3].write(batch.items, getattr(batch, "lines", None))
        self._tally.add(self._progress_name, len(batch.items))
        pause_point("write")

    def finish_bundle(self):
        self._tally.flush()
        if self._current is not None:
            yield WindowedValue(self._close(), MIN_TIMESTAMP, [GlobalWindow()])


@beam.typehints.with_input_types(Batch)
@beam.typehints.with_output_types(WrittenFile)
class WriteShards(beam.PTransform):
    """Batches -> temporary files under ``TEMP_ROOT/NAME/``; gives the files written, which
    ``ListWrittenFiles`` lists in ``TEMP_ROOT/NAME.files.json``.

    The pipeline only writes temporary files and reports them (shard, start, path, records,
    bytes); the driver (``pipeline.execution.finalize.finalize``) moves them to ``OUTPUT/NAME/part-*``
    after the pipeline finished, checks each one is there as reported, and records it in the
    manifest. Nothing under the output directory but the run's own temporary directory is
    written while the pipeline runs.
    """

    def __init__(
        self,
        temp_root: str,
        name: str,
        file_format: str = "jsonl",
        *,
        id_field: str = "id",
        messages_field: str = "messages",
        sink: str = "flat",
    ) -> None:
        super().__init__()
        self._temp_root = temp_root
        self._name = name
        self._file_format = file_format
        self._id_field = id_field
        self._messages_field = messages_field
        self._sink = sink  # whose records: a Parquet file takes that sink's schema

    def expand(self, batches):
        temp_dir = FileSystems.join(self._temp_root, self._name)
        return batches | "WriteTemp" >> beam.ParDo(
            _WriteShardFiles(
                temp_dir,
                self._file_format,
                self._id_field,
                self._messages_field,
                progress_name=self._name,
                sink=self._sink,
            )
        ).with_input_types(Batch).with_output_types(WrittenFile)


def _named(file: WrittenFile, name: str) -> tuple[str, WrittenFile]:
    return name, file


@beam.typehints.with_output_types(int)  # the number of files written
class ListWrittenFiles(beam.PTransform):
    """``{output name: the files its WriteShards wrote}`` -> every output's list,
    ``TEMP_ROOT/NAME.files.json``, in one global combine (one per output was two stages
    each: measured, docs/per-record-speed.md)."""

    def __init__(self, temp_root: str) -> None:
        super().__init__()
        self._temp_root = temp_root

    def expand(self, written):
        names = tuple(written)
        return (
            [files | f"Name{name}" >> beam.Map(_named, name) for name, files in written.items()]
            | "AllFiles" >> beam.Flatten()
            | "CollectFiles" >> beam.combiners.ToList()
            | "Report" >> beam.Map(write_reports, self._temp_root, names, WorkerFilesystems())
        )


class WriteSummary(beam.PTransform):
    """The summary dict -> ``summary.json`` (pretty-printed, stable key order)."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self._path = path

    def expand(self, summary):
        return summary | "WriteSummary" >> beam.Map(write_summary, self._path, WorkerFilesystems())
