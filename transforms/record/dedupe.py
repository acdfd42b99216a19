"""``--dedupe`` and ``--split`` after normalization, as plain functions: the claims a shard's
conversations make (their keys, no record), which one each content key keeps, the verdicts
that come of it, and a shard's spilled conversations shaped by its verdicts, in input order.
``pipeline.graph.shard_dataset`` brings the claims of every shard together with them (its
shuffles) and writes each shard's outputs from its spill file.

What each conversation's keys are is decided where it is normalized (``transforms.dataset.dataset_keys``:
its content hash chain, its split); these functions only decide what is kept:

- **exact**: conversations with the same content (tools and messages as written; ids and other
  fields aside) collapse into the first in input order (shard, then position);
- **prefix**: also a conversation whose messages are the first ones of a longer one collapses
  into the longest conversation it begins (the earliest of the longest, when several);
- the conversation kept takes the first id of those collapsed into it (its drops/ line's
  ``id``, and the record's own id field when the sink writes one) and lists the others, in
  input order, in its drops/ line (``duplicates``); each of the others is a dead letter with
  reason ``duplicate`` naming the id kept: every record read still ends in exactly one place;
- **splits**: each conversation's records go to its split's output (``train``: ``normalized/``;
  another split: its own directory), its metrics (with ``split``) to ``drops/`` as before.

Only claims and verdicts are shuffled: a record stays in its shard's spill file, read once, in
order, when its shard is written. Determinism: the decisions depend on the keys and places only,
and every shard's outputs are written in input order, so the files, their names and their bytes
depend on the input only, on any runner.
"""

from __future__ import annotations

import pickle
from typing import Any, Iterator, NamedTuple, Union

from transforms.core.jsontext import dumps_line, parse_json
from transforms.dataset.dataset_keys import CONTENT_KEYS, PRIVATE_KEYS, TRAIN
from transforms.dataset.training_summary import DUPLICATE
from transforms.record.inputs import Batch
from transforms.record.record_settings import Settings

#: What one shard's shaped elements are tagged with.
RECORDS, DROPS, LETTERS, KEPT, COLLAPSED = "records", "drops", "letters", "kept", "collapsed"

#: A conversation's place in the input: (shard, its batch's start, its place in that batch).
Order = tuple[int, int, int]


class Claim(NamedTuple):
    """What the dedupe decides on for one conversation: its keys and place, not its record."""

    order: Order
    id: Any
    full: str  # the content key of the whole conversation
    prefixes: tuple[str, ...] = ()  # the content keys of its prefixes (``prefix``)

    @property
    def shard(self) -> int:
        return self.order[0]


class Conversation(NamedTuple):
    """One normalized conversation as its shard's spill file gives it back."""

    shard: int
    start: int  # its batch's start, then
    offset: int  # its place in that batch: (shard, start, offset) is its place in the input
    metrics: dict[str, Any]
    item: Any  # the record, or its JSON line (a JSON Lines output)
    line: Any  # its JSON line, or None

    @property
    def order(self) -> Order:
        return (self.shard, self.start, self.offset)


class KeptAs(NamedTuple):
    """Verdict: the conversation at ``order`` is kept, as ``first_id``, the others listed."""

    order: Order
    first_id: Any
    duplicates: list[Any]


class DuplicateOf(NamedTuple):
    """Verdict: the conversation at ``order`` is a duplicate of the one kept as ``first_id``
    (``same``: the same conversation; else a prefix of it)."""

    order: Order
    first_id: Any
    same: bool


Verdict = Union[KeptAs, DuplicateOf]


