"""A strict sendability check for flat message lists: would a provider accept this history?

``check_sendable(messages)`` reads a list in the flat shape normalization emits and returns
every rule it breaks as a ``Violation(kind, index, tool_call_id, detail)``. It never changes
data, never raises on odd input (non-objects, missing roles, unhashable ids are violations
too) and is a pure function: no Beam, no I/O, no global state, so a DoFn can call it as is.

The pairing rules are the strictest of the providers' (see FORMATS.md):

* OpenAI: "An assistant message with 'tool_calls' must be followed by tool messages responding
  to each 'tool_call_id'" and "messages with role 'tool' must be a response to a preceeding
  message with 'tool_calls'";
* Anthropic: "tool_use ids were found without tool_result blocks immediately after" and
  "unexpected tool_use_id found in tool_result blocks"; tool_use ids must be unique;
* Gemini: "the number of function response parts is equal to the number of function call
  parts of the function call turn".

So: every call is answered by exactly one result, placed in *the block right after its turn*
(the maximal run of consecutive ``tool`` messages directly after the assistant turn that
declares it); every id is declared once; no result without a call; system messages first.

Definitions the kinds rely on:

* A *message* is an object with a non-blank string ``role``. Anything else is reported as
  ``not_flat`` and is otherwise transparent: it neither breaks a block nor counts as a
  message before a system message (normalization would drop it, which fixes nothing else).
* Ids are compared exactly, as providers compare them. A call id must be a string that is
  already canonical: trimmed, not blank, not ``"0"`` (MEM-16 reads ``" c1"`` as ``"c1"``, a
  provider does not; normalization always emits canonical ids).
* The first declaration of an id owns it (as in MEM-5); a later one is ``redeclared_id``.
* A result in its owner's block answers the call; the first such is the answer and any other
  result of the id is ``duplicate_result``. When the block has none, the first result of the
  id elsewhere is ``result_not_adjacent`` (and the call is not also reported unanswered), the
  later ones ``duplicate_result``.
* One message can break several rules (a result leading the list is also not adjacent to its
  call); each is reported.

``check_user_first(messages)`` is the rule of the providers that want a user message first
(Anthropic, Bedrock, Gemini; OpenAI takes an assistant first): a first message after the system
group that is the assistant's is ``leading_assistant``. ``convnorm validate`` adds it for
records read by those providers' readers; their writers refuse such a record with the same reason.

Tool names are: an empty name, or one outside ``^[a-zA-Z0-9_-]{1,64}$`` (the rule of OpenAI,
Anthropic and Bedrock), is ``invalid_tool_name``. Roles are not validated (MEM-5 keeps any role
verbatim; mapping ``developer`` or unknown roles is a writer's job), nor are extra keys,
argument types or empty text.

Usage::

    >>> from transforms.core.validate import check_sendable, count_by_kind
    >>> history = [
    ...     {"role": "user", "content": "q"},
    ...     {"role": "tool", "content": "early", "tool_call_id": "c1"},
    ...     {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c1", "name": "s"}]},
    ... ]
    >>> [(v.kind, v.index, v.tool_call_id) for v in check_sendable(history)]
    [('result_not_adjacent', 1, 'c1')]
    >>> count_by_kind(check_sendable(history))
    {'result_not_adjacent': 1}
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from transforms.core.tool_blocks import tool_blocks

__all__ = [
    "VIOLATION_KINDS",
    "Violation",
    "check_sendable",
    "check_user_first",
    "count_by_kind",
    "is_sendable",
    "violation_order",
]

#: The closed list of violation kinds, in canonical order (reports and counts follow it).
VIOLATION_KINDS = (
    "not_flat",  # not an object, no usable role, or pairing keys of the wrong shape or place
    "content_not_string",  # content missing or not a string
    "system_not_first",  # a system message after a non-system message
    "leading_tool",  # a tool message first after the system group
    "unusable_call_id",  # a call id that is not a canonical string ("", "0", untrimmed, non-str)
    "invalid_tool_name",  # a call's name that is empty or breaks the providers' ^[a-zA-Z0-9_-]{1,64}$
    "redeclared_id",  # a call id already declared (earlier turn or earlier in the same turn)
    "unanswered_call",  # a call with no result anywhere
    "result_not_adjacent",  # a call's result, but not in the block right after its turn
    "orphan_result",  # a tool message whose id no call declares (or no usable id)
    "duplicate_result",  # a second result for a call
    "leading_assistant",  # opens with the assistant: for Anthropic, Bedrock, Gemini bodies (check_user_first)
)

_KIND_ORDER = {kind: rank for rank, kind in enumerate(VIOLATION_KINDS)}

#: The tool names every provider accepts: OpenAI's, Anthropic's and Bedrock's rule (the Gemini
#: API accepts these too, and dots and colons besides).
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@dataclass(frozen=True)
class Violation:
    """One broken rule: its kind, where (index in the input list; ``None`` for the list
    itself), the call id concerned when it is a string (else ``None``), and a short text.

    A dataclass, not a NamedTuple: a tuple's ``index`` method would shadow the field."""

    kind: str
    index: int | None
    tool_call_id: str | None
    detail: str


