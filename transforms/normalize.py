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

``normalize_conversation(messages, trace=Trace())`` also records, in the same pass, what each
rule did to each entry: an ``Event`` per drop (the same calls that count the drops record it,
so the two cannot disagree), per system message moved, per id trimmed, per result healed, and
for each output message the input entry it came from. Off by default (``trace=None``), where
the pass is exactly the one that counts; ``convnorm explain`` and the report use it.

Usage::

    >>> from transforms.normalize import normalize_conversation
    >>> normalize_conversation([{"role": "user", "content": 42}]).messages
    [{'role': 'user', 'content': '42'}]
"""

from __future__ import annotations

from typing import Any, NamedTuple

from transforms.jsontext import compact_json, int_text

__all__ = [
    "CALL_REASONS",
    "INTERRUPTED_RESULT",
    "REASONS",
    "Event",
    "NormalizeResult",
    "Reading",
    "Trace",
    "coerce_messages",
    "content_text",
    "moved_by_system_first",
    "normalize_conversation",
    "normalize_read",
    "pairing_key",
    "raw_call_id",
    "split_drops",
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

#: The reasons that remove a call from inside an assistant turn, not a message from the list:
#: ``messages in - messages dropped + healed = messages out`` counts every other reason.
CALL_REASONS = frozenset({"unusable_call", "redeclared_call"})


def split_drops(drops: dict[str, int]) -> tuple[dict[str, int], dict[str, int]]:
    """Drops by reason as ``(messages removed from the list, calls removed from turns that
    stayed)``: MEM-5's count is both; the messages alone add up (in - messages + healed = out)."""
    messages = {reason: n for reason, n in drops.items() if reason not in CALL_REASONS}
    return messages, {reason: n for reason, n in drops.items() if reason in CALL_REASONS}


#: Content of the synthetic result that answers a call left unanswered (MEM-3).
INTERRUPTED_RESULT = "Tool call was interrupted; no result."


class NormalizeResult(NamedTuple):
    """What normalization returns for one conversation."""

    messages: list[Any]
    dropped: int
    drops: dict[str, int]
    healed: int


class Reading(NamedTuple):
    """How rule 1 found the input, beside the result (``normalize_read``)."""

    #: Every entry was an object with a role among ``system``, ``user``, ``assistant``,
    #: ``tool``, a ``content`` of text or null, and no other key but the pairing key, at the
    #: top level (a result's id, a turn's list of calls); every call an object with an id, in
    #: a spelling the lenient reading reads (``tool_call_id`` or ``id``, ``name``, ``args`` or
    #: ``arguments``, a ``function`` object of ``name`` and ``arguments``; and ``type``), each
    #: key read once. Nothing was dropped by rule 1, cast from another type or left unread.
    whole: bool
    #: Some call was read from a ``function`` object (the provider spelling).
    function_calls: bool


#: The four readings, made once (``_READINGS[whole][function_calls]``): the walk gives one a
#: conversation, and a NamedTuple costs a call to build.
_READINGS = ((Reading(False, False), Reading(False, True)), (Reading(True, False), Reading(True, True)))

#: ``_DropLog.add``'s ``call`` when the drop is of an entry, not of a call (a call may be ``None``).
NO_CALL: Any = object()


class Event(NamedTuple):
    """One thing a rule did to one entry of the input list (recorded with ``trace``)."""

    #: ``dropped``, ``moved`` (rule 2), ``rekeyed`` (an id trimmed or read as text) or
    #: ``healed`` (a synthetic result added for an unanswered call).
    kind: str
    #: The drop reason (``REASONS``), ``system_first``, ``id_trimmed``, ``id_as_text`` or
    #: ``unanswered_call``.
    reason: str
    #: The entry's index in the input list (healed: the turn that declares the call); ``None``
    #: for an entry the core made itself (a synthetic result).
    entry: int | None
    #: The call's index in that entry's ``tool_calls`` (events on one call), else ``None``.
    call: int | None = None
    #: The id concerned, as text (``' c1' -> 'c1'`` for a trimmed one).
    detail: str = ""
    #: Which repair pass (1, or 2 after rule 4) made it; 0 for rules 1 and 2.
    repair_pass: int = 0


