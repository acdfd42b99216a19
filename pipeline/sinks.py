"""Writing outputs: one file per input shard, named by the shard, byte-identical on reruns.

``WriteShards`` writes batches to ``DIR/<name>/part-<shard>.<ext>``. Every batch carries the
shard it was read from; batches of one shard arrive together and in input order, because
reading, normalizing and writing are fused into one stage (no shuffle between them), so each
file's content and name depend only on the input, never on worker scheduling. A runner that
split a shard over bundles would give it several files, ``part-<shard>-<start>``, still in
order. Files are written under temporary names and renamed once every file of that output is
written, so a failed run leaves no half-written part files.

Output file formats form a registry (``FILE_FORMATS``): JSON Lines for every output, and
Parquet for normalized flat records.
"""

from __future__ import annotations

import json
import uuid
from typing import Callable, NamedTuple

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue

from pipeline.progress import Tally
from transforms.records import dumps_line

OUTPUT_DIRS = ("normalized", "drops", "dead_letter")
SUMMARY_FILE = "summary.json"


# --------------------------------------------------------------------------------------------
# File formats: open(path) -> writer with write(items) and close()


class _JsonLinesFile:
    def __init__(self, path: str) -> None:
        self._handle = FileSystems.create(path, mime_type="application/jsonl",
                                          compression_type=CompressionTypes.UNCOMPRESSED)

    def write(self, items: list) -> None:
        self._handle.write(b"".join(dumps_line(item) + b"\n" for item in items))

    def close(self) -> None:
        self._handle.close()


class _ParquetFile:
    """Normalized flat records as Parquet: typed messages, call arguments as JSON text.

    Columns: ``id``; ``messages`` (list of structs role, content, tool_calls, tool_call_id;
    a call's ``args`` is its JSON text, so strings and objects both survive exactly); and
    ``fields``, the record's other fields as one JSON text (their types vary per record).
    """

    def __init__(self, path: str, id_field: str, messages_field: str) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        call = pa.struct([("tool_call_id", pa.string()), ("name", pa.string()), ("args", pa.string())])
        message = pa.struct([("role", pa.string()), ("content", pa.string()),
                             ("tool_calls", pa.list_(call)), ("tool_call_id", pa.string())])
        self._schema = pa.schema([("id", pa.string()), ("messages", pa.list_(message)), ("fields", pa.string())])
        self._pa = pa
        self._id_field = id_field
        self._messages_field = messages_field
        self._handle = FileSystems.create(path, mime_type="application/vnd.apache.parquet",
                                          compression_type=CompressionTypes.UNCOMPRESSED)
        self._writer = pq.ParquetWriter(self._handle, self._schema)

    def _row(self, record: dict) -> dict:
        messages = []
        for m in record.get(self._messages_field, []):
            row = {"role": m["role"], "content": m["content"], "tool_calls": None,
                   "tool_call_id": m.get("tool_call_id")}
            if "tool_calls" in m:
                row["tool_calls"] = [
                    {"tool_call_id": c["tool_call_id"], "name": c["name"],
                     "args": dumps_line(c["args"]).decode() if "args" in c else None}
                    for c in m["tool_calls"]
                ]
            messages.append(row)
        fields = {k: v for k, v in record.items() if k not in (self._id_field, self._messages_field)}
        rid = record.get(self._id_field)
        return {"id": None if rid is None else str(rid), "messages": messages, "fields": dumps_line(fields).decode()}

    def write(self, items: list) -> None:
        self._writer.write_table(self._pa.Table.from_pylist([self._row(r) for r in items], schema=self._schema))

    def close(self) -> None:
        self._writer.close()
        self._handle.close()


class FileFormat(NamedTuple):
    extension: str
    #: ``open(path, id_field, messages_field)`` -> a writer with ``write(items)`` and ``close()``.
    open: Callable


#: Output file format name -> its extension and writer.
FILE_FORMATS: dict[str, FileFormat] = {
    "jsonl": FileFormat(".jsonl", lambda path, id_field, messages_field: _JsonLinesFile(path)),
    "parquet": FileFormat(".parquet", _ParquetFile),
}


# --------------------------------------------------------------------------------------------
# Beam


