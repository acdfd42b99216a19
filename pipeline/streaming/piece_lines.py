"""The streaming driver's ``calls.jsonl`` line format (``pipeline.streaming.assembled``): the
call-log pieces a window handed on, kept on disk between windows, one JSON line each, read back
exactly.
"""

from __future__ import annotations

from typing import Any

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


def piece_of_line(line: bytes) -> tuple[str, int, Any]:
    """``(source, position, piece)`` back from a ``piece_line``."""
    doc = parse_json(line)
    piece = PIECE_KINDS[doc["kind"]](**doc["piece"])
    if isinstance(piece, Call):  # a tuple, which JSON writes as a list
        piece = piece._replace(text_dropped=tuple(piece.text_dropped))
    return doc["source"], doc["position"], piece
