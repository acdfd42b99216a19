"""FlowDrop MEM-5 conversation normalization, exactly as resolved in NORMALIZATION.md.

``normalize_conversation(messages)`` takes one logged message list and returns a
``NormalizeResult``: the provider-sendable list, the number of entries dropped, the drops by
reason and the number of synthetic "interrupted" results inserted.

The four rules run in order:

1. coerce every entry to the flat shape (drop non-objects and role-less entries, cast
   content to text, read calls leniently);
2. move ``system`` messages to the front (stable partition);
3. repair tool pairing (step A declarations, step B results, step C unanswered calls);
4. strip ``tool`` messages leading the list after the system group, then run rule 3 again.

Pure: no Beam, no I/O, no global state, and the input is never mutated. ``dropped`` is
counted by the operations that drop, one by one, never derived from list lengths: an unusable
id can cost three drops from a list of two.

Usage::

    >>> from transforms.normalize import normalize_conversation
    >>> normalize_conversation([{"role": "user", "content": 42}]).messages
    [{'role': 'user', 'content': '42'}]
"""

from __future__ import annotations

from typing import Any, NamedTuple

from transforms.jsontext import compact_json, int_text

__all__ = [
    "INTERRUPTED_RESULT",
    "REASONS",
    "NormalizeResult",
    "coerce_messages",
    "content_text",
    "normalize_conversation",
    "pairing_key",
    "raw_call_id",
    "system_first",
    "usable_id",
]

#: The closed list of drop reasons, in the order the rules can produce them.
REASONS = (
    "not_an_object",
    "no_role",
    "unusable_call",
    "redeclared_call",
    "emptied_turn",
    "orphan_result",
    "duplicate_result",
    "leading_tool",
)

#: Content of the synthetic result that answers a call left unanswered (MEM-3).
INTERRUPTED_RESULT = "Tool call was interrupted; no result."


class NormalizeResult(NamedTuple):
    """What normalization returns for one conversation."""

    messages: list[Any]
    dropped: int
    drops: dict[str, int]
    healed: int


class _DropLog:
    """Counts drops at the moment they happen: ``dropped`` and the per-reason tally together."""

    __slots__ = ("dropped", "by_reason")

    def __init__(self) -> None:
        self.dropped = 0
        self.by_reason: dict[str, int] = {}

    def add(self, reason: str) -> None:
        self.dropped += 1
        self.by_reason[reason] = self.by_reason.get(reason, 0) + 1

    def report(self) -> dict[str, int]:
        # Canonical reason order, so that serialized reports are byte-stable.
        if not self.by_reason:
            return {}  # most conversations
        return {r: self.by_reason[r] for r in REASONS if r in self.by_reason}


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


def _read_call(call: Any) -> Any:
    """Read one call leniently (provider-shaped calls included); junk passes through.

    A call that is not an object is left as it is, for rule 3 to drop as ``unusable_call``.
    The id is kept raw here: step A decides whether it is usable.
    """
    if not isinstance(call, dict):
        return call
    get = call.get
    call_id = get("tool_call_id")  # raw_call_id, inlined: once per call
    if call_id is None:
        call_id = get("id")
    name = get("name")
    args = get("args")
    if args is None:
        args = get("arguments")
    if name is None or args is None:
        function = get("function")
        if isinstance(function, dict):
            if name is None:
                name = function.get("name")
            if args is None:
                args = function.get("arguments")
    if name is None:
        name = ""
    elif name.__class__ is not str:
        name = content_text(name)
    if args is None:
        return {"tool_call_id": call_id, "name": name}
    return {"tool_call_id": call_id, "name": name, "args": args}


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
_PLAIN_ROLES = frozenset(("system", "user", "assistant", "tool"))


def _coerce(messages: list[Any], log: _DropLog) -> list[Any]:
    out: list[Any] = []
    append = out.append
    for entry in messages:
        if not isinstance(entry, dict):
            log.add("not_an_object")
            continue
        role = entry.get("role")
        if role.__class__ is not str or role not in _PLAIN_ROLES:
            if not isinstance(role, str) or not role.strip():
                log.add("no_role")
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
                append({"role": role, "content": content, "tool_calls": [_read_call(c) for c in calls]})
                continue
        elif role == "tool":
            call_id = entry.get("tool_call_id")
            if call_id is None:
                call_id = pairing_key(entry, "tool_call_id")
            append({"role": role, "content": content, "tool_call_id": call_id})
            continue
        append({"role": role, "content": content})
    return out


def coerce_messages(messages: list[Any]) -> tuple[list[Any], dict[str, int]]:
    """Rule 1 alone: the coerced list and its drops by reason.

    Exposed for opt-in passes that want to work on flat messages before the core runs. Ids
    are still raw here (untrimmed, possibly unusable); rule 3 settles them.
    """
    log = _DropLog()
    return _coerce(messages, log), log.report()


# --------------------------------------------------------------------------------------------
# Rule 2 — system messages first


