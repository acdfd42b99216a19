"""``--dedupe`` and ``--split`` after normalization, as plain functions: a shard's held outputs
to its conversations, the content keys they claim, which one each key keeps, the collapse into
it, and a shard's outputs in input order. ``pipeline.graph.shard_dataset`` brings conversations
of every shard together with them (its shuffles).

What each conversation's keys are is decided where it is normalized (``transforms.dataset_keys``:
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

Determinism: every shard's conversations are sorted by their place in the input and written as
one batch per shard and output, so the files, their names and their bytes depend on the input
only, on any runner.
"""

from __future__ import annotations

from typing import Any, Iterator, NamedTuple

from transforms.core.jsontext import dumps_line, parse_json
from transforms.dataset.dataset_keys import CONTENT_KEYS, TRAIN
from transforms.dataset.training_summary import DUPLICATE
from transforms.record.inputs import Batch
from transforms.record.record_settings import Settings

#: What one shard's regrouped elements are tagged with.
RECORDS, DROPS, LETTERS, KEPT, COLLAPSED = "records", "drops", "letters", "kept", "collapsed"


class Conversation(NamedTuple):
    """One normalized conversation, brought together with its metrics after the step."""

    shard: int
    start: int  # its batch's start, then
    offset: int  # its place in that batch: (shard, start, offset) is its place in the input
    metrics: dict[str, Any]
    item: Any  # the record, or its JSON line (a JSON Lines output)
    line: Any  # its JSON line, or None

    @property
    def order(self) -> tuple[int, int, int]:
        return (self.shard, self.start, self.offset)


def shard_conversations(element: tuple[int, Any]) -> Iterator[Conversation]:
    """One shard's batches of records and of drop metrics -> its conversations, in input order."""
    shard, tagged = element
    records: dict[tuple[int, int], Batch] = {}
    drops: dict[tuple[int, int], Batch] = {}
    for tag, batch in tagged:
        (records if tag == RECORDS else drops)[(batch.start, batch.scope)] = batch
    for key in sorted(drops):
        metrics = drops[key].items
        batch = records.get(key)
        if batch is None:
            # Not reached: the step routes a batch's records and metrics together. Were it, the
            # run's recount would find them missing (not accounted, no _SUCCESS): never nulls.
            continue
        lines = batch.lines if batch.lines is not None else [None] * len(metrics)
        for index, (m, item, line) in enumerate(zip(metrics, batch.items, lines)):
            yield Conversation(shard, key[0], index, m, item, line)


def content_claims(conversation: Conversation) -> Iterator[tuple[str, tuple[str, Any]]]:
    """(content key, what this conversation is under it): its whole content, with itself; each
    of its prefixes (``prefix``), with a reference to it (length, place, full key)."""
    full, prefixes = conversation.metrics[CONTENT_KEYS]
    yield full, ("whole", conversation)
    length = len(prefixes) + 1
    for prefix in prefixes:
        yield prefix, ("extends", (length, conversation.order, full))


def resolve_content(element: tuple[str, Any]) -> Iterator[tuple[str, tuple[str, Conversation]]]:
    """One content key's conversations -> (the key of the one kept, what each is).

    Conversations that are a prefix of longer ones go into the longest (the earliest of the
    longest); identical ones into the first in input order, which is kept."""
    key, values = element[0], list(element[1])
    wholes = sorted((c for kind, c in values if kind == "whole"), key=lambda c: c.order)
    if not wholes:
        return
    extenders = [ref for kind, ref in values if kind == "extends"]
    if extenders:
        _, _, target = min(extenders, key=lambda ref: (-ref[0], ref[1]))
        for conversation in wholes:
            yield target, (COLLAPSED, conversation)
        return
    yield key, (KEPT, wholes[0])
    for conversation in wholes[1:]:
        yield key, (COLLAPSED, conversation)


def collapse_kept(element: tuple[str, Any], settings: Settings) -> Iterator[tuple[int, tuple[str, Any]]]:
    """The conversation kept and those collapsed into it -> the kept one (the first id, the
    others listed) and a ``duplicate`` dead letter for each other, by shard."""
    values = list(element[1])
    kept = [c for kind, c in values if kind == KEPT]
    collapsed = sorted((c for kind, c in values if kind == COLLAPSED), key=lambda c: c.order)
    if not kept:  # not reached: the longest conversation of a chain is kept under its own key
        kept, collapsed = collapsed[:1], collapsed[1:]
    (survivor,) = kept
    if not collapsed:
        yield survivor.shard, (KEPT, survivor)
        return
    members = sorted([survivor, *collapsed], key=lambda c: c.order)
    first_id = members[0].metrics["id"]
    metrics = dict(survivor.metrics)
    metrics["id"] = first_id
    metrics["duplicates"] = [c.metrics["id"] for c in members[1:]]
    item, line = _with_id(survivor, first_id, settings)
    yield survivor.shard, (KEPT, survivor._replace(metrics=metrics, item=item, line=line))
    for conversation in collapsed:
        yield conversation.shard, (LETTERS, _duplicate_letter(conversation, survivor, first_id, settings))


def _with_id(conversation: Conversation, first_id: str, settings: Settings) -> tuple[Any, Any]:
    """The kept record with the first id in its id field, when its sink writes one."""
    if conversation.metrics["id"] == first_id:
        return conversation.item, conversation.line
    record = conversation.item if isinstance(conversation.item, dict) else parse_json(conversation.line)
    if not isinstance(record, dict) or settings.id_field not in record:
        return conversation.item, conversation.line
    record = {**record, settings.id_field: first_id}
    line = dumps_line(record)
    return (line if not isinstance(conversation.item, dict) else record), line


def _duplicate_letter(
    conversation: Conversation, survivor: Conversation, first_id: str, settings: Settings
) -> dict[str, Any]:
    same = conversation.metrics[CONTENT_KEYS][0] == survivor.metrics[CONTENT_KEYS][0]
    how = "the same conversation as" if same else "a prefix of the conversation kept as"
    line = conversation.line if conversation.line is not None else dumps_line(conversation.item)
    raw = line.decode("utf-8", "replace") if isinstance(line, bytes) else str(line)
    return {
        "source": conversation.metrics["source"],
        "position": conversation.metrics["position"],
        "reason": DUPLICATE,
        "detail": f"--dedupe {settings.dedupe}: {how} {first_id}",
        # The record as the sink wrote it (the input's text is not kept past the step).
        "raw": raw[: settings.raw_limit],
        "id": conversation.metrics["id"],
    }


def shard_outputs(shard: int, values: list[tuple[str, Any]], names: tuple[str, ...]) -> Iterator[tuple[str, Batch]]:
    """One shard's kept conversations and dead letters -> ``(output, Batch)`` pairs: its drop
    metrics (``DROPS``), each split's records (by split name), its dead letters (``LETTERS``),
    one batch each, in input order; an output with nothing for the shard gets no batch."""
    kept = sorted((c for kind, c in values if kind == KEPT), key=lambda c: c.order)
    letters = sorted((d for kind, d in values if kind == LETTERS), key=lambda d: d["position"])
    if kept:
        metrics = [{k: v for k, v in c.metrics.items() if k != CONTENT_KEYS} for c in kept]
        yield DROPS, Batch(shard, kept[0].start, metrics)
        for name in names:
            chosen = [c for c, m in zip(kept, metrics) if m.get("split", TRAIN) == name]
            if chosen:
                lines = [c.line for c in chosen]
                yield name, Batch(shard, chosen[0].start, [c.item for c in chosen], None if None in lines else lines)
    if letters:
        yield LETTERS, Batch(shard, letters[0]["position"], letters)
