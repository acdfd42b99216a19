"""Parquet rows as raw records: one record per row (its index the position), Arrow's types as
JSON (``_jsonable``)."""

from __future__ import annotations

import base64
import datetime
import decimal
import math
from typing import Iterator

import orjson

from pipeline.io.files import open_input
from pipeline.io.planned_files import open_shard
from pipeline.io.shard import Shard
from transforms.record.inputs import DEFAULT_MAX_RECORD_BYTES, Parsed, RawRecord, Unreadable


def _jsonable(value, nulled: list):
    """A Parquet value as JSON can hold it: Arrow types that JSON lacks become text.

    Bytes that are UTF-8 become their text, other bytes base64; decimals their exact decimal
    text; dates, times and timestamps ISO 8601; durations their seconds. A non-finite float
    (NaN, +-inf), which JSON cannot hold, becomes null and is counted in ``nulled[0]``.
    """
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        nulled[0] += 1
        return None
    if isinstance(value, dict):
        return {k: _jsonable(v, nulled) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v, nulled) for v in value]
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
        return [_jsonable(v, nulled) for v in value]
    return value  # anything else: the record's guard dead-letters it if JSON cannot hold it


def _parquet_row(row: dict) -> Parsed:
    """One Parquet row as a record; non-finite floats nulled and counted by column."""
    out = {}
    counts = None
    for column, value in row.items():
        nulled = [0]
        out[column] = _jsonable(value, nulled)
        if nulled[0]:
            counts = counts or {}
            counts[column] = nulled[0]
    return Parsed(out, counts)


def _arrow_text(column, i: int) -> str:
    """Arrow's own text of a value Python cannot hold (a date past 9999 is cast in C++)."""
    import pyarrow as pa

    try:
        return column.slice(i, 1).cast(pa.string())[0].as_py()
    except Exception:  # noqa: BLE001
        return f"<{column.type} value>"


def _parquet_rows(batch) -> Iterator:
    """A record batch's rows as ``Parsed`` records; a row holding a value Python cannot
    represent (a nanosecond timestamp, a year past 9999) is an ``unconvertible_value``
    ``Unreadable`` naming its column, and the other rows are read. A file with two columns of
    one name makes every row one: a record cannot hold two fields of one name, and keeping
    either would lose the other silently."""
    names = batch.schema.names
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        yield from _rows_with_repeated_columns(batch, repeated)
        return
    try:
        rows = batch.to_pylist()
    except Exception:  # noqa: BLE001 — pyarrow raises several types; find the row below
        rows = None
    if rows is not None:
        for row in rows:
            yield _parquet_row(row)
        return
    columns = batch.schema.names
    for i in range(batch.num_rows):
        row, failure = {}, None
        for name, column in zip(columns, batch.columns):
            try:
                row[name] = column[i].as_py()
            except Exception as error:  # noqa: BLE001
                failure = failure or (name, error)
                row[name] = _arrow_text(column, i)  # for the dead letter only
        if failure is None:
            yield _parquet_row(row)
            continue
        name, cause = failure
        raw = {k: _jsonable(v, [0]) for k, v in row.items()}
        try:
            raw_text = orjson.dumps(raw, default=str).decode()
        except (TypeError, ValueError):
            raw_text = repr(raw)
        yield Unreadable("unconvertible_value", f"column {name!r}: {type(cause).__name__}: {cause}", raw_text[:4000])


def _rows_with_repeated_columns(batch, repeated: list[str]) -> Iterator:
    names = batch.schema.names
    detail = "; ".join(f"column {name!r}: the file has {names.count(name)} columns named so" for name in repeated)
    detail += "; a record cannot hold two fields of one name"
    for i in range(batch.num_rows):
        pairs = []
        for name, column in zip(names, batch.columns):
            try:
                value = _jsonable(column[i].as_py(), [0])
            except Exception:  # noqa: BLE001 — shown as Arrow's text, for the dead letter only
                value = _arrow_text(column, i)
            pairs.append([name, value])
        try:
            raw_text = orjson.dumps(pairs, default=str).decode()
        except (TypeError, ValueError):
            raw_text = repr(pairs)
        yield Unreadable("unconvertible_value", detail, raw_text[:4000])


#: Rows per Parquet record batch at most; fewer where the row group's rows are big.
PARQUET_BATCH_ROWS = 1024


