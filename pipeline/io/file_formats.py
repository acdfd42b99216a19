"""The output file formats, each file measured as it is written (records, bytes, sha256).

Output file formats form a registry (``FILE_FORMATS``): JSON Lines for every output, and
Parquet for normalized flat records. Each opens a path and returns a writer with
``write(items, lines=None)`` and ``close() -> FileMeasure``.
"""

from __future__ import annotations

import hashlib
from typing import Callable, NamedTuple

from pipeline.io import files
from pipeline.io.schema_parquet import sink_schema, storage_row
from transforms.core.jsontext import dumps_line
from transforms.record.flat_rows import flat_row, parquet_schema

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
    """Normalized flat records as Parquet rows (``transforms.record.flat_rows``): typed messages, call
    arguments exact (a string stays that string, a JSON value is its JSON text, ``args_kind``
    says which), the other fields as one JSON text; ``flat_rows.flat_record`` reads a row back.
    """

    def __init__(self, path: str, id_field: str, messages_field: str, sink: str = "flat") -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        self._sink = sink
        if sink == "flat":
            self._schema = self._storage = parquet_schema(pa)
        else:
            # Another sink: the rows of the schema its writer declares (pipeline.io.schema_parquet).
            self._storage, self._schema = sink_schema(pa, sink, id_field)
        self._pa = pa
        self._id_field = id_field
        self._messages_field = messages_field
        self._file = _MeasuredFile(path, "application/vnd.apache.parquet")
        self._writer = pq.ParquetWriter(self._file, self._schema)
        self._rows = 0

    def _row(self, record: dict) -> dict:
        if self._sink != "flat":
            return storage_row(record, self._sink, self._id_field)
        return flat_row(record, self._id_field, self._messages_field)

    def write(self, items: list, lines: list | None = None) -> None:
        # ``lines`` (the items' JSON text) is of no use to a Parquet file.
        table = self._pa.Table.from_pylist([self._row(r) for r in items], schema=self._storage)
        if self._storage is not self._schema:
            table = table.cast(self._schema)  # JSON text to the JSON extension type
        self._writer.write_table(table)
        self._rows += len(items)

    def close(self) -> FileMeasure:
        self._writer.close()
        self._file.close()
        return self._file.measure(self._rows)


class FileFormat(NamedTuple):
    extension: str
    #: ``open(path, id_field, messages_field, sink="flat")`` -> a writer with ``write(items,
    #: lines=None)`` and ``close() -> FileMeasure``; ``sink``: whose records (Parquet: their schema).
    open: Callable
    #: The writer writes ``lines`` (the items' JSON lines, when the job made them) as they are.
    takes_lines: bool = False


#: The sinks whose records a Parquet file holds: flat (``transforms.record.flat_rows``), and hf and
#: the TRL sinks (the schema each writer declares: ``pipeline.io.schema_parquet``).
PARQUET_SINKS = ("flat", "hf", "trl-dpo", "trl-kto", "trl-prompts")

#: Output file format name -> its extension and writer.
FILE_FORMATS: dict[str, FileFormat] = {
    "jsonl": FileFormat(
        ".jsonl", lambda path, id_field, messages_field, sink="flat": _JsonLinesFile(path), takes_lines=True
    ),
    "parquet": FileFormat(".parquet", _ParquetFile),
}
