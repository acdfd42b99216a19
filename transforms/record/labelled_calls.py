"""Labels put on the conversations assembled from call logs (no Beam import): the glue between
the label join (``transforms.calllogs.labels``: which group each label joins) and an output
shard's conversations (``transforms.record.assembled_calls``: which conversation of the group,
which message).

An output shard's items are its ``AssemblyOutput`` conversations, the ``Joined`` labels of its
groups and partial counts; ``labelled`` puts each label on its conversation (``labels.attach``)
and counts it joined, or unmatched when its group made no conversation (a dead letter).
``joined_in`` joins labels where every group is at hand (the streaming driver's window).
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

from transforms.calllogs.assemble import GroupState, call_traces
from transforms.calllogs.calls import Label
from transforms.calllogs.labels import Joined, attach, label_counts, resolve, targets_of
from transforms.core.counts import add_counts
from transforms.core.jsontext import canonical_json, parse_json
from transforms.record.assembled_calls import AssemblyOutput, assembly_partial, bucket_of, shard_batches
from transforms.record.inputs import Batch


def labelled(made: list[Any]) -> tuple[list[AssemblyOutput], dict[str, Any]]:
    """One output shard's conversations, with the labels joined to their groups put on them
    (``labels.attach``): a label of a call on the message that call answered, else on the
    conversation holding its trace (the group's first such), else on the group's conversation;
    a label whose group made no conversation (a dead letter) is counted unmatched. ``made``: the
    shard's ``AssemblyOutput`` and ``Joined`` items, and partial counts (dicts) to add."""
    conversations = sorted((item for item in made if isinstance(item, AssemblyOutput)), key=lambda c: c.order)
    joined = [item for item in made if isinstance(item, Joined)]
    counts: dict[str, Any] = {}
    for item in made:
        if isinstance(item, dict):
            counts = add_counts(counts, item)
    if not joined:
        return conversations, counts
    by_group: dict[tuple[str, str], list[int]] = {}
    for n, conversation in enumerate(conversations):
        order = parse_json(conversation.order)
        if len(order) == 3 and conversation.judged is not None:
            by_group.setdefault((order[0], order[1]), []).append(n)
    placed: dict[int, list[tuple[Label, int | None]]] = {}
    unmatched: dict[str, int] = {}
    for item in sorted(joined, key=lambda j: canonical_json([j.format, j.group, list(j.label)])):
        where = _place(item, [(n, conversations[n]) for n in by_group.get((item.format, item.group), ())])
        if where is None:
            unmatched[item.label.source] = unmatched.get(item.label.source, 0) + 1
        else:
            placed.setdefault(where[0], []).append((item.label, where[1]))
    out = list(conversations)
    for n, labels in placed.items():
        raw = out[n].raw
        payload = raw.payload
        out[n] = out[n]._replace(raw=raw._replace(payload=payload._replace(value=attach(payload.value, labels))))
    more = label_counts(joined=sum(len(labels) for labels in placed.values()), label_unmatched=unmatched)
    return out, add_counts(counts, more)


def _place(item: Joined, group: list[tuple[int, AssemblyOutput]]) -> tuple[int, int | None] | None:
    """Which of its group's conversations a label goes on, and on which message (``None``: the
    whole conversation)."""
    label = item.label
    if item.call:
        for n, conversation in group:
            if label.call_id in (conversation.judged or {}):
                return n, (conversation.judged or {})[label.call_id]
        for n, conversation in group:
            calls = conversation.raw.payload.assembly.get("calls", ())
            if any(call.get("call") == label.call_id for call in calls):
                return n, None
    for n, conversation in group:
        metadata = conversation.raw.payload.value.get("metadata") or {}
        if label.trace_id and label.trace_id in metadata.get("trace_ids", ()):
            return n, None
    return (group[0][0], None) if group else None


def joined_in(states: dict[tuple[str, str], GroupState]) -> list[Any]:
    """The labels of ``states`` (groups' states, some holding labels only) joined to the groups
    among them (``labels.resolve``), as ``labelled`` takes them: ``Joined`` items and partial
    counts. For a run that holds every group in one place (the streaming driver's window)."""
    by_id: dict[str, tuple[list[Any], list[Any]]] = {}
    for _, state in sorted(states.items(), key=lambda item: item[0]):
        for label in state.labels:
            by_id.setdefault(label.group, ([], []))[0].append(label)
    if not by_id:
        return []
    for key, state in sorted(states.items(), key=lambda item: item[0]):
        if state.calls:
            for join_id, target in targets_of(key, call_traces(state)):
                if join_id in by_id:
                    by_id[join_id][1].append(target)
    out: list[Any] = []
    for join_id in sorted(by_id):
        joined, counts = resolve(*by_id[join_id])
        out.extend(joined)
        if counts:
            out.append({"labels": counts})
    return out


def joined_by_bucket(keyed: tuple[str, Iterable[Any]], buckets: int) -> Iterator[tuple[int, Any]]:
    """The labels and targets of one join id -> each label keyed by the output shard of the group
    it joins (``labels.resolve``), its counts by the join id's."""
    join_id, items = keyed
    items = list(items)
    labels = [item for item in items if isinstance(item, Label)]
    if not labels:
        return
    joined, counts = resolve(labels, [item for item in items if not isinstance(item, Label)])
    for item in joined:
        yield bucket_of((item.format, item.group), buckets), item
    if counts:
        yield bucket_of(("", join_id), buckets), {"labels": counts}


def labelled_batches(keyed: tuple[int, Iterable[Any]], first_shard: int, batch_size: int) -> Iterator[Batch]:
    """``shard_batches`` of one output shard's conversations, labelled (``labelled``)."""
    made, _ = labelled(list(keyed[1]))
    yield from shard_batches((keyed[0], made), first_shard, batch_size)


def labelled_partial(keyed: tuple[int, Iterable[Any]]) -> dict[str, Any]:
    """``assembly_partial`` of one output shard, with its labels' counts."""
    made, counts = labelled(list(keyed[1]))
    return add_counts(assembly_partial((keyed[0], made)), counts)
