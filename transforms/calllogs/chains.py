"""Calls that carry only what is new since an earlier response (no Beam import).

A Responses API request may name the response it continues (``previous_response_id``) and send
only the new input items: the server holds the rest. Its log then holds a fragment of the
conversation. Within a group, ``resolved`` puts before each such call the sequence of the call
whose response it names (that call's history and output, itself resolved first when it too
continues another), so the call stands for the whole conversation it was part of and collapses
as any growing history does. A call whose earlier response is not in its group (not logged, or
logged in another group) stays as it is, counted.
"""

from __future__ import annotations

from typing import Any

from transforms.calllogs.assemble import Assembled, GroupState, NoCalls, Origin, assemble, chain_of, comparable
from transforms.calllogs.calls import Call
from transforms.calllogs.chained import TEXTS_RESTORED
from transforms.calllogs.restored_text import restored_text
from transforms.core.jsontext import canonical_json


def _messages_at(state: GroupState, length: int, end: bytes) -> list[dict[str, Any]] | None:
    """The first ``length`` messages of the kept sequence whose chain holds ``end`` there."""
    if length == 0:
        return []
    for sequence in state.sequences:
        if len(sequence.chain) >= length and sequence.chain[length - 1] == end:
            return sequence.messages[:length]
    return None


def continued(base: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The whole history of a call that continues ``base`` and sent ``new``: ``base``, then the
    new items, less the system instructions the request repeats (Responses ``instructions`` are
    sent again with each request). A request that holds ``base`` already is kept as it is."""
    if not base:
        return new
    if len(new) >= len(base) and chain_of(new[: len(base)])[-1] == chain_of(base)[-1]:
        return new
    same = 0
    mine, theirs = comparable(new), comparable(base)
    while (
        same < min(len(new), len(base))
        and isinstance(new[same], dict)
        and new[same].get("role") == "system"
        and canonical_json(mine[same]) == canonical_json(theirs[same])
    ):
        same += 1
    return [*base, *new[same:]]


def resolved(state: GroupState) -> tuple[GroupState, int, int]:
    """A state whose chained calls (``GroupState.chained``) are added with their whole history:
    the state itself when it has none, else a copy (the state given is a combiner's accumulator,
    left as it is); how many calls were chained, and how many name a response the group lacks."""
    if not state.chained:
        return state, 0, 0
    out = GroupState().merge(state)
    pending = sorted(out.chained, key=lambda item: (item[0], canonical_json(list(item[1]))))
    out.chained = []
    own: dict[str, tuple[Origin, Call]] = {}
    for origin, call in pending:
        if call.response_id:
            own.setdefault(call.response_id, (origin, call))
    memo: dict[str, list[dict[str, Any]] | None] = {}

    def sequence_of(response_id: str, seen: frozenset[str]) -> list[dict[str, Any]] | None:
        if response_id in memo:
            return memo[response_id]
        found = None
        if response_id in out.responses:
            found = _messages_at(out, *out.responses[response_id])
        elif response_id in own and response_id not in seen:  # a chained call: its own first
            call = own[response_id][1]
            base = sequence_of(call.previous_response_id, seen | {response_id})
            if base is not None:
                found = [*continued(base, call.history), *call.output]
        memo[response_id] = found
        return found

    chained = unchained = 0
    for origin, call in pending:
        base = sequence_of(call.previous_response_id, frozenset((call.response_id,)))
        if base is None:
            unchained += 1
            history = call.history
        else:
            chained += 1
            history = continued(base, call.history)
        out.add(origin.source, origin.position, call._replace(history=history, previous_response_id=""))
    return out, chained, unchained


def assemble_chained(fmt: str, group: str, state: GroupState, **fields: str) -> list[Assembled] | NoCalls:
    """``assemble`` of the state ``resolved`` gives, with the answers' texts a history's copy
    lost put back (``restored_text``); the conversation's ``assembly`` counts the calls chained
    (``responses_chained``), those naming a response the group lacks (``responses_unchained``:
    they hold only the items new since then) and the texts put back (``TEXTS_RESTORED``)."""
    state, chained, unchained = resolved(state)
    state, restored = restored_text(state)
    made = assemble(fmt, group, state, **fields)
    if isinstance(made, list) and made:
        if chained:
            made[0].assembly["responses_chained"] = chained
        if unchained:
            made[0].assembly["responses_unchained"] = unchained
        if restored:
            made[0].assembly[TEXTS_RESTORED] = restored
    return made
