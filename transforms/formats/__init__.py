"""Reader/writer registry for conversation log formats (no Beam import).

``READERS`` and ``WRITERS`` map a format name to its ``Reader`` / ``Writer``; importing this
package registers every built-in format. See ``base`` for the contract.
"""

from typing import Any

from transforms.formats.base import (
    READERS,
    WRITERS,
    Conversation,
    FormatError,
    Reader,
    WriteContext,
    Writer,
    count_written,
    detect_reader,
    register_reader,
    register_writer,
)

# Built-in formats register themselves on import: add a format module's name here.
from transforms.formats import (  # noqa: F401
    anthropic,
    bedrock,
    flat,
    gemini,
    openai,
    openai_responses,
    sharegpt,
)
from transforms.formats.claims import read_forced, unrecognized
from transforms.formats.openai import _openai_ism

#: The readers a plain chat can go to, and the readers the plain-chat rules below were proved
#: against: another registered reader (a plug-in) turns the shortcut off.
_PLAIN_READERS = ("openai", "flat")
_BUILT_IN_READERS = frozenset(
    ("anthropic", "bedrock-converse", "flat", "gemini", "openai", "openai-responses", "sharegpt")
)
#: Top-level keys some reader before ``openai`` looks at (ShareGPT ``conversations``, Gemini
#: ``contents``, Responses ``input``, Anthropic and Bedrock ``system``, Bedrock ``toolConfig``):
#: a record holding one is not plain.
_CLAIMED_KEYS = frozenset(("conversations", "contents", "input", "system", "toolConfig"))
_SHAREGPT_ROLES = ("function_call", "observation")
#: Message keys a detector before ``openai`` looks at (ShareGPT ``from``, Gemini ``parts``).
_FOREIGN_KEYS = frozenset(("from", "parts"))
#: Message keys ``_openai_ism`` looks at besides role, content and calls.
_ISM_KEYS = frozenset(("function_call", "refusal", "tool_call_ids"))
#: Roles that are neither ShareGPT tags nor OpenAI-isms.
_CHAT_ROLES = frozenset(("system", "user", "assistant", "tool"))


def plain_chat_reader(record: Any, messages_field: str = "messages") -> str | None:
    """``"openai"`` or ``"flat"`` when ``record`` is a plain chat, else ``None`` (not known).

    A plain chat is an object without any key in ``_CLAIMED_KEYS`` whose message field is a
    list of entries that are either not objects (the core drops them) or objects with
    ``content``, ``tool_calls`` or ``tool_call_id``, no ``from`` or ``parts`` key, no list
    content and no ShareGPT role. ShareGPT, Anthropic, Gemini and Responses detection all
    refuse such a record and no entry is foreign, so full detection gives ``openai`` if a
    message has an OpenAI-ism (``openai._openai_ism``) and ``flat`` otherwise: what this
    returns. One pass over the messages instead of six detectors (tests/test_detect_fast.py
    checks the two agree on generated records and every sample).
    """
    if record.__class__ is not dict or not _CLAIMED_KEYS.isdisjoint(record):
        return None
    messages = record.get(messages_field)
    if messages.__class__ is not list:
        return None
    has_openai_ism = False
    for message in messages:
        if message.__class__ is not dict:
            if isinstance(message, dict):
                return None  # a dict subclass: leave it to the detectors
            continue
        if not ("content" in message or "tool_calls" in message or "tool_call_id" in message):
            return None
        if isinstance(message.get("content"), list) or not _FOREIGN_KEYS.isdisjoint(message):
            return None  # list content, a ShareGPT turn, Gemini parts: for the detectors
        role = message.get("role")
        plain_role = role.__class__ is str and role in _CHAT_ROLES
        if not plain_role and role in _SHAREGPT_ROLES:
            return None
        if has_openai_ism:
            continue
        calls = message.get("tool_calls")
        if not plain_role or (calls.__class__ is list and calls) or not _ISM_KEYS.isdisjoint(message):
            has_openai_ism = _openai_ism(message)  # the only messages it can say yes to
    return "openai" if has_openai_ism else "flat"


def detect_reader_after(previous: Reader | None, record: Any, messages_field: str = "messages") -> Reader | None:
    """``detect_reader(record, messages_field)``, faster for a run of plain chats.

    ``previous`` is the reader detected for the previous record of the same batch (or
    ``None``). When it read a plain chat, the one-pass ``plain_chat_reader`` is tried first;
    a record it cannot decide goes through full detection. The result is always the one full
    detection gives.
    """
    if previous is not None and previous.name in _PLAIN_READERS and READERS.keys() == _BUILT_IN_READERS:
        found = plain_chat_reader(record, messages_field)
        if found is not None:
            return READERS[found]
    return detect_reader(record, messages_field)


__all__ = [
    "READERS",
    "WRITERS",
    "Conversation",
    "FormatError",
    "Reader",
    "WriteContext",
    "Writer",
    "count_written",
    "detect_reader",
    "detect_reader_after",
    "plain_chat_reader",
    "read_forced",
    "register_reader",
    "register_writer",
    "unrecognized",
]
