"""Conversations chained across groups (no Beam import): a conversation whose every message,
ending at an assistant's answer, is the start of a longer conversation of the same format in
another group is that conversation's earlier part, not a conversation of its own.

The assembly (``transforms.calllogs.assemble``) rebuilds conversations group by group, a group
being a format's conversation or session id, else its trace id. Where a client gives each call
or each turn a group of its own (LiteLLM without a session id: a trace id per call; OpenTelemetry's
openai-v2 instrumentation without a parent span: a trace per call; a chat whose turns are
separate traces), one conversation comes out as many, each a prefix of the next. The rule here
is the collapse of prefixes across groups, kept exact:

- a conversation *A* is **subsumed** by a conversation *B* of another group (same format) when
  A's sequence (as its calls recorded it: before any tool result recorded apart is filled in)
  ends with an assistant message and is a strict prefix of B's, compared as the assembly
  compares (``assemble.chain_of``: arguments as parsed JSON, call ids by place). So B's history
  extends A's history *and* A's output;
- a history that shares only a start with another (the same system and user message, another
  answer), or a conversation equal to another, is not subsumed: separate conversations stay
  separate;
- A is dropped and counted; its calls, tool results and truncated answers are added to the
  account of the longest conversation that subsumes it (then the smallest by format, group and
  branch), which keeps its own id. That one is never subsumed itself (anything extending it
  would subsume A and be longer);
- a group that lost a conversation has its other ones renumbered (``renumbered``), so its ids
  are those it would have had without it.

Only keys travel: each conversation gives the chain hash of its strict prefixes that end at an
assistant message (``Fingerprints.covers``) and of itself when it ends at one
(``Fingerprints.full``). ``resolve`` decides at one hash (``decide`` at many);
``merge_absorbed`` is the one place
a survivor takes what a subsumed conversation hands it.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, NamedTuple

from transforms.calllogs.context import merge_context
from transforms.calllogs.dropped_text import put_back

#: The count of answers' texts put back where a history's copy lost them (``dropped_text``): in
#: a conversation's ``assembly`` entry and the summary's ``call_logs``.
TEXTS_RESTORED = "answer_texts_restored"


class Fingerprints(NamedTuple):
    """A conversation's keys for chaining: its length, the chain hashes of its strict prefixes
    that end at an assistant message, and its own end's hash when it ends at one (else ``b""``).

    Apart from those, its keys as the writer that drops an answer's text logs a conversation
    (``dropped_text``; the assembly's ``_text_dropped_keys``): at the answers it goes on past
    while its copies from that writer lost their text (``dropped_covers``); where it ends at an
    answer, when it holds answers with a text beside tool calls (``dropped_full``, else
    ``b""``), and those answers' places (``answer_places``), to be put back where they are
    copies in the conversation that takes it."""

    length: int
    covers: tuple[bytes, ...]
    full: bytes
    dropped_covers: tuple[bytes, ...] = ()
    dropped_full: bytes = b""
    answer_places: tuple[int, ...] = ()


def fingerprints_of(
    messages: list[Any],
    chain: list[bytes],
    dropped_covers: tuple[bytes, ...] = (),
    dropped_full: bytes = b"",
    answer_places: tuple[int, ...] = (),
) -> Fingerprints:
    """``Fingerprints`` of a sequence as its calls recorded it (``chain``: ``assemble.chain_of``)."""
    ends = [chain[i] for i, message in enumerate(messages) if _is_answer(message)]
    full = chain[-1] if chain and _is_answer(messages[-1]) else b""
    covers = tuple(ends[:-1]) if full else tuple(ends)
    return Fingerprints(len(chain), covers, full, dropped_covers, dropped_full, answer_places)


def _is_answer(message: Any) -> bool:
    return isinstance(message, dict) and message.get("role") == "assistant"


class Absorbed(NamedTuple):
    """What a subsumed conversation hands the one that subsumes it."""

    #: Its key (format, group, branch: as the assembly orders conversations).
    conversation: bytes
    #: Its id, as it would have been written.
    id: Any
    #: Its ``assembly`` entry (its calls, tool results, truncated answers).
    assembly: dict[str, Any]
    #: Its record's ``metadata`` (who had it: user, session, traces, first and last call ...).
    metadata: dict[str, Any] | None = None
    #: Its answers with a text beside tool calls and their places in its sequence, handed on
    #: only where the one taking it holds copies that lost their text
    #: (``Fingerprints.dropped_full``): put back there (``merge_absorbed``).
    answers: tuple[tuple[int, dict[str, Any]], ...] = ()


class Claim(NamedTuple):
    """One conversation at one hash: it ends there (``full``, with what it would hand on), or it
    goes on past it (``length`` messages in all)."""

    conversation: bytes
    group: str
    length: int
    absorbed: Absorbed | None = None
    #: When its latest call started (nanoseconds; 0 unknown): a conversation goes on only in a
    #: call logged no earlier than the latest call of the one it would take in.
    last_start: int = 0


def claims_of(
    conversation: bytes,
    group: str,
    prints: Fingerprints,
    absorbed: Absorbed,
    last_start: int = 0,
    answers: tuple[tuple[int, dict[str, Any]], ...] = (),
) -> list[tuple[bytes, Claim]]:
    """The claims a conversation makes, by hash: one where it ends (when it ends at an answer),
    one per earlier answer; and by its keys as the writer that drops text logs it, one per
    answer it goes on past, one where it ends handing on ``answers`` (``Absorbed.answers``)."""
    covers = (*prints.covers, *prints.dropped_covers)
    out = [(h, Claim(conversation, group, prints.length, None, last_start)) for h in covers]
    if prints.full:
        out.append((prints.full, Claim(conversation, group, prints.length, absorbed, last_start)))
    if prints.dropped_full:
        handed = absorbed._replace(answers=answers)
        out.append((prints.dropped_full, Claim(conversation, group, prints.length, handed, last_start)))
    return out


def last_call_start(assembly: dict[str, Any]) -> int:
    """When the latest of a conversation's calls started (its ``assembly`` entry's calls)."""
    starts = [c.get("start") for c in assembly.get("calls", ()) if isinstance(c, dict)]
    return max((s for s in starts if isinstance(s, int)), default=0)


class Subsumed(NamedTuple):
    """Verdict for a conversation: dropped, its messages being the start of ``into``'s."""

    conversation: bytes
    into: bytes