class Trace:
    """What ``normalize_conversation(messages, trace=...)`` did, filled in the same pass.

    ``events``: in the order the rules made them. ``origins``: for each output message, the
    index of the input entry it came from, or ``None`` for a synthetic result.
    """

    __slots__ = ("events", "origins")

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.origins: list[int | None] = []


class _DropLog:
    """Counts drops at the moment they happen: ``dropped`` and the per-reason tally together.

    The rules hand it the entry (and call) each drop concerns, and call ``renamed``,
    ``rebuilt`` and ``healed`` on their rare paths: no-ops here, recorded by ``_TracingLog``.
    """

    __slots__ = ("dropped", "by_reason", "repair_pass")

    def __init__(self) -> None:
        self.dropped = 0
        self.by_reason: dict[str, int] = {}
        self.repair_pass = 0

    def add(self, reason: str, entry: Any = None, call: Any = NO_CALL) -> None:
        self.dropped += 1
        self.by_reason[reason] = self.by_reason.get(reason, 0) + 1

    def renamed(self, new: Any, old: Any, turn: Any, raw_id: Any) -> None:
        """``new`` replaces ``old`` (a call of ``turn``, or a result) with its id made usable."""

    def rebuilt(self, new: Any, old: Any) -> None:
        """``new`` replaces the message ``old`` (fewer calls, or none)."""

    def healed(self, result: Any, turn: Any, call_id: str) -> None:
        """``result`` answers ``call_id`` of ``turn`` (step C)."""

    def report(self) -> dict[str, int]:
        # Canonical reason order, so that serialized reports are byte-stable.
        if not self.by_reason:
            return {}  # most conversations
        return {r: self.by_reason[r] for r in REASONS if r in self.by_reason}


class _TracingLog(_DropLog):
    """A ``_DropLog`` that also records an ``Event`` for each thing done to an entry.

    Entries are followed by identity: each message and call the rules make is mapped to the
    input entry (and call) it stands for, and kept alive, so that an id is never reused.
    """

    __slots__ = ("trace", "_size", "_entry", "_call", "_input", "_coerce_drops", "_alive")

    def __init__(self, messages: list[Any], trace: Trace) -> None:
        super().__init__()
        self.trace = trace
        self._size = len(messages)
        self._entry: dict[int, int] = {}  # id(message) -> input index
        self._call: dict[int, tuple[int, int]] = {}  # id(call) -> (input index, call index)
        self._input: dict[int, list[int]] = {}  # id(input entry) -> its indices not yet seen
        for index, entry in enumerate(messages):
            self._input.setdefault(id(entry), []).append(index)
        self._coerce_drops: set[int] = set()
        self._alive: list[Any] = [messages]

    def _record(self, kind: str, reason: str, entry: int | None, call: int | None = None, detail: str = "") -> None:
        self.trace.events.append(Event(kind, reason, entry, call, detail, self.repair_pass))

    def add(self, reason: str, entry: Any = None, call: Any = NO_CALL) -> None:
        super().add(reason)
        if self.repair_pass == 0:  # rule 1: an input entry, before any flat message exists
            index = self._input[id(entry)].pop(0)
            self._coerce_drops.add(index)
            self._record("dropped", reason, index)
            return
        where = self._entry.get(id(entry))
        if call is NO_CALL:
            self._record("dropped", reason, where, None, _id_text(entry))
        else:
            self._record("dropped", reason, where, self._call_index(entry, call), _id_text(call))

    def _call_index(self, turn: Any, call: Any) -> int | None:
        known = self._call.get(id(call))
        if known is not None:
            return known[1]
        # A call that is no object (shared identity: small ints, strings) is dropped in the first
        # pass, where a turn's calls are its input calls one for one: the first not yet reported.
        calls = turn["tool_calls"]
        reported = {e.call for e in self.trace.events if e.entry == self._entry.get(id(turn)) and e.call is not None}
        return next((k for k, c in enumerate(calls) if c is call and k not in reported), None)

    def coerced(self, flat: list[Any]) -> None:
        """After rule 1: each flat message stands for the input entry it was made from."""
        kept = [i for i in range(self._size) if i not in self._coerce_drops]
        for message, index in zip(flat, kept):
            self._entry[id(message)] = index
            for k, call in enumerate(message.get("tool_calls", ())):
                self._call[id(call)] = (index, k)
        self._alive.append(flat)

    def moved(self, before: list[Any]) -> None:
        """Rule 2: each system message that had another message before it moved to the front."""
        for position in moved_by_system_first(before):
            self._record("moved", "system_first", self._entry.get(id(before[position])))

    def renamed(self, new: Any, old: Any, turn: Any, raw_id: Any) -> None:
        self._alive.append(old)
        reason = "id_as_text" if not isinstance(raw_id, str) else "id_trimmed"
        detail = f"{raw_id!r} -> {new['tool_call_id']!r}"
        if turn is None:  # a result
            self._entry[id(new)] = where = self._entry.get(id(old), -1)
            self._record("rekeyed", reason, where, None, detail)
            return
        self._call[id(new)] = known = self._call.get(id(old), (self._entry.get(id(turn), -1), -1))
        self._record("rekeyed", reason, known[0], known[1], detail)

    def rebuilt(self, new: Any, old: Any) -> None:
        self._alive.append(old)
        where = self._entry.get(id(old))
        if where is not None:
            self._entry[id(new)] = where

    def healed(self, result: Any, turn: Any, call_id: str) -> None:
        self._alive.append(result)
        known = next((self._call.get(id(c)) for c in turn["tool_calls"] if c["tool_call_id"] == call_id), None)
        entry = self._entry.get(id(turn)) if known is None else known[0]
        self._record("healed", "unanswered_call", entry, None if known is None else known[1], call_id)

    def finish(self, messages: list[Any]) -> None:
        self.trace.origins = [self._entry.get(id(message)) for message in messages]


