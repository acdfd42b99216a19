"""Conversations chained across groups (``transforms.calllogs.chained``), in the batch graph:
only keys are shuffled, the conversations stay where the assembly put them.

::

    conversations, where the assembly makes them | their claims (``ConversationClaims``), a list
        by (format, bucket of hashes) | GroupByKey (ByHash)
        | verdicts, a list by the output shard of the conversations they are for

The verdicts meet their conversations in the assembly's own shuffle by output shard
(``shard_assembly``'s ``Gather``), where ``chained_conversations`` drops the subsumed ones and
hands their accounts to those that subsume them: no record is shuffled once more (FnApiRunner
materializes a Flatten's inputs, so there each conversation is encoded once more). A claim is a
16-byte hash and a key; a conversation ending at an answer adds its ``assembly`` entry (its
calls' places), never its messages. The claims are made where the conversations are (in
``shard_assembly``'s groups' combine and its linked groups', which the others' claims ride to
reach ByHash in one collection), so no packed conversation is read back for them. The streaming
driver, which assembles a window's groups in one process, calls ``chained_in_memory`` on them.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, NamedTuple

import apache_beam as beam

from transforms.calllogs.assemble import conversation_id
from transforms.calllogs.chained import (
    Absorb,
    Absorbed,
    Claim,
    Subsumed,
    Verdicts,
    claims_of,
    decide,
    last_call_start,
    merge_absorbed,
    renumbered,
)
from transforms.calllogs.dropped_text import has_text_beside_calls
from transforms.record.assembled_calls import AssemblyOutput, bucket_of
from transforms.record.dedupe import pack, unpack
from transforms.record.inputs import Parsed


def _assembled(made: Any) -> dict[str, Any] | None:
    """An assembled conversation's ``assembly`` entry (None for a dead letter or anything else)."""
    if not isinstance(made, AssemblyOutput) or made.fingerprints is None:
        return None
    payload = made.raw.payload
    return payload.assembly if isinstance(payload, Parsed) else None


def _answers(record: Any, messages_field: str, places: tuple[int, ...]) -> tuple[tuple[int, dict[str, Any]], ...]:
    """A record's answers with a text beside tool calls, each with its place in the sequence
    (``Fingerprints.answer_places``: tool results recorded apart, filled in, are no answers)."""
    messages = record.get(messages_field) if isinstance(record, dict) else None
    listed: list[Any] = messages if isinstance(messages, list) else []
    return tuple(zip(places, [m for m in listed if has_text_beside_calls(m)]))


def conversation_claims(
    made: Any, id_field: str, messages_field: str = "messages"
) -> Iterator[tuple[tuple[str, bytes], Claim]]:
    """A conversation's claims, by format and hash (none for a dead letter)."""
    assembly = _assembled(made)
    if assembly is None:
        return
    record = made.raw.payload.value
    metadata = record.get("metadata") if isinstance(record, dict) else None
    absorbed = Absorbed(
        made.order,
        record.get(id_field) if isinstance(record, dict) else None,
        assembly,
        metadata if isinstance(metadata, dict) and metadata else None,
    )
    last_start = last_call_start(assembly)
    prints = made.fingerprints
    answers = _answers(record, messages_field, prints.answer_places) if prints.dropped_full else ()
    for h, claim in claims_of(made.order, assembly["group"], prints, absorbed, last_start, answers):
        yield (assembly["format"], h), claim


def _hash_bucket(h: bytes, buckets: int) -> int:
    return int.from_bytes(h[:4], "big") % buckets


#: The key's tag of the conversations' claims, ``(CLAIMS_TAG, format, bucket of hashes)``.
CLAIMS_TAG = "claims"


class ConversationClaims(NamedTuple):
    """Where conversations are made (``shard_assembly``): their claims, keyed for the chaining."""

    id_field: str
    buckets: int
    messages_field: str = "messages"

    def keyed(self, outputs: Iterable[Any]) -> Iterator[tuple[tuple[str, str, int], bytes]]:
        """Conversations' claims, packed, one value per bucket of hashes: a shuffled element per
        claim (a conversation has one per answer), each pickled by Beam's coder, would cost
        more than the decision."""
        by_bucket: dict[tuple[str, str, int], list[tuple[bytes, Claim]]] = {}
        for made in outputs:
            for (fmt, h), claim in conversation_claims(made, self.id_field, self.messages_field):
                by_bucket.setdefault((CLAIMS_TAG, fmt, _hash_bucket(h, self.buckets)), []).append((h, claim))
        for where, claims in by_bucket.items():
            yield where, pack(claims)


