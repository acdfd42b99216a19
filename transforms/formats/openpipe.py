"""OpenPipe dataset entries (its fine-tuning datasets' JSONL): a Chat Completions record whose last
assistant message is the preferred output, with the one it was preferred to.

An entry::

    {"messages": [...], "rejected_message": {"role": "assistant", "content": ...},
     "tools": [...], "tool_choice": ..., "split": "TRAIN" | "TEST"}

Its messages are read as the ``openai`` reader reads them. ``rejected_message`` becomes the
label ``preferred`` (``value: true``, ``source: "openpipe"``) on the last assistant message,
whose ``rejected`` is that message (docs/fine-tuning.md, "Preference, KTO and prompt sets"):
``trl-dpo`` writes the pair, ``trl-kto`` the logged message as a good one. An entry without an
assistant message to prefer keeps the rejected message in the label, judging the whole
conversation (``trl-dpo`` refuses it: ``no_answer``). Every other field is carried;
``rejected_message`` is read into the label.
"""

from __future__ import annotations

from typing import Any

from transforms.formats._common import message_list, record_fields
from transforms.formats.base import Conversation, FormatError, Reader, not_a_record, register_reader
from transforms.formats.openai import openai_to_flat


def read_openpipe_dataset(record: Any, messages_field: str) -> Conversation:
    if not isinstance(record, dict):
        raise not_a_record(record)
    report: dict[str, Any] = {}
    discarded: dict[str, Any] = {}
    messages = openai_to_flat(message_list(record, messages_field), report, discarded)
    rejected = record.get("rejected_message")
    if not isinstance(rejected, dict):
        raise FormatError("rejected_not_a_message", "an OpenPipe entry's rejected_message is a message object")
    last = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "assistant"), None)
    label: dict[str, Any] = {"name": "preferred", "value": True, "source": "openpipe"}
    if last is not None:
        label["message"] = last
    label["rejected"] = [rejected]
    fields = record_fields(record, ("rejected_message",))
    metadata = dict(fields["metadata"]) if isinstance(fields.get("metadata"), dict) else {}
    earlier = metadata.get("labels")
    metadata["labels"] = [*earlier, label] if isinstance(earlier, list) else [label]
    fields["metadata"] = metadata
    fields[messages_field] = messages
    return Conversation(messages, fields, report or None, discarded or None)


def detect_openpipe_dataset(record: Any, messages_field: str) -> bool:
    return isinstance(record, dict) and "rejected_message" in record and isinstance(record.get(messages_field), list)


OPENPIPE_DATASET_READER = register_reader(
    Reader(
        "openpipe-dataset",
        read_openpipe_dataset,
        detect_openpipe_dataset,
        priority=15,
        description="OpenPipe dataset entries (messages, and rejected_message for preference data)",
    )
)