class _WriteShardFiles(beam.DoFn):
    """Writes each shard's batches to a temporary file; emits (shard, start, temp) per file.

    One file is open at a time: a shard's batches arrive together (reading, normalizing and
    writing are fused), so the file closes when the next shard begins. Keeping one open per
    shard ran out of file handles with a few hundred input files.
    """

    def __init__(self, temp_dir: str, file_format: str, id_field: str, messages_field: str,
                 progress_name: str = "") -> None:
        self._temp_dir = temp_dir
        self._file_format = file_format
        self._id_field = id_field
        self._messages_field = messages_field
        self._progress_name = progress_name

    def setup(self) -> None:
        self._tally = Tally(self._progress_name or "written")  # live progress of local runs

    def start_bundle(self) -> None:
        self._current = None  # (shard, start, temp path, writer)

    def _close(self) -> tuple[int, int, str]:
        shard, start, temp, writer = self._current
        writer.close()
        self._current = None
        return shard, start, temp

    def process(self, batch):
        if self._current is not None and self._current[0] != batch.shard:
            yield self._close()
        if self._current is None:
            # A unique temporary name per attempt: a retried bundle never clobbers another.
            temp = FileSystems.join(self._temp_dir, f"{batch.shard:05d}-{batch.start:015d}-{uuid.uuid4().hex}")
            writer = FILE_FORMATS[self._file_format].open(temp, self._id_field, self._messages_field)
            self._current = (batch.shard, batch.start, temp, writer)
        self._current[3].write(batch.items)
        self._tally.add(self._progress_name, len(batch.items))

    def finish_bundle(self):
        self._tally.flush()
        if self._current is not None:
            yield WindowedValue(self._close(), MIN_TIMESTAMP, [GlobalWindow()])


def final_names(written: list[tuple[int, int, str]], directory: str, extension: str) -> list[tuple[str, str]]:
    """(temp, final) pairs: ``part-<shard>`` or, if a shard spans files, ``part-<shard>-<start>``."""
    by_shard: dict[int, list] = {}
    for shard, start, temp in written:
        by_shard.setdefault(shard, []).append((start, temp))
    moves = []
    for shard in sorted(by_shard):
        files = sorted(by_shard[shard])
        for start, temp in files:
            name = f"part-{shard:05d}" if len(files) == 1 else f"part-{shard:05d}-{start:015d}"
            moves.append((temp, FileSystems.join(directory, name + extension)))
    return moves


def _finalize(written: list, directory: str, temp_dir: str, extension: str) -> int:
    # Runs once all files are written. Idempotent, should a runner retry it: a temporary
    # file already renamed is skipped.
    moves = [(t, f) for t, f in final_names(written, directory, extension) if FileSystems.exists(t)]
    if moves:
        FileSystems.rename([t for t, _ in moves], [f for _, f in moves])
    if FileSystems.exists(temp_dir):
        FileSystems.delete([temp_dir])
    if not FileSystems.exists(directory):
        # An output with no records is still an (empty) directory, where filesystems have them.
        try:
            FileSystems.mkdirs(directory)
        except OSError:
            pass
    return len(written)


class WriteShards(beam.PTransform):
    """Batches -> ``DIRECTORY/part-<shard><ext>`` files; returns the number of files written."""

    def __init__(self, directory: str, file_format: str = "jsonl", *, id_field: str = "id",
                 messages_field: str = "messages") -> None:
        super().__init__()
        self._directory = directory
        self._file_format = file_format
        self._id_field = id_field
        self._messages_field = messages_field

    def expand(self, batches):
        # Created by the first file written into it (nothing happens at construction time).
        temp_dir = FileSystems.join(self._directory, ".temp-" + uuid.uuid4().hex)
        written = batches | "WriteTemp" >> beam.ParDo(
            _WriteShardFiles(temp_dir, self._file_format, self._id_field, self._messages_field,
                             progress_name=self._directory.rstrip("/").rsplit("/", 1)[-1]))
        return (
            written
            | "CollectFiles" >> beam.combiners.ToList()
            | "Rename" >> beam.Map(_finalize, self._directory, temp_dir, FILE_FORMATS[self._file_format].extension)
        )


def write_summary(summary: dict, path: str) -> dict:
    with FileSystems.create(path, mime_type="application/json") as handle:
        handle.write(json.dumps(summary, indent=2, ensure_ascii=False).encode() + b"\n")
    return summary


class WriteSummary(beam.PTransform):
    """The summary dict -> ``summary.json`` (pretty-printed, stable key order)."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self._path = path

    def expand(self, summary):
        return summary | "WriteSummary" >> beam.Map(write_summary, self._path)