def _verdicts(keyed: tuple[tuple[str, str, int], Iterable[bytes]], tag: str, buckets: int) -> Iterator[tuple]:
    """One bucket of hashes -> its verdicts, packed, one value per output shard they are for."""
    (_, fmt, _), packed = keyed
    by_shard: dict[int, list[Subsumed | Absorb]] = {}
    for group, verdict in decide(pair for claims in packed for pair in unpack(claims)):
        by_shard.setdefault(bucket_of((fmt, group), buckets), []).append(verdict)
    for shard, verdicts in sorted(by_shard.items()):
        yield (tag, shard), Verdicts(pack(verdicts))


def chained_conversations(values: Iterable[Any], id_field: str, messages_field: str = "messages") -> list[Any]:
    """One output shard's conversations and verdicts -> its conversations, the subsumed ones
    left out, the others with the accounts they took (``merge_absorbed``), a group that lost one
    renumbered. Anything else passes as it is."""
    made: list[Any] = []
    subsumed: set[bytes] = set()
    absorbs: dict[bytes, list[Absorbed]] = {}
    for value in values:
        for one in unpack(value.packed) if isinstance(value, Verdicts) else (value,):
            if isinstance(one, Subsumed):
                subsumed.add(one.conversation)
            elif isinstance(one, Absorb):
                absorbs.setdefault(one.conversation, []).append(one.absorbed)
            else:
                made.append(one)
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
    return [_updated(one, absorbs.get(one.order, []), places.get(one.order), id_field, messages_field) for one in kept]


def _updated(
    made: Any, absorbed: list[Absorbed], place: tuple[int, int, str] | None, id_field: str, messages_field: str
) -> Any:
    if not absorbed and place is None:
        return made
    payload = made.raw.payload
    record, assembly, added = merge_absorbed(payload.value, payload.assembly, absorbed, messages_field)
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


def chained_in_memory(made: list[Any], id_field: str, messages_field: str = "messages") -> list[Any]:
    """``made`` (conversations of many groups, in one process) chained across their groups:
    what the batch graph's shuffles decide, decided with a dict of their hashes."""
    by_format: dict[str, list[tuple[bytes, Claim]]] = {}
    for one in made:
        for (fmt, h), claim in conversation_claims(one, id_field, messages_field):
            by_format.setdefault(fmt, []).append((h, claim))
    verdicts = [verdict for fmt in sorted(by_format) for _, verdict in decide(by_format[fmt])]
    return chained_conversations([*made, *verdicts], id_field, messages_field)


@beam.typehints.with_input_types(beam.typehints.Any)
@beam.typehints.with_output_types(beam.typehints.Any)
class ChainAcrossGroups(beam.PTransform):
    """The conversations' claims (``claims``' keyed, made where the assembly makes the
    conversations) -> the verdicts on them under their output shard's key (``(tag, output
    shard)``), for ``chained_conversations`` to apply where each output shard's conversations
    meet."""

    def __init__(self, id_field: str, buckets: int, tag: str, messages_field: str = "messages") -> None:
        super().__init__()
        #: What the assembly calls on the conversations it makes, for their keyed claims.
        self.claims = ConversationClaims(id_field, buckets, messages_field)
        self._buckets = buckets
        self._tag = tag

    def expand(self, claims):
        return claims | "ByHash" >> beam.GroupByKey() | "Verdicts" >> beam.FlatMap(_verdicts, self._tag, self._buckets)


def chain_enabled(settings: Any) -> bool:
    """Whether the run chains conversations across groups (``--chain-groups``, on by default)."""
    return bool(settings.chain_groups)


__all__ = [
    "CLAIMS_TAG",
    "ChainAcrossGroups",
    "ConversationClaims",
    "chain_enabled",
    "chained_conversations",
    "chained_in_memory",
]
