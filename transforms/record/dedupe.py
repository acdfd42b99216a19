"""``--dedupe`` and ``--split`` after normalization, as plain functions: the claims a shard's
conversations make (their keys, no record), which one each content key keeps, the verdicts
that come of it, and a shard's spilled conversations shaped by its verdicts, in input order.
``pipeline.graph.shard_dataset`` brings the claims of every shard together with them (its
shuffles) and rewrites the outputs of each shard a verdict touches.

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

Only claims and verdicts are shuffled: a record stays in its shard's files (or spill file),
read once, in order, when a verdict touches its shard. Determinism: the decisions depend on the keys and places only,
and every shard's outputs are written in input order, so the files, their names and their bytes
depend on the input only, on any runner.
"""

from __future__ import annotations

import io
import pickle
import sys
from typing import AbstractSet, Any, Iterator, NamedTuple, Union

from transforms.core.jsontext import dumps_line, parse_json
from transforms.dataset.dataset_keys import CONTENT_KEYS, LINK_SIZE, PRIVATE_KEYS, TRAIN
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
    prefixes: bytes = b""  # its prefixes' links, ``LINK_SIZE`` bytes each (``prefix``; ``dataset_keys.content_keys``)

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


def batch_claims(shard: int, start: int, metrics: list[dict[str, Any]], links: bool = True) -> list[tuple[Any, ...]]:
    """A batch's conversations (their drop metrics) -> their claims as plain tuples (``Claim``'s
    fields), in input order; ``links`` False: without their prefixes (kept apart by the caller)."""
    out = []
    for offset, m in enumerate(metrics):
        full, prefixes = m[CONTENT_KEYS]
        out.append(((shard, start, offset), m["id"], full, prefixes if links else b""))
    return out


def pack(values: Any) -> bytes:
    """Claims (or what is decided of them) as one value for a shuffle: one pickle of plain
    tuples is several times cheaper than Beam's coder on a list of them, element by element."""
    return pickle.dumps(values, protocol=pickle.HIGHEST_PROTOCOL)


