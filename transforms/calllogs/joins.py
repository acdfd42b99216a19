"""Fragments joined by key before the assembly (no Beam import).

A record may hold a call only in part: the LangSmith SDK sends a run's ``post`` in one ingestion
payload and its ``patch`` (outputs, end time) in a later one; OpenTelemetry's batch log exporter
splits one span's GenAI events over two documents, and writes the span itself in a traces
document of its own. Each such part is a ``Fragment`` keyed by what ties the parts together (the
run id; the trace and span ids), grouped like a conversation group under the key
``(format + JOIN_SUFFIX, key)`` (``assemble.group_key``), so that every fragment of a key meets
the others wherever it was read, on every runner. ``joined_pieces`` then hands one key's
fragments to its format's joiner (``calls.register_joiner``), which gives the pieces they make;
those go to their conversation group as any piece does. A fragment that meets none it needs (a
patch whose post was never read) gives a ``Rejected``: a dead letter with its reason.
"""

from __future__ import annotations

from typing import Any, Iterator

from transforms.calllogs.assemble import GroupState, group_key
from transforms.calllogs.calls import JOIN_SUFFIX, JOINERS, Call, Fragment, Piece, Rejected
from transforms.core.jsontext import canonical_json


def is_join_key(key: tuple[Any, ...]) -> bool:
    """Whether a group key is a key of fragments to join (``(format + JOIN_SUFFIX, key)``)."""
    return bool(key) and isinstance(key[0], str) and key[0].endswith(JOIN_SUFFIX)


def joined_pieces(key: tuple[str, str], state: GroupState) -> list[tuple[str, int, Piece]]:
    """The pieces one key's fragments make, ``(source, position, piece)``: the format's joiner
    given the fragments in one order (time, place, then content), whatever order they came in."""
    fmt = key[0][: -len(JOIN_SUFFIX)]
    ordered = sorted(
        state.fragments,
        key=lambda item: (item[1].start, item[0].source, item[0].position, item[1].part, canonical_json(item[1].data)),
    )
    fragments = [(origin.source, origin.position, fragment) for origin, fragment in ordered]
    if not fragments:
        return []
    joiner = JOINERS.get(fmt)
    if joiner is None:  # a fragment of a format with no joiner: a bug, said as a dead letter
        source, position, first = fragments[0]
        detail = f"{fmt}: {len(fragments)} part(s) of {key[1]!r} and no way to join them"
        return [(source, position, Rejected(fmt, key[1], first.start, first.call_id, "unjoined", detail))]
    return joiner(fragments)


def joined_states(key: tuple[str, str], state: GroupState) -> Iterator[tuple[tuple[str, str], GroupState]]:
    """One key's fragments -> the states of the groups their pieces go to, each counting the
    calls its fragments made (``GroupState.joined``: the summary's ``calls_joined``)."""
    places = sorted({(origin.source, origin.position) for origin, _ in state.fragments})
    states: dict[tuple[str, str], GroupState] = {}
    for source, position, piece in joined_pieces(key, state):
        found = states.setdefault(group_key(piece), GroupState())
        found.add(source, position, piece)
        if isinstance(piece, Call):
            found.joined += 1
            others = [place for place in places if place != (source, position)]
            if others:
                found.parts[(source, position, piece.call_id)] = others
    yield from sorted(states.items())


def joined_alone(items: list[Any]) -> list[Any]:
    """A record's pieces as they come out when no other record holds a part of its calls: its
    fragments joined among themselves (in place of the first of each key), the rest as read."""
    out: list[tuple[str, Any]] = []
    states: dict[tuple[str, str], GroupState] = {}
    for item in items:
        if isinstance(item, Fragment):
            key = group_key(item)
            if key not in states:
                states[key] = GroupState()
                out.append(("key", key))
            states[key].add("", 0, item)
        else:
            out.append(("item", item))
    found: list[Any] = []
    for kind, item in out:
        if kind == "key":
            found.extend(piece for _, _, piece in joined_pieces(item, states[item]))
        else:
            found.append(item)
    return found
