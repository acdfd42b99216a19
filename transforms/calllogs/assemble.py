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
import operator
import re
from typing import Any, NamedTuple

from transforms.calllogs.calls import JOIN_SUFFIX, Call, Fragment, Label, Piece, Rejected, ToolResult
from transforms.calllogs.chained import Fingerprints, fingerprints_of
from transforms.calllogs.context import conversation_metadata
from transforms.calllogs.dropped_text import (
    calls_named,
    has_text_beside_calls,
    lost_its_text,
    parsed_args,
    text_dropped_key,
)
from transforms.core.jsontext import canonical_json, dumps_line

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
    #: Digest of the call's context (a key of ``GroupState.contexts``), and how many messages
    #: its output holds (the first of them is the message its labels judge).
    context: bytes | None = None
    answers: int = 0


#: The size of a chain hash (``blake2b``, 16 bytes).
_DIGEST_SIZE = 16
#: A group state's fields made again when it is read back (``GroupState.__setstate__``).
_REBUILT = frozenset(("prefixes", "ends", "_recent", "sequences", "calls"))


class KeptSequence:
    """A maximal sequence: its messages (owned by the state), their hash chain, and the ledger
    of what reading them left out (the call's that gave them: ``Call.discarded``)."""

    __slots__ = ("messages", "chain", "discarded")

    def __init__(
        self, messages: list[dict[str, Any]], chain: list[bytes], discarded: dict[str, Any] | None = None
    ) -> None:
        self.messages = messages
        self.chain = chain
        self.discarded = discarded


def message_digest(message: Any) -> bytes:
    """The hash of one flat message: key-sorted JSON, so the key order a reader wrote does not
    count, the values exactly (text, ids, arguments) do."""
    return hashlib.blake2b(canonical_json(message), digest_size=16).digest()


def comparable(messages: list[Any]) -> list[Any]:
    """The messages as a call log's calls are compared: arguments parsed, and call ids replaced
    by their place among the sequence's calls (``#0``, ``#1`` ...), a tool result's id by the
    place of the call it answers (by id; by order among the calls not yet answered when its id
    names none of them, or when it has none). Exporters invent ids (Google ADK: ``call_0`` in an
    output, ``call_1`` in the next request's copy) or leave them out; what pairs with what is
    kept, the spelling is not. Message ``i``'s form depends only on messages ``0..i``, so the
    prefixes of a sequence are the prefixes of its comparable form."""
    out: list[Any] = []
    places: dict[str, str] = {}
    pending: list[str] = []
    count = 0
    for message in messages:
        if not isinstance(message, dict):
            out.append(message)
            continue
        calls = message.get("tool_calls")
        if isinstance(calls, list) and calls:
            message = dict(message)
            seen = []
            for call in calls:
                if not isinstance(call, dict):
                    seen.append(call)
                    continue
                place = f"#{count}"
                count += 1
                own = call.get("tool_call_id")
                if isinstance(own, str) and own:
                    places[own] = place
                pending.append(place)
                same = {**call, "tool_call_id": place}
                if "args" in call:
                    same["args"] = parsed_args(call["args"])
                seen.append(same)
            message["tool_calls"] = seen
        elif message.get("role") == "tool" and "tool_call_id" in message:
            own = message["tool_call_id"]
            answered = places.get(own) if isinstance(own, str) else None
            if answered is None and pending:
                answered = pending[0]  # an id that names no call (invented, or none): by order
            if answered is not None:
                if answered in pending:
                    pending.remove(answered)
                message = {**message, "tool_call_id": answered}
        out.append(message)
    return out


def chain_of(messages: list[Any]) -> list[bytes]:
    """The hash chain of a sequence, of its comparable form (``comparable``)."""
    return _chain(messages, [])[0]


