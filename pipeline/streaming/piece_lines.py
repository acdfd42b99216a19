"""The streaming driver's ``calls.jsonl`` line format (``pipeline.streaming.assembled``): the
call-log pieces a window handed on, kept on disk between windows, one JSON line each, read back
exactly.
"""

from __future__ import annotations

from typing import Any

import orjson

from transforms.calllogs.calls import Call, Fragment, Label, Rejected, ToolResult
from transforms.core.jsontext import dumps_line, parse_json

#: A piece's ``kind`` in its JSON line -> its type.
PIECE_KINDS: dict[str, type] = {
    "call": Call,
    "tool_result": ToolResult,
    "rejected": Rejected,
    "fragment": Fragment,
    "label": Label,
}
_KIND_OF = {piece_type: kind for kind, piece_type in PIECE_KINDS.items()}


def piece_line(source: str, position: int, piece: Any) -> bytes:
    """One piece as a JSON line: its record's source and position, its kind and its fields,
    enough to rebuild it exactly (``piece_of_line``: integers of any size, floats to the bit)."""
    kind = _KIND_OF[type(piece)]
    return dumps_line({"source": source, "position": position, "kind": kind, "piece": piece._asdict()}) + b"\n"


#: Digits mapped to one byte, to find their runs by a plain search.
_DIGITS = bytes.maketrans(b"0123456789", b"\x1b" * 10)
_PAST_64_BITS = (b"\x1b" * 20, b"-" + b"\x1b" * 19)


def _line_document(line: bytes) -> Any:
    """A ``piece_line`` read back exactly, faster than ``parse_json`` can read any line: its
    numbers are ``dumps_line``'s, whose doubles orjson reads back to the bit (their shortest
    spelling), so the one number orjson could misread is an integer past 64 bits (it would read
    a float). A line with a run of digits that long (or one in a string) takes ``parse_json``."""
    mapped = line.translate(_DIGITS)
    if any(run in mapped for run in _PAST_64_BITS):
        return parse_json(line)
    return orjson.loads(line)


def piece_of_line(line: bytes) -> tuple[str, int, Any]:
    """``(source, position, piece)`` back from a ``piece_line``."""
    doc = _line_document(line)
    kind, fields = doc["kind"], doc["piece"]
    if kind == "call" and "text_dropped" in fields:  # a tuple, which JSON writes as a list
        fields["text_dropped"] = tuple(fields["text_dropped"])
    return doc["source"], doc["position"], PIECE_KINDS[kind](**fields)