class Absorb(NamedTuple):
    """Verdict for a conversation: it takes the account of one it subsumes."""

    conversation: bytes
    absorbed: Absorbed


def resolve(claims: Iterable[Claim]) -> list[tuple[str, Subsumed | Absorb]]:
    """The verdicts at one hash (of one format), each with the group of the conversation it is
    for: every conversation ending there is subsumed by the longest that goes on past it (then
    the smallest key), if any, that was logged no earlier: its latest call started no earlier
    than the ending one's (else the one whose latest call is the latest). Two chats that only
    begin alike, the second logged after the first ended, are not one. ``claims`` is read
    twice, never held (a GroupByKey's values)."""
    best: Claim | None = None
    latest: Claim | None = None
    for claim in claims:
        if claim.absorbed is not None:
            continue
        if best is None or (-claim.length, claim.conversation) < (-best.length, best.conversation):
            best = claim
        if latest is None or (-claim.last_start, -claim.length, claim.conversation) < (
            -latest.last_start,
            -latest.length,
            latest.conversation,
        ):
            latest = claim
    if best is None or latest is None:
        return []
    out: list[tuple[str, Subsumed | Absorb]] = []
    for claim in claims:
        if claim.absorbed is None:
            continue
        into = best if best.last_start >= claim.last_start else latest
        # A group's own conversations are never prefixes of one another (the assembly collapsed them).
        if into.last_start >= claim.last_start and claim.group != into.group:
            out.append((claim.group, Subsumed(claim.conversation, into.conversation)))
            out.append((into.group, Absorb(into.conversation, claim.absorbed)))
    return out


def decide(claims: Iterable[tuple[bytes, Claim]]) -> list[tuple[str, Subsumed | Absorb]]:
    """The verdicts of many hashes' claims (of one format), each with the group of the
    conversation it is for: ``resolve`` at each hash where a conversation ends."""
    by_hash: dict[bytes, list[Claim]] = {}
    ends: set[bytes] = set()
    for h, claim in claims:
        by_hash.setdefault(h, []).append(claim)
        if claim.absorbed is not None:
            ends.add(h)
    return [verdict for h in sorted(ends) for verdict in resolve(by_hash[h])]


class Verdicts(NamedTuple):
    """Verdicts travelling together (those of one bucket of hashes for one output shard), as
    one pickle of their list."""

    packed: bytes


def _latest(entry: Any) -> tuple[Any, ...]:
    if not isinstance(entry, dict):
        return (0, "", "", 0)
    return (entry.get("start", 0), str(entry.get("call", "")), str(entry.get("source", "")), entry.get("position", 0))


