"""An answer's text put back where a history's copy of it lost it, within a group (no Beam
import). The rule is ``transforms.calllogs.dropped_text``'s; this applies it to a group's state.

A history message marked as read from a writer that drops an answer's text
(``GroupState.text_dropped``, by its chain hash) is put back to the answer a call of the group
got at that place: the output of a call whose history is the same as the marked message's
(compared as the assembly compares), when that output is the marked message with a text
(``dropped_text.same_answer``), and the group logged one such answer there (two different
ones: neither is taken). Every kept sequence holding the marked message gets the answer, so a
history that went on from it extends the answer's own sequence and the two collapse as any
growing history does. Conversations of other groups are chained the same way by keys
(``chained``: ``Fingerprints.text_dropped`` and ``answer_dropped``).
"""

from __future__ import annotations

from typing import Any

from transforms.calllogs.assemble import GroupState, KeptSequence, chain_of
from transforms.calllogs.dropped_text import as_meant, has_text_beside_calls, same_answer
from transforms.core.jsontext import canonical_json


def _answers(state: GroupState) -> dict[bytes, dict[bytes, dict[str, Any]]]:
    """The answers with a text beside tool calls that the group's calls got, by the chain hash
    of what comes before them (``b""``: nothing), each distinct answer once (as its arguments
    are meant; of two spellings the first by exact text: the same whatever the order calls
    arrived in)."""
    places: dict[bytes, list[tuple[int, int]]] = {}
    for index, sequence in enumerate(state.sequences):
        for at, h in enumerate(sequence.chain):
            places.setdefault(h, []).append((index, at))
    answers: dict[bytes, dict[bytes, dict[str, Any]]] = {}
    for call in state.calls:
        if not call.answers:
            continue
        for index, end in places.get(call.end, ()):
            at = end - (call.answers - 1)
            sequence = state.sequences[index]
            message = sequence.messages[at]
            if not has_text_beside_calls(message):
                continue
            found = answers.setdefault(sequence.chain[at - 1] if at else b"", {})
            key = as_meant(message)
            if key not in found or canonical_json(message) < canonical_json(found[key]):
                found[key] = message
    return answers


def _restored(
    sequence: KeptSequence, dropped: set[bytes], answers: dict[bytes, dict[bytes, dict[str, Any]]], done: set[bytes]
) -> KeptSequence | None:
    """``sequence`` with the answers put back at its marked places (``done`` gets those places'
    hashes), or ``None`` when none is."""
    messages: list[Any] | None = None
    for at, h in enumerate(sequence.chain):
        if h not in dropped:
            continue
        found = answers.get(sequence.chain[at - 1] if at else b"")
        if not found or len(found) != 1:
            continue  # none logged, or two different answers there: neither is the one
        (answer,) = found.values()
        if same_answer(sequence.messages[at], answer):
            messages = list(sequence.messages) if messages is None else messages
            messages[at] = answer
            done.add(h)
    if messages is None:
        return None
    return KeptSequence(messages, chain_of(messages), sequence.discarded)


def restored_text(state: GroupState) -> tuple[GroupState, int]:
    """A state whose history copies that lost an answer's text hold that answer again: the
    state itself when none does, else a new one (the state given is a combiner's accumulator,
    left as it is); and how many places were put back."""
    if not state.text_dropped:
        return state, 0
    answers = _answers(state)
    if not answers:
        return state, 0
    done: set[bytes] = set()
    remap: dict[bytes, bytes] = {}
    sequences = []
    for sequence in state.sequences:
        new = _restored(sequence, state.text_dropped, answers, done)
        if new is not None:
            remap.update((old, h) for old, h in zip(sequence.chain, new.chain) if old != h)
        sequences.append(new or sequence)
    if not done:
        return state, 0
    out = GroupState().merge(state)
    out.sequences, out.prefixes, out.ends = [], set(), {}
    for sequence in sequences:
        out._keep(sequence)
    out.calls = [c._replace(end=remap.get(c.end, c.end)) for c in state.calls]
    out.truncated = {remap.get(h, h) for h in state.truncated}
    out.responses = {rid: (length, remap.get(end, end)) for rid, (length, end) in state.responses.items()}
    # The places put back hold an answer now; those after them keep their marks, rehashed.
    out.text_dropped = {remap.get(h, h) for h in state.text_dropped if h not in done}
    return out, len(done)


__all__ = ["restored_text"]