def _chain(messages: list[Any], known: list[bytes]) -> tuple[list[bytes], int]:
    """The hash chain of ``messages`` given ``known``, the chain of as many first messages, all
    plain; and how many first messages are plain.

    A plain message (a string role, not ``tool``, and a string content, nothing else) is its
    own comparable form and changes nothing for the messages after it (it makes no call and
    answers none): the chain goes through such messages without ``comparable``, their digests
    looked up by role and text (a call's history repeats the one before it), and from the first
    other message on takes the comparable form of the rest, which is the whole's."""
    chain = list(known)
    previous = chain[-1] if chain else b""
    blake2b = hashlib.blake2b
    digests = _PLAIN_DIGESTS
    start = len(known)
    for index in range(start, len(messages)):
        message = messages[index]
        if message.__class__ is dict and len(message) == 2:
            role = message.get("role")
            content = message.get("content")
            if role.__class__ is str and content.__class__ is str and role != "tool":
                key = (role, content)
                digest = digests.get(key)
                if digest is None:
                    digest = message_digest(message)
                    if len(content) <= _PLAIN_DIGEST_CHARS:
                        if len(digests) >= _PLAIN_DIGEST_COUNT:
                            digests.clear()
                        digests[key] = digest
                previous = blake2b(previous + digest, digest_size=16).digest()
                chain.append(previous)
                continue
        for rest in comparable(messages[index:]):
            previous = blake2b(previous + message_digest(rest), digest_size=16).digest()
            chain.append(previous)
        return chain, index
    return chain, len(messages)


#: Digests of plain messages by (role, text), of texts up to ``_PLAIN_DIGEST_CHARS``, at most
#: ``_PLAIN_DIGEST_COUNT`` of them (then forgotten at once): a few megabytes at most.
_PLAIN_DIGESTS: dict[tuple[str, str], bytes] = {}
_PLAIN_DIGEST_CHARS = 2048
_PLAIN_DIGEST_COUNT = 4096


