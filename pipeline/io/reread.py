"""One record read again from its input, by its position (``record_at``, for ``convnorm
explain``), and the line numbers of positions in a file."""

from __future__ import annotations

from typing import Iterable

from pipeline.io.read_shard import read_shard
from pipeline.io.shard import FILE_KINDS, Blank, Shard, file_suffix
from pipeline.io.text_containers import UTF8_BOM, open_text_stream
from transforms.record.inputs import DEFAULT_MAX_RECORD_BYTES, RawRecord, Unreadable


def record_at(path: str, position: int, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> RawRecord | None:
    """The raw record at ``position`` of ``path``, as the run read it (a drop-metrics line or a
    dead letter names both); ``None`` when the file has none there (or is gone)."""
    suffix = file_suffix(path)
    if suffix is None or position < 0:
        return None
    if FILE_KINDS[suffix][2]:  # uncompressed JSONL: the line that starts at that byte
        # (The first line of a file with a byte-order mark starts past it: read it from 0.)
        start = position if position > len(UTF8_BOM) else 0
        items = read_shard(Shard(0, path, suffix, start, position + 1), max_record_bytes)
    else:
        items = read_shard(Shard(0, path, suffix, 0, None), max_record_bytes)
    for item in items:
        if isinstance(item, Blank):
            continue
        if item.position == position and not isinstance(item.payload, Unreadable):
            return item
        if item.position >= position:
            return None
    return None


def line_numbers(path: str, positions: Iterable[int]) -> dict[int, int]:
    """The 1-based line numbers of byte ``positions`` in a JSONL file (decompressed: the
    positions convnorm gives a ``.jsonl.gz``); {} for other kinds or a file that cannot be
    read. Reads the file up to the last position, once."""
    wanted = sorted({p for p in positions if p >= 0})
    suffix = file_suffix(path)
    if not wanted or suffix is None or FILE_KINDS[suffix][0] != "jsonl":
        return {}
    found: dict[int, int] = {}
    try:
        with open_text_stream(Shard(0, path, suffix, 0, None)) as handle:
            offset, lines = 0, 1
            for position in wanted:
                while offset < position:
                    chunk = handle.read(min(1 << 20, position - offset))
                    if not chunk:
                        return found
                    lines += chunk.count(b"\n")
                    offset += len(chunk)
                found[position] = lines
    except Exception:  # noqa: BLE001 — a line number is a nicety: the byte offset still says where
        return found
    return found
