"""Which reader may read a record: the rules behind ``--format auto`` and a forced ``--format``.

Readers never claim what they cannot read. A message list is a chat only when its entries look
like messages (``_common.foreign_entry``): an entry with a role and none of ``content``,
``tool_calls``, ``tool_call_id`` keeps its text somewhere no reader reads (Gemini ``parts``, a
``text`` key), and coercion would erase it while counting nothing. Each reader's ``detect``
refuses such lists, so ``--format auto`` dead-letters them as ``unknown_format``, with the
sentence ``unrecognized`` writes.

A reader named with ``--format`` reads a record only when auto-detection would give it to that
reader, or to ``flat`` (a plain chat, which every reader reads alike), or when the record is
valid in the reader's own format as it is (``Reader.accepts``: an Anthropic body of text
parts, which auto-detection gives to ``openai``). A record that another
reader recognizes is refused (``wrong_format``, naming what was expected and what the record
looks like), and so is one whose read messages hold a foreign entry (``unknown_shape``); the
job dead-letters both as ``format_error``. ``flat`` itself is the exception to the first rule:
the core reads every chat shape leniently, so forced ``flat`` takes any list of messages, except
one holding a custom tool call, which the core cannot read.

Adding a reader changes nothing here: it registers its ``detect`` with the others.
"""

from __future__ import annotations

from typing import Any

from transforms.formats._common import describe_entry, foreign_entry
from transforms.formats.base import Conversation, FormatError, Reader, detect_reader

#: The catch-all reader: a plain chat that no other reader recognizes.
CATCH_ALL = "flat"


def _looks_like(winner: Reader | None) -> str:
    if winner is None or winner.name == CATCH_ALL:
        return ""
    return f"; it looks like {winner.name} ({winner.description}): read it with --format {winner.name} or auto"


def _call_the_core_cannot_read(messages: Any) -> str | None:
    """Why forced ``flat`` must refuse a call of ``messages``, or ``None``: it reads OpenAI
    function calls, but the core knows no custom tool call (``{"type": "custom", "custom":
    {name, input}}``) and no call whose ``function`` is its name (Inspect AI's ``{"function":
    "web_browser_go"}``): it would keep an empty name (and lose a custom call's input), counting
    nothing."""
    for message in messages if isinstance(messages, list) else ():
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        for call in calls if isinstance(calls, list) else ():
            if not isinstance(call, dict) or call.get("name") is not None:
                continue
            if isinstance(call.get("custom"), dict) and not isinstance(call.get("function"), dict):
                return "the core reads no custom tool call (its name and input would be lost)"
            if isinstance(call.get("function"), str):
                return "the core reads no call whose function is its name (the name would be lost)"
    return None


def _read_flat(reader: Reader, record: Any, messages_field: str) -> Conversation:
    """Forced ``flat``: it takes any list of messages, so what auto-detection would say of the
    record only matters in a refusal (which calls are refused, and the sentence naming what the
    record looks like); it is asked only then (the job forces ``flat`` on every conversation it
    assembles from call logs)."""
    conversation = reader.read(record, messages_field)
    refused = _call_the_core_cannot_read(conversation.messages)
    winner = detect_reader(record, messages_field) if refused is not None else None
    if refused is not None and winner is not None and winner.name != CATCH_ALL:
        raise FormatError("wrong_format", refused + _looks_like(winner))
    index = foreign_entry(conversation.messages)
    if index is not None:
        if refused is None:
            winner = detect_reader(record, messages_field)
        detail = describe_entry(conversation.messages, index, "message")
        raise FormatError("unknown_shape", detail + _looks_like(winner))
    return conversation


def read_forced(reader: Reader, record: Any, messages_field: str) -> Conversation:
    """Read ``record`` with the reader named on the command line, or raise ``FormatError``."""
    if reader.name == CATCH_ALL:
        return _read_flat(reader, record, messages_field)
    winner = detect_reader(record, messages_field)
    if (
        winner is not None
        and winner is not reader
        and winner.name != CATCH_ALL
        and not (reader.accepts is not None and reader.accepts(record, messages_field))
    ):
        raise FormatError(
            "wrong_format",
            f"expected {reader.description}{_looks_like(winner)}",
        )
    conversation = reader.read(record, messages_field)
    index = foreign_entry(conversation.messages)
    if index is not None:
        detail = describe_entry(conversation.messages, index, "message")
        raise FormatError("unknown_shape", detail + _looks_like(winner))
    return conversation


def unrecognized(record: Any, messages_field: str) -> str:
    """Why no reader accepts ``record`` (an object or a list), for its ``unknown_format`` dead letter."""
    if isinstance(record, list):
        lists = [("the list's", record)]
    else:
        # The message field first, then any other list (Gemini's ``contents``, an ``input``).
        names = [messages_field] + [k for k in record if k != messages_field]
        lists = [(repr(k), record[k]) for k in names if isinstance(record.get(k), list)]
        # ... and a message list one object down (a Batch line's ``body``).
        lists += [
            (repr(f"{k}.{messages_field}"), v[messages_field])
            for k, v in record.items()
            if isinstance(v, dict) and isinstance(v.get(messages_field), list)
        ]
    for where, entries in lists:
        index = foreign_entry(entries)
        if index is not None:
            return describe_entry(entries, index, where) + "; no reader accepts it"
    keys = ", ".join(map(str, list(record)[:10])) if isinstance(record, dict) else "none: a list"
    return (
        f"no reader accepts this record (keys: {keys}); "
        "name one with --format, or the message field with --messages-field"
    )
