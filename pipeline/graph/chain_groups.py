"""Conversations chained across groups (``transforms.calllogs.chained``), in the batch graph:
only keys are shuffled, the conversations stay where the assembly put them.

::

    (output shard, conversation) | its claims by (format, hash) | GroupByKey | verdicts, by the
        output shard of the conversation each is for | Flatten with the conversations

The verdicts meet their conversations in the assembly's own shuffle by output shard
(``shard_assembly``'s ``Gather``), where ``chained_conversations`` drops the subsumed ones and
hands their accounts to those that subsume them: no record is shuffled once more. A claim is a
16-byte hash and a key; a conversation ending at an answer adds its ``assembly`` entry (its calls'
places), never its messages. The streaming driver, which assembles a window's groups in one
process, calls ``chained_in_memory`` on them.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

import apache_beam as beam

from transforms.call_assembly import _Conversation, bucket_of
from transforms.calllogs.assemble import conversation_id
from transforms.calllogs.chained import (
    Absorb,
    Absorbed,
    Claim,
    Subsumed,
    claims_of,
    merge_absorbed,
    renumbered,
    resolve,
)
from transforms.record.inputs import Parsed


def _assembled(made: Any) -> dict[str, Any] | None:
    """An assembled conversation's ``assembly`` entry (None for a dead letter or anything else)."""
    if not isinstance(made, _Conversation) or made.fingerprints is None:
        return None
    payload = made.raw.payload
    return payload.assembly if isinstance(payload, Parsed) else None


def conversation_claims(made: Any, id_field: str) -> Iterator[tuple[tuple[str, bytes], Claim]]:
    """A conversation's claims, by format and hash (none for a dead letter)."""
    assembly = _assembled(made)
    if assembly is None:
        return
    record = made.raw.payload.value
    absorbed = Absorbed(made.order, record.get(id_field) if isinstance(record, dict) else None, assembly)
    for h, claim in claims_of(made.order, assembly["group"], made.fingerprints, absorbed):
        yield (assembly["format"], h), claim


def _claims(keyed: tuple[Any, Any], tag: str, id_field: str) -> Iterator[tuple[tuple[str, bytes], Claim]]:
    key, made = keyed
    if key[0] == tag:
        yield from conversation_claims(made, id_field)


def _verdicts(keyed: tuple[tuple[str, bytes], Iterable[Claim]], tag: str, buckets: int) -> Iterator[tuple]:
    (fmt, _), claims = keyed
    for group, verdict in resolve(claims):
        yield (tag, bucket_of((fmt, group), buckets)), verdict


def chained_conversations(values: Iterable[Any], id_field: str) -> list[Any]:
    """One output shard's conversations and verdicts -> its conversations, the subsumed ones
    left out, the others with the accounts they took (``merge_absorbed``), a group that lost one
    renumbered. Anything else passes as it is."""
    made: list[Any] = []
    subsumed: set[bytes] = set()
    absorbs: dict[bytes, list[Absorbed]] = {}
    for value in values:
        if isinstance(value, Subsumed):
            subsumed.add(value.conversation)
        elif isinstance(value, Absorb):
            absorbs.setdefault(value.conversation, []).append(value.absorbed)
        else:
            made.append(value)
    if not subsumed and not absorbs:
        return made
    lost = set()
    kept = []
    for one in made:
        assembly = _assembled(one)
        if assembly is not None and one.order in subsumed:
            lost.add((assembly["format"], assembly["group"]))
            continue
        kept.append(one)
    survivors = [
        (one.order, a["group"], a.get("branch", 0), a)
        for one in kept
        if (a := _assembled(one)) is not None and (a["format"], a["group"]) in lost
    ]
    places = renumbered(survivors, conversation_id)
    return [_updated(one, absorbs.get(one.order, []), places.get(one.order), id_field) for one in kept]


def _updated(made: Any, absorbed: list[Absorbed], place: tuple[int, int, str] | None, id_field: str) -> Any:
    if not absorbed and place is None:
        return made
    payload = made.raw.payload
    record, assembly, added = merge_absorbed(payload.value, payload.assembly, absorbed)
    counts = dict(made.counts)
    for name, n in added.items():
        counts[name] = counts.get(name, 0) + n
    if place is not None:
        branch, branches, new_id = place
        record = {**record, id_field: new_id}
        assembly = dict(assembly)
        assembly.pop("branch", None)
        assembly.pop("branches", None)
        if branches:
            assembly["branch"], assembly["branches"] = branch, branches
        counts["branches"] = 1 if branch else 0
    raw = made.raw._replace(payload=payload._replace(value=record, assembly=assembly))
    return made._replace(raw=raw, counts=counts)


def chained_in_memory(made: list[Any], id_field: str) -> list[Any]:
    """``made`` (conversations of many groups, in one process) chained across their groups:
    what the batch graph's shuffles decide, decided with a dict of their hashes."""
    by_hash: dict[tuple[str, bytes], list[Claim]] = {}
    for one in made:
        for key, claim in conversation_claims(one, id_field):
            by_hash.setdefault(key, []).append(claim)
    verdicts = [verdict for claims in by_hash.values() for _, verdict in resolve(claims)]
    return chained_conversations([*made, *verdicts], id_field)


@beam.typehints.with_input_types(beam.typehints.Any)
@beam.typehints.with_output_types(beam.typehints.Any)
class ChainAcrossGroups(beam.PTransform):
    """Keyed conversations (``(tag, output shard)``: the assembly's) -> the same, and the
    verdicts on them under their output shard's key, for ``chained_conversations`` to apply
    where each output shard's conversations meet."""

    def __init__(self, id_field: str, buckets: int, tag: str) -> None:
        super().__init__()
        self._id_field = id_field
        self._buckets = buckets
        self._tag = tag

    def expand(self, keyed):
        verdicts = (
            keyed
            | "Claims" >> beam.FlatMap(_claims, self._tag, self._id_field)
            | "ByHash" >> beam.GroupByKey()
            | "Verdicts" >> beam.FlatMap(_verdicts, self._tag, self._buckets)
        )
        return (keyed, verdicts) | "WithVerdicts" >> beam.Flatten()


def chain_enabled(settings: Any) -> bool:
    """Whether the run chains conversations across groups (``--chain-groups``, on by default)."""
    return getattr(settings, "chain_groups", True)


__all__ = ["ChainAcrossGroups", "chain_enabled", "chained_conversations", "chained_in_memory"]
