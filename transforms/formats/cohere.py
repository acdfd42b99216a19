"""Cohere v1 chat: a reader for logged ``/v1/chat`` requests and responses (no writer).

A v1 record is ``{"message"?, "chat_history"?: [...], "preamble"?, "tools"?, "tool_results"?,
...}`` (cohere-python ``BaseCohere.chat``; a response holds ``text`` and the updated
``chat_history``). Entries are ``{"role": "USER" | "CHATBOT" | "SYSTEM", "message", "tool_calls"?}``
or ``{"role": "TOOL", "tool_results": [{"call": {"name", "parameters"}, "outputs": [...]}]}``:

- ``preamble`` → a leading system message; ``SYSTEM`` → system, ``USER`` → user, ``CHATBOT`` →
  assistant (its ``message`` the content);
- a ``CHATBOT``'s ``tool_calls`` ``{name, parameters}`` → calls, ``args`` the ``parameters``
  object; v1 has no call ids, so each gets a position-derived one (``call_<entry index>``, or
  ``call_<entry index>_<n>`` for the n-th of several, as every reader derives them);
- each ``tool_result`` → one ``tool`` message, its content the compact JSON of ``outputs``
  (a list of objects), paired by v1's own rule: the call it repeats (the same name and
  parameters) among the still-unanswered calls of the last ``CHATBOT`` turn, else the first
  unanswered one of that name, else none (MEM-5 drops it as an orphan, counted);
- the top-level ``tool_results`` answer the last ``CHATBOT`` turn's calls the same way, and a
  non-empty top-level ``message`` is the last user message (``""`` when a request sends results);
- single-step tool use (``force_single_step``: the history's last turn has no unanswered call,
  the request repeats the user's ``message`` beside ``tool_results``): the user message, then
  an assistant turn of the calls the results repeat (each ``call`` read as the call, its id
  ``call_<len(chat_history)>[_n]``), then the results;
- ``tools`` ``{name, description, parameter_definitions: {p: {type, description, required}}}``
  → bare schemas ``{name, description?, parameters: {type: object, properties, required}}`` (v1
  types ``str``, ``int``, ``float``, ``bool``, ``list``/``List[...]``, ``dict``/``Dict[...]`` map to
  JSON Schema types; another type is kept as its ``description``), read by every writer.

Other keys of an entry, and the ``call`` a result repeats (its pairing key), go to the
ledger; every other field of the record is carried. Roles other than the four are kept as
they are (a writer refuses them, naming ``--map-role``).
"""

from __future__ import annotations

import json
from typing import Any

from transforms.core.ledger import note, note_unread_keys
from transforms.core.normalize import content_text
from transforms.formats._common import IdAllocator, record_fields
from transforms.formats.base import Conversation, FormatError, Reader, not_a_record, register_reader

NAME = "cohere-v1"
_ROLES = {"USER": "user", "CHATBOT": "assistant", "SYSTEM": "system", "TOOL": "tool"}
_ENTRY_READ = frozenset(("role", "message", "tool_calls", "tool_results"))
_CONSUMED = ("chat_history", "message", "preamble", "tool_results", "tools")
_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "list": "array", "dict": "object"}


def _same_call(call: dict[str, Any], pending: tuple[str, Any, Any]) -> bool:
    return bool(call.get("name") == pending[1] and call.get("parameters") == pending[2])


def _answer(
    result: Any, pending: list[tuple[str, Any, Any]], discarded: dict[str, Any], call_read: bool = False
) -> dict[str, Any]:
    """The tool message of one ``tool_result``; takes the call it answers off ``pending``. The
    ``call`` it repeats is only its pairing key: left out, counted in the ledger (``call``),
    unless it was read as the call itself (``call_read``: single-step tool use)."""
    call = result.get("call") if isinstance(result, dict) else None
    if not call_read:
        note(discarded, "call", call.get("parameters") if isinstance(call, dict) else call)
    call = call if isinstance(call, dict) else {}
    index = next((k for k, p in enumerate(pending) if _same_call(call, p)), None)
    if index is None:
        index = next((k for k, p in enumerate(pending) if p[1] == call.get("name")), None)
    call_id = pending.pop(index)[0] if index is not None else None
    outputs = result.get("outputs") if isinstance(result, dict) else None
    text = json.dumps(outputs, ensure_ascii=False, separators=(",", ":")) if outputs is not None else ""
    return {"role": "tool", "content": text, "tool_call_id": call_id}


