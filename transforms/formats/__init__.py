"""Reader/writer registry for conversation log formats (no Beam import).

``READERS`` and ``WRITERS`` map a format name to its ``Reader`` / ``Writer``; importing this
package registers every built-in format. See ``base`` for the contract.
"""

from typing import Any, NamedTuple

from transforms.calllogs.calls import CALL_LOG_KEYS
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
    braintrust,
    cohere,
    flat,
    gemini,
    hf,
    openai,
    openai_responses,
    openpipe,
    sharegpt,
    trl,
)
from transforms.formats.claims import read_forced, unrecognized
from transforms.formats.openai import _openai_ism, plain_message, scan_calls
from transforms.core.normalize import Reading

#: The readers a plain chat can go to, and the readers the plain-chat rules below were proved
#: against: another registered reader (a plug-in) turns the shortcut off.
_PLAIN_READERS = ("openai", "flat")
#: The conversation readers convnorm registers (each module above registers its own on import):
#: with no other, a plain chat is the flat reader's.
BUILT_IN_READERS = frozenset(READERS)
#: Top-level keys some reader before ``openai`` looks at (ShareGPT ``conversations``, Gemini
#: ``contents``, Responses and Braintrust ``input``, Anthropic and Bedrock ``system``, Bedrock
#: ``toolConfig``, an OpenPipe dataset entry's ``rejected_message``): a record holding one is not plain.
#: And the keys that mark a call log (a LiteLLM payload has a top-level ``messages``): such a
#: record goes to full detection, where the call-log readers come first.
_CLAIMED_KEYS = (
    frozenset(("conversations", "contents", "input", "system", "toolConfig", "rejected_message")) | CALL_LOG_KEYS
)
_SHAREGPT_ROLES = ("function_call", "observation")
#: Message keys a detector before ``openai`` looks at (ShareGPT ``from``, Gemini ``parts``).
_FOREIGN_KEYS = frozenset(("from", "parts"))
#: Message keys ``_openai_ism`` looks at besides role, content and calls.
_ISM_KEYS = frozenset(("function_call", "refusal", "tool_call_ids"))
#: Roles that are neither ShareGPT tags nor OpenAI-isms.
_CHAT_ROLES = frozenset(("system", "user", "assistant", "tool"))
#: The keys rule 1 keeps, by chat role (``transforms.core.ledger``): a message holding no other
#: key is a usual message of a plain chat.
_KEPT_KEYS = {
    "system": frozenset(("role", "content")),
    "user": frozenset(("role", "content")),
    "assistant": frozenset(("role", "content", "tool_calls")),
    "tool": frozenset(("role", "content", "tool_call_id")),
}


class PlainChat(NamedTuple):
    """What ``plain_chat`` found in one pass over a plain chat's messages."""

    #: ``"openai"`` or ``"flat"``: the reader full detection gives.
    reader: str
    #: The messages are what the reader's read for the core hands on (``Reader.read_for_core``):
    #: the flat reader hands every list on as it is, the OpenAI reader a list whose every
    #: message is plain (``openai.plain_message``).
    as_is: bool
    #: No message holds a key that rule 1 discards (``transforms.core.ledger``'s own test, message
    #: by message): read as is, the ledger of what coercion discards is empty.
    keys_kept: bool


def plain_chat(record: Any, messages_field: str = "messages") -> PlainChat | None:
    """What one pass learns of a plain chat: its reader, whether its messages go to the core as
    they are, whether coercion discards anything; ``None`` when ``record`` is not a plain chat.

    A plain chat is an object without any key in ``_CLAIMED_KEYS`` whose message field is a
    list of entries that are either not objects (the core drops them) or objects with
    ``content``, ``tool_calls`` or ``tool_call_id``, no ``from`` or ``parts`` key, no list
    content and no ShareGPT role. ShareGPT, Anthropic, Gemini and Responses detection all
    refuse such a record and no entry is foreign, so full detection gives ``openai`` if a
    message has an OpenAI-ism (``openai._openai_ism``) and ``flat`` otherwise.
    tests/test_detect_fast.py checks this against full detection on generated records and
    every sample; tests/test_openai_fast_path.py checks ``as_is`` and ``keys_kept`` against
    the readers and the ledger.
    """
    messages = _plain_top(record, messages_field)
    if messages is None:
        return None
    has_openai_ism = False
    as_is = keys_kept = True
    for message in messages:
        if message.__class__ is not dict:
            if isinstance(message, dict):
                return None  # a dict subclass: leave it to the detectors
            continue
        role = message.get("role")
        kept = _KEPT_KEYS.get(role) if role.__class__ is str else None
        if kept is not None and message.keys() <= kept and len(message) > 1:
            # The usual message: a chat role and only keys rule 1 keeps for it (so no foreign
            # key, no OpenAI-ism key, nothing for the ledger), one beside the role.
            if isinstance(message.get("content"), list):
                return None  # list content (parts, blocks): for the detectors
            if role == "assistant":
                calls = message.get("tool_calls")
                if calls.__class__ is list:
                    if calls:
                        # Only calls can make it an OpenAI-ism, or one the OpenAI reader converts.
                        openai_ism, plain = scan_calls(calls)
                        has_openai_ism = has_openai_ism or openai_ism
                        as_is = as_is and plain
                elif calls is not None:
                    keys_kept = False  # not a list of calls: the ledger counts it
            continue
        # Anything else, by the general rules.
        keys_kept = False
        found = _by_the_general_rules(message, role, has_openai_ism, as_is)
        if found is None:
            return None
        has_openai_ism, as_is = found
    if not has_openai_ism:
        return PlainChat("flat", True, keys_kept)
    return PlainChat("openai", as_is, keys_kept)