def _id_text(item: Any) -> str:
    """The id a dropped call or result carried, as text for its event ("" when none)."""
    if not isinstance(item, dict):
        return ""
    value = item.get("tool_call_id")
    return "" if value is None else str(value)


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


def _read_call(call: Any) -> tuple[Any, bool]:
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
    return _read_call_leniently(call)


def _read_call_leniently(call: Any) -> tuple[Any, bool]:
    """``_read_call`` for any spelling (the whole reading of rule 1's call table)."""
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
_PLAIN_ROLES = frozenset(("system", "user", "assistant", "tool"))


def _coerce(messages: list[Any], log: _DropLog) -> list[Any]:
    out: list[Any] = []
    append = out.append
    for entry in messages:
        if not isinstance(entry, dict):
            log.add("not_an_object", entry)
            continue
        role = entry.get("role")
        if role.__class__ is not str or role not in _PLAIN_ROLES:
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
                append({"role": role, "content": content, "tool_calls": [_read_call(c)[0] for c in calls]})
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
        log = _DropLog()
        return _coerce(messages, log), log.report()
    tracing = _TracingLog(messages, trace)
    coerced = _coerce(messages, tracing)
    tracing.coerced(coerced)
    tracing.finish(coerced)
    return coerced, tracing.report()


# --------------------------------------------------------------------------------------------
# Rule 2 — system messages first


def moved_by_system_first(messages: list[Any]) -> list[int]:
    """Positions of the system messages that rule 2 moves: those with another message before them."""
    moved: list[int] = []
    seen_other = False
    for position, message in enumerate(messages):
        if message["role"] != "system":
            seen_other = True
        elif seen_other:
            moved.append(position)
    return moved


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
    return _heal_unanswered(after_b, answered, log)


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
                log.add("unusable_call", message, call)
                changed = True
            elif call_id in declared:
                log.add("redeclared_call", message, call)
                changed = True
            else:
                declared.add(call_id)
                if raw_id != call_id:
                    renamed = {**call, "tool_call_id": call_id}
                    log.renamed(renamed, call, message, raw_id)
                    call = renamed
                    changed = True
                kept.append(call)
        if not changed:
            keep(message)
        elif kept:
            rebuilt = {"role": message["role"], "content": message["content"], "tool_calls": kept}
            log.rebuilt(rebuilt, message)
            keep(rebuilt)
        elif message["content"].strip():
            rebuilt = {"role": message["role"], "content": message["content"]}
            log.rebuilt(rebuilt, message)
            keep(rebuilt)
        else:
            log.add("emptied_turn", message)
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
            log.add("orphan_result", message)
        elif call_id in answered:
            log.add("duplicate_result", message)
        else:
            answered.add(call_id)
            if raw_id != call_id:
                renamed = {"role": "tool", "content": message["content"], "tool_call_id": call_id}
                log.renamed(renamed, message, None, raw_id)
                message = renamed
            keep(message)
    return after_b


