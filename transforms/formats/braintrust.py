"""Braintrust log rows (a project's logs or an experiment's rows: the JSONL export, ``/btql``,
``bt sync pull``), read with their scores and reference answer.

A row::

    {"id", "input", "output", "expected", "scores": {name: number in [0, 1] | null},
     "metadata": {...}, "tags": [...], "span_id", "root_span_id", "created", ...}

- ``input``: a Chat Completions message list, an object holding one at ``messages`` (and its
  ``tools``), or a text (one user message); anything else is refused (``input_not_messages``).
- ``output``: a text, a message, a list of messages, a completion (``choices``) or a list of
  choices (the first choice's message); ``null``: no answer (the conversation is its input).
- ``scores``: ``metadata.scores`` (name -> number; a null score, one not computed, is left
  out) and one label per score, ``source: "braintrust"``, judging the first output message.
- ``expected`` (a reference answer, in any shape ``output`` takes): the label ``expected``,
  value ``"reference"``, whose ``correction`` is that answer (docs/fine-tuning.md,
  "Preference, KTO and prompt sets"): ``trl-dpo`` pairs it
  with the logged output (a different one), ``trl-prompts`` writes it as ``reference``.
- ``metadata``: kept, with ``scores`` and ``labels`` set as above, ``tags`` (sorted, unique),
  ``trace_ids`` (``[root_span_id]``) and ``model`` (``metadata.model``) when the row has them.

Every other field of the row is carried as it is; ``input``, ``output``, ``expected`` and
``scores`` are read into the messages and the metadata.
"""

from __future__ import annotations

from typing import Any

from transforms.formats._common import record_fields
from transforms.formats._labels import is_label_value
from transforms.formats.base import Conversation, FormatError, Reader, not_a_record, register_reader
from transforms.formats.openai import openai_to_flat

#: Keys that make a row Braintrust's: ``input`` and ``output`` beside one of these.
_BRAINTRUST_KEYS = frozenset(("scores", "expected", "span_id", "root_span_id", "span_attributes"))
_READ = ("input", "output", "expected", "scores")


def _input_messages(value: Any) -> tuple[list[Any], Any]:
    """The input's messages and the tools it names."""
    if isinstance(value, str):
        return [{"role": "user", "content": value}], None
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        return value["messages"], value.get("tools")
    if isinstance(value, list) and all(isinstance(m, dict) and "role" in m for m in value):
        return value, None
    raise FormatError("input_not_messages", "a Braintrust row's input is a message list, a request or a text")


def _output_messages(value: Any, what: str) -> list[Any]:
    """An output (or ``expected``) as Chat Completions messages; ``[]`` for none."""
    if value is None:
        return []
    if isinstance(value, str):
        return [{"role": "assistant", "content": value}]
    if isinstance(value, dict) and isinstance(value.get("choices"), list):
        value = value["choices"]
    if isinstance(value, dict) and "message" in value:
        value = value["message"]
    if isinstance(value, dict) and ("content" in value or "tool_calls" in value):
        return [{"role": "assistant", **value}]
    if isinstance(value, list) and value and all(isinstance(m, dict) for m in value):
        if "message" in value[0]:
            return _output_messages(value[0]["message"], what)  # choices: the first one's
        if all("role" in m for m in value):
            return value
    raise FormatError(f"{what}_not_messages", f"a Braintrust row's {what} is not a text, message or completion")


def read_braintrust(record: Any, messages_field: str) -> Conversation:
    if not isinstance(record, dict):
        raise not_a_record(record)
    prompt, tools = _input_messages(record.get("input"))
    output = _output_messages(record.get("output"), "output")
    report: dict[str, Any] = {}
    discarded: dict[str, Any] = {}
    messages = openai_to_flat([*prompt, *output], report, discarded)
    answer = len(openai_to_flat(prompt)) if output else None
    fields = record_fields(record, _READ)
    metadata = dict(record["metadata"]) if isinstance(record.get("metadata"), dict) else {}
    scores = record.get("scores")
    scores = {k: v for k, v in sorted(scores.items()) if is_label_value(v)} if isinstance(scores, dict) else {}
    labels: list[dict[str, Any]] = [
        {"name": name, "value": value, "source": "braintrust", **({"message": answer} if answer is not None else {})}
        for name, value in scores.items()
    ]
    expected = _output_messages(record.get("expected"), "expected")
    if expected:
        judged = {"message": answer} if answer is not None else {}
        labels.append(
            {"name": "expected", "value": "reference", "source": "braintrust", **judged, "correction": expected}
        )
    if scores:
        metadata["scores"] = scores
    if labels:
        metadata["labels"] = labels
    _context(record, metadata)
    fields["metadata"] = metadata
    fields[messages_field] = messages
    if tools is not None and "tools" not in fields:
        fields["tools"] = tools
    return Conversation(messages, fields, report or None, discarded or None)


def _context(record: dict[str, Any], metadata: dict[str, Any]) -> None:
    """The row's context under the metadata's documented names (docs/fine-tuning.md)."""
    tags = record.get("tags")
    if isinstance(tags, list) and all(isinstance(t, str) for t in tags) and tags:
        metadata["tags"] = sorted(set(tags))
    if isinstance(record.get("root_span_id"), str):
        metadata["trace_ids"] = [record["root_span_id"]]


def detect_braintrust(record: Any, messages_field: str) -> bool:
    return (
        isinstance(record, dict)
        and "input" in record
        and "output" in record
        and not _BRAINTRUST_KEYS.isdisjoint(record)
        and messages_field not in record
    )


BRAINTRUST_READER = register_reader(
    Reader(
        "braintrust",
        read_braintrust,
        detect_braintrust,
        priority=15,
        description="Braintrust log rows (input, output, expected, scores, metadata, tags)",
    )
)
