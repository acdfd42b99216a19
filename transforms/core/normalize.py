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

Rule 1 is ``transforms.core.normalize_coerce``; rules 2 to 4 are ``transforms.core.normalize_repair``;
``transforms.core.normalize_walk`` does rules 1, 2 and steps A and B in one walk, the path nearly
every conversation takes; ``transforms.core.normalize_log`` counts the drops (and keeps the trace).
This module runs them in order and is where every public name of the core is imported from.

Pure: no Beam, no I/O, no global state, and the input is never mutated. ``dropped`` is
counted by the operations that drop, one by one, never derived from list lengths: an unusable
id can cost three drops from a list of two.

``normalize_conversation(messages, trace=Trace())`` also records, in the same pass, what each
rule did to each entry: an ``Event`` per drop (the same calls that count the drops record it,
so the two cannot disagree), per system message moved, per id trimmed, per result healed, and
for each output message the input entry it came from. Off by default (``trace=None``), where
the pass is exactly the one that counts; ``convnorm explain`` and the report use it.

Usage::

    >>> from transforms.core.normalize import normalize_conversation
    >>> normalize_conversation([{"role": "user", "content": 42}]).messages
    [{'role': 'user', 'content': '42'}]
"""

from __future__ import annotations

from typing import Any, NamedTuple

from transforms.core.normalize_coerce import (
    coerce_entries,
    coerce_messages,
    content_text,
    pairing_key,
    raw_call_id,
    usable_id,
)
from transforms.core.normalize_log import CALL_REASONS, REASONS, DropLog, Event, Trace, TracingLog, split_drops
from transforms.core.normalize_repair import (
    INTERRUPTED_RESULT,
    heal_unanswered,
    moved_by_system_first,
    repair,
    strip_leading_tools,
    system_first,
)
from transforms.core.normalize_walk import Reading, walk

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


class NormalizeResult(NamedTuple):
    """What normalization returns for one conversation."""

    messages: list[Any]
    dropped: int
    drops: dict[str, int]
    healed: int


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
    log = DropLog()
    flat, declared, answered, reading = walk(messages, log, reading_wanted)
    if flat is None:
        # A result precedes a later declaration of its id: step B must see the whole list.
        return _by_the_letter(messages), reading
    healed = 0
    if len(answered) != len(declared):
        flat, healed = heal_unanswered(flat, answered, log)  # step C
    stripped = strip_leading_tools(flat, log)
    if stripped is flat:
        # Nothing stripped: the second pass would see the first pass's output, where every id
        # is usable and declared once and answered once, and change nothing (drop nothing,
        # heal nothing). Skipping it is the same result, for a third of the core's time.
        return NormalizeResult(flat, log.dropped, log.report(), healed), reading
    # (Not reached from a walk: a kept result follows the turn that declares it. Kept so that
    # rule 4 is applied here exactly as written.)
    flat, healed_again = repair(stripped, log)
    return NormalizeResult(flat, log.dropped, log.report(), healed + healed_again), reading


def _by_the_letter(messages: Any, trace: Trace | None = None) -> NormalizeResult:
    """Rules 1-4 as NORMALIZATION.md writes them, one pass per step; with ``trace``, what each
    rule did to each entry, recorded as it does it."""
    if not isinstance(messages, list):
        return NormalizeResult([], 0, {}, 0)
    tracing = None if trace is None else TracingLog(messages, trace)
    log = DropLog() if tracing is None else tracing
    coerced = coerce_entries(messages, log)
    flat = system_first(coerced)
    if tracing is not None:
        tracing.coerced(coerced)
        if flat is not coerced:
            tracing.moved(coerced, moved_by_system_first(coerced))
    log.repair_pass = 1
    flat, healed = repair(flat, log)
    stripped = strip_leading_tools(flat, log)
    if stripped is flat:
        return _result(flat, log, healed, tracing)  # as above
    # Rule 4 runs the repair pass again: stripping a leading result can un-answer a call, and
    # the second pass heals it.
    log.repair_pass = 2
    flat, healed_again = repair(stripped, log)
    return _result(flat, log, healed + healed_again, tracing)


def _result(flat: list[Any], log: DropLog, healed: int, tracing: TracingLog | None) -> NormalizeResult:
    if tracing is not None:
        tracing.finish(flat)
    return NormalizeResult(flat, log.dropped, log.report(), healed)