def _heal_unanswered(messages: list[Any], answered: set[str], log: _DropLog) -> tuple[list[Any], int]:
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
                result = {"role": "tool", "content": INTERRUPTED_RESULT, "tool_call_id": call_id}
                log.healed(result, message, call_id)
                keep(result)
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
        log.add("leading_tool", messages[end])
        end += 1
    if end == start:
        return messages
    return messages[:start] + messages[end:]


def normalize_conversation(messages: Any, trace: Trace | None = None) -> NormalizeResult:
    """Normalize one conversation by MEM-5 (rules 1-4 of NORMALIZATION.md, in order).

    Input that is not a list normalizes to ``[]`` with nothing dropped: a job routes such a
    record to its dead-letter output before calling this function. With ``trace`` (a fresh
    ``Trace``), the same pass also records what it did to each entry; the result is the same.
    """
    if trace is not None:
        return _by_the_letter(messages, trace)  # the trace follows the rules step by step
    return _normalize(messages, False)[0]


def normalize_read(messages: Any) -> tuple[NormalizeResult, Reading]:
    """``normalize_conversation(messages)``, and how rule 1 found the input (``Reading``)."""
    return _normalize(messages, True)


def _normalize(messages: Any, reading_wanted: bool) -> tuple[NormalizeResult, Reading]:
    if not isinstance(messages, list):
        return NormalizeResult([], 0, {}, 0), Reading(False, False)
    log = _DropLog()
    flat, declared, answered, reading = _walk(messages, log, reading_wanted)
    if flat is None:
        # A result precedes a later declaration of its id: step B must see the whole list.
        return _by_the_letter(messages), reading
    healed = 0
    if len(answered) != len(declared):
        flat, healed = _heal_unanswered(flat, answered, log)  # step C
    stripped = _strip_leading_tools(flat, log)
    if stripped is flat:
        # Nothing stripped: the second pass would see the first pass's output, where every id
        # is usable and declared once and answered once, and change nothing (drop nothing,
        # heal nothing). Skipping it is the same result, for a third of the core's time.
        return NormalizeResult(flat, log.dropped, log.report(), healed), reading
    # (Not reached from a walk: a kept result follows the turn that declares it. Kept so that
    # rule 4 is applied here exactly as written.)
    flat, healed_again = _repair(stripped, log)
    return NormalizeResult(flat, log.dropped, log.report(), healed + healed_again), reading


def _by_the_letter(messages: Any, trace: Trace | None = None) -> NormalizeResult:
    """Rules 1-4 as NORMALIZATION.md writes them, one pass per step; with ``trace``, what each
    rule did to each entry, recorded as it does it."""
    if not isinstance(messages, list):
        return NormalizeResult([], 0, {}, 0)
    tracing = None if trace is None else _TracingLog(messages, trace)
    log = _DropLog() if tracing is None else tracing
    coerced = _coerce(messages, log)
    flat = system_first(coerced)
    if tracing is not None:
        tracing.coerced(coerced)
        if flat is not coerced:
            tracing.moved(coerced)
    log.repair_pass = 1
    flat, healed = _repair(flat, log)
    stripped = _strip_leading_tools(flat, log)
    if stripped is flat:
        return _result(flat, log, healed, tracing)  # as above
    # Rule 4 runs the repair pass again: stripping a leading result can un-answer a call, and
    # the second pass heals it.
    log.repair_pass = 2
    flat, healed_again = _repair(stripped, log)
    return _result(flat, log, healed + healed_again, tracing)


def _result(flat: list[Any], log: _DropLog, healed: int, tracing: _TracingLog | None) -> NormalizeResult:
    if tracing is not None:
        tracing.finish(flat)
    return NormalizeResult(flat, log.dropped, log.report(), healed)


# --------------------------------------------------------------------------------------------
# Rules 1, 2 and steps A and B of rule 3 in one walk


