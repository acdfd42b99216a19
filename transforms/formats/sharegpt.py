"""ShareGPT / LLaMA-Factory conversations: a reader.

``{"conversations": [{"from", "value"}], "system"?, "tools"?, ...}``; the same turns under the
message field or as a bare list; and LLaMA-Factory's ``role`` / ``content`` variants, including
the v1 block content ``[{"type": "text" | "reasoning" | "tool_call", "value"}]``.

- Roles: ``human``/``user`` → user, ``gpt``/``assistant``/``chatgpt``/``bing``/``bard``/``model``
  → assistant, ``system`` → system, ``function_call`` → assistant with calls,
  ``observation``/``tool``/``function`` → tool; any other role is kept as it is.
- A ``function_call`` value (and a v1 ``tool_call`` block) is JSON ``{"name", "arguments"}`` or a
  list of them (parallel calls); arguments are kept verbatim (usually an object). Unparseable
  JSON is a FormatError (``bad_function_call``): there is no call to keep.
- No ids exist: calls get ``call_<turn index>`` (``call_<turn index>_<n>`` for the n-th of
  several). A run of consecutive results answers the calls made since the last other turn, one
  result per call, in order; extra results are orphans and calls left over stay unanswered (the
  core drops and heals them, counted). A single result answering several calls is split when
  its text is a JSON list with exactly one element per call (LLaMA-Factory batches parallel
  results so: an element's ``content`` is its text, else its compact JSON); otherwise it answers
  the first call only.
- ``reasoning`` blocks are dropped (no flat equivalent); other block types as in
  ``_common.part_text``.
- The ``system`` column becomes the leading system message. The ``tools`` column, a JSON
  string in LLaMA-Factory, is carried parsed when it parses to a list (writers need the
  schemas), else as it is.
"""

from __future__ import annotations

import json
from typing import Any

from transforms.formats._common import (
    JOIN,
    IdAllocator,
    block_text,
    note_reasoning,
    parse_tools_text,
    part_text,
    record_fields,
)
from transforms.formats.base import Conversation, FormatError, Reader, register_reader
from transforms.normalize import content_text

_ROLES = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "chatgpt": "assistant",
    "bing": "assistant",
    "bard": "assistant",
    "model": "assistant",
    "system": "system",
    "function_call": "assistant",
    "observation": "tool",
    "tool": "tool",
    "function": "tool",
}
_TOOL_TAGS = ("function_call", "observation")
_V1_TYPES = frozenset(("text", "reasoning", "tool_call"))


def _parse_calls(value: Any) -> list:
    """The calls of a function_call value: ``[{"name", "args"?}]``."""
    data = value
    if isinstance(value, str):
        try:
            data = json.loads(value)
        except ValueError:
            raise FormatError("bad_function_call", f"function_call value is not JSON: {value[:80]!r}") from None
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not all(isinstance(d, dict) for d in data):
        raise FormatError("bad_function_call", "function_call value is not {name, arguments} or a list of them")
    calls = []
    for d in data:
        call = {"name": d.get("name")}
        if d.get("arguments") is not None:
            call["args"] = d["arguments"]
        calls.append(call)
    return calls


def _split_batch(text: str, count: int) -> list | None:
    """One result text per call when ``text`` is a JSON list of exactly ``count`` results."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, list) or len(data) != count:
        return None
    return [content_text(e["content"]) if isinstance(e, dict) and "content" in e else content_text(e) for e in data]


_TAG_KEYS = frozenset(("from", "role"))


def _turn(entry: dict) -> tuple[Any, Any]:
    # ShareGPT tags (from/value) first, LLaMA-Factory's OpenAI-style tags (role/content) else.
    if "value" not in entry and "content" not in entry and not entry.keys() <= _TAG_KEYS:
        # Its text is under a key this reader does not read: refuse rather than blank it.
        shown = ", ".join(map(str, list(entry)[:8]))
        raise FormatError("unreadable_turn", f"a turn with neither value nor content (its keys: {shown})")
    if "from" in entry:
        return entry.get("from"), entry.get("value")
    return entry.get("role"), entry.get("content")


def _content(value: Any, discarded: dict) -> tuple[str, list]:
    """Text and raw calls of a turn's value: a string, or v1 blocks (reasoning to ``discarded``)."""
    if not isinstance(value, list):
        return block_text(value), []
    texts, calls = [], []
    for block in value:
        if isinstance(block, dict) and block.get("type") == "tool_call":
            calls.extend(_parse_calls(block.get("value")))
        else:
            text = part_text(block)
            if text:
                texts.append(text)
            elif text is None:
                note_reasoning(block, discarded)
    return JOIN.join(texts), calls


