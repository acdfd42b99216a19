"""MEM-5's rules 2 to 4 on coerced messages (NORMALIZATION.md): system messages first, the
repair pass (step A declarations, step B results, step C unanswered calls), and the
leading-tool guard that ``transforms.core.normalize`` follows with the repair pass again.
"""

from __future__ import annotations

from typing import Any

from transforms.core.normalize_coerce import usable_id
from transforms.core.normalize_log import DropLog

#: Content of the synthetic result that answers a call left unanswered (MEM-3).
INTERRUPTED_RESULT = "Tool call was interrupted; no result."


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


def repair(messages: list[Any], log: DropLog) -> tuple[list[Any], int]:
    """One repair pass (steps A, B, C). Returns the new list and how many results it healed."""
    declared: set[str] = set()
    answered: set[str] = set()
    after_b = _answer_results(_declare_calls(messages, declared, log), declared, answered, log)
    if len(answered) == len(declared):
        return after_b, 0  # every call answered: step C has nothing to do
    return heal_unanswered(after_b, answered, log)


def _declare_calls(messages: list[Any], declared: set[str], log: DropLog) -> list[Any]:
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


def _answer_results(messages: list[Any], declared: set[str], answered: set[str], log: DropLog) -> list[Any]:
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


def heal_unanswered(messages: list[Any], answered: set[str], log: DropLog) -> tuple[list[Any], int]:
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


def strip_leading_tools(messages: list[Any], log: DropLog) -> list[Any]:
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