def system_first(messages: list[Any]) -> list[Any]:
    """Rule 2 alone: a stable partition, system messages first (coerced messages)."""
    systems = [m for m in messages if m["role"] == "system"]
    if not systems or messages[: len(systems)] == systems:  # (compared by identity first)
        return messages  # no system message, or already first: the partition is the list
    return systems + [m for m in messages if m["role"] != "system"]


# --------------------------------------------------------------------------------------------
# Rule 3 — the repair pass


def _repair(messages: list[Any], log: _DropLog) -> tuple[list[Any], int]:
    """One repair pass (steps A, B, C). Returns the new list and how many results it healed."""
    declared: set[str] = set()
    answered: set[str] = set()
    after_b = _answer_results(_declare_calls(messages, declared, log), declared, answered, log)
    if len(answered) == len(declared):
        return after_b, 0  # every call answered: step C has nothing to do
    return _heal_unanswered(after_b, answered)


def _declare_calls(messages: list[Any], declared: set[str], log: _DropLog) -> list[Any]:
    """Step A — declarations: the first declaration of an id owns the pairing (``declared``)."""
    after_a: list[Any] = []
    keep = after_a.append
    for message in messages:
        if "tool_calls" not in message:  # only assistant turns carry calls after rule 1
            keep(message)
            continue
        kept = []
        changed = False
        for call in message["tool_calls"]:
            raw_id = call.get("tool_call_id") if isinstance(call, dict) else None
            call_id = usable_id(raw_id)
            if call_id is None:
                log.add("unusable_call")
                changed = True
            elif call_id in declared:
                log.add("redeclared_call")
                changed = True
            else:
                declared.add(call_id)
                if raw_id != call_id:
                    call = {**call, "tool_call_id": call_id}
                    changed = True
                kept.append(call)
        if not changed:
            keep(message)
        elif kept:
            keep({"role": message["role"], "content": message["content"], "tool_calls": kept})
        elif message["content"].strip():
            keep({"role": message["role"], "content": message["content"]})
        else:
            log.add("emptied_turn")
    return after_a


def _answer_results(messages: list[Any], declared: set[str], answered: set[str], log: _DropLog) -> list[Any]:
    """Step B — results: each declared id is answered by its first usable result, anywhere."""
    after_b: list[Any] = []
    keep = after_b.append
    for message in messages:
        if "tool_call_id" not in message:  # only tool messages carry an id after rule 1
            keep(message)
            continue
        raw_id = message["tool_call_id"]
        call_id = usable_id(raw_id)
        if call_id is None or call_id not in declared:
            log.add("orphan_result")
        elif call_id in answered:
            log.add("duplicate_result")
        else:
            answered.add(call_id)
            if raw_id != call_id:
                message = {"role": "tool", "content": message["content"], "tool_call_id": call_id}
            keep(message)
    return after_b


def _heal_unanswered(messages: list[Any], answered: set[str]) -> tuple[list[Any], int]:
    """Step C — unanswered calls: a synthetic result directly after the declaring turn."""
    healed = 0
    after_c: list[Any] = []
    keep = after_c.append
    for message in messages:
        keep(message)
        if "tool_calls" not in message:
            continue
        for call in message["tool_calls"]:
            call_id = call["tool_call_id"]
            if call_id not in answered:
                keep({"role": "tool", "content": INTERRUPTED_RESULT, "tool_call_id": call_id})
                healed += 1
    return after_c, healed


# --------------------------------------------------------------------------------------------
# Rule 4 — leading-tool guard, then repair again


def _strip_leading_tools(messages: list[Any], log: _DropLog) -> list[Any]:
    start = 0
    while start < len(messages) and messages[start]["role"] == "system":
        start += 1
    end = start
    while end < len(messages) and messages[end]["role"] == "tool":
        log.add("leading_tool")
        end += 1
    if end == start:
        return messages
    return messages[:start] + messages[end:]


def normalize_conversation(messages: Any) -> NormalizeResult:
    """Normalize one conversation by MEM-5 (rules 1-4 of NORMALIZATION.md, in order).

    Input that is not a list normalizes to ``[]`` with nothing dropped: a job routes such a
    record to its dead-letter output before calling this function.
    """
    if not isinstance(messages, list):
        return NormalizeResult([], 0, {}, 0)
    log = _DropLog()
    flat = _coerce(messages, log)
    flat = system_first(flat)
    flat, healed = _repair(flat, log)
    stripped = _strip_leading_tools(flat, log)
    if stripped is flat:
        # Nothing stripped: the second pass would see the first pass's output, where every id
        # is usable and declared once and answered once, and change nothing (drop nothing,
        # heal nothing). Skipping it is the same result, for a third of the core's time.
        return NormalizeResult(flat, log.dropped, log.report(), healed)
    # Rule 4 runs the repair pass again: stripping a leading result can un-answer a call, and
    # the second pass heals it.
    flat, healed_again = _repair(stripped, log)
    return NormalizeResult(flat, log.dropped, log.report(), healed + healed_again)