def merge_absorbed(
    record: dict[str, Any], assembly: dict[str, Any], absorbed: list[Absorbed], messages_field: str = "messages"
) -> tuple[dict[str, Any], dict[str, Any], dict[str, int]]:
    """A surviving conversation's record and ``assembly`` entry with the accounts of the
    conversations it subsumed, and the counts that adds to its partial summary. The one place a
    conversation takes what another hands it: metadata a conversation carries (a user or
    session id, trace ids ...) goes into ``Absorbed`` (``pipeline.graph.chain_groups.
    conversation_claims``) and is merged here, into the record or the assembly entry. Neither
    is changed in place; its messages are its own.

    Their calls join its ``calls`` (by start time) and count as ``collapsed`` into it; the tool
    results they held (filled or unused) are listed as unused (its messages are its own calls');
    their truncated answers are in its messages too; ``chained`` lists their ids. Their
    ``metadata`` merges into its own (``context.merge_context``, each the earlier: trace ids and
    tags united, the earliest first call, its own user, session, model ... where it names one).
    The answers handed on (``Absorbed.answers``) are put back where their copies lost their
    text (``dropped_text.put_back``), counted ``answer_texts_restored``: what the conversations
    written hold (those a subsumed one had put back in its own messages are not)."""
    if not absorbed:
        return record, assembly, {}
    absorbed = sorted(absorbed, key=lambda a: a.conversation)
    earlier = [a.metadata for a in absorbed if a.metadata]
    if earlier and isinstance(record, dict):
        merged: dict[str, Any] = {}
        for metadata in sorted(earlier, key=lambda m: str(m.get("first_call_at", ""))):
            merged = merge_context(merged, metadata)
        own = record.get("metadata")
        record = {**record, "metadata": merge_context(merged, own if isinstance(own, dict) else None)}
    out = dict(assembly)
    calls = list(assembly.get("calls", ()))
    unused = list(assembly.get("tool_results_unused", ()))
    added = 0
    truncated = assembly.get("truncated_stream", 0)
    restored = 0
    for one in absorbed:
        theirs = one.assembly
        for at, answer in one.answers:
            messages = record.get(messages_field) if isinstance(record, dict) else None
            put = put_back(messages, at, answer) if isinstance(messages, list) else None
            if put is not None:
                record = {**record, messages_field: put}
                restored += 1
        calls.extend(theirs.get("calls", ()))
        added += len(theirs.get("calls", ()))
        unused.extend(theirs.get("tool_results_filled", ()))
        unused.extend(theirs.get("tool_results_unused", ()))
        truncated += theirs.get("truncated_stream", 0)
    out["calls"] = sorted(calls, key=_latest)
    out["collapsed"] = assembly.get("collapsed", 0) + added
    out["chained"] = sorted({*assembly.get("chained", ()), *(a.id for a in absorbed if isinstance(a.id, str))})
    if unused:
        out["tool_results_unused"] = sorted(unused, key=_latest)
    if truncated:
        out["truncated_stream"] = truncated
    counts = {"prefixes_collapsed": added, "chained_across_groups": len(absorbed)}
    if restored:
        out[TEXTS_RESTORED] = assembly.get(TEXTS_RESTORED, 0) + restored
        counts[TEXTS_RESTORED] = restored
    return record, out, counts


def renumbered(
    survivors: list[tuple[bytes, str, int, dict[str, Any]]], conversation_id: Callable[[str, int], str]
) -> dict[bytes, tuple[int, int, str]]:
    """The new place of each surviving conversation of the groups that lost one: from
    ``(key, group, branch, assembly)`` of every survivor of those groups, ``key -> (branch,
    branches, id)``, in their old order."""
    by_group: dict[str, list[tuple[int, bytes]]] = {}
    for key, group, branch, _ in survivors:
        by_group.setdefault(group, []).append((branch, key))
    out: dict[bytes, tuple[int, int, str]] = {}
    for group, members in by_group.items():
        members.sort()
        for new, (_, key) in enumerate(members):
            out[key] = (new, len(members) - 1, conversation_id(group, new))
    return out


__all__ = [
    "TEXTS_RESTORED",
    "Absorb",
    "Absorbed",
    "Claim",
    "Fingerprints",
    "Subsumed",
    "Verdicts",
    "claims_of",
    "decide",
    "fingerprints_of",
    "merge_absorbed",
    "renumbered",
    "resolve",
]
