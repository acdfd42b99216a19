"""Writing outputs: one file per input shard, named by the shard, byte-identical on reruns.

``WriteShards`` writes batches that become ``DIR/<name>/part-<shard>.<ext>``. Every batch carries the
shard it was read from; batches of one shard arrive together and in input order, because
reading, normalizing and writing are fused into one stage (no shuffle between them), so each
file's content and name depend only on the input, never on worker scheduling. A runner that
split a shard over bundles would give it several files, ``part-<shard>-<start>``, still in
order. Files are written under temporary names in the run's temporary directory and reported
(path, records, bytes), every output's in one list per output (``ListWrittenFiles``, one
combine for all); ``pipeline.io.ownership`` renames them once the whole pipeline succeeded and
checks each one, so a failed run leaves no half-written part files.

Output file formats form a registry (``FILE_FORMATS``): JSON Lines for every output, and
Parquet for normalized flat records.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any, Callable, NamedTuple

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue

from pipeline.graph.tally import Tally
from pipeline.io import files
from pipeline.testhooks import pause_point
from transforms.flat_rows import flat_row, parquet_schema
from transforms.inputs import Batch
from transforms.jsontext import document_bytes, dumps_line

# --------------------------------------------------------------------------------------------
# File formats: open(path) -> writer with write(items, lines=None) and close() -> FileMeasure


class FileMeasure(NamedTuple):
    """A file as its writer wrote it: records (JSONL lines, Parquet rows), bytes and sha256."""

    records: int
    size: int
    sha256: str


class _MeasuredFile:
    """A file being written, measured as it is: bytes, newlines and sha256 of everything that
    goes through ``write``, so the finished file need not be read back (a re-read per file made
    finalizing 100,000 outputs on an object store take ~1.2 million calls)."""

    def __init__(self, path: str, mime_type: str) -> None:
        self._handle = files.create(path, mime_type=mime_type)  # a fresh name, never through a link
        self._digest = hashlib.sha256()
        self.size = 0
        self.lines = 0

    def write(self, data) -> int:
        self._digest.update(data)
        self.size += len(data)
        self.lines += data.count(b"\n")
        return self._handle.write(data)

    # What pyarrow's ParquetWriter asks of a file object besides ``write``.
    @property
    def closed(self) -> bool:
        return self._handle.closed

    def flush(self) -> None:
        self._handle.flush()

    def tell(self) -> int:
        return self.size

    def close(self) -> None:
        self._handle.close()

    def measure(self, records: int) -> FileMeasure:
        return FileMeasure(records, self.size, self._digest.hexdigest())


class _JsonLinesFile:
    def __init__(self, path: str) -> None:
        self._file = _MeasuredFile(path, "application/jsonl")

    def write(self, items: list, lines: list | None = None) -> None:
        # ``lines``: the items already serialized by the per-record guard, written as they are.
        if lines is None:
            lines = [dumps_line(item) for item in items]
        if lines:
            self._file.write(b"\n".join(lines) + b"\n")

    def close(self) -> FileMeasure:
        self._file.close()
        # A record is a line: the newlines written, counted the way finalize counts a file on disk.
        return self._file.measure(self._file.lines)


class _ParquetFile:
    """Normalized flat records as Parquet rows (``transforms.flat_rows``): typed messages, call
    arguments exact (a string stays that string, a JSON value is its JSON text, ``args_kind``
    says which), the other fields as one JSON text; ``flat_rows.flat_record`` reads a row back.
    """

    def __init__(self, path: str, id_field: str, messages_field: str) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        self._schema = parquet_schema(pa)
        self._pa = pa
        self._id_field = id_field
        self._messages_field = messages_field
        self._file = _MeasuredFile(path, "application/vnd.apache.parquet")
        self._writer = pq.ParquetWriter(self._file, self._schema)
        self._rows = 0

    def _row(self, record: dict) -> dict:
        return flat_row(record, self._id_field, self._messages_field)

    def write(self, items: list, lines: list | None = None) -> None:
        # ``lines`` (the items' JSON text) is of no use to a Parquet file.
        self._writer.write_table(self._pa.Table.from_pylist([self._row(r) for r in items], schema=self._schema))
        self._rows += len(items)

    def close(self) -> FileMeasure:
        self._writer.close()
        self._file.close()
        return self._file.measure(self._rows)


class FileFormat(NamedTuple):
    extension: str
    #: ``open(path, id_field, messages_field)`` -> a writer with ``write(items, lines=None)`` and
    #: ``close() -> FileMeasure``.
    open: Callable
    #: The writer writes ``lines`` (the items' JSON lines, when the job made them) as they are.
    takes_lines: bool = False


#: Output file format name -> its extension and writer.
FILE_FORMATS: dict[str, FileFormat] = {
    "jsonl": FileFormat(".jsonl", lambda path, id_field, messages_field: _JsonLinesFile(path), takes_lines=True),
    "parquet": FileFormat(".parquet", _ParquetFile),
}


# --------------------------------------------------------------------------------------------
# Beam


class _WriteShardFiles(beam.DoFn):
    """Writes each shard's batches to a temporary file; emits one ``WrittenFile`` per file.

    One file is open at a time: a shard's batches arrive together (reading, normalizing and
    writing are fused), so the file closes when the next shard begins. Keeping one open per
    shard ran out of file handles with a few hundred input files.
    """

    def __init__(
        self, temp_dir: str, file_format: str, id_field: str, messages_field: str, progress_name: str = ""
    ) -> None:
        self._temp_dir = temp_dir
        self._file_format = file_format
        self._id_field = id_field
        self._messages_field = messages_field
        self._progress_name = progress_name

    def setup(self) -> None:
        self._tally = Tally(self._progress_name or "written")  # live progress of local runs

    def start_bundle(self) -> None:
        self._current: list[Any] | None = None  # [shard, start, temp path, writer]

    def _close(self) -> WrittenFile:
        assert self._current is not None  # called with a file open
        shard, start, temp, writer = self._current
        self._current = None
        return WrittenFile(shard, start, temp, *writer.close())

    def process(self, batch):
        if self._current is not None and self._current[0] != batch.shard:
            yield self._close()
        if self._current is None:
            # A unique temporary name per attempt: a retried bundle never clobbers another.
            temp = FileSystems.join(self._temp_dir, temp_name(batch.shard, batch.start, uuid.uuid4().hex))
            writer = FILE_FORMATS[self._file_format].open(temp, self._id_field, self._messages_field)
            self._current = [batch.shard, batch.start, temp, writer]
        self._current[3].write(batch.items, getattr(batch, "lines", None))
        self._tally.add(self._progress_name, len(batch.items))
        pause_point("write")

    def finish_bundle(self):
        self._tally.flush()
        if self._current is not None:
            yield WindowedValue(self._close(), MIN_TIMESTAMP, [GlobalWindow()])


def temp_name(shard: int, start: int, attempt: str) -> str:
    """A part file's temporary name: its shard, first byte offset and a name unique per attempt."""
    return f"{shard:05d}-{start:015d}-{attempt}"


