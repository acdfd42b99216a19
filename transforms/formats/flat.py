"""The FlowDrop flat shape: a bare message list, or an object with one at ``messages_field``.

Stored-buffer rows (pairing keys under ``metadata``) and provider-shaped calls are read by the
core itself, leniently, so the flat reader only finds the list. The flat writer is the
identity: the normalized record already has the flat shape.
"""

from __future__ import annotations

from typing import Any

from transforms.formats.base import (
    Conversation,
    FormatError,
    Reader,
    WriteContext,
    Writer,
    register_reader,
    register_writer,
)


def read_flat(record: Any, messages_field: str) -> Conversation:
    if isinstance(record, list):
        return Conversation(record, {})
    if not isinstance(record, dict):
        raise FormatError("not_a_record", f"a record is an object or a list, not {type(record).__name__}")
    if messages_field not in record:
        raise FormatError("missing_messages", f"no {messages_field!r} field")
    messages = record[messages_field]
    if not isinstance(messages, list):
        raise FormatError("messages_not_a_list", f"{messages_field!r} is {type(messages).__name__}, not a list")
    return Conversation(messages, record)


def detect_flat(record: Any, messages_field: str) -> bool:
    # The catch-all: any list, or any object with a list at the message field.
    return isinstance(record, list) or (isinstance(record, dict) and isinstance(record.get(messages_field), list))


def write_flat(record: dict, ctx: WriteContext) -> dict:
    return record


FLAT_READER = register_reader(
    Reader("flat", read_flat, detect_flat, priority=90, description="FlowDrop flat shape (and stored-buffer rows)")
)
FLAT_WRITER = register_writer(Writer("flat", write_flat, description="FlowDrop flat shape"))
