"""One shard read, whatever its file kind (``read_shard``), and in batches (``iter_batches``):
a file that fails mid-way yields one ``unreadable_file`` record for the rest, a changed one one
``input_changed`` record, so the failure is a dead letter, not a crash."""

from __future__ import annotations

from typing import Callable, Iterator, Sequence

from pipeline.io.parquet_rows import read_parquet_shard
from pipeline.io.parts import start_in_part
from pipeline.io.planned_files import InputChanged
from pipeline.io.shard import FILE_KINDS, Blank, Shard
from pipeline.io.text_containers import read_json_shard, read_jsonl_shard
from pipeline.testhooks import pause_point
from transforms.record.inputs import (
    DEFAULT_BATCH_BYTES,
    DEFAULT_MAX_RECORD_BYTES,
    Batch,
    RawRecord,
    Unreadable,
    batch_is_full,
    raw_size,
)

_SHARD_READERS = {"jsonl": read_jsonl_shard, "json": read_json_shard, "parquet": read_parquet_shard}


def read_shard(shard: Shard, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> Iterator:
    """Yield the shard's ``RawRecord``s in order, and a ``Blank`` for each run of blank JSONL lines.

    A file that cannot be opened or read any further ends in one ``unreadable_file`` record
    (at the position after the last one read), never in an exception. A record over
    ``max_record_bytes`` is a ``record_too_large`` record, read past without being held.
    """
    next_position = shard.start
    left = shard.limit
    try:
        for item in _SHARD_READERS[FILE_KINDS[shard.suffix][0]](shard, max_record_bytes):
            if not isinstance(item, Blank):
                if left is not None:
                    if left <= 0:
                        return  # --limit: the plan's records are read
                    left -= 1
                next_position = item.position + 1
            yield item
    except InputChanged as changed:
        # Not the file planned: what was read stays read, the rest is this one record.
        position = next_position if changed.position is None else changed.position
        yield RawRecord(shard.name, position, Unreadable("input_changed", changed.detail))
    except MemoryError:
        raise  # the machine's limit, not the file's fault: the run fails saying so
    except Exception as error:  # noqa: BLE001 — filesystems and pyarrow raise many types
        yield RawRecord(
            shard.name,
            next_position,
            Unreadable("unreadable_file", f"reading stopped: {type(error).__name__}: {error}"),
        )


def iter_batches(
    shard: Shard,
    batch_size: int,
    stats: dict,
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    batch_bytes: int = DEFAULT_BATCH_BYTES,
) -> Iterator[Batch]:
    """Group a shard's records into batches of ``batch_size`` records or ``batch_bytes`` raw
    bytes, whichever comes first; ``stats`` counts records and blank lines."""
    items: list = []
    size = 0
    for item in read_shard(shard, max_record_bytes):
        if isinstance(item, Blank):
            stats["blank_lines"] += item.lines
            continue
        stats["records"] += 1
        items.append(item)
        size += raw_size(item)
        if batch_is_full(len(items), size, batch_size, batch_bytes):
            yield Batch(shard.number, items[0].position, items)
            items, size = [], 0
            pause_point("reading")  # the file open, a batch handed on: tests change it here
    if items:
        yield Batch(shard.number, items[0].position, items)


def iter_part_batches(
    shards: Sequence[Shard],
    number: int,
    batch_size: int,
    stats: dict,
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    batch_bytes: int = DEFAULT_BATCH_BYTES,
    *,
    read: Callable[[Shard, Batch], None] | None = None,
    done: Callable[[Shard], None] | None = None,
) -> Iterator[Batch]:
    """``iter_batches`` over the shards of one part (``pipeline.io.parts``), in order, as batches
    of the part ``number``: the records of small files share a batch up to the same limits (a
    batch per two-record file cost more than the records: summaries, counters, Beam's element),
    each batch's ``start`` its first record's place in the part (``parts.start_in_part``).
    ``read(shard, batch)`` sees each of a shard's own batches as read; ``done(shard)`` is called
    once a shard is read whole."""
    items: list = []
    size, start = 0, 0
    for index, shard in enumerate(shards):
        for batch in iter_batches(shard, batch_size, stats, max_record_bytes, batch_bytes):
            if read is not None:
                read(shard, batch)
            added = sum(raw_size(item) for item in batch.items)
            if items and (len(items) + len(batch.items) > batch_size or size + added > batch_bytes):
                yield Batch(number, start, items)  # the two together would pass a limit
                items, size = [], 0
            if not items:
                start = start_in_part(index, batch.start)
            items += batch.items
            size += added
            if batch_is_full(len(items), size, batch_size, batch_bytes):
                yield Batch(number, start, items)
                items, size = [], 0
        if done is not None:
            done(shard)
    if items:
        yield Batch(number, start, items)