class GroupState:
    """What is known of one conversation group so far (a combiner's accumulator).

    ``sequences`` are the maximal ones, each once; ``prefixes`` holds every chain hash of every
    kept sequence (a sequence is a prefix of a kept one exactly when its end is there) and
    ``ends`` each kept sequence's own end, so that a call costs a pass over its own messages and
    a few look-ups, never a comparison with every kept sequence (a trace of thousands of
    unrelated calls)."""

    __slots__ = (
        "sequences",
        "calls",
        "tool_results",
        "rejected",
        "tools",
        "prefixes",
        "ends",
        "truncated",
        "fragments",
        "joined",
        "chained",
        "responses",
        "parts",
        "contexts",
        "labels",
        "text_dropped",
        "_recent",
    )

    def __init__(self) -> None:
        self.sequences: list[KeptSequence] = []
        self.calls: list[_CallSeen] = []
        self.tool_results: list[tuple[Origin, ToolResult]] = []
        #: Parts of the group's records that could not be read: a dead letter each.
        self.rejected: list[tuple[Origin, Rejected]] = []
        self.tools: dict[bytes, list[dict[str, Any]]] = {}
        self.prefixes: set[bytes] = set()
        self.ends: dict[bytes, int] = {}
        #: The chain ends of the calls whose output was a stream cut off (``Call.truncated``): a
        #: conversation holding one of them holds that partial answer, however the calls arrive.
        self.truncated: set[bytes] = set()
        #: Under a key of fragments to join (``group_key``): the fragments, ``(origin, fragment)``.
        self.fragments: list[tuple[Origin, Fragment]] = []
        #: Calls that continue an earlier response (``Call.previous_response_id``), held whole
        #: (they hold only what is new) until ``resolve_chains``; and each response id -> the
        #: length and chain end of the call that got it.
        self.chained: list[tuple[Origin, Call]] = []
        self.responses: dict[str, tuple[int, bytes]] = {}
        #: A call made of fragments of several records (``joins``): ``(source, position,
        #: call id)`` -> the other records' places, listed in its ``assembly`` entry (``parts``).
        self.parts: dict[tuple[str, int, str], list[tuple[str, int]]] = {}
        #: Calls made of fragments (parts of a call read apart, joined) (``transforms.calllogs.joins``).
        self.joined = 0
        #: The calls' contexts (``Call.context``), each once, by digest: a session's calls mostly
        #: share one.
        self.contexts: dict[bytes, dict[str, Any]] = {}
        #: Labels read (``calls.Label``): not assembled, handed on to be joined by their id.
        self.labels: list[Label] = []
        #: The chain hashes (``chain[i]``) of history messages read from a writer that drops an
        #: answer's text beside its tool calls (``Call.text_dropped``): where the assembly may
        #: put that text back (``transforms.calllogs.restored_text``).
        self.text_dropped: set[bytes] = set()
        #: The last call's history and its chain, when every message of it is plain: the next
        #: call's history, made of the same messages and more (a reader that reads a history
        #: once per group hands on the same message objects), hashes only what it adds.
        self._recent: tuple[list[Any], list[bytes]] | None = None

    def __getstate__(self) -> dict[str, Any]:
        # Shuffled and kept by Beam: every field but what is made of the chains again
        # (``prefixes``, ``ends``) and the last call's; each sequence's chain as one bytes
        # object, the calls as plain tuples (pickle asks a named tuple for its fields by a
        # Python call).
        state = {name: getattr(self, name) for name in self.__slots__ if name not in _REBUILT}
        state["sequences"] = [(q.messages, b"".join(q.chain), q.discarded) for q in self.sequences]
        state["calls"] = [(tuple(c.origin), *c[1:]) for c in self.calls]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        sequences = state.pop("sequences")
        calls = state.pop("calls")
        for name, value in state.items():
            setattr(self, name, value)
        self.calls = [_CallSeen(Origin(*origin), *rest) for origin, *rest in calls]
        self.sequences = []
        self.prefixes = set()
        self.ends = {}
        self._recent = None
        for messages, joined, discarded in sequences:
            chain = [joined[i : i + _DIGEST_SIZE] for i in range(0, len(joined), _DIGEST_SIZE)]
            self.sequences.append(KeptSequence(messages, chain, discarded))
            if chain:
                self.ends[chain[-1]] = len(self.sequences) - 1
                self.prefixes.update(chain)

    def add(self, source: str, position: int, piece: Piece) -> GroupState:
        origin = Origin(source, position, piece.call_id, piece.start)
        if isinstance(piece, ToolResult):
            self.tool_results.append((origin, piece))
            return self
        if isinstance(piece, Rejected):
            self.rejected.append((origin, piece))
            return self
        if isinstance(piece, Fragment):
            self.fragments.append((origin, piece))
            return self
        if isinstance(piece, Label):
            self.labels.append(piece)
            return self
        if not isinstance(piece, Call):
            return self  # not a piece to assemble (a reader's ``Skipped`` marker)
        if piece.previous_response_id:
            self.chained.append((origin, piece))
            return self
        history = piece.history
        messages = [*history, *piece.output]
        hashed: list[bytes] = []
        recent = self._recent
        if recent is not None:
            before, before_chain = recent
            size = len(before)
            if len(history) >= size and all(map(operator.is_, history[:size], before)):
                hashed = before_chain
        chain, plain = _chain(messages, hashed)
        self._recent = (history, chain[: len(history)]) if history and plain >= len(history) else None
        if piece.response_id:
            self._responded(piece.response_id, (len(chain), chain[-1] if chain else b""))
        tools = None
        if piece.tools is not None:
            tools = hashlib.blake2b(canonical_json(piece.tools), digest_size=16).digest()
            known = self.tools.get(tools)
            # Tools alike but for key order: the same ones whatever the order calls arrive in.
            if known is None or _exact(piece.tools) < _exact(known):
                self.tools[tools] = piece.tools
        context = None
        if piece.context:
            context = hashlib.blake2b(canonical_json(piece.context), digest_size=16).digest()
            self.contexts.setdefault(context, piece.context)
        self.calls.append(
            _CallSeen(origin, len(chain), chain[-1] if chain else b"", tools, piece.model, context, len(piece.output))
        )
        if piece.truncated and piece.output and chain:
            self.truncated.add(chain[-1])
        for place in piece.text_dropped:
            if 0 <= place < len(history):
                self.text_dropped.add(chain[place])
        self._keep(KeptSequence(messages, chain, piece.discarded))
        return self

    def _keep(self, new: KeptSequence) -> None:
        """Keep a sequence unless it is a prefix of one kept; it replaces the one it extends (at
        most one can be: two kept sequences are never prefixes of one another). Of two equal
        ones (alike but for key order) the one whose exact text comes first stays: the same one
        whatever the order they arrive in."""
        if not new.chain:
            if not self.sequences:
                self._append(new)
            return
        end = new.chain[-1]
        same = self.ends.get(end)
        if same is not None:
            kept = self.sequences[same]
            if (_exact(new.messages), _exact(new.discarded)) < (_exact(kept.messages), _exact(kept.discarded)):
                self.sequences[same] = new
            return
        if end in self.prefixes:
            return  # a prefix of a kept sequence
        # At most one kept sequence is a prefix of it; a growing history's is near its end.
        for h in reversed(new.chain[:-1]):
            index = self.ends.get(h)
            if index is not None:  # it extends that kept sequence: replace it
                del self.ends[h]
                self.sequences[index] = new
                self.ends[end] = index
                self.prefixes.update(new.chain)
                return
        self._append(new)

    def _append(self, new: KeptSequence) -> None:
        if self.sequences and not self.sequences[0].chain:
            # The empty sequence (a call that sent and got nothing) is a prefix of any other.
            self.sequences.pop(0)
            self.ends = {h: i - 1 for h, i in self.ends.items()}
        self.sequences.append(new)
        if new.chain:
            self.ends[new.chain[-1]] = len(self.sequences) - 1
            self.prefixes.update(new.chain)

    def _responded(self, response_id: str, end: tuple[int, bytes]) -> None:
        known = self.responses.get(response_id)
        if known is None or end < known:  # the same response logged twice: one, either order
            self.responses[response_id] = end

    def holds_pieces(self) -> bool:
        """Whether it holds anything to assemble, join or dead-letter (its labels aside)."""
        return bool(self.calls or self.chained or self.tool_results or self.rejected or self.fragments)

    def merge(self, other: GroupState) -> GroupState:
        for sequence in other.sequences:
            self._keep(sequence)
        self.chained.extend(other.chained)
        self.parts.update(other.parts)
        for response_id, end in other.responses.items():
            self._responded(response_id, end)
        self.calls.extend(other.calls)
        self.tool_results.extend(other.tool_results)
        self.rejected.extend(other.rejected)
        self.fragments.extend(other.fragments)
        self.joined += other.joined
        self.truncated |= other.truncated
        self.text_dropped |= other.text_dropped
        for key, context in other.contexts.items():
            self.contexts.setdefault(key, context)
        self.labels.extend(other.labels)
        for key, tools in other.tools.items():
            known = self.tools.get(key)
            if known is None or _exact(tools) < _exact(known):
                self.tools[key] = tools
        return self


