"""MEM-5's rule 1: each entry coerced to the flat shape (NORMALIZATION.md, "Rule 1"), content
cast to text by its table, calls read leniently, ids read (``usable_id``) for rule 3.

The by-the-letter pass (``transforms.core.normalize``) calls ``coerce_entries``; the one walk
(``transforms.core.normalize_walk``) inlines its hot path and calls the rest.
"""

from __future__ import annotations

from typing import Any

from transforms.core.jsontext import compact_json, int_text
from transforms.core.normalize_log import DropLog, Trace, TracingLog

# --------------------------------------------------------------------------------------------
# Content casting (rule 1, step 4)


def _json_text(value: Any) -> str:
    """Compact JSON text of a non-scalar, or ``""`` when nothing can serialize it."""
    try:
        return compact_json(value)
    except (TypeError, ValueError, RecursionError):
        return ""


def content_text(content: Any) -> str:
    """Cast a message's content to text by the casting table of rule 1."""
    cls = content.__class__
    if cls is str:
        text: str = content  # the class test is the hot path's narrowing, which mypy cannot see
        return text
    if content is None:
        return ""
    if cls is bool:
        return "true" if content else "false"
    if cls is int:
        return int_text(content)
    if cls is float:
        return float.__repr__(content)
    # Subclasses of the scalar types cast like their base type.
    if isinstance(content, str):
        return str.__str__(content)
    if isinstance(content, bool):
        return "true" if content else "false"
    if isinstance(content, int):
        return int_text(int(content))
    if isinstance(content, float):
        return float.__repr__(content)
    return _json_text(content)


# --------------------------------------------------------------------------------------------
# Rule 1 — coerce each entry


def usable_id(value: Any) -> str | None:
    """The trimmed text of a call id, or ``None`` when the id is unusable.

    Booleans, null and anything neither string nor integer are unusable; an integer becomes
    its decimal text; a string is trimmed. ``""`` and ``"0"`` are unusable (``"0"`` is a legal
    string but a falsy value); ``"00"`` is usable.
    """
    text: str
    cls = value.__class__
    if cls is str:
        text = value.strip()
    elif cls is int:
        text = int_text(value)
    elif isinstance(value, bool) or value is None:
        return None
    elif isinstance(value, int):
        text = int_text(int(value))
    elif isinstance(value, str):
        text = str.__str__(value).strip()
    else:
        return None
    if not text or text == "0":
        return None
    return text


def read_call(call: Any) -> tuple[Any, bool]:
    """Read one call leniently (provider-shaped calls included); junk passes through.

    A call that is not an object is left as it is, for rule 3 to drop as ``unusable_call``.
    The id is kept raw here: step A decides whether it is usable. The flag: the call was read
    whole (``Reading``): each of its keys was read, or is ``type``, and so were the keys of a
    ``function`` object it was read from (a key read twice, or null, makes it ``False``).
    """
    # The two spellings nearly every log uses, with a text name and arguments, read in one
    # step: what the lenient reading gives them (tests/test_core_walk.py holds the two alike).
    if call.__class__ is dict and len(call) == 3:
        if "function" in call and "id" in call and "type" in call:  # {id, type, function}
            function = call["function"]
            if function.__class__ is dict and len(function) == 2:
                name = function.get("name")
                args = function.get("arguments")
                if name.__class__ is str and args is not None:
                    call_id = call["id"]
                    return {"tool_call_id": call_id, "name": name, "args": args}, call_id is not None
        elif "tool_call_id" in call and "name" in call and "args" in call:  # the flat call
            name = call["name"]
            args = call["args"]
            if name.__class__ is str and args is not None:
                call_id = call["tool_call_id"]
                return {"tool_call_id": call_id, "name": name, "args": args}, call_id is not None
    return read_call_leniently(call)


def read_call_leniently(call: Any) -> tuple[Any, bool]:
    """``read_call`` for any spelling (the whole reading of rule 1's call table)."""
    if not isinstance(call, dict):
        return call, False
    get = call.get
    call_id = get("tool_call_id")  # raw_call_id, inlined: once per call
    if call_id is None:
        call_id = get("id")
    name = get("name")
    args = get("args")
    if args is None:
        args = get("arguments")
    read = (call_id is not None) + (name is not None) + (args is not None) + ("type" in call)
    if name is None or args is None:
        function = get("function")
        if isinstance(function, dict):
            inner = len(function)
            if name is None:
                name = function.get("name")
                inner -= name is not None
            if args is None:
                args = function.get("arguments")
                inner -= args is not None
            read += inner == 0
    whole = read == len(call)
    if name is None:
        name = ""
    elif name.__class__ is not str:
        name = content_text(name)
    if args is None:
        return {"tool_call_id": call_id, "name": name}, whole
    return {"tool_call_id": call_id, "name": name, "args": args}, whole


def raw_call_id(call: dict[str, Any]) -> Any:
    """The id a call declares, as the core reads it (not yet checked): ``tool_call_id``, else ``id``."""
    call_id = call.get("tool_call_id")
    return call.get("id") if call_id is None else call_id


def pairing_key(entry: dict[str, Any], key: str) -> Any:
    """A message's ``tool_calls`` or ``tool_call_id`` as the core reads it (not yet checked)."""
    # Stored-buffer rows keep pairing keys under ``metadata``.
    value = entry.get(key)
    if value is None:
        metadata = entry.get("metadata")
        if isinstance(metadata, dict):
            value = metadata.get(key)
    return value


# Roles that need no blank check: the hot path of rule 1.
PLAIN_ROLES = frozenset(("system", "user", "assistant", "tool"))


def coerce_entries(messages: list[Any], log: DropLog) -> list[Any]:
    out: list[Any] = []
    append = out.append
    for entry in messages:
        if not isinstance(entry, dict):
            log.add("not_an_object", entry)
            continue
        role = entry.get("role")
        if role.__class__ is not str or role not in PLAIN_ROLES:
            if not isinstance(role, str) or not role.strip():
                log.add("no_role", entry)
                continue
            role = str.__str__(role)
        content = entry.get("content")
        if content.__class__ is not str:
            content = content_text(content)
        # pairing_key's own key first, inlined (its metadata fallback only when that is null).
        if role == "assistant":
            calls = entry.get("tool_calls")
            if calls is None:
                calls = pairing_key(entry, "tool_calls")
            if isinstance(calls, list) and calls:
                append({"role": role, "content": content, "tool_calls": [read_call(c)[0] for c in calls]})
                continue
        elif role == "tool":
            call_id = entry.get("tool_call_id")
            if call_id is None:
                call_id = pairing_key(entry, "tool_call_id")
            append({"role": role, "content": content, "tool_call_id": call_id})
            continue
        append({"role": role, "content": content})
    return out


def coerce_messages(messages: list[Any], trace: Trace | None = None) -> tuple[list[Any], dict[str, int]]:
    """Rule 1 alone: the coerced list and its drops by reason.

    Exposed for opt-in passes that want to work on flat messages before the core runs. Ids
    are still raw here (untrimmed, possibly unusable); rule 3 settles them. With ``trace``:
    its drop events, and ``trace.origins`` the input index of each coerced message.
    """
    if trace is None:
        log = DropLog()
        return coerce_entries(messages, log), log.report()
    tracing = TracingLog(messages, trace)
    coerced = coerce_entries(messages, tracing)
    tracing.coerced(coerced)
    tracing.finish(coerced)
    return coerced, tracing.report()
