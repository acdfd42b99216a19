"""The streaming driver's ``calls.jsonl`` line format (``pipeline.streaming.assembled``): the
call-log pieces a window handed on, kept on disk between windows, one JSON line each, read back
exactly.

A call's history is most often the one before it and more: a reader hands the calls of a group
the same message objects again (the Langfuse reader reads a history once per group). A file's
lines are written by one ``PieceLines`` and read back by another, in the file's order: a call
whose first history messages are the previous call's of its group in the file (the same
objects) keeps only how many (``history_from``) and the messages after them. Read back, its
history is that call's messages, the same objects again, and the rest: the line is shorter
to write and to parse, and the assembly's look for a history it knows (``GroupState.add``:
the same objects) finds it, as in a batch run. A line without ``history_from`` (every line of
an earlier release) holds its whole history.
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
    """``(source, position, piece)`` back from a ``piece_line`` (a line holding its whole
    history: ``PieceLines.read`` reads every line of a file)."""
    return PieceLines().read(line)


class PieceLines:
    """The lines of one ``calls.jsonl``, written (``line``) or read back (``read``) in the
    file's order: each group's last call's history, to share with the next call's."""

    def __init__(self) -> None:
        #: A call's group (format, group) -> the history of its group's last call in the file.
        self._last: dict[tuple[str, str], list[Any]] = {}

    def line(self, source: str, position: int, piece: Any) -> bytes:
        """``piece_line``, a call's history after the messages it shares with its group's last
        call in the file (the same objects) given as how many those are."""
        if type(piece) is not Call:
            return piece_line(source, position, piece)
        key = (piece.format, piece.group)
        history = piece.history
        last = self._last.get(key)
        self._last[key] = history
        shared = 0
        if last:
            for mine, theirs in zip(history, last):
                if mine is not theirs:
                    break
                shared += 1
        if not shared:
            return piece_line(source, position, piece)
        fields = piece._asdict()
        fields["history"] = history[shared:]
        doc = {"source": source, "position": position, "kind": "call", "history_from": shared, "piece": fields}
        return dumps_line(doc) + b"\n"

    def read(self, line: bytes) -> tuple[str, int, Any]:
        """``(source, position, piece)`` back from a line of ``line`` (every earlier line of the
        file read by this reader, those of other groups aside)."""
        doc = _line_document(line)
        kind, fields = doc["kind"], doc["piece"]
        if kind == "call":
            if "text_dropped" in fields:  # a tuple, which JSON writes as a list
                fields["text_dropped"] = tuple(fields["text_dropped"])
            key = (fields["format"], fields["group"])
            shared = doc.get("history_from", 0)
            if shared:
                last = self._last.get(key)
                if last is None or len(last) < shared:
                    raise ValueError(f"a calls.jsonl line shares {shared} messages its group's last call lacks")
                fields["history"] = [*last[:shared], *fields["history"]]
            self._last[key] = fields["history"]
        return doc["source"], doc["position"], PIECE_KINDS[kind](**fields)
