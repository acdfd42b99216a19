"""An answer's text that a history's copy of it lost (no Beam import): what is the same message.

python-contrib's openai-v2 instrumentation, in its legacy conventions (GenAI events as log
records), writes an assistant message that made tool calls as its calls only
(``message_to_event``): the text the answer had beside them is not in the next request's
``gen_ai.assistant.message`` record, while the answer's own ``gen_ai.choice`` record keeps it.
The reader marks such history messages (``Call.text_dropped``); only those are compared here,
and only with an answer the same conversation logged at that place:

- the copy is an assistant message with tool calls and an empty text;
- the answer is an assistant message with a text and the same tool calls: the same ids, the
  same names, the arguments equal as parsed JSON, nothing else different.

Then they are one message, and the answer (with its text) is the one kept. Nothing else is
loosened: a history from any other writer that lacks an answer's text says the conversation
went on without it (an application may strip it on purpose).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from transforms.core.jsontext import canonical_json

#: What a key of a copy that lost its text is hashed with, apart from the assembly's chain
#: hashes (``chained.Fingerprints.text_dropped``).
_KEY_PREFIX = b"text-dropped\0"


def parsed_args(args: Any) -> Any:
    """Call arguments as the provider means them: JSON text parsed (one log writes the string
    the API returned, the next request's copy an object), anything else as it is."""
    if isinstance(args, str) and args.strip()[:1] in ("{", "["):
        try:
            return json.loads(args)
        except ValueError:
            return args
    return args


def _makes_calls(message: dict[str, Any]) -> bool:
    calls = message.get("tool_calls")
    return isinstance(calls, list) and bool(calls) and all(isinstance(c, dict) for c in calls)


def _calls_as_meant(message: dict[str, Any]) -> bytes:
    return canonical_json([{**c, "args": parsed_args(c["args"])} if "args" in c else c for c in message["tool_calls"]])


def as_meant(message: dict[str, Any]) -> bytes:
    """A message as the rule compares it: key-sorted JSON, its calls' arguments parsed."""
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        return canonical_json(message)
    meant = [{**c, "args": parsed_args(c["args"])} if isinstance(c, dict) and "args" in c else c for c in calls]
    return canonical_json({**message, "tool_calls": meant})


def lost_its_text(message: Any) -> bool:
    """An assistant message with tool calls and no text: what the legacy writer makes of an
    answer that made calls."""
    return (
        isinstance(message, dict)
        and message.get("role") == "assistant"
        and message.get("content") in ("", None)
        and _makes_calls(message)
    )


def has_text_beside_calls(message: Any) -> bool:
    """An assistant answer with a text and tool calls: one whose copy the legacy writer cuts."""
    return (
        isinstance(message, dict)
        and message.get("role") == "assistant"
        and isinstance(message.get("content"), str)
        and message["content"] != ""
        and _makes_calls(message)
    )


def same_answer(copy: Any, answer: Any) -> bool:
    """Whether ``copy`` (a history's, its text lost) is ``answer`` less its text: the same tool
    calls (ids, names, arguments as parsed JSON) and nothing else different."""
    if not (lost_its_text(copy) and has_text_beside_calls(answer)):
        return False
    if set(copy) != set(answer):
        return False
    if any(copy[key] != answer[key] for key in copy if key not in ("content", "tool_calls")):
        return False
    return _calls_as_meant(copy) == _calls_as_meant(answer)


def calls_named(before: bytes, message: dict[str, Any]) -> bytes:
    """A running hash of the tool calls' own ids and names, ``before`` and then ``message``'s
    (the assembly's chain counts call ids by place; the rule asks the same ids)."""
    calls = [[c.get("tool_call_id"), c.get("name")] for c in message.get("tool_calls") or () if isinstance(c, dict)]
    return hashlib.blake2b(before + canonical_json(calls), digest_size=16).digest()


def text_dropped_key(chain_hash: bytes, named: bytes) -> bytes:
    """A key of the sequences as the writer that drops text logs them, apart from the
    assembly's chain hashes: the chain hash of such a sequence (every answer with a text beside
    tool calls in it as its copy: the text empty) and the hash of its calls' ids and names
    (``calls_named``)."""
    return hashlib.blake2b(_KEY_PREFIX + chain_hash + named, digest_size=16).digest()


def put_back(messages: list[Any], at: int, answer: dict[str, Any]) -> list[Any] | None:
    """``messages`` with the copy of ``answer`` that lost its text, at ``at`` or after it (tool
    results recorded apart may have been filled in before it), replaced by ``answer``; ``None``
    when no message there is its copy."""
    for index in range(max(at, 0), len(messages)):
        if same_answer(messages[index], answer):
            return [*messages[:index], answer, *messages[index + 1 :]]
    return None


__all__ = [
    "as_meant",
    "calls_named",
    "has_text_beside_calls",
    "lost_its_text",
    "parsed_args",
    "put_back",
    "same_answer",
    "text_dropped_key",
]
