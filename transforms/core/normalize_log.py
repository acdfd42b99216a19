"""What MEM-5's rules record as they go: the drops by reason, and with a trace, what each rule
did to each entry (``transforms.core.normalize``'s bookkeeping; no Beam, no I/O).

``DropLog`` counts a drop at the moment a rule makes it, so that ``dropped`` is never derived
from list lengths; ``TracingLog`` also records an ``Event`` per thing done to an entry, in the
same calls, so the trace and the counts cannot disagree.
"""

from __future__ import annotations

from typing import Any, NamedTuple

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


#: ``DropLog.add``'s ``call`` when the drop is of an entry, not of a call (a call may be ``None``).
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


class DropLog:
    """Counts drops at the moment they happen: ``dropped`` and the per-reason tally together.

    The rules hand it the entry (and call) each drop concerns, and call ``renamed``,
    ``rebuilt`` and ``healed`` on their rare paths: no-ops here, recorded by ``TracingLog``.
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


class TracingLog(DropLog):
    """A ``DropLog`` that also records an ``Event`` for each thing done to an entry.

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

    def moved(self, before: list[Any], positions: list[int]) -> None:
        """Rule 2: each system message that had another message before it (at ``positions`` of
        ``before``: ``moved_by_system_first``) moved to the front."""
        for position in positions:
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