def parquet_batch_rows(rows: int, uncompressed: int, limit: int) -> int:
    """Rows per record batch for a row group of ``rows`` rows and ``uncompressed`` bytes (its
    column chunks' uncompressed sizes): rows of the group's average size that add up to about
    ``limit``, so a batch holds about one record's worth however big the rows are."""
    if rows <= 0 or uncompressed <= 0:
        return PARQUET_BATCH_ROWS
    return max(1, min(PARQUET_BATCH_ROWS, limit * rows // uncompressed))


def _parquet_too_large(size: int, limit: int, how: str, raw: str = "") -> Unreadable:
    return Unreadable(
        "record_too_large",
        f"a Parquet row of {size:,} bytes ({how}) is over --max-record-bytes {limit:,}; it was not read",
        raw,
    )


def _value_sizes(array) -> list[int]:
    """The bytes each value of an Arrow array takes (for a dictionary column: its entry, not
    the whole dictionary), measured on the buffers: nothing is converted."""
    import pyarrow as pa

    if pa.types.is_dictionary(array.type):
        entries: dict[int, int] = {}  # measured as used: a dictionary may be far longer than the batch
        sizes = []
        for index in array.indices.to_pylist():
            if index is not None and index not in entries:
                entries[index] = array.dictionary.slice(index, 1).nbytes
            sizes.append(0 if index is None else entries[index])
        return sizes
    return [array.slice(i, 1).nbytes for i in range(len(array))]


def _row_sizes(batch) -> list[int]:
    """Each row's bytes in Arrow (the sum of its values' sizes)."""
    sizes = [0] * batch.num_rows
    for column in batch.columns:
        for i, size in enumerate(_value_sizes(column)):
            sizes[i] += size
    return sizes


def _row_prefix(batch, i: int) -> str:
    """The start of an over-long row, for its dead letter: its short values, and the type and
    size of the others (never the whole row as text)."""
    shown = {}
    for name, column in zip(batch.schema.names, batch.columns):
        value = column.slice(i, 1)
        if value.nbytes <= 1024:
            try:
                shown[name] = _jsonable(value[0].as_py(), [0])
                continue
            except Exception:  # noqa: BLE001 — shown by its type below
                pass
        shown[name] = f"<{column.type}: {value.nbytes:,} bytes>"
    return orjson.dumps(shown, default=str).decode()[:4000]


def _bounded_rows(batch, limit: int) -> Iterator:
    """A record batch's rows as records; a row over ``limit`` bytes in Arrow is a
    ``record_too_large`` ``Unreadable``, measured before any Python object of it is built."""
    if batch.nbytes <= limit:  # the common case: no row can be over (a row is part of the batch)
        yield from _parquet_rows(batch)
        return
    start = 0
    for i, size in enumerate(_row_sizes(batch)):
        if size > limit:
            yield from _parquet_rows(batch.slice(start, i - start))
            yield _parquet_too_large(size, limit, "its values in Arrow", _row_prefix(batch, i))
            start = i + 1
    yield from _parquet_rows(batch.slice(start))


def _row_group_sizes(metadata) -> list[tuple[int, int]]:
    """(rows, uncompressed bytes) of each row group, from the file's metadata alone."""
    groups = []
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        uncompressed = sum(group.column(c).total_uncompressed_size for c in range(group.num_columns))
        groups.append((group.num_rows, uncompressed))
    return groups


def row_ranges(path: str, shard_bytes: int) -> list[tuple[int, int, int]]:
    """A Parquet file cut into ranges of whole row groups of about ``shard_bytes`` of the file
    each, from its metadata alone (nothing decoded): ``(first row, end row, bytes)`` each, in
    order; one range for a file of one row group or of no more than ``shard_bytes``. The cuts
    fall where the row groups' bytes, added up, pass equal shares of the file's (no small tail
    range); they depend on the file's metadata only."""
    import pyarrow.parquet as pq  # only Parquet inputs pay for the import

    with open_input(path) as handle:
        metadata = pq.ParquetFile(handle).metadata
    groups = []  # (rows, compressed bytes)
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        groups.append((group.num_rows, sum(group.column(c).total_compressed_size for c in range(group.num_columns))))
    total = sum(size for _, size in groups)
    count = min(len(groups), -(-total // shard_bytes)) if shard_bytes > 0 else 1
    ranges: list[tuple[int, int, int]] = []
    first = size = done = 0
    row = 0
    for rows, group_bytes in groups:
        row += rows
        size += group_bytes
        done += group_bytes
        # Close a range where the bytes so far reach the next equal share of the file's.
        if len(ranges) < count - 1 and done * count >= total * (len(ranges) + 1):
            ranges.append((first, row, size))
            first, size = row, 0
    if row > first or not ranges:
        ranges.append((first, row, size))
    return ranges


def read_parquet_shard(shard: Shard, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> Iterator:
    # Row group by row group, in record batches cut to the limit (``parquet_batch_rows``). A
    # row group of one row bigger than the limit is that row: a dead letter known from the
    # metadata, never decoded (a 7 KB file can hold a 200 MB string). Any other row over the
    # limit is measured in Arrow, before it becomes a record. Running out of memory while
    # decoding a row group makes the rest of that group one dead letter; the next group is read.
    import pyarrow.parquet as pq  # only Parquet inputs pay for the import

    # A shard of a cut file (``row_ranges``) reads the row groups of its rows only: its
    # ``start`` and ``end`` are rows, on row groups' bounds.
    source = shard.name
    index = 0
    with open_shard(shard) as handle:
        parquet = pq.ParquetFile(handle)
        for g, (rows, uncompressed) in enumerate(_row_group_sizes(parquet.metadata)):
            first, end = index, index + rows
            if first < shard.start:
                index = end
                continue
            if shard.end is not None and first >= shard.end:
                break
            if rows == 1 and uncompressed > max_record_bytes:
                how = f"row group {g} of one row, uncompressed, in the file's metadata"
                yield RawRecord(source, index, _parquet_too_large(uncompressed, max_record_bytes, how))
                index = end
                continue
            try:
                batches = parquet.iter_batches(
                    batch_size=parquet_batch_rows(rows, uncompressed, max_record_bytes), row_groups=[g]
                )
                for batch in batches:
                    for payload in _bounded_rows(batch, max_record_bytes):
                        yield RawRecord(source, index, payload)
                        index += 1
            except MemoryError as error:  # pyarrow's ArrowMemoryError is one
                yield RawRecord(source, index, _out_of_memory(g, rows, uncompressed, first, index, end, error))
                index = end


def _out_of_memory(group: int, rows: int, uncompressed: int, first: int, at: int, end: int, error) -> Unreadable:
    unread = f"row {at}" if end - at == 1 else f"rows {at}-{end - 1}"
    return Unreadable(
        "record_too_large",
        f"out of memory decoding row group {group} (rows {first}-{end - 1}, {uncompressed:,} bytes uncompressed): "
        f"{unread} not read ({type(error).__name__}: {error})",
    )
