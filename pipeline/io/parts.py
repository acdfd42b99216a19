"""Output parts: consecutive input shards read by one task and written into one file per output.

One file per input shard made 100,000 small inputs leave 300,000 tiny outputs (and as many
tasks, reports and renames). ``plan_parts`` groups the plan's shards, in plan order, into
parts of about ``--part-bytes`` of input each (64 MiB): a part is one read task and one file
per output, ``part-<part>``; a plan under 16 x 64 MiB gets parts of 1/16 of it (at least
1 MiB), so that many workers still share an input of many small files. The grouping depends
only on the plan (the files, their sizes when planned, their order) and the flag, never on the
runner or its workers, so a rerun, one worker or many, every runner, gives the same names and
bytes; a part's file is the outputs of its shards, in their order. A shard of the part size or
more, and a byte range of a file cut into shards (``--shard-bytes``), is a part alone, so big
inputs still spread over workers. ``--part-bytes 0``: one part per shard, the layout before
parts. No Beam import (the flags module reads the default).
"""

from __future__ import annotations

from typing import NamedTuple

from pipeline.io.shard import Shard

#: Input bytes per output part (``--part-bytes``); 0: one part per input shard.
DEFAULT_PART_BYTES = 64 << 20
#: Parts a plan is cut into at least, where it is big enough: smaller parts than
#: ``--part-bytes`` keep that many workers busy on an input of many small files...
SPREAD_PARTS = 16
#: ...but never smaller than this (a file of a few KB per part is what parts are against).
MIN_PART_BYTES = 1 << 20
#: A batch's ``start`` within a part: its shard's index in the part times this, plus its
#: position in the shard's file. Unique within the part (positions stay under a terabyte), so
#: a runner that splits a part's batches over bundles gives files ``part-<part>-<start>`` that
#: never share a name and sort in input order.
START_STRIDE = 10**12


class Part(NamedTuple):
    """Consecutive planned shards whose outputs go into one file per output."""

    number: int
    shards: tuple[Shard, ...]
    #: The part's first position (``Shard.start``'s counterpart, for the temporary names).
    start: int = 0


def planned_bytes(shard: Shard) -> int | None:
    """The input bytes a shard covers as planned (None: not known)."""
    if shard.range_bytes is not None:  # a range of rows: its bytes as planned
        return shard.range_bytes
    if shard.end is not None:
        return shard.end - shard.start
    if shard.file_size is None:
        return None
    return shard.file_size - shard.start


def plan_parts(shards: list[Shard], part_bytes: int = DEFAULT_PART_BYTES) -> list[Part]:
    """The shards, in plan order, grouped into parts of at most ``part_bytes`` of input, or of
    1/``SPREAD_PARTS`` of the plan where that is smaller, but not under ``MIN_PART_BYTES`` (a
    shard that alone reaches it, a byte range of a cut file, or one of unknown size, is a part
    alone); ``part_bytes`` 0: a part per shard."""
    known = sum(b for b in map(planned_bytes, shards) if b is not None)
    part_bytes = min(part_bytes, max(MIN_PART_BYTES, known // SPREAD_PARTS))
    parts: list[Part] = []
    group: list[Shard] = []
    size = 0

    def close() -> None:
        nonlocal group, size
        if group:
            parts.append(Part(len(parts), tuple(group)))
        group, size = [], 0

    for shard in shards:
        covered = planned_bytes(shard)
        # A byte range (or a Parquet file's rows) of a file cut into shards (--shard-bytes) is
        # a part alone: the cut is there to spread one file over workers.
        cut = shard.end is not None or shard.start > 0
        if part_bytes <= 0 or covered is None or covered >= part_bytes or cut:
            close()
            group = [shard]
            close()
            continue
        if group and size + covered > part_bytes:
            close()
        group.append(shard)
        size += covered
    close()
    return parts


def start_in_part(index: int, position: int) -> int:
    """The ``start`` of a batch at ``position`` of the ``index``-th shard of its part."""
    return index * START_STRIDE + position