def _exact(value: Any) -> bytes:
    """A value's JSON text as it is (key order kept): the tie-break between values alike."""
    return dumps_line(value) if value is not None else b""


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
    #: Its keys for chaining conversations across groups (``transforms.calllogs.chained``).
    fingerprints: Fingerprints | None = None
    #: Each of its calls' id -> the index in ``messages`` of the assistant message it answered
    #: (the message a label of that call judges); calls that answered nothing are not in it.
    judged: dict[str, int] | None = None


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


def _holders(state: GroupState) -> dict[bytes, list[int]]:
    """Each chain hash -> the kept sequences (by index) that hold that prefix."""
    holders: dict[bytes, list[int]] = {}
    for index, sequence in enumerate(state.sequences):
        for h in sequence.chain:
            holders.setdefault(h, []).append(index)
    return holders


def _held_by(call: _CallSeen, holders: dict[bytes, list[int]], every: list[int]) -> list[int]:
    return every if call.length == 0 else holders.get(call.end, [])


def _ordered_sequences(state: GroupState) -> tuple[list[KeptSequence], list[list[_CallSeen]]]:
    """The maximal sequences, the conversation's first, and the calls of each: sequences ranked
    by the latest call each holds (then the longer, then its hash), so that the order depends on
    the pieces only; a call goes to the first sequence in that order that holds it."""
    if len(state.sequences) == 1:  # most groups: every call's sequence is a prefix of it
        return list(state.sequences), [list(state.calls)]
    holders = _holders(state)
    every = list(range(len(state.sequences)))
    latest: list[Any] = [None] * len(state.sequences)
    for call in state.calls:
        when = _latest(call.origin)
        for index in _held_by(call, holders, every):
            if latest[index] is None or when > latest[index]:
                latest[index] = when

    def rank(index: int) -> tuple[Any, ...]:
        sequence = state.sequences[index]
        return (latest[index], len(sequence.chain), sequence.chain[-1] if sequence.chain else b"")

    order = sorted(every, key=rank, reverse=True)
    place = {index: n for n, index in enumerate(order)}
    members: list[list[_CallSeen]] = [[] for _ in order]
    for call in state.calls:
        members[min(place[i] for i in _held_by(call, holders, every))].append(call)
    return [state.sequences[i] for i in order], members