def pack_flat(values: Any) -> bytes:
    """``pack`` for plain values in which no object refers to itself (``--dedupe``'s claims:
    tuples of text, numbers and bytes): pickled without the memo (``Pickler.fast``), about a
    tenth of ``pack``'s time on 100,000 claims (the memo's entry per object was most of it);
    an object met twice is written twice (a few more bytes a claim). ``unpack`` reads it."""
    out = io.BytesIO()
    pickler = pickle.Pickler(out, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.fast = True
    pickler.dump(values)
    return out.getvalue()


def unpack(packed: bytes) -> Any:
    """``pack``'s (and ``pack_flat``'s) values."""
    values: Any = pickle.loads(packed)  # noqa: S301 — the run's own values, written by ``pack``
    return values


def unpack_claims(packed: bytes) -> list[Claim]:
    """A shard result's packed claims (``batch_claims``') -> its claims."""
    return [Claim(*fields) for fields in unpack(packed)] if packed else []


def fingerprint(key: str) -> int:
    """A content key's first 64 bits, read in this machine's byte order (as
    ``memoryview(...).cast("Q")`` reads a link's first 8 bytes): what ``known`` sets hold (8
    bytes a conversation)."""
    return int.from_bytes(bytes.fromhex(key[:16]), sys.byteorder)


#: A prefix's link's bytes in ``Claim.prefixes``, and those of its content key (the first ones).
_LINK, _KEY = LINK_SIZE, 16


def content_claims(claim: Claim, known: AbstractSet[int] | None = None) -> Iterator[tuple[str, tuple[str, Any]]]:
    """(content key, what this conversation is under it): its whole content, with its claim
    (less its prefixes); each of its prefixes (``prefix``), with a reference to it (length,
    place, full key, id). Plain tuples: Beam's coder encodes them itself, where it pickles a
    named tuple one by one (a third of the shuffles' cost).

    ``known``: the ``fingerprint`` of every conversation's whole content in the run. A prefix
    that is not among them is no conversation's whole, so its claim would decide nothing
    (``resolve_content`` passes over a key without a whole): it is left out. Most prefixes
    are none, and they were most of what ``prefix`` shuffled (a claim per message)."""
    yield claim.full, ("whole", (claim.order, claim.id, claim.full))
    links = claim.prefixes
    length = len(links) // _LINK + 1
    for at in range(0, len(links), _LINK):
        # The link's first 8 bytes: ``fingerprint`` of its key's text.
        if known is None or int.from_bytes(links[at : at + 8], sys.byteorder) in known:
            yield links[at : at + _KEY].hex(), ("extends", (length, claim.order, claim.full, claim.id))


def none_known(links: bytes, known: AbstractSet[int]) -> bool:
    """Is none of these prefix links (several conversations' ``Claim.prefixes`` joined) among
    the ``known`` wholes? Their fingerprints tested at once, in C (most batches: then
    ``content_claims`` need not test them one by one)."""
    return known.isdisjoint(memoryview(links).cast("Q")[:: _LINK // 8])


def resolve_content(element: tuple[str, Any]) -> Iterator[tuple[str, tuple[str, tuple[Any, ...], tuple[Any, ...]]]]:
    """One content key's claims -> (the key of the one kept, each other conversation collapsed
    into it, with the one kept: ``(COLLAPSED, claim, survivor)``).

    Conversations that are a prefix of longer ones go into the longest (the earliest of the
    longest); identical ones into the first in input order, which is kept. A conversation kept
    with nothing collapsed into it (most of them) gives nothing: it needs no verdict, and the
    next shuffle carries the duplicates only."""
    key, values = element[0], list(element[1])
    wholes = sorted((Claim(*c) for kind, c in values if kind == "whole"), key=lambda c: c.order)
    if not wholes:
        return
    extenders = [ref for kind, ref in values if kind == "extends"]
    if extenders:
        # The earliest of the longest: under its own key (which no longer one extends) it is
        # the earliest whole, the one kept there too.
        _, order, target, first_id = min(extenders, key=lambda ref: (-ref[0], ref[1]))
        survivor = (order, first_id, target)
        for claim in wholes:
            yield target, (COLLAPSED, tuple(claim), survivor)
        return
    survivor = tuple(wholes[0])
    for claim in wholes[1:]:
        yield key, (COLLAPSED, tuple(claim), survivor)


def collapse_kept(element: tuple[str, Any]) -> Iterator[tuple[int, Verdict]]:
    """The conversations collapsed into one kept (each with it) -> a verdict for each, by
    shard: the kept one takes the first id and lists the others; each other is a duplicate of
    it. A conversation kept with nothing collapsed into it gets no verdict (and no element:
    it is written as it is)."""
    values = list(element[1])
    collapsed = sorted((Claim(*c) for kind, c, _ in values if kind == COLLAPSED), key=lambda c: c.order)
    if not collapsed:
        return
    survivor = Claim(*values[0][2])
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
    # (A spill's metrics hold no content keys: taken off once claimed, ``shard_step.Held``; a
    # trl-dpo candidate's keep their pair claim.)
    metrics = [c.metrics if not c.metrics.keys() & PRIVATE_KEYS else _without_keys(c.metrics) for c in kept]
    yield DROPS, Batch(shard, kept[0].start, metrics)
    for name in names:
        chosen = [c for c, m in zip(kept, metrics) if m.get("split", TRAIN) == name]
        if chosen:
            lines = [c.line for c in chosen]
            yield name, Batch(shard, chosen[0].start, [c.item for c in chosen], None if None in lines else lines)


def batch_outputs(
    shard: int,
    start: int,
    metrics: list[dict[str, Any]],
    items: list[Any],
    lines: list[Any] | None,
    names: tuple[str, ...],
) -> Iterator[tuple[str, Batch]]:
    """``shard_outputs`` of a spilled batch whose conversations are all kept as they are (no
    verdict), without a ``Conversation`` made for each: the same pairs."""
    if not metrics:
        return
    yield DROPS, Batch(shard, start, [m if CONTENT_KEYS not in m else _without_keys(m) for m in metrics])
    each_split = [m.get("split", TRAIN) for m in metrics]
    for name in names:
        chosen = [index for index, split in enumerate(each_split) if split == name]
        if not chosen:
            continue
        its_lines = None if lines is None else [lines[index] for index in chosen]
        its_items = items if len(chosen) == len(items) else [items[index] for index in chosen]
        yield name, Batch(shard, start, its_items, None if its_lines is None or None in its_lines else its_lines)


def _without_keys(metrics: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in metrics.items() if k not in PRIVATE_KEYS}


def sorted_letters(letters: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A shard's dead letters (its own, then its duplicates) in input order, by position."""
    return sorted(letters, key=lambda d: d["position"])