def _by_the_general_rules(
    message: dict[str, Any], role: Any, has_openai_ism: bool, as_is: bool
) -> tuple[bool, bool] | None:
    """``plain_chat`` of a message that is not a usual one: (an OpenAI-ism so far, as is so
    far) with this message too; ``None`` when it makes the record no plain chat."""
    if not ("content" in message or "tool_calls" in message or "tool_call_id" in message):
        return None
    if isinstance(message.get("content"), list) or not _FOREIGN_KEYS.isdisjoint(message):
        return None  # list content, a ShareGPT turn, Gemini parts: for the detectors
    plain_role = role.__class__ is str and role in _CHAT_ROLES
    if not plain_role and role in _SHAREGPT_ROLES:
        return None
    calls = message.get("tool_calls")
    if not plain_role or (calls.__class__ is list and calls) or not _ISM_KEYS.isdisjoint(message):
        # The only messages that can be an OpenAI-ism or that the OpenAI reader converts.
        if not has_openai_ism:
            has_openai_ism = _openai_ism(message)
        if as_is:
            as_is = plain_message(message, role)
    return has_openai_ism, as_is


def plain_chat_reader(record: Any, messages_field: str = "messages") -> str | None:
    """``"openai"`` or ``"flat"`` when ``record`` is a plain chat (``plain_chat``), else ``None``."""
    found = plain_chat(record, messages_field)
    return None if found is None else found.reader


def _plain_top(record: Any, messages_field: str) -> list[Any] | None:
    """The message list of a record whose top level is a plain chat's, else ``None``."""
    if record.__class__ is not dict or not _CLAIMED_KEYS.isdisjoint(record):
        return None
    messages = record.get(messages_field)
    return messages if messages.__class__ is list else None


def _plain_hint(previous: Reader | None) -> bool:
    # The shortcut holds for the built-in readers only: a plug-in reader turns it off.
    return previous is not None and previous.name in _PLAIN_READERS and READERS.keys() == BUILT_IN_READERS


def plain_chat_messages(previous: Reader | None, record: Any, messages_field: str = "messages") -> list[Any] | None:
    """The messages of ``record`` when ``previous`` read a plain chat and ``record``'s top level
    is a plain chat's; ``None`` otherwise. Whether they are a plain chat read as they are, the
    core's reading of them says (``plain_chat_read``): the job normalizes them first."""
    return _plain_top(record, messages_field) if _plain_hint(previous) else None


def plain_chat_read(reading: Reading) -> PlainChat | None:
    """What ``plain_chat`` says of a plain chat's messages that the core read whole
    (``normalize.Reading``), without a pass of its own; ``None`` when not read whole.

    Read whole, every message is a usual message of a plain chat (a chat role, only the keys
    rule 1 keeps, no list content) whose calls are flat or OpenAI function calls with their
    ids and nothing the OpenAI reader reads beside them: both plain readers hand the list on
    as it is, the ledger has nothing to count, and an OpenAI-ism is a call read from a
    ``function`` object. tests/test_plain_chat.py holds the two to the same answer.
    """
    if not reading.whole:
        return None
    return _WHOLE_OPENAI if reading.function_calls else _WHOLE_FLAT


# The two answers for a chat read whole, made once (a NamedTuple costs a call to build, and
# the job asks once a record).
_WHOLE_OPENAI = PlainChat("openai", True, True)
_WHOLE_FLAT = PlainChat("flat", True, True)


def plain_chat_after(previous: Reader | None, record: Any, messages_field: str = "messages") -> PlainChat | None:
    """``plain_chat(record)`` when ``previous`` (the reader detected for the previous record of
    the same batch, or ``None``) read a plain chat and only the built-in readers are registered;
    ``None`` otherwise, or when ``record`` is not a plain chat."""
    return plain_chat(record, messages_field) if _plain_hint(previous) else None


def detect_reader_after(previous: Reader | None, record: Any, messages_field: str = "messages") -> Reader | None:
    """``detect_reader(record, messages_field)``, faster for a run of plain chats.

    ``previous`` is the reader detected for the previous record of the same batch (or
    ``None``). When it read a plain chat, the one-pass ``plain_chat`` is tried first; a record
    it cannot decide goes through full detection. The result is always the one full detection
    gives.
    """
    found = plain_chat_after(previous, record, messages_field)
    if found is not None:
        return READERS[found.reader]
    return detect_reader(record, messages_field)


__all__ = [
    "BUILT_IN_READERS",
    "READERS",
    "WRITERS",
    "Conversation",
    "FormatError",
    "Reader",
    "WriteContext",
    "Writer",
    "PlainChat",
    "count_written",
    "detect_reader",
    "detect_reader_after",
    "plain_chat",
    "plain_chat_after",
    "plain_chat_messages",
    "plain_chat_read",
    "plain_chat_reader",
    "read_forced",
    "register_reader",
    "register_writer",
    "unrecognized",
]