def conversation_id(group: str, branch: int) -> str:
    """The id of a group's conversation (``branch`` 0) or of its n-th branch
    (``<group>#branch<n>``). A group named like a branch (``x#branch1``, ``x#branch1#``) gets a
    ``#`` more, so that no group's id is another group's branch's."""
    if branch:
        return f"{group}{BRANCH_SEPARATOR}{branch}"
    return group + "#" if _LIKE_A_BRANCH.search(group) else group


_LIKE_A_BRANCH = re.compile(re.escape(BRANCH_SEPARATOR) + r"[0-9]+#*\Z")


def assemble(
    fmt: str,
    group: str,
    state: GroupState,
    *,
    id_field: str = "id",
    messages_field: str = "messages",
    tools_field: str = "tools",
) -> list[Assembled] | NoCalls:
    """The conversations of one group, the conversation first, then its branches. (Calls that
    continue an earlier response are held apart: ``chains.assemble_chained`` puts them in.)"""
    if not state.calls:
        origins = sorted((origin for origin, _ in state.tool_results), key=_latest)
        places = tuple(dict.fromkeys((o.source, o.position) for o in origins))
        return NoCalls(
            origins[0].source,
            origins[0].position,
            f"{fmt} group {group!r}: {len(state.tool_results)} tool result(s) and no LLM call to assemble",
            places,
        )
    sequences, members = _ordered_sequences(state)
    results = _tool_results_by_call(state.tool_results)
    used: set[tuple[Origin, str]] = set()
    assembled = []
    for index, (sequence, calls) in enumerate(zip(sequences, members)):
        calls.sort(key=lambda c: _latest(c.origin))
        last = calls[-1]
        messages, filled = fill_tool_results(sequence.messages, results)
        used.update((origin, tool_call_id) for origin, tool_call_id in filled)
        cid = conversation_id(group, index)
        record: dict[str, Any] = {id_field: cid, messages_field: messages}
        tools = next((c.tools for c in reversed(calls) if c.tools is not None), None)
        if tools is not None:
            record[tools_field] = state.tools[tools]
        model = next((c.model for c in reversed(calls) if c.model), None)
        if model is not None:
            record["model"] = model
        metadata = conversation_metadata(
            ((c.origin.start, state.contexts.get(c.context) if c.context else None) for c in calls), model
        )
        if metadata:
            record["metadata"] = metadata
        assembly: dict[str, Any] = {
            "format": fmt,
            "group": group,
            "calls": [_origin_entry(c.origin, state.parts) for c in calls],
            "collapsed": len(calls) - 1,
        }
        if len(sequences) > 1:
            assembly["branch"] = index
            assembly["branches"] = len(sequences) - 1
        if filled:
            assembly["tool_results_filled"] = [_origin_entry(origin) for origin, _ in filled]
        truncated = sum(h in state.truncated for h in sequence.chain) if state.truncated else 0
        if truncated:
            # Answers that arrived cut off (a stream with no end): not whole answers to train on.
            assembly["truncated_stream"] = truncated
        prints = fingerprints_of(sequence.messages, sequence.chain, *_text_dropped_keys(sequence, state.text_dropped))
        judged = judged_messages(calls, sequence.messages, messages)
        assembled.append(
            Assembled(
                record,
                last.origin.source,
                last.origin.position,
                assembly,
                sequence.discarded,
                fingerprints=prints,
                judged=judged,
            )
        )
    unused = [origin for origin, piece in state.tool_results if (origin, piece.tool_call_id) not in used]
    if unused:
        # Results the histories already hold (or that answer no call): listed, so every
        # record read is found in one conversation's account.
        assembled[0].assembly["tool_results_unused"] = [_origin_entry(o) for o in sorted(unused, key=_latest)]
    return assembled


