"""Reading conversation logs: plan the input into shards, then read shards into batches.

Input files are matched and planned before the pipeline is built (so a pattern that matches
nothing is an error up front, and shard numbers are fixed). Each file kind has a reader:

=============  =====================================================  =====================
suffix         records                                                position
=============  =====================================================  =====================
``.jsonl``     one JSON value per line; split into byte ranges        byte offset of line
``.jsonl.gz``  the same, gzip-compressed (read whole)                 offset, decompressed
``.jsonl.zst`` the same, zstd-compressed (read whole)                 offset, decompressed
``.json``      an array of records (an object: one record)            element index
``.parquet``   one record per row                                     row index
=============  =====================================================  =====================

Any Beam filesystem works (local paths, ``gs://``, ...). Blank JSONL lines are not records:
they are counted (``blank_lines``) and skipped. A file that fails mid-way yields one
``unreadable_file`` record for the rest, so the failure is a dead letter, not a crash.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import decimal
import gzip
import io
import logging
from typing import Iterator, NamedTuple

import apache_beam as beam
import zstandard
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.pvalue import TaggedOutput

from pipeline.progress import Tally
from transforms.conversations import NAMESPACE
from transforms.records import Batch, Parsed, RawRecord, Unreadable, parse_json

LOG = logging.getLogger(__name__)

#: Suffix -> (kind, compression, splittable); longest suffix wins.
FILE_KINDS = {
    ".jsonl": ("jsonl", None, True),
    ".jsonl.gz": ("jsonl", "gzip", False),
    ".jsonl.zst": ("jsonl", "zstd", False),
    ".json": ("json", None, False),
    ".parquet": ("parquet", None, False),
}

DEFAULT_SHARD_BYTES = 64 << 20
DEFAULT_BATCH_SIZE = 256
#: Records between two progress lines of one shard.
PROGRESS_EVERY = 100_000


class InputError(ValueError):
    """An input that cannot be planned: nothing matched, or an unknown file kind."""


class Shard(NamedTuple):
    """A planned unit of reading: a whole file, or a byte range of an uncompressed JSONL file."""

    index: int
    path: str
    suffix: str
    start: int
    end: int | None  # exclusive; None: to the end of the file


def file_suffix(path: str) -> str | None:
    lowered = path.lower()
    for suffix in sorted(FILE_KINDS, key=len, reverse=True):
        if lowered.endswith(suffix):
            return suffix
    return None


def plan_shards(patterns: list[str], shard_bytes: int = DEFAULT_SHARD_BYTES) -> list[Shard]:
    """Match every pattern and cut the files into shards, in a deterministic order."""
    files: dict[str, int] = {}
    for pattern in patterns:
        try:
            matched = FileSystems.match([pattern])[0].metadata_list
        except Exception as error:  # noqa: BLE001 — filesystems raise their own types
            raise InputError(f"cannot match --input {pattern!r}: {error}") from None
        if not matched:
            raise InputError(f"no file matches --input {pattern!r}")
        for meta in matched:
            files[meta.path] = meta.size_in_bytes
    shards: list[Shard] = []
    for path in sorted(files):
        suffix = file_suffix(path)
        if suffix is None:
            raise InputError(
                f"cannot tell the format of {path!r} from its name; "
                f"input files end in one of: {', '.join(FILE_KINDS)}"
            )
        size = files[path]
        if FILE_KINDS[suffix][2] and size > shard_bytes:
            # Equal ranges of at most shard_bytes: no small tail shard, so workers that take
            # shards in turn get even work.
            count = -(-size // shard_bytes)
            bounds = [size * k // count for k in range(count + 1)]
            for start, end in zip(bounds, bounds[1:]):
                shards.append(Shard(len(shards), path, suffix, start, None if end == size else end))
        else:
            shards.append(Shard(len(shards), path, suffix, 0, None))
    return shards


def shard_sizes(shards: list[Shard]) -> list[int]:
    """Bytes of each planned shard (its range, or its whole file), by shard index."""
    sizes: dict[str, int] = {}
    for path in {s.path for s in shards if s.end is None}:
        try:
            sizes[path] = FileSystems.match([path])[0].metadata_list[0].size_in_bytes
        except Exception:  # noqa: BLE001 — only for progress: an unknown size counts 0
            sizes[path] = 0
    return [(s.end if s.end is not None else max(sizes[s.path], s.start)) - s.start for s in shards]


# --------------------------------------------------------------------------------------------
# Reading one shard (plain generators: the baseline benchmark and the validator reuse them)

BLANK = object()  # a blank JSONL line: counted and skipped, not a record


class _ZstdReader(io.RawIOBase):
    """A zstd stream that raises at a truncated end (the library's stream reader does not)."""

    def __init__(self, raw) -> None:
        self._raw = raw
        self._decompressor = zstandard.ZstdDecompressor()
        self._frame = self._decompressor.decompressobj()
        self._pending = b""
        self._started = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self._pending:
            chunk = self._raw.read(1 << 20)
            if not chunk:
                if self._started and not self._frame.eof:
                    raise EOFError("zstd stream ended before the end of its frame")
                return 0
            while chunk:
                self._started = True
                self._pending += self._frame.decompress(chunk)
                chunk = b""
                if self._frame.eof and self._frame.unused_data:
                    # Concatenated frames: start the next one on the leftover bytes.
                    chunk = self._frame.unused_data
                    self._frame = self._decompressor.decompressobj()
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n


@contextlib.contextmanager
def _open_text_stream(shard: Shard):
    # Beam's own decompressing reader stops quietly at a truncated archive; these raise,
    # so a cut-off file becomes an ``unreadable_file`` dead letter instead of a short read.
    compression = FILE_KINDS[shard.suffix][1]
    with FileSystems.open(shard.path, compression_type=CompressionTypes.UNCOMPRESSED) as raw:
        if compression == "gzip":
            yield gzip.GzipFile(fileobj=raw, mode="rb")
        elif compression == "zstd":
            yield io.BufferedReader(_ZstdReader(raw), buffer_size=1 << 20)
        else:
            yield raw


_BOM = b"\xef\xbb\xbf"  # a UTF-8 byte-order mark, as some Windows tools write


def _read_jsonl(shard: Shard) -> Iterator:
    with _open_text_stream(shard) as handle:
        position = 0
        if shard.start:
            # A line belongs to the shard its first byte falls in: skip the partial one.
            handle.seek(shard.start - 1)
            position = shard.start - 1 + len(handle.readline())
        while shard.end is None or position < shard.end:
            try:
                line = handle.readline()
            except Exception as error:  # noqa: BLE001 — corrupt archives raise many types
                yield RawRecord(shard.path, position, Unreadable(
                    "unreadable_file", f"reading stopped at offset {position}: {type(error).__name__}: {error}"))
                return
            if not line:
                return
            if position == 0 and line.startswith(_BOM):
                position, line = len(_BOM), line[len(_BOM):]
            if line.strip():
                yield RawRecord(shard.path, position, line)
            else:
                yield BLANK
            position += len(line)


def _read_json(shard: Shard) -> Iterator:
    # The whole document is parsed at once, in one worker's memory: for big inputs, JSONL
    # (split into shards, streamed) is the better container.
    with FileSystems.open(shard.path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        text = handle.read()
    if text.startswith(_BOM):
        text = text[len(_BOM):]
    try:
        document = parse_json(text)
    except (ValueError, RecursionError) as error:
        hint = ""
        if text.lstrip()[:1] == b"{" and b"\n{" in text:
            hint = " (it looks like JSON Lines: name the file .jsonl)"
        yield RawRecord(shard.path, 0, Unreadable("invalid_json", f"not a JSON document: {error}{hint}",
                                                  text[:4000].decode("utf-8", errors="replace")))
        return
    if isinstance(document, list):
        for index, record in enumerate(document):
            yield RawRecord(shard.path, index, Parsed(record))
    else:
        yield RawRecord(shard.path, 0, Parsed(document))


def _jsonable(value):
    """A Parquet value as JSON can hold it: Arrow types that JSON lacks become text.

    Bytes that are UTF-8 become their text, other bytes base64; decimals their exact decimal
    text; dates, times and timestamps ISO 8601; durations their seconds.
    """
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return base64.b64encode(value).decode("ascii")
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, tuple):  # map columns: a list of (key, value) pairs
        return [_jsonable(v) for v in value]
    return value  # anything else: the record's guard dead-letters it if JSON cannot hold it


def _read_parquet(shard: Shard) -> Iterator:
    import pyarrow.parquet as pq  # only Parquet inputs pay for the import

    index = 0
    with FileSystems.open(shard.path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        for table in pq.ParquetFile(handle).iter_batches(batch_size=1024):
            for row in table.to_pylist():
                yield RawRecord(shard.path, index, Parsed(_jsonable(row)))
                index += 1


_SHARD_READERS = {"jsonl": _read_jsonl, "json": _read_json, "parquet": _read_parquet}


def read_shard(shard: Shard) -> Iterator:
    """Yield the shard's ``RawRecord``s in order, and ``BLANK`` for each blank JSONL line.

    A file that cannot be opened or read any further ends in one ``unreadable_file`` record
    (at the position after the last one read), never in an exception.
    """
    next_position = shard.start
    try:
        for item in _SHARD_READERS[FILE_KINDS[shard.suffix][0]](shard):
            if item is not BLANK:
                next_position = item.position + 1
            yield item
    except Exception as error:  # noqa: BLE001 — filesystems and pyarrow raise many types
        yield RawRecord(shard.path, next_position, Unreadable(
            "unreadable_file", f"reading stopped: {type(error).__name__}: {error}"))


def iter_batches(shard: Shard, batch_size: int, stats: dict) -> Iterator[Batch]:
    """Group a shard's records into batches; ``stats`` counts records and blank lines."""
    items: list = []
    for item in read_shard(shard):
        if item is BLANK:
            stats["blank_lines"] += 1
            continue
        stats["records"] += 1
        items.append(item)
        if len(items) >= batch_size:
            yield Batch(shard.index, items[0].position, items)
            items = []
    if items:
        yield Batch(shard.index, items[0].position, items)


# --------------------------------------------------------------------------------------------
# Beam


class _ReadShard(beam.DoFn):
    STATS = "read_stats"

    def __init__(self, batch_size: int, total_shards: int) -> None:
        self._batch_size = batch_size
        self._total = total_shards

    def setup(self) -> None:
        self._blank = Metrics.counter(NAMESPACE, "blank_lines")
        self._shards = Metrics.counter(NAMESPACE, "shards_read")
        self._tally = Tally("read")  # the live progress of local runs (pipeline/progress.py)

    def process(self, shard: Shard):
        stats = {"records": 0, "blank_lines": 0}
        reported = 0
        # Offsets are file bytes only in uncompressed JSONL; other files count once read whole.
        byte_offsets = FILE_KINDS[shard.suffix] == ("jsonl", None, True)
        for batch in iter_batches(shard, self._batch_size, stats):
            yield batch
            self._tally.add("records", len(batch.items))
            if byte_offsets:
                self._tally.at(shard.index, batch.items[-1].position - shard.start)
            # Progress on long shards too (compressed files are one shard each); no payloads.
            if stats["records"] - reported >= PROGRESS_EVERY:
                reported = stats["records"]
                LOG.info("shard %d/%d (%s): %d records so far", shard.index + 1, self._total, shard.path, reported)
        self._blank.inc(stats["blank_lines"])
        self._shards.inc()
        self._tally.shard_done(shard.index)
        LOG.info("read shard %d/%d (%s): %d records", shard.index + 1, self._total, shard.path, stats["records"])
        yield TaggedOutput(self.STATS, {"shard": shard.index, **stats})


class ReadOutputs(NamedTuple):
    batches: beam.PCollection
    stats: beam.PCollection


class ReadConversationLogs(beam.PTransform):
    """Planned shards -> batches of ``RawRecord`` (and per-shard read statistics)."""

    def __init__(self, shards: list[Shard], batch_size: int = DEFAULT_BATCH_SIZE) -> None:
        super().__init__()
        self._shards = shards
        self._batch_size = batch_size

    def expand(self, pbegin):
        read = _ReadShard(self._batch_size, len(self._shards))
        outputs = (
            pbegin
            | "Shards" >> beam.Create(self._shards)
            # Spread shards over workers; the shards themselves are tiny.
            | "Spread" >> beam.Reshuffle()
            | "Read" >> beam.ParDo(read).with_outputs(read.STATS, main="batches")
        )
        return ReadOutputs(outputs.batches, outputs[read.STATS])