def violation_order(violation: Violation) -> tuple[int, int]:
    """The order violations are listed in: by index (``None`` first), then by ``VIOLATION_KINDS``."""
    return (-1 if violation.index is None else violation.index, _KIND_ORDER[violation.kind])


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _id_problem(value: Any) -> str | None:
    """Why a call id is not a canonical id, or ``None`` when it is."""
    if not isinstance(value, str):
        return "missing" if value is None else f"not a string: {_describe(value)}"
    text = value.strip()
    if not text:
        return "blank"
    if text == "0":
        return "falsy '0'"
    if text != value:
        return f"not trimmed: {value!r}"
    return None


def check_sendable(messages: Any) -> list[Violation]:
    """Every way ``messages`` breaks the strict sendability rules, in list order.

    Violations are sorted by index (``None`` first), then by the order of ``VIOLATION_KINDS``;
    an empty list means a provider would accept the history's structure. Linear time.
    """
    if not isinstance(messages, list):
        return [Violation("not_flat", None, None, f"messages is not a list: {type(messages).__name__}")]
    found: list[Violation] = []
    owner, results = _walk(messages, found.append)
    _check_results(owner, results, found.append)
    found.sort(key=violation_order)
    return found


Report = Callable[[Violation], None]


def _walk(messages: list[Any], report: Report) -> tuple[dict[str, int], list[tuple[int, str | None, int]]]:
    """Declarations, blocks and the simple per-message rules, in one walk.

    Returns ``{id: index of the turn that first declares it}`` and, for each tool message,
    ``(index, id if a string, the turn whose block holds it or -1)``.
    """
    blocks = tool_blocks(messages)
    owner: dict[str, int] = {}
    results: list[tuple[int, str | None, int]] = []
    order = _OrderCheck()
    for index, message in enumerate(messages):
        role = _role(index, message, report)
        if role is None:
            continue
        order.check(index, role, message, report)
        _check_keys(index, role, message, report)
        if role == "tool":
            raw = message.get("tool_call_id")
            results.append((index, raw if isinstance(raw, str) else None, blocks[index]))
        elif role == "assistant" and "tool_calls" in message:
            _declare_calls(index, message["tool_calls"], owner, report)
    return owner, results


def _role(index: int, message: Any, report: Report) -> str | None:
    """The message's role, or ``None`` (reported ``not_flat``) when it is not a message."""
    if not isinstance(message, dict):
        report(Violation("not_flat", index, None, f"not an object: {type(message).__name__}"))
        return None
    role = message.get("role")
    if not isinstance(role, str) or not role.strip():
        report(Violation("not_flat", index, None, f"no usable role: {_describe(role)}"))
        return None
    if not isinstance(message.get("content"), str):
        what = "missing" if "content" not in message else type(message["content"]).__name__
        report(Violation("content_not_string", index, None, f"content is {what}"))
    return role


class _OrderCheck:
    """System messages first; no tool message first after the system group."""

    def __init__(self) -> None:
        self.seen_other = False  # a non-system message came earlier
        self.leading = True  # still in the system group or the tool run right after it

    def check(self, index: int, role: str, message: dict[str, Any], report: Report) -> None:
        if role == "system":
            if self.seen_other:
                report(Violation("system_not_first", index, None, "system message after the conversation began"))
        else:
            self.seen_other = True
        if self.leading and role != "system":
            if role == "tool":
                report(
                    Violation(
                        "leading_tool",
                        index,
                        _string(message.get("tool_call_id")),
                        "tool message first after the system group",
                    )
                )
            else:
                self.leading = False


