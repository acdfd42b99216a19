"""Conversations assembled from the calls that made them (no Beam import).

The pieces of one conversation (``transforms.calllogs.calls``: every ``Call`` and
``ToolResult`` of one ``(format, group)``) go into a ``GroupState``, one at a time and in any
order, and come out as conversations:

- each call stands for the sequence it saw: its history, then its output;
- a sequence that is a prefix of another *collapses* into it (the calls of a growing history);
- what is left are the maximal sequences, each one conversation. The one that holds the
  latest call (by start time, then call id) is the conversation; any other (a retry, a branch,
  a summarised context: a history that is not a prefix of it) is a conversation of its own,
  marked a *branch* (``<group>#branch<n>``) and counted, never merged and never lost;
- a call belongs to the first conversation, in that order, whose sequence it is a prefix of;
- a tool result recorded apart (a tool span) is filled in after the assistant turn whose call
  it answers where the conversation lacks that call's result.

Memory: a state holds each maximal sequence once, and per call only its length, the hash of its
sequence and where it came from; never a call's own history. So a trace of N calls whose
history grows with each holds one N-message history, not N of them. Prefixes are compared by a
chain of hashes (``chain[i]`` is the hash of the first ``i + 1`` messages), so a call costs one
pass over its own messages. States merge (``merge``), as a Beam combiner's accumulators do;
the conversations do not depend on the order pieces arrive in or on how states were merged.
"""

from __future__ import annotations

import hashlib
from typing import Any, NamedTuple

from transforms.calllogs.calls import Call, Piece, ToolResult
from transforms.jsontext import canonical_json

#: Separates a group from a branch's number in a branch's id: ``<group>#branch<n>``.
BRANCH_SEPARATOR = "#branch"


class Origin(NamedTuple):
    """Where a piece was read: the input file and position of its record, and its own id."""

    source: str
    position: int
    call_id: str
    start: int


class _CallSeen(NamedTuple):
    origin: Origin
    #: The length of the call's sequence and the chain hash at its end (b"" when empty).
    length: int
    end: bytes
    #: Digest of the call's tools (a key of ``GroupState.tools``), and its model.
    tools: bytes | None
    model: str | None


class _Sequence:
    """A maximal sequence: its messages (owned by the state), their hash chain, and the ledger
    of what reading them left out (the call's that gave them: ``Call.discarded``)."""

    __slots__ = ("messages", "chain", "discarded")

    def __init__(
        self, messages: list[dict[str, Any]], chain: list[bytes], discarded: dict[str, Any] | None = None
    ) -> None:
        self.messages = messages
        self.chain = chain
        self.discarded = discarded

    def holds(self, length: int, end: bytes) -> bool:
        """A sequence of ``length`` messages whose chain ends in ``end`` is a prefix of this one."""
        return length == 0 or (length <= len(self.chain) and self.chain[length - 1] == end)


def message_digest(message: Any) -> bytes:
    """The hash of one flat message: key-sorted JSON, so the key order a reader wrote does not
    count, the values exactly (text, ids, arguments) do."""
    return hashlib.blake2b(canonical_json(message), digest_size=16).digest()


def chain_of(messages: list[Any]) -> list[bytes]:
    chain: list[bytes] = []
    previous = b""
    for message in messages:
        previous = hashlib.blake2b(previous + message_digest(message), digest_size=16).digest()
        chain.append(previous)
    return chain