def sharegpt_to_flat(turns: list, system: Any = None, discarded: dict | None = None) -> list:
    out = []
    discarded = {} if discarded is None else discarded
    if isinstance(system, str) and system:
        out.append({"role": "system", "content": system})
    ids = IdAllocator()
    pending: list[dict] = []  # calls made since the last turn that was neither call nor result
    index = 0
    while index < len(turns):
        entry = turns[index]
        if not isinstance(entry, dict):
            out.append(entry)  # the core drops it, counted
            pending = []
            index += 1
            continue
        tag, value = _turn(entry)
        role = _ROLES.get(tag, tag) if isinstance(tag, str) else tag
        if role == "tool":
            # The whole run of consecutive results answers the pending calls together.
            run = []
            while index < len(turns) and isinstance(turns[index], dict):
                tag, value = _turn(turns[index])
                if not isinstance(tag, str) or _ROLES.get(tag, tag) != "tool":
                    break
                run.append(_content(value, discarded)[0])
                index += 1
            if len(run) == 1 and len(pending) > 1:
                run = _split_batch(run[0], len(pending)) or run
            for k, text in enumerate(run):
                call_id = pending[k]["tool_call_id"] if k < len(pending) else None  # extra: an orphan
                out.append({"role": "tool", "content": text, "tool_call_id": call_id})
            pending = []
            continue
        if tag == "function_call":
            text, calls = "", _parse_calls(value)
        else:
            text, calls = _content(value, discarded)
        message = {"role": role, "content": text}
        if calls:
            many = len(calls) > 1
            message["tool_calls"] = [
                {"tool_call_id": ids.new(index, n if many else None), **call} for n, call in enumerate(calls)
            ]
            pending.extend(message["tool_calls"])
        else:
            pending = []
        out.append(message)
        index += 1
    return out


def read_sharegpt(record: Any, messages_field: str) -> Conversation:
    discarded: dict = {}
    if isinstance(record, list):
        return Conversation(sharegpt_to_flat(record, None, discarded), {}, discarded or None)
    if not isinstance(record, dict):
        raise FormatError("not_a_record", f"a record is an object or a list, not {type(record).__name__}")
    key = "conversations" if isinstance(record.get("conversations"), list) else messages_field
    turns = record.get(key)
    if not isinstance(turns, list):
        raise FormatError("missing_conversations", f"no list at 'conversations' or {messages_field!r}")
    system = record.get("system")
    # The message field, if that is where the turns were, stays for the job to replace in place;
    # a system column that is not text is not read, so it is carried.
    consumed = ("conversations",) if key == "conversations" else ()
    if isinstance(system, str) or system is None:
        consumed += ("system",)
    fields = record_fields(record, consumed)
    if "tools" in fields:
        fields["tools"] = parse_tools_text(fields["tools"])
    return Conversation(sharegpt_to_flat(turns, system, discarded), fields, discarded or None)


def _sharegpt_turn(entry: Any) -> bool:
    if not isinstance(entry, dict):
        return False
    if "from" in entry and "value" in entry:
        return True
    if entry.get("role") in _TOOL_TAGS:
        return True
    content = entry.get("content")
    # v1 blocks spell the text "value", never "text".
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") in _V1_TYPES and "value" in b and "text" not in b for b in content
    )


def _any_sharegpt_turn(entries: list) -> bool:
    for entry in entries:
        # The usual chat message first (detection runs on every record): a role and text.
        if entry.__class__ is dict and "from" not in entry and entry.get("content").__class__ is not list:
            if entry.get("role") in _TOOL_TAGS:
                return True
        elif _sharegpt_turn(entry):
            return True
    return False


def detect_sharegpt(record: Any, messages_field: str) -> bool:
    if isinstance(record, list):
        return _any_sharegpt_turn(record)
    if not isinstance(record, dict):
        return False
    for key in ("conversations", messages_field):
        turns = record.get(key)
        if isinstance(turns, list) and _any_sharegpt_turn(turns):
            return True
    return False


SHAREGPT_READER = register_reader(
    Reader(
        "sharegpt",
        read_sharegpt,
        detect_sharegpt,
        priority=20,
        description="ShareGPT / LLaMA-Factory conversations (function_call / observation, v1 blocks)",
    )
)
