"""A conversation's labels as the preference, KTO and prompt sinks read them (no Beam import).

A normalized record may carry ``metadata`` (docs/fine-tuning.md, "The metadata contract"):
``scores`` (label name -> one value) and ``labels``, a list of label objects with the keys
``LABEL_KEYS``. ``message`` is the index in the record's messages of the assistant message the
label judges; absent, the label judges the whole conversation, which for a sink is its *final
continuation* (``final_start``), unless ``message_dropped`` says the message it judged was
dropped by the core (such a label judges nothing a sink writes, and is not read here).
``correction`` is a better output for the judged message (a human's edit, Braintrust's
``expected``); ``rejected`` a worse one (OpenPipe's ``rejected_message``). A record with
``scores`` and no ``labels`` is read as one whole-conversation label per score.

A *continuation* starts at an assistant message and runs over the assistant and tool messages
after it, up to the next message of another role (``turn_end``): what TRL calls a completion.
Everything before it is its prompt.
"""

from __future__ import annotations

from typing import Any

from transforms.formats.base import FormatError
from transforms.formats.openai import openai_to_flat

#: The keys of a label object in ``metadata.labels``, in the order they are written: every
#: reader that makes labels (the call-log label readers, ``braintrust``, ``openpipe-dataset``)
#: and every sink that reads them uses these names (docs/fine-tuning.md, "The metadata contract").
LABEL_KEYS = ("name", "value", "source", "message", "message_dropped", "comment", "correction", "rejected")
#: The sources a label can come from (the tool whose export held it).
LABEL_SOURCES = ("langfuse", "langsmith", "phoenix", "braintrust", "openpipe", "helicone")
#: The roles a continuation holds.
CONTINUATION_ROLES = frozenset(("assistant", "tool"))


def is_label_value(value: Any) -> bool:
    """A label's value: a finite number, a bool or a string."""
    if isinstance(value, bool) or isinstance(value, str):
        return True
    return isinstance(value, (int, float)) and value == value and value not in (float("inf"), float("-inf"))


def record_labels(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The record's labels in their order: ``metadata.labels`` (entries that are not a label
    object with a name and a value left out, and those whose judged message was dropped), or,
    without any, one whole-conversation label per ``metadata.scores`` entry, by name."""
    metadata = record.get("metadata")
    if not isinstance(metadata, dict):
        return []
    labels = metadata.get("labels")
    if isinstance(labels, list) and labels:
        return [
            label
            for label in labels
            if isinstance(label, dict)
            and isinstance(label.get("name"), str)
            and is_label_value(label.get("value"))
            and not label.get("message_dropped")
        ]
    scores = metadata.get("scores")
    if isinstance(scores, dict):
        return [
            {"name": name, "value": scores[name]}
            for name in sorted(scores)
            if isinstance(name, str) and is_label_value(scores[name])
        ]
    return []


def final_start(messages: list[Any]) -> int | None:
    """The index of the final continuation's first message (the first message after the last
    message of another role, when it is an assistant message); ``None`` when the conversation
    does not end on one."""
    start = len(messages)
    while start > 0 and messages[start - 1].get("role") in CONTINUATION_ROLES:
        start -= 1
    while start < len(messages) and messages[start].get("role") != "assistant":
        start += 1  # tool messages right after a user's: not an answer
    return start if start < len(messages) else None


def turn_end(messages: list[Any], start: int) -> int:
    """The index after the continuation that starts at ``start``."""
    end = start + 1
    while end < len(messages) and messages[end].get("role") in CONTINUATION_ROLES:
        end += 1
    return end


def judged_start(messages: list[Any], label: dict[str, Any]) -> int:
    """Where the continuation the label judges starts: its ``message``, or the final
    continuation's first message; ``FormatError`` when that is no assistant message."""
    index = label.get("message")
    if index is None:
        start = final_start(messages)
        if start is None:
            raise FormatError("no_answer", "the conversation does not end on an assistant answer to judge")
        return start
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(messages):
        raise FormatError("label_message_out_of_range", f"label {label['name']!r} names message {index!r}")
    if messages[index].get("role") != "assistant":
        raise FormatError(
            "label_message_not_assistant", f"label {label['name']!r} names message {index}, not an assistant message"
        )
    return index


def alternative(value: Any, what: str) -> list[Any]:
    """A label's ``correction`` or ``rejected`` output as flat messages (one message or a list,
    in the flat or the Chat Completions shape); ``FormatError`` when it is not a continuation."""
    listed = [value] if isinstance(value, dict) else value
    if not isinstance(listed, list) or not listed or not all(isinstance(m, dict) for m in listed):
        raise FormatError("unreadable_alternative", f"the {what} output is not a message or a list of messages")
    try:
        flat = openai_to_flat([{"role": "assistant", **listed[0]}, *listed[1:]])
    except FormatError as error:
        raise FormatError("unreadable_alternative", f"the {what} output: {error}") from None
    out = []
    for message in flat:
        if not isinstance(message, dict) or message.get("role") not in CONTINUATION_ROLES:
            raise FormatError("unreadable_alternative", f"the {what} output holds a message that is not an answer")
        content = message.get("content")
        if content is None:
            message = {**message, "content": ""}
        elif not isinstance(content, str):
            raise FormatError("unreadable_alternative", f"the {what} output's content is not text")
        out.append(message)
    if out[0].get("role") != "assistant":
        raise FormatError("unreadable_alternative", f"the {what} output does not start with an assistant message")
    return out


def same_output(a: list[Any], b: list[Any]) -> bool:
    """Two continuations that say the same: the same roles, texts and calls (ids aside)."""

    def said(messages: list[Any]) -> list[Any]:
        return [
            (
                m.get("role"),
                m.get("content") or "",
                [(c.get("name"), c.get("args")) for c in m.get("tool_calls") or ()],
            )
            for m in messages
        ]

    return said(a) == said(b)