def _walk(
    messages: list[Any], log: _DropLog, reading_wanted: bool = True
) -> tuple[list[dict[str, Any]] | None, set[str], set[str], Reading]:
    """Rule 1, steps A and B of the first repair pass, and rule 2, in one walk of the input.

    Returns the list step B gives, the declared and the answered ids, and how rule 1 found
    the input (when ``reading_wanted``; else a reading that says nothing). The list is
    ``None`` when a result comes before the first declaration of its id, which is then
    declared later (step B, which sees every declaration of the list first, must decide it:
    ``_by_the_letter``).

    Why one walk gives the letter's result: rule 2 moves only system messages, which carry no
    calls and no results after rule 1, so steps A and B see the assistant turns and the
    results in input order either way, and the partition commutes with their drops. Step A
    needs nothing that comes later. Step B needs to know whether an id is declared anywhere:
    for a result after the declaration that is known when it is met, and so is whether an
    earlier result answered it; a result before any declaration is an orphan (dropped at the
    end) unless a later turn declares its id (``None``).
    """
    out: list[dict[str, Any]] = []
    append = out.append
    declared: set[str] = set()
    answered: set[str] = set()
    undeclared: list[str] | None = None  # ids of results met before any declaration of them
    others = late_system = False
    whole, function_calls = reading_wanted, False  # Reading, as far as the walk has seen
    for entry in messages:
        if entry.__class__ is not dict:
            whole = False
            if not isinstance(entry, dict):
                log.add("not_an_object")
                continue
        role = entry.get("role")
        if role.__class__ is not str or role not in _PLAIN_ROLES:
            whole = False
            if not isinstance(role, str) or not role.strip():
                log.add("no_role")
                continue
            role = str.__str__(role)
        content = entry.get("content")
        if content.__class__ is not str:
            if content is None:
                content = ""
                whole = whole and "content" in entry
            else:
                content = content_text(content)
                whole = False
        # Whole: role and content, and the pairing key of a turn with calls or of a result.
        if role == "system":
            late_system = late_system or others
            whole = whole and len(entry) == 2
            append({"role": role, "content": content})
            continue
        others = True
        if role == "assistant":
            calls = entry.get("tool_calls")
            if calls is None:
                whole = whole and len(entry) == 2
                if "metadata" in entry:  # a stored-buffer row's (pairing_key); no key, no calls
                    calls = pairing_key(entry, "tool_calls")
            else:
                whole = whole and len(entry) == 3 and calls.__class__ is list
            if isinstance(calls, list) and calls:
                # Step A: the first declaration of an id owns the pairing.
                kept: list[Any] = []
                for source in calls:
                    call, read_whole = _read_call(source)  # a new dict (for any object), or the junk
                    raw_id = call["tool_call_id"] if call.__class__ is dict else None
                    if whole:
                        whole = read_whole and raw_id is not None and source.__class__ is dict
                        function_calls = function_calls or (whole and "function" in source)
                    # usable_id, inlined for the usual string id
                    call_id = raw_id.strip() if raw_id.__class__ is str else usable_id(raw_id)
                    if not call_id or call_id == "0":
                        log.add("unusable_call")
                    elif call_id in declared:
                        log.add("redeclared_call")
                    else:
                        declared.add(call_id)
                        if raw_id != call_id:
                            call["tool_call_id"] = call_id
                        kept.append(call)
                if kept:
                    append({"role": role, "content": content, "tool_calls": kept})
                elif content.strip():
                    append({"role": role, "content": content})
                else:
                    log.add("emptied_turn")
                continue
        elif role == "tool":
            # Step B: each declared id is answered by its first usable result.
            call_id = entry.get("tool_call_id")
            if call_id is None:
                whole = False
                call_id = pairing_key(entry, "tool_call_id")
            else:
                whole = whole and len(entry) == 3
            call_id = call_id.strip() if call_id.__class__ is str else usable_id(call_id)  # (as above)
            if not call_id or call_id == "0":
                log.add("orphan_result")
            elif call_id in declared:
                if call_id in answered:
                    log.add("duplicate_result")
                else:
                    answered.add(call_id)
                    append({"role": role, "content": content, "tool_call_id": call_id})
            elif undeclared is None:
                undeclared = [call_id]
            else:
                undeclared.append(call_id)
            continue
        else:
            whole = whole and len(entry) == 2
        append({"role": role, "content": content})
    reading = _READINGS[whole][function_calls]
    if undeclared is not None:
        for call_id in undeclared:
            if call_id in declared:
                return None, declared, answered, reading
            log.add("orphan_result")
    if late_system:
        out = system_first(out)  # rule 2
    return out, declared, answered, reading