class GroupState:
    """What is known of one conversation group so far (a combiner's accumulator)."""

    __slots__ = ("sequences", "calls", "tool_results", "tools")

    def __init__(self) -> None:
        self.sequences: list[_Sequence] = []
        self.calls: list[_CallSeen] = []
        self.tool_results: list[tuple[Origin, ToolResult]] = []
        self.tools: dict[bytes, list[dict[str, Any]]] = {}

    def add(self, source: str, position: int, piece: Piece) -> GroupState:
        origin = Origin(source, position, piece.call_id, piece.start)
        if isinstance(piece, ToolResult):
            self.tool_results.append((origin, piece))
            return self
        messages = [*piece.history, *piece.output]
        chain = chain_of(messages)
        tools = None
        if piece.tools is not None:
            tools = hashlib.blake2b(canonical_json(piece.tools), digest_size=16).digest()
            self._keep_tools(tools, piece.tools)
        self.calls.append(_CallSeen(origin, len(chain), chain[-1] if chain else b"", tools, piece.model))
        self._keep(_Sequence(messages, chain, piece.discarded))
        return self

    def _keep_tools(self, key: bytes, tools: list[dict[str, Any]]) -> None:
        """Of tool lists alike but for key order, the same one whatever the order they came in."""
        kept = self.tools.get(key)
        if kept is None or repr(tools) < repr(kept):
            self.tools[key] = tools

    def _keep(self, new: _Sequence) -> None:
        """Keep a sequence unless it is a prefix of one kept; it replaces one it extends (at
        most one can be: two kept sequences are never prefixes of one another). Of two equal
        ones (alike but for key order, or for what reading them left out) the same one stays
        whatever the order they came in: the one whose messages and ledger ``repr`` first."""
        length, end = len(new.chain), (new.chain[-1] if new.chain else b"")
        for index, kept in enumerate(self.sequences):
            if kept.holds(length, end):
                if length == len(kept.chain) and _exact(new) < _exact(kept):
                    self.sequences[index] = new
                return
            if length > len(kept.chain) and new.holds(len(kept.chain), kept.chain[-1] if kept.chain else b""):
                self.sequences[index] = new
                return
        self.sequences.append(new)

    def merge(self, other: GroupState) -> GroupState:
        for sequence in other.sequences:
            self._keep(sequence)
        self.calls.extend(other.calls)
        self.tool_results.extend(other.tool_results)
        for key, tools in other.tools.items():
            self._keep_tools(key, tools)
        return self


def _exact(sequence: _Sequence) -> str:
    """A sequence's messages and ledger exactly (key order included), to choose between equal ones."""
    return repr((sequence.messages, sequence.discarded))


class Assembled(NamedTuple):
    """One conversation made of calls: its record (flat shape) and what made it."""

    record: dict[str, Any]
    #: Where the record stands in the outputs: the latest call's file and position.
    source: str
    position: int
    #: The drop-metrics record's ``assembly`` entry (``conversation_assembly``).
    assembly: dict[str, Any]
    #: What reading its messages left out (the ledger of the call that gave them), or ``None``.
    discarded: dict[str, Any] | None = None


class NoCalls(NamedTuple):
    """A group with tool results and no LLM call: nothing to assemble (a dead letter at each
    of its records)."""

    source: str
    position: int
    detail: str
    #: Every record its tool results were read from, ``(source, position)``, the first first.
    places: tuple[tuple[str, int], ...] = ()


def _latest(origin: Origin) -> tuple[int, str, str, int]:
    return (origin.start, origin.call_id, origin.source, origin.position)


def _ordered_sequences(state: GroupState) -> list[_Sequence]:
    """The maximal sequences, the conversation's first: each ranked by the latest call it holds
    (then the longer, then its hash), so that the order depends on the pieces only."""

    def rank(sequence: _Sequence) -> tuple[Any, ...]:
        held = [_latest(c.origin) for c in state.calls if sequence.holds(c.length, c.end)]
        return (max(held), len(sequence.chain), sequence.chain[-1] if sequence.chain else b"")

    return sorted(state.sequences, key=rank, reverse=True)