def _check_keys(index: int, role: str, message: dict[str, Any], report: Report) -> None:
    if role != "assistant" and "tool_calls" in message:
        report(Violation("not_flat", index, None, f"tool_calls on a {role!r} message"))
    if role != "tool" and "tool_call_id" in message:
        report(Violation("not_flat", index, None, f"tool_call_id on a {role!r} message"))


def _declare_calls(index: int, calls: Any, owner: dict[str, int], report: Report) -> None:
    """Check one turn's calls and record the ids it declares first in ``owner``."""
    if not isinstance(calls, list) or not calls:
        report(Violation("not_flat", index, None, "tool_calls is not a non-empty list"))
        return
    for position, call in enumerate(calls):
        if not isinstance(call, dict):
            report(Violation("not_flat", index, None, f"call {position} is not an object"))
            continue
        raw = call.get("tool_call_id")
        name = call.get("name")
        if not isinstance(name, str):
            report(Violation("not_flat", index, _string(raw), f"call {position} has no string name"))
        elif not TOOL_NAME.match(name):
            detail = f"call {position}: tool name {_describe(name)} is empty or breaks {TOOL_NAME.pattern}"
            report(Violation("invalid_tool_name", index, _string(raw), detail))
        problem = _id_problem(raw)
        if problem is not None:
            report(Violation("unusable_call_id", index, _string(raw), f"call {position}: id {problem}"))
        if not isinstance(raw, str):
            continue  # nothing can pair with it
        # A string id pairs exactly even when it is not canonical, so its result is not also an orphan.
        if raw in owner:
            where = "this turn" if owner[raw] == index else f"message {owner[raw]}"
            report(Violation("redeclared_id", index, raw, f"call {position}: id already declared by {where}"))
            continue
        owner[raw] = index


def _check_results(owner: dict[str, int], results: list[tuple[int, str | None, int]], report: Report) -> None:
    """Adjacency, orphans, duplicates. An id's answer is preferably in its block."""
    answered_in_block = {
        call_id for _index, call_id, turn in results if call_id is not None and owner.get(call_id) == turn
    }
    answered: set[str] = set()
    for index, call_id, turn in results:
        if call_id is None:
            report(Violation("orphan_result", index, None, "tool message without a string tool_call_id"))
            continue
        declared_by = owner.get(call_id)
        if declared_by is None:
            report(Violation("orphan_result", index, call_id, "no call declares this id"))
        elif declared_by == turn and call_id not in answered:
            answered.add(call_id)
        elif call_id in answered or call_id in answered_in_block:
            detail = f"the call of message {declared_by} is already answered"
            report(Violation("duplicate_result", index, call_id, detail))
        else:
            answered.add(call_id)
            place = "before" if index < declared_by else "after"
            report(
                Violation(
                    "result_not_adjacent",
                    index,
                    call_id,
                    f"result {place} message {declared_by} but not in the tool block right after it",
                )
            )
    for call_id, turn in owner.items():
        if call_id not in answered:
            report(Violation("unanswered_call", turn, call_id, "call with no result anywhere"))


def _string(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def check_user_first(messages: Any) -> list[Violation]:
    """``leading_assistant`` when the first message after the system group (and no tool
    message: that is ``leading_tool``) is the assistant's, else nothing."""
    for index, message in enumerate(messages if isinstance(messages, list) else ()):
        role = message.get("role") if isinstance(message, dict) else None
        if role in ("system", "developer") or not isinstance(role, str):
            continue
        if role == "assistant":
            return [Violation("leading_assistant", index, None, "the conversation opens with the assistant")]
        return []
    return []


def is_sendable(messages: Any) -> bool:
    """True when ``check_sendable`` finds nothing."""
    return not check_sendable(messages)


def count_by_kind(violations: Iterable[Violation]) -> dict[str, int]:
    """``{kind: count}`` for the kinds that occurred, in the canonical order of the kinds."""
    counts: dict[str, int] = {}
    for violation in violations:
        counts[violation.kind] = counts.get(violation.kind, 0) + 1
    return {kind: counts[kind] for kind in VIOLATION_KINDS if kind in counts}