class WrittenFile(NamedTuple):
    """A file a writer reports: its shard, first byte offset, temporary path, and its measure
    taken while writing (records, bytes, sha256), which finalize checks and the manifest keeps."""

    shard: int
    start: int
    temp: str
    records: int
    size: int
    sha256: str


def final_names(written: list[WrittenFile], directory: str, extension: str) -> list[tuple[WrittenFile, str]]:
    """(file, final path) pairs: ``part-<shard>`` or, if a shard spans files, ``part-<shard>-<start>``."""
    by_shard: dict[int, list[WrittenFile]] = {}
    for file in written:
        by_shard.setdefault(file.shard, []).append(file)
    # The directory's prefix, joined once: a filesystem lookup per file cost seconds at 100,000.
    prefix = FileSystems.join(directory, "")
    moves = []
    for shard in sorted(by_shard):
        parts = sorted(by_shard[shard], key=lambda f: f.start)
        for file in parts:
            name = f"part-{shard:05d}" if len(parts) == 1 else f"part-{shard:05d}-{file.start:015d}"
            moves.append((file, prefix + name + extension))
    return moves


def report_path(temp_root: str, name: str) -> str:
    """Where ``WriteShards`` lists the files it wrote for output ``name``."""
    return FileSystems.join(temp_root, name + ".files.json")


def write_report(written: list, path: str) -> int:
    # Runs once all files of this output are written; rewriting it on a retry is harmless.
    rows = sorted((WrittenFile(*w)._asdict() for w in written), key=lambda r: (r["shard"], r["start"]))
    files.write_in_place(path, document_bytes(rows, indent=1, ascii_only=True, rows=True), replace=True)
    return len(rows)


@beam.typehints.with_input_types(Batch)
@beam.typehints.with_output_types(WrittenFile)
class WriteShards(beam.PTransform):
    """Batches -> temporary files under ``TEMP_ROOT/NAME/``; gives the files written, which
    ``ListWrittenFiles`` lists in ``TEMP_ROOT/NAME.files.json``.

    The pipeline only writes temporary files and reports them (shard, start, path, records,
    bytes); the driver (``pipeline.io.ownership.finalize``) moves them to ``OUTPUT/NAME/part-*``
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
    ) -> None:
        super().__init__()
        self._temp_root = temp_root
        self._name = name
        self._file_format = file_format
        self._id_field = id_field
        self._messages_field = messages_field

    def expand(self, batches):
        temp_dir = FileSystems.join(self._temp_root, self._name)
        return batches | "WriteTemp" >> beam.ParDo(
            _WriteShardFiles(
                temp_dir, self._file_format, self._id_field, self._messages_field, progress_name=self._name
            )
        ).with_input_types(Batch).with_output_types(WrittenFile)


def _named(file: WrittenFile, name: str) -> tuple[str, WrittenFile]:
    return name, file


def write_reports(written: list[tuple[str, WrittenFile]], temp_root: str, names: tuple[str, ...]) -> int:
    """Each output's list of the files written for it (``write_report``), an empty one for an
    output that wrote none; the number of files."""
    by_name: dict[str, list[WrittenFile]] = {name: [] for name in names}
    for name, file in written:
        by_name[name].append(file)
    for name, files_written in by_name.items():
        write_report(files_written, report_path(temp_root, name))
    return len(written)


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
            | "Report" >> beam.Map(write_reports, self._temp_root, names)
        )


def write_summary(summary: dict, path: str) -> dict:
    files.write_in_place(path, document_bytes(summary), replace=True)
    return summary


class WriteSummary(beam.PTransform):
    """The summary dict -> ``summary.json`` (pretty-printed, stable key order)."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self._path = path

    def expand(self, summary):
        return summary | "WriteSummary" >> beam.Map(write_summary, self._path)