def assemble(
    fmt: str,
    group: str,
    state: GroupState,
    *,
    id_field: str = "id",
    messages_field: str = "messages",
    tools_field: str = "tools",
) -> list[Assembled] | NoCalls:
    """The conversations of one group, the conversation first, then its branches."""
    if not state.calls:
        origins = sorted((origin for origin, _ in state.tool_results), key=_latest)
        places = tuple(dict.fromkeys((o.source, o.position) for o in origins))
        return NoCalls(
            origins[0].source,
            origins[0].position,
            f"{fmt} group {group!r}: {len(state.tool_results)} tool result(s) and no LLM call to assemble",
            places,
        )
    sequences = _ordered_sequences(state)
    members: list[list[_CallSeen]] = [[] for _ in sequences]
    for call in state.calls:
        for index, sequence in enumerate(sequences):
            if sequence.holds(call.length, call.end):
                members[index].append(call)
                break
    results = _tool_results_by_call(state.tool_results)
    used: set[tuple[Origin, str]] = set()
    assembled = []
    for index, (sequence, calls) in enumerate(zip(sequences, members)):
        calls.sort(key=lambda c: _latest(c.origin))
        last = calls[-1]
        messages, filled = fill_tool_results(sequence.messages, results)
        used.update((origin, tool_call_id) for origin, tool_call_id in filled)
        cid = group if index == 0 else f"{group}{BRANCH_SEPARATOR}{index}"
        record: dict[str, Any] = {id_field: cid, messages_field: messages}
        tools = next((c.tools for c in reversed(calls) if c.tools is not None), None)
        if tools is not None:
            record[tools_field] = state.tools[tools]
        model = next((c.model for c in reversed(calls) if c.model), None)
        if model is not None:
            record["model"] = model
        assembly: dict[str, Any] = {
            "format": fmt,
            "group": group,
            "calls": [_origin_entry(c.origin) for c in calls],
            "collapsed": len(calls) - 1,
        }
        if len(sequences) > 1:
            assembly["branch"] = index
            assembly["branches"] = len(sequences) - 1
        if filled:
            assembly["tool_results_filled"] = [_origin_entry(origin) for origin, _ in filled]
        assembled.append(Assembled(record, last.origin.source, last.origin.position, assembly, sequence.discarded))
    unused = [origin for origin, piece in state.tool_results if (origin, piece.tool_call_id) not in used]
    if unused:
        # Results the histories already hold (or that answer no call): listed, so every
        # record read is found in one conversation's account.
        assembled[0].assembly["tool_results_unused"] = [_origin_entry(o) for o in sorted(unused, key=_latest)]
    return assembled


def _origin_entry(origin: Origin) -> dict[str, Any]:
    return {"source": origin.source, "position": origin.position, "call": origin.call_id, "start": origin.start}


def _tool_results_by_call(tool_results: list[tuple[Origin, ToolResult]]) -> dict[str, tuple[Origin, ToolResult]]:
    """The first result recorded (by start time) for each call id; results without an id
    cannot be placed."""
    by_call: dict[str, tuple[Origin, ToolResult]] = {}
    for origin, piece in sorted(tool_results, key=lambda item: _latest(item[0])):
        if piece.tool_call_id and piece.tool_call_id not in by_call:
            by_call[piece.tool_call_id] = (origin, piece)
    return by_call


def fill_tool_results(
    messages: list[dict[str, Any]], results: dict[str, tuple[Origin, ToolResult]]
) -> tuple[list[dict[str, Any]], list[tuple[Origin, str]]]:
    """``messages`` with a tool message added for each call that has no result in them but a
    recorded one, right after its assistant turn and the results already there, in call order;
    the results used. A new list; the messages themselves are shared, not copied."""
    if not results:
        return messages, []
    # Only string ids answer a call (a reader hands on whatever id a payload held: a list is
    # no key, and one must not crash the group's assembly).
    answered = {
        m["tool_call_id"]
        for m in messages
        if isinstance(m, dict) and m.get("role") == "tool" and isinstance(m.get("tool_call_id"), str)
    }
    out: list[dict[str, Any]] = []
    filled: list[tuple[Origin, str]] = []
    pending: list[dict[str, Any]] = []
    for message in messages:
        if pending and not (isinstance(message, dict) and message.get("role") == "tool"):
            out.extend(pending)
            pending = []
        out.append(message)
        if isinstance(message, dict) and message.get("role") == "assistant":
            calls = message.get("tool_calls")
            for call in calls if isinstance(calls, list) else ():
                call_id = call.get("tool_call_id") if isinstance(call, dict) else None
                if isinstance(call_id, str) and call_id not in answered and call_id in results:
                    origin, piece = results[call_id]
                    pending.append({"role": "tool", "content": piece.content, "tool_call_id": call_id})
                    filled.append((origin, call_id))
                    answered.add(call_id)
    out.extend(pending)
    return (out if filled else messages), filled


def group_key(piece: Piece) -> tuple[str, str]:
    """The key pieces are grouped by: the format and its conversation group."""
    return (piece.format, piece.group)


__all__ = [
    "Assembled",
    "BRANCH_SEPARATOR",
    "Call",
    "GroupState",
    "NoCalls",
    "Origin",
    "assemble",
    "chain_of",
    "fill_tool_results",
    "group_key",
    "message_digest",
]