def batch_claims(shard: int, start: int, metrics: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """A batch's conversations (their drop metrics) -> their claims as plain tuples (``Claim``'s
    fields), in input order."""
    out = []
    for offset, m in enumerate(metrics):
        full, prefixes = m[CONTENT_KEYS]
        out.append(((shard, start, offset), m["id"], full, tuple(prefixes)))
    return out


def pack(values: list[Any]) -> bytes:
    """Claims (or what is decided of them) as one value for a shuffle: one pickle of plain
    tuples is several times cheaper than Beam's coder on a list of them, element by element."""
    return pickle.dumps(values, protocol=pickle.HIGHEST_PROTOCOL)


def unpack(packed: bytes) -> list[Any]:
    """``pack``'s values."""
    values: list[Any] = pickle.loads(packed)  # noqa: S301 — the run's own values, written by ``pack``
    return values


def unpack_claims(packed: bytes) -> list[Claim]:
    """A shard result's packed claims (``batch_claims``') -> its claims."""
    return [Claim(*fields) for fields in unpack(packed)] if packed else []


def content_claims(claim: Claim) -> Iterator[tuple[str, tuple[str, Any]]]:
    """(content key, what this conversation is under it): its whole content, with its claim
    (less its prefixes); each of its prefixes (``prefix``), with a reference to it (length,
    place, full key). Plain tuples: Beam's coder encodes them itself, where it pickles a
    named tuple one by one (a third of the shuffles' cost)."""
    yield claim.full, ("whole", (claim.order, claim.id, claim.full))
    length = len(claim.prefixes) + 1
    for prefix in claim.prefixes:
        yield prefix, ("extends", (length, claim.order, claim.full))


def resolve_content(element: tuple[str, Any]) -> Iterator[tuple[str, tuple[str, tuple[Any, ...]]]]:
    """One content key's claims -> (the key of the one kept, what each is).

    Conversations that are a prefix of longer ones go into the longest (the earliest of the
    longest); identical ones into the first in input order, which is kept."""
    key, values = element[0], list(element[1])
    wholes = sorted((Claim(*c) for kind, c in values if kind == "whole"), key=lambda c: c.order)
    if not wholes:
        return
    extenders = [ref for kind, ref in values if kind == "extends"]
    if extenders:
        _, _, target = min(extenders, key=lambda ref: (-ref[0], ref[1]))
        for claim in wholes:
            yield target, (COLLAPSED, tuple(claim))
        return
    yield key, (KEPT, tuple(wholes[0]))
    for claim in wholes[1:]:
        yield key, (COLLAPSED, tuple(claim))


def collapse_kept(element: tuple[str, Any]) -> Iterator[tuple[int, Verdict]]:
    """The conversation kept and those collapsed into it -> a verdict for each, by shard: the
    kept one takes the first id and lists the others; each other is a duplicate of it. A
    conversation kept with nothing collapsed into it gets no verdict (it is written as it is)."""
    values = list(element[1])
    kept = [Claim(*c) for kind, c in values if kind == KEPT]
    collapsed = sorted((Claim(*c) for kind, c in values if kind == COLLAPSED), key=lambda c: c.order)
    if not kept:  # not reached: the longest conversation of a chain is kept under its own key
        kept, collapsed = collapsed[:1], collapsed[1:]
    (survivor,) = kept
    if not collapsed:
        return
    members = sorted([survivor, *collapsed], key=lambda c: c.order)
    first_id = members[0].id
    yield survivor.shard, KeptAs(survivor.order, first_id, [c.id for c in members[1:]])
    for claim in collapsed:
        yield claim.shard, DuplicateOf(claim.order, first_id, claim.full == survivor.full)


def spilled_conversations(
    shard: int, start: int, metrics: list[dict[str, Any]], items: list[Any], lines: list[Any] | None
) -> list[Conversation]:
    """One spilled batch (its drop metrics, records and their lines) -> its conversations."""
    each_line = lines if lines is not None else [None] * len(metrics)
    return [Conversation(shard, start, index, *each) for index, each in enumerate(zip(metrics, items, each_line))]


def shape(conversation: Conversation, verdict: Verdict | None, settings: Settings) -> tuple[str, Any]:
    """A conversation and its verdict -> ``(KEPT, the conversation as written)`` or
    ``(LETTERS, its duplicate dead letter)``; no verdict: kept as it is."""
    if verdict is None:
        return KEPT, conversation
    if isinstance(verdict, DuplicateOf):
        return LETTERS, _duplicate_letter(conversation, verdict, settings)
    metrics = dict(conversation.metrics)
    metrics["id"] = verdict.first_id
    metrics["duplicates"] = list(verdict.duplicates)
    item, line = _with_id(conversation, verdict.first_id, settings)
    return KEPT, conversation._replace(metrics=metrics, item=item, line=line)


def _with_id(conversation: Conversation, first_id: Any, settings: Settings) -> tuple[Any, Any]:
    """The kept record with the first id in its id field, when its sink writes one."""
    if conversation.metrics["id"] == first_id:
        return conversation.item, conversation.line
    record = conversation.item if isinstance(conversation.item, dict) else parse_json(conversation.line)
    if not isinstance(record, dict) or settings.id_field not in record:
        return conversation.item, conversation.line
    record = {**record, settings.id_field: first_id}
    line = dumps_line(record)
    return (line if not isinstance(conversation.item, dict) else record), line


def _duplicate_letter(conversation: Conversation, verdict: DuplicateOf, settings: Settings) -> dict[str, Any]:
    how = "the same conversation as" if verdict.same else "a prefix of the conversation kept as"
    line = conversation.line if conversation.line is not None else dumps_line(conversation.item)
    raw = line.decode("utf-8", "replace") if isinstance(line, bytes) else str(line)
    letter = {
        "source": conversation.metrics["source"],
        "position": conversation.metrics["position"],
        "reason": DUPLICATE,
        "detail": f"--dedupe {settings.dedupe}: {how} {verdict.first_id}",
        # The record as the sink wrote it (the input's text is not kept past the step).
        "raw": raw[: settings.raw_limit],
        "id": conversation.metrics["id"],
    }
    if "assembly" in conversation.metrics:  # assembled from call logs: its calls, for explain
        letter["assembly"] = conversation.metrics["assembly"]
    return letter


def shard_outputs(shard: int, kept: list[Conversation], names: tuple[str, ...]) -> Iterator[tuple[str, Batch]]:
    """Some of a shard's kept conversations, in input order -> ``(output, Batch)`` pairs: their
    drop metrics (``DROPS``) and each split's records (by split name), without the private
    keys; an output with nothing gets no batch."""
    if not kept:
        return
    metrics = [{k: v for k, v in c.metrics.items() if k not in PRIVATE_KEYS} for c in kept]
    yield DROPS, Batch(shard, kept[0].start, metrics)
    for name in names:
        chosen = [c for c, m in zip(kept, metrics) if m.get("split", TRAIN) == name]
        if chosen:
            lines = [c.line for c in chosen]
            yield name, Batch(shard, chosen[0].start, [c.item for c in chosen], None if None in lines else lines)


def sorted_letters(letters: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A shard's dead letters (its own, then its duplicates) in input order, by position."""
    return sorted(letters, key=lambda d: d["position"])
