"""The FlowDrop flat shape: a bare message list, or an object with one at ``messages_field``.

Stored-buffer rows (pairing keys under ``metadata``) and provider-shaped calls are read by the
core itself, leniently, so the flat reader only finds the list. The flat writer is the
identity: the normalized record already has the flat shape.
"""

from __future__ import annotations

from typing import Any

from transforms.formats._common import foreign_entry, message_list
from transforms.formats.base import (
    Conversation,
    Reader,
    WriteContext,
    Writer,
    register_reader,
    register_writer,
)


def read_flat(record: Any, messages_field: str) -> Conversation:
    return Conversation(message_list(record, messages_field), record if isinstance(record, dict) else {})


def detect_flat(record: Any, messages_field: str) -> bool:
    # The catch-all: a list, or an object with a list at the message field, whose entries look
    # like messages (an entry in a shape nobody reads would have its text erased by coercion).
    if isinstance(record, dict):
        record = record.get(messages_field)
    return isinstance(record, list) and foreign_entry(record) is None


def write_flat(record: dict[str, Any], ctx: WriteContext) -> dict[str, Any]:
    return record


FLAT_READER = register_reader(
    Reader("flat", read_flat, detect_flat, priority=90, description="FlowDrop flat shape (and stored-buffer rows)")
)
# The normalized record is MEM-5's to the letter unless --reasoning keep asks for the carried
# reasoning field on its assistant messages (any provider's, as it was).
FLAT_WRITER = register_writer(
    Writer(
        "flat",
        write_flat,
        description="FlowDrop flat shape",
        reasoning=("*",),
        reasoning_default="drop",
        media=lambda item, role: True,
        media_default="drop",
    )
)