def _text_dropped_keys(sequence: KeptSequence, dropped: set[bytes]) -> tuple[tuple[bytes, ...], bytes, tuple[int, ...]]:
    """A sequence's keys as the writer that drops text logs it (``chained.Fingerprints``): at
    each answer it goes on past, while every message with tool calls up to there is a copy from
    that writer (``dropped``) with no text and one at least is; where it ends at an answer,
    when it holds answers with a text beside tool calls (their copies' key); and those answers'
    places."""
    messages, chain = sequence.messages, sequence.chain
    places = [at for at, message in enumerate(messages) if has_text_beside_calls(message)]
    if not places and not dropped:
        return (), b"", ()  # nothing a copy could have lost, and no copy: no key (the common case)
    covers: list[bytes] = []
    named = b""
    only_copies, copied = True, False  # every message with calls so far a copy, and one at least
    for at, message in enumerate(messages):
        if not (isinstance(message, dict) and message.get("role") == "assistant"):
            continue
        if message.get("tool_calls"):
            named = calls_named(named, message)
            if lost_its_text(message) and chain[at] in dropped:
                copied = True
            else:
                only_copies = False
        if only_copies and copied and at < len(messages) - 1:
            covers.append(text_dropped_key(chain[at], named))
    full = b""
    if places and isinstance(messages[-1], dict) and messages[-1].get("role") == "assistant":
        at_places = set(places)
        copies = [{**m, "content": ""} if n in at_places else m for n, m in enumerate(messages)]
        full = text_dropped_key(chain_of(copies)[-1], named)
    return tuple(covers), full, tuple(places)


def judged_messages(
    calls: list[_CallSeen], sequence: list[dict[str, Any]], messages: list[dict[str, Any]]
) -> dict[str, int]:
    """Each call's id -> where the first message of its output stands in ``messages`` (the
    sequence with tool results filled in: the same message objects, some added between)."""
    place = None if messages is sequence else {id(m): n for n, m in enumerate(messages)}
    judged: dict[str, int] = {}
    for call in calls:
        if call.answers and call.length <= len(sequence):
            index = call.length - call.answers
            judged[call.origin.call_id] = index if place is None else place[id(sequence[index])]
    return judged


def _origin_entry(
    origin: Origin, parts: dict[tuple[str, int, str], list[tuple[str, int]]] | None = None
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "source": origin.source,
        "position": origin.position,
        "call": origin.call_id,
        "start": origin.start,
    }
    joined = parts.get((origin.source, origin.position, origin.call_id)) if parts else None
    if joined:  # the other records its parts were read from (a LangSmith patch, OTel events)
        entry["parts"] = [{"source": source, "position": position} for source, position in joined]
    return entry


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


def call_traces(state: GroupState) -> list[tuple[str, str | None]]:
    """Each call's id and its trace's (``Call.context``), for labels to be joined by."""
    out = []
    for call in state.calls:
        context = state.contexts.get(call.context) if call.context else None
        out.append((call.origin.call_id, context.get("trace_id") if context else None))
    for origin, chained in state.chained:  # calls held whole until their responses are chained
        out.append((origin.call_id, (chained.context or {}).get("trace_id")))
    return out


def group_key(piece: Piece) -> tuple[str, str]:
    """The key pieces are grouped by: the format and its conversation group; a fragment's, the
    format marked ``JOIN_SUFFIX`` and its join key (``transforms.calllogs.joins``)."""
    if isinstance(piece, Fragment):
        return (piece.format + JOIN_SUFFIX, piece.key)
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
