"""One conversation before and after, side by side, each repair with its reason (no Beam import).

``explain(messages, profile, drop_roles, map_roles)`` normalizes a conversation as the run did
(``--drop-role`` / ``--map-role`` first, as ``transforms.record.records`` applies them), with the
core's opt-in trace on (``transforms.core.normalize.Trace``: the events come from the repair pass
itself, never from a second reading of its rules), and lines the two lists up in ``Row``s: one
per input entry, in input order, with the output message it became (or none); one per call of
a turn that a rule touched; one per synthetic result, after the turn whose call it answers.
Each row carries its ``Mark``s: dropped, moved, re-keyed, mapped or healed, with the reason.

``convnorm explain`` prints the rows as text and the report draws them as HTML
(``pipeline.finished.explain``).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, NamedTuple

from transforms.core.normalize import Event, Trace
from transforms.repairs.profiles import ProfileResult, normalize_with_profile
from transforms.repairs.roles import (
    DROPPED_ROLE,
    MAPPED_ROLE,
    apply_role_options,
    drops_with_roles,
    repairs_with_roles,
    role_fate,
)

#: What each reason means, in a few words (rule numbers are NORMALIZATION.md's / MEM-5's).
WHY = {
    "not_an_object": "not an object (rule 1)",
    "no_role": "no usable role (rule 1)",
    "unusable_call": 'its id is unusable: missing, blank, "0" or not text (rule 3)',
    "redeclared_call": "its id was declared by an earlier call, which owns it (rule 3)",
    "emptied_turn": "no call left and no text (rule 3)",
    "orphan_result": "it answers no call declared in the conversation (rule 3)",
    "duplicate_result": "its call was already answered by an earlier result (rule 3)",
    "leading_tool": "a result before any turn, at the front (rule 4)",
    "system_first": "system messages go first (rule 2)",
    "id_trimmed": "its id trimmed (rule 3)",
    "id_as_text": "its id written as text (rule 3)",
    "unanswered_call": "synthetic result for a call that had none (rule 3)",
    "rekeyed_call": "a reused id given its own spelling (profile lossless)",
    "moved_result": "moved into the block after its call (profile lossless)",
    DROPPED_ROLE: "its role is dropped (--drop-role)",
    MAPPED_ROLE: "given another role (--map-role)",
}

#: How each kind of mark is shown in text.
KIND_WORDS = {"dropped": "DROPPED", "moved": "MOVED", "rekeyed": "RE-KEYED", "mapped": "MAPPED", "healed": "HEALED"}


class Mark(NamedTuple):
    kind: str  # dropped, moved, rekeyed, mapped, healed
    reason: str
    detail: str = ""

    def text(self) -> str:
        why = WHY.get(self.reason, self.reason)
        detail = f" [{self.detail}]" if self.detail else ""
        return f"{KIND_WORDS.get(self.kind, self.kind.upper())} {self.reason}: {why}{detail}"


class Row(NamedTuple):
    #: Index of the input entry (``None``: a synthetic result, which has none).
    before: int | None
    #: Index of a call of that entry's turn (a row about one call), else ``None``.
    call: int | None
    #: Index of the output message the entry became (``None``: dropped, or a call row).
    after: int | None
    marks: tuple[Mark, ...] = ()


class Explanation(NamedTuple):
    before: list[Any]
    result: ProfileResult
    trace: Trace
    rows: list[Row]


def explain(
    messages: Any,
    profile: str = "spec",
    drop_roles: tuple[str, ...] = (),
    map_roles: tuple[tuple[str, str], ...] = (),
) -> Explanation:
    """Normalize ``messages`` as the run did (the role options, then ``profile``) with the
    trace on, and line up before and after. The result's drops and repairs include the role
    options' (``drop_role``, ``map_role``), as the run's drops/ line does."""
    trace = Trace()
    before = messages if isinstance(messages, list) else []
    if not before or not (drop_roles or map_roles):
        result = normalize_with_profile(messages, profile, trace)
        return Explanation(before, result, trace, explanation_rows(before, result.messages, trace))
    to_core, role_drops, role_maps = apply_role_options(before, drop_roles, map_roles)
    result = normalize_with_profile(to_core, profile, trace)
    rows = _with_role_rows(explanation_rows(to_core, result.messages, trace), before, drop_roles, dict(map_roles))
    result = result._replace(
        dropped=result.dropped + role_drops,
        drops=drops_with_roles(result.drops, role_drops),
        repairs=repairs_with_roles(result.repairs, role_maps),
    )
    return Explanation(before, result, trace, rows)


def _with_role_rows(
    rows: list[Row], before: list[Any], drop_roles: tuple[str, ...], mapping: dict[str, str]
) -> list[Row]:
    """The rows of the list the core saw, renumbered to the input's entries: a row per entry
    the role options dropped, in input order, and a mark on each entry given another role."""
    fates = [role_fate(entry, drop_roles, mapping) for entry in before]
    kept = [i for i, fate in enumerate(fates) if fate != DROPPED_ROLE]
    dropped = [
        Row(i, None, None, (Mark("dropped", DROPPED_ROLE, str(before[i]["role"])),))
        for i, fate in enumerate(fates)
        if fate == DROPPED_ROLE
    ]
    out: list[Row] = []
    for row in rows:
        if row.before is None:
            out.append(row)
            continue
        index = kept[row.before]
        while dropped and dropped[0].before is not None and dropped[0].before < index:
            out.append(dropped.pop(0))
        fate = fates[index]
        marks = row.marks
        if row.call is None and fate is not None:
            marks = (Mark("mapped", MAPPED_ROLE, f"{before[index]['role']} → {fate}"), *marks)
        out.append(row._replace(before=index, marks=marks))
    return out + dropped


def explanation_rows(before: list[Any], after: list[Any], trace: Trace) -> list[Row]:
    """The rows of ``explain``: input order, call rows and synthetic results under their turn."""
    out_of = {origin: k for k, origin in enumerate(trace.origins) if origin is not None}
    entry_marks: dict[int | None, list[Mark]] = defaultdict(list)
    call_marks: dict[tuple[int | None, int], list[Mark]] = defaultdict(list)
    healed_by_id: dict[str, Event] = {}
    for event in trace.events:
        if event.kind == "healed":
            healed_by_id[event.detail] = event
            continue
        mark = Mark(event.kind, event.reason, event.detail)
        if event.kind == "moved" and event.entry in out_of:
            mark = mark._replace(detail=f"now #{out_of[event.entry]}" + (f", {event.detail}" if event.detail else ""))
        if event.call is None:
            entry_marks[event.entry].append(mark)
        else:
            call_marks[(event.entry, event.call)].append(mark)
    synthetic: dict[int | None, list[tuple[int, Mark]]] = defaultdict(list)
    for k, origin in enumerate(trace.origins):
        if origin is None:
            call_id = after[k].get("tool_call_id") if isinstance(after[k], dict) else None
            healed = healed_by_id.get(str(call_id))
            mark = Mark("healed", "unanswered_call", str(call_id) if call_id is not None else "")
            synthetic[healed.entry if healed is not None else None].append((k, mark))
    rows = []
    for index in range(len(before)):
        rows.append(Row(index, None, out_of.get(index), tuple(entry_marks.pop(index, ()))))
        for entry, call in sorted(key for key in call_marks if key[0] == index):
            rows.append(Row(index, call, None, tuple(call_marks[(entry, call)])))
        rows += [Row(None, None, k, (mark,)) for k, mark in synthetic.pop(index, ())]
    # Anything a rule did to an entry it made itself (a synthetic result dropped by pass 2).
    rows += [Row(None, None, None, tuple(marks)) for marks in entry_marks.values() if marks]
    rows += [Row(None, None, k, (mark,)) for items in synthetic.values() for k, mark in items]
    return rows


def before_text(explanation: Explanation, row: Row, limit: int = 80) -> str:
    """What a row shows of the input: its entry, or (a call row) the call, on one line."""
    if row.before is None:
        return ""
    entry = explanation.before[row.before]
    if row.call is None:
        return message_text(entry, limit)
    calls = entry.get("tool_calls") if isinstance(entry, dict) else None
    shown = call_text(calls[row.call]) if isinstance(calls, list) and row.call < len(calls) else "?"
    return cut_text(f"call {row.call}: {shown}", limit)


def after_text(explanation: Explanation, row: Row, limit: int = 80) -> str:
    """What a row shows of the output: the message the entry became, on one line."""
    return "" if row.after is None else message_text(explanation.result.messages[row.after], limit)


def message_text(message: Any, limit: int = 80) -> str:
    """One message on one line: role, content (cut at ``limit`` characters), calls or result id."""
    if not isinstance(message, dict):
        return cut_text(f"(not an object) {_json(message)}", limit)
    role = message.get("role")
    content = message.get("content")
    text = content if isinstance(content, str) else _json(content)
    head = f"{role}" if isinstance(role, str) else f"(role {_json(role)})"
    tool_call_id = message.get("tool_call_id")
    if tool_call_id is not None:
        head += f" [{tool_call_id}]"
    calls = message.get("tool_calls")
    tail = ""
    if isinstance(calls, list) and calls:
        tail = " calls " + ", ".join(call_text(c) for c in calls)
    shown = " ".join(text.split())
    return cut_text(f"{head}: {shown!r}{tail}" if shown or not tail else f"{head}:{tail}", limit)


def call_text(call: Any) -> str:
    """A call as ``id name``, read leniently as the core reads it."""
    if not isinstance(call, dict):
        return f"(not an object) {_json(call)}"
    call_id = call.get("tool_call_id", call.get("id"))
    name = call.get("name")
    function = call.get("function")
    if name is None and isinstance(function, dict):
        name = function.get("name")
    return f"{call_id if call_id is not None else '(no id)'} {name if name is not None else ''}".strip()


def _json(value: Any) -> str:
    import json

    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return repr(value)


def cut_text(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, the cut marked with ``…``."""
    return text if len(text) <= limit else text[: max(limit - 1, 1)] + "…"


def counts_line(before: list[Any], result: ProfileResult) -> str:
    """``12 in - 3 messages dropped + 1 healed = 10 out; 2 calls dropped from kept turns``."""
    from transforms.core.normalize import split_drops

    calls = sum(split_drops(result.drops)[1].values())
    messages = result.dropped - calls
    line = (
        f"{len(before)} messages in - {messages} dropped + {result.healed} healed = {len(result.messages)} out"
        f"; {calls} call(s) dropped from turns that stayed"
    )
    if result.repairs:
        line += "; repairs: " + ", ".join(f"{name} {n}" for name, n in result.repairs.items())
    return line
