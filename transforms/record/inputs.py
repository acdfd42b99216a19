"""What readers hand the per-record steps (no Beam import): raw records and their batches.

A raw record is what a reader found at one position of one file: a JSONL line, an element of
a ``.json`` array, a Parquet row, or a marker for a file that could not be read.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class RawRecord(NamedTuple):
    """One record as found in the input, before parsing.

    ``position`` is the byte offset of the line for JSONL (in the decompressed stream), the
    element index for a ``.json`` array and the row index for Parquet. ``payload`` is the
    line's bytes (or text), a ``Parsed`` value, or ``Unreadable``.
    """

    source: str
    position: int
    payload: Any


class Parsed(NamedTuple):
    """A payload the reader already decoded (a ``.json`` array element, a Parquet row).

    ``nulled`` counts, by field, the values the reader had to write as null because JSON
    cannot hold them (Parquet's NaN and infinities); ``None`` when there were none.
    """

    value: Any
    nulled: dict[str, Any] | None = None
    #: A conversation assembled from call-log records: which calls made it (the drop-metrics
    #: record's ``assembly``, ``transforms.calllogs.assemble``); ``None`` for any other record.
    assembly: dict[str, Any] | None = None
    #: Its reader's part of the ledger of discarded fields (``Conversation.discarded``), which
    #: the flat reader that reads an assembled conversation cannot know.
    discarded: dict[str, Any] | None = None


class Unreadable(NamedTuple):
    """Stands for the part of a file that could not be read (corrupt archive, bad array)."""

    reason: str
    detail: str
    raw: str = ""


class Batch(NamedTuple):
    """A run of consecutive items from one input shard, in input order.

    Beam's per-element cost in Python dominates small records, so the job moves records in
    batches; ``shard`` (the index of the planned input range) names the output files, which
    keeps them byte-identical across reruns and runners without a global sort.
    """

    shard: int
    #: Position of the batch's first input record within the shard's file.
    start: int
    items: list[Any]
    #: Each item as its JSON line (no newline), when processing already serialized it: a JSON
    #: Lines file writes these bytes instead of serializing the items again. ``None``: not known.
    lines: list[Any] | None = None
    #: Which run of the normalizer's state made the items (0: none, as read). A unique field
    #: (openai-batch's ``custom_id``) is unique among the items of one shard and one scope, so
    #: the writer starts a new file when either changes: the contract holds whether or not a
    #: runner fuses the normalizer and the writer into one stage.
    scope: int = 0


#: Bytes of an uncompressed JSONL file per shard (``--shard-bytes``): big files spread over workers.
DEFAULT_SHARD_BYTES = 64 << 20
#: Records per batch (``--batch-size``).
DEFAULT_BATCH_SIZE = 256
#: Largest record read (a JSONL line, a .json document); a larger one is a ``record_too_large``
#: dead letter. Parsing and normalizing hold up to ~20x a record's bytes in Python objects at
#: worst (tiny messages; bench/bench_memory.py), so the default keeps one record's cost under
#: ~0.7 GB.
DEFAULT_MAX_RECORD_BYTES = 32 << 20

#: A batch closes at this many raw bytes of its records, or at its count (``--batch-size``),
#: whichever comes first: it bounds what a batch of large records holds (its lines and ~20x
#: their bytes in Python objects); CPU per record did not measurably change between 64 KiB
#: and 1 MiB (docs/per-record-speed.md).
DEFAULT_BATCH_BYTES = 256 << 10


def raw_size(raw: RawRecord) -> int:
    """A raw record's bytes as read (a JSONL line); 0 for one read as a value (Parquet, .json)."""
    payload = raw.payload
    return len(payload) if isinstance(payload, (bytes, str)) else 0


def batch_is_full(records: int, size: int, max_records: int, max_bytes: int) -> bool:
    """A batch closes at ``max_records`` records or ``max_bytes`` raw bytes, whichever first
    (the record that crosses the size included): the one rule of the shard reader and of
    ``BatchRawRecords``."""
    return records >= max_records or size >= max_bytes