def cohere_to_flat(record: dict[str, Any], discarded: dict[str, Any]) -> list[Any]:
    history = record.get("chat_history") or []
    if not isinstance(history, list):
        raise FormatError("history_not_a_list", f"'chat_history' is {type(history).__name__}, not a list")
    out: list[Any] = []
    preamble = record.get("preamble")
    if isinstance(preamble, str) and preamble:
        out.append({"role": "system", "content": preamble})
    ids = IdAllocator(set())
    pending: list[tuple[str, Any, Any]] = []  # (id, name, parameters) of the last CHATBOT's unanswered calls
    for index, entry in enumerate(history):
        if not isinstance(entry, dict):
            out.append(entry)  # the core drops it, counted
            continue
        note_unread_keys(entry, _ENTRY_READ, discarded)
        role = entry.get("role")
        role = _ROLES.get(role, role) if isinstance(role, str) else role
        if role == "tool":
            results = entry.get("tool_results")
            out.extend(_answer(r, pending, discarded) for r in (results if isinstance(results, list) else ()))
            continue
        message: dict[str, Any] = {"role": role, "content": content_text(entry.get("message") or "")}
        calls = entry.get("tool_calls")
        if role == "assistant":
            pending = []
        if role == "assistant" and isinstance(calls, list) and calls:
            message["tool_calls"] = _flat_calls(calls, index, ids, pending)
        out.append(message)
    results = record.get("tool_results")
    results = results if isinstance(results, list) else []
    current = record.get("message")
    if results and not pending and isinstance(current, str) and current:
        # Single-step tool use (``force_single_step``): the request repeats the user's message
        # beside the results of the calls the model made for it, each result's ``call`` the call.
        out.append({"role": "user", "content": current})
        out.append(_calls_of(results, len(history), ids, pending))
        out.extend(_answer(r, pending, discarded, call_read=True) for r in results)
        return out
    out.extend(_answer(r, pending, discarded) for r in results)
    if isinstance(current, str) and current:
        out.append({"role": "user", "content": current})
    return out


def _flat_calls(calls: list[Any], index: int, ids: IdAllocator, pending: list[tuple[str, Any, Any]]) -> list[Any]:
    """v1 calls ``{name, parameters}`` (anything else read as ``{}``) as flat calls, their ids
    derived from the entry ``index``; each one added to ``pending``."""
    several = len(calls) > 1
    flat_calls = []
    for n, call in enumerate(calls):
        call = call if isinstance(call, dict) else {}
        call_id = ids.new(index, n if several else None)
        flat = {"tool_call_id": call_id, "name": call.get("name")}
        if call.get("parameters") is not None:
            flat["args"] = call["parameters"]
        flat_calls.append(flat)
        pending.append((call_id, call.get("name"), call.get("parameters")))
    return flat_calls


def _calls_of(results: list[Any], index: int, ids: IdAllocator, pending: list[tuple[str, Any, Any]]) -> dict[str, Any]:
    """The assistant turn of the calls single-step results repeat (``call``: name, parameters)."""
    calls = [r.get("call") if isinstance(r, dict) else None for r in results]
    return {"role": "assistant", "content": "", "tool_calls": _flat_calls(calls, index, ids, pending)}


def _parameters(definitions: Any) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required = []
    for name, spec in (definitions if isinstance(definitions, dict) else {}).items():
        spec = spec if isinstance(spec, dict) else {}
        kind = spec.get("type")
        base = kind.split("[", 1)[0].lower() if isinstance(kind, str) else None
        schema: dict[str, Any] = {}
        if base in _TYPES:
            schema["type"] = _TYPES[base]
        description = spec.get("description")
        if isinstance(description, str):
            schema["description"] = description
        elif isinstance(kind, str) and base not in _TYPES:
            schema["description"] = kind
        properties[name] = schema
        if spec.get("required") is True:
            required.append(name)
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    return out


def cohere_tools(tools: Any) -> Any:
    """v1 tool definitions as bare schemas ``{name, description?, parameters}``."""
    if not isinstance(tools, list):
        return tools
    out = []
    for tool in tools:
        if not isinstance(tool, dict) or "parameter_definitions" not in tool and "name" not in tool:
            out.append(tool)
            continue
        schema = {"name": tool.get("name")}
        if isinstance(tool.get("description"), str):
            schema["description"] = tool["description"]
        schema["parameters"] = _parameters(tool.get("parameter_definitions"))
        out.append(schema)
    return out


def read_cohere(record: Any, messages_field: str) -> Conversation:
    if not isinstance(record, dict):
        raise not_a_record(record)
    discarded: dict[str, Any] = {}
    flat = cohere_to_flat(record, discarded)
    fields = record_fields(record, _CONSUMED)
    if "tools" in record:
        fields["tools"] = cohere_tools(record["tools"])
    return Conversation(flat, fields, discarded=discarded or None)


def _v1_entry(entry: Any) -> bool:
    return isinstance(entry, dict) and entry.get("role") in _ROLES and ("message" in entry or "tool_results" in entry)


def detect_cohere(record: Any, messages_field: str) -> bool:
    """An object without a message list at the message field whose ``chat_history`` holds a v1
    entry (upper-case role, ``message`` or ``tool_results``), or whose ``message`` is a string
    beside a ``preamble``, a ``chat_history`` list, a ``tool_results`` list or v1 tools (their
    ``parameter_definitions``)."""
    if not isinstance(record, dict) or isinstance(record.get(messages_field), list):
        return False
    history = record.get("chat_history")
    if isinstance(history, list) and any(_v1_entry(e) for e in history):
        return all(_v1_entry(e) or not isinstance(e, dict) for e in history)
    tools = record.get("tools")
    v1_tools = isinstance(tools, list) and any(isinstance(t, dict) and "parameter_definitions" in t for t in tools)
    return isinstance(record.get("message"), str) and (
        isinstance(history, list)
        or isinstance(record.get("preamble"), str)
        or isinstance(record.get("tool_results"), list)
        or v1_tools
    )


COHERE_READER = register_reader(
    Reader(
        NAME,
        read_cohere,
        detect_cohere,
        priority=45,
        description="Cohere v1 chat (message, chat_history of USER / CHATBOT / SYSTEM / TOOL, preamble)",
    )
)
