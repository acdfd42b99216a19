"""MEM-5's rules 1 and 2 and steps A and B of the first repair pass in one walk of the input,
and how rule 1 found it (``Reading``): the path ``transforms.core.normalize`` takes for nearly every
conversation; it hands the rest to the rules one pass each.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from transforms.core.normalize_coerce import PLAIN_ROLES, content_text, pairing_key, read_call, usable_id
from transforms.core.normalize_log import DropLog
from transforms.core.normalize_repair import system_first


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


def walk(
    messages: list[Any], log: DropLog, reading_wanted: bool = True
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
        if role.__class__ is not str or role not in PLAIN_ROLES:
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
                    call, read_whole = read_call(source)  # a new dict (for any object), or the junk
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
