"""The batch graph's assembly of call logs: one chain of steps, no tagged output, one leaf
(what every runner, DaskRunner included, can run).

::

    ShardResult | Keyed: each result by its shard; its groups' states packed by slot of groups,
                  its labels and the ids its calls and traces offer them (targets) packed by
                  slot of join ids (a few elements a shard, not one a group or a call); its
                  fragments by join key; [chain] its groups' response ids packed by bucket of ids
     |-- ToJoin (fragments, response ids) | JoinFragments: CombinePerKey
     |     | the pieces the fragments make, batched by group as Keyed's; response ids as they came
     |     |-- [chain] ResponseKeys | ByResponse: GroupByKey | the links, at one key per format
     |     |       | AllLinks: GroupByKey | the linked groups' verdicts (Joins), by their slot
     |     '-- JoinedStates (the rest)
     '-- Whole (the rest)
    Flatten | AssembleGroups: CombinePerKey(results kept, pieces assembled, labels gathered)
            | results; conversations and labels by output shard; [chain] the linked groups'
              states by their root's slot, the others' conversations' claims by bucket of hashes
     |-- [chain] ToLinked (linked states, claims) | JoinLinkedGroups: CombinePerKey
     |     | each root's groups merged: conversations by output shard, their claims; claims as they came
     |     |-- Claims | ChainAcrossGroups: ByHash: GroupByKey | verdicts by output shard
     |     '-- Linked (the conversations)
     '-- Unlinked (the rest)
    Flatten | Gather: GroupByKey | each output shard's conversations chained, labelled, processed
                                   and written

Fragments (parts of one call read apart: a LangSmith patch sent after its post, OTel events
split over documents) meet by key before their pieces join the groups'
(``transforms.calllogs.joins``). Shard results pass through untouched (less their pieces), so
``MergeShardResults`` after it sees every shard's result and every assembled output shard's
alike. A ``chain`` (``chain_groups.ChainAcrossGroups``, --chain-groups) decides on the claims
of every conversation; its verdicts meet their conversations in ``Gather``, where each output
shard applies them (``chained_conversations``). With it, groups linked by response id
(``transforms.calllogs.response_links``) are joined first: the links' verdicts go into the
groups' combine, and only the linked groups' states are combined once more, by their root's
slot, where each root's are merged, before their conversations join the others. What crosses a
shuffle is a batch (a slot's states, links, verdicts or conversations, a bucket's response ids
or claims), not an element per group or call: each element is pickled by Beam's coder.

Seven shuffles with ``chain`` (three without), each a step of the data's own order: the
fragments must be joined before their groups' response ids are known, every link met before a
group's root is known, the verdicts meet the states before the linked ones can move, the
linked conversations made before all claims can meet, the claims decided before the verdicts
meet the conversations. Keys ride the shuffle before their own (response ids the fragments',
claims the linked groups'); records cross only their own. Each branch that meets the main line
again is a Flatten, and DaskRunner's Flatten adds its inputs' partitions (a GroupByKey keeps
its input's), so the few branches above matter there: for ``P`` input partitions the shuffles
hold P, P, P, 3P, 3P, 3P and 9P (with each key's response ids and claims in a branch of its
own, they held P, 2P, 2P, 4P, 4P, 8P and 16P).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import uuid
from typing import AbstractSet, Any, Iterable, Iterator

import apache_beam as beam

from pipeline.graph.chain_groups import CLAIMS_TAG, ConversationClaims, chained_conversations
from pipeline.graph.shard_step import ShardResult, ShardWork, numbered_place, process_batches
from pipeline.testhooks import pause_point
from transforms.calllogs.assemble import GroupState, call_traces
from transforms.calllogs.calls import Label
from transforms.calllogs.joins import is_join_key, joined_states
from transforms.calllogs.labels import Joined, Target, resolve, targets_of
from transforms.calllogs.response_links import Joins, links_of, response_keys, roots
from transforms.conversations import freeze_gc
from transforms.record.assembled_calls import (
    AssemblyOutput,
    PackedGroup,
    assembly_partial,
    bucket_of,
    conversations_of,
    each_output,
    packed_outputs,
    shard_batches,
)
from transforms.record.dedupe import pack, unpack
from transforms.record.labelled_calls import labelled
from transforms.totals import summary as summaries

_RESULT, _GROUP, _GROUPS, _JOINS, _OUTPUT, _ANY = "result", "group", "groups", "joins", "output", "any"
#: The key's tags of the response-id chaining: a group's response ids, the links (one key), a
#: group joining its root's.
_RESPONSE, _LINKS, _JOINED = "response", "links", "joined"
#: What each shuffle after the first takes of the one before's output, by key tag (the rest
#: goes on to the groups' combine, or to ``Gather``): response ids ride the fragments' join, the
#: conversations' claims (``CLAIMS_TAG``) the linked groups' join.
_JOIN_FIRST, _TO_LINKS, _TO_LINKED, _TO_CHAIN = {_GROUP, _RESPONSE}, {_RESPONSE}, {_JOINED, CLAIMS_TAG}, {CLAIMS_TAG}
#: The key's tag of the conversations keyed by output shard (what ``ChainAcrossGroups`` reads).
OUTPUT_TAG = _OUTPUT
#: Groups' states (and the ids they offer labels) cross the shuffle in batches, a batch per input
#: shard and slot of groups, this many slots per output shard: a shuffled element per group (and
#: per call, for its label targets), each pickled by Beam's coder, cost more than the assembly.
SLOTS_PER_OUTPUT_SHARD = 4


def _slot(join_or_group: Any, buckets: int) -> int:
    """The slot of a group's key (or of a join id): within one output shard's (``bucket_of``)."""
    key = join_or_group if isinstance(join_or_group, tuple) else ("", join_or_group)
    return bucket_of(key, buckets * SLOTS_PER_OUTPUT_SHARD)


def _batched(
    states: Iterable[tuple[tuple[str, str], GroupState | PackedGroup]],
    labels: Iterable[Label],
    buckets: int,
    responses: bool = True,
) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Groups' states, packed by slot, ``{group key: state}`` (a state packed already as its
    bytes); their label targets and ``labels``, packed by the slot of their join ids,
    ``(labels, targets)``: ``[(join id, Label)]``, ``[(join id, Target as a tuple)]``; with
    ``responses`` (the response-id chaining), their response ids held and lacked
    (``response_keys``), packed by bucket of ids."""
    groups: dict[int, dict[tuple[str, str], GroupState | bytes]] = {}
    joins: dict[int, tuple[list, list]] = {}
    by_ids: dict[tuple[str, str, int], list[Any]] = {}
    for label in labels:
        joins.setdefault(_slot(label.group, buckets), ([], []))[0].append((label.group, label))
    for key, state in states:
        if isinstance(state, PackedGroup):
            groups.setdefault(_slot(key, buckets), {})[key] = state.packed
            traces, held = state.traces, state.responses if responses else ()
        else:
            groups.setdefault(_slot(key, buckets), {})[key] = state
            traces, held = call_traces(state), list(response_keys(key, state)) if responses else ()
        for join_id, target in targets_of(key, traces):
            joins.setdefault(_slot(join_id, buckets), ([], []))[1].append((join_id, tuple(target)))
        for (fmt, response_id), value in held:
            where = (_RESPONSE, fmt, bucket_of((fmt, response_id), buckets))
            by_ids.setdefault(where, []).append(((fmt, response_id), value))
    for slot, batch in groups.items():
        yield (_GROUPS, slot), pack(batch)
    for slot, pair in joins.items():
        yield (_JOINS, slot), pack(pair)
    for where, pairs in by_ids.items():
        yield where, pack(pairs)


def keyed_results(result: ShardResult, buckets: int, responses: bool = True) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """A shard's result keyed by its shard; its groups' states and the ids they offer labels
    (and, with ``responses``, their response ids), in batches (``_batched``); fragments to join,
    packed under their join key."""
    yield (_RESULT, result.shard), result._replace(calls=())
    labels: list[Label] = []
    states = []
    for key, state in result.calls:
        labels.extend(state.labels)
        if isinstance(state, PackedGroup):
            if not state.holds:
                continue
        else:
            state.labels = []
            if not state.holds_pieces():
                continue
        if is_join_key(key):
            yield (_GROUP, *key), pack({key: state.packed if isinstance(state, PackedGroup) else state})
        else:
            states.append((key, state))
    yield from _batched(states, labels, buckets, responses)
    if result.calls:
        yield (_ANY,), None  # the run holds call logs: every output shard of them is written


def tagged(keyed: tuple[tuple[Any, ...], Any], tags: AbstractSet[str]) -> bool:
    """Whether a keyed item's key has one of ``tags``: a collection going two ways, to two
    shuffles, is two filters of it (no tagged output: DaskRunner gives each consumer them all)."""
    return keyed[0][0] in tags


def untagged(keyed: tuple[tuple[Any, ...], Any], tags: AbstractSet[str]) -> bool:
    return keyed[0][0] not in tags


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic collector off while values are unpacked: each of its full collections would
    scan every object made so far again (measured: unpacking a slot's states took three times
    as long with it on); the values hold no cycle."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _unpacked_states(packed: Iterable[bytes]) -> dict[Any, GroupState]:
    """Packed ``{key: state}`` batches (the shards') -> each key's state, the shards' merged."""
    states: dict[Any, GroupState] = {}
    for batch in packed:
        with _collector_paused():
            found = unpack(batch)
        for key, state in found.items():
            if isinstance(state, bytes):  # packed while its shard was read
                with _collector_paused():
                    state = unpack(state)
            known = states.get(key)
            if known is None:
                states[key] = state
            else:
                known.merge(state)
    return states


def _passed_on(keyed: tuple[tuple[Any, ...], list]) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Keys that ride a shuffle on their way to the next (response ids, claims): each packed
    value as it came, under its key."""
    key, (_, packed) = keyed
    for value in packed:
        yield key, value


def joined_groups(
    keyed: tuple[tuple[Any, ...], list], buckets: int, responses: bool = True
) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """One join key's fragments (the shards' merged) -> the states of the groups their pieces go
    to, and the ids their calls offer labels (``Target``), batched as ``keyed_results``'. A
    bucket of response ids (the whole groups', riding this shuffle) goes on as it came."""
    if keyed[0][0] == _RESPONSE:
        yield from _passed_on(keyed)
        return
    _, (_, packed) = keyed
    for key, state in _unpacked_states(packed).items():
        yield from _batched(joined_states(key, state), (), buckets, responses)


class KeepResultsAssembleGroups(beam.CombineFn):
    """A shard result's key holds that result; a slot's (or a join key's), its packed batches,
    unpacked where the combine's output is read: a batch is pickled once and read once."""

    def create_accumulator(self) -> list:
        return [[], []]

    def add_input(self, accumulator: list, value: Any) -> list:
        if isinstance(value, bytes):  # a shard's batch
            accumulator[1].append(value)
        elif value is not None:  # a result's key; a slot's linked groups' verdicts, Joins
            accumulator[0].append(value)
        return accumulator

    def merge_accumulators(self, accumulators: Iterable[list]) -> list:
        accumulators = iter(accumulators)
        first = next(accumulators)
        for more in accumulators:
            first[0].extend(more[0])
            first[1].extend(more[1])
        return first

    def extract_output(self, accumulator: list) -> list:
        return accumulator


def _joined_labels(packed: list[bytes], buckets: int) -> Iterator[tuple]:
    """A slot of join ids: each label goes to the output shard of the group it joins, to be put
    on its conversation; and the labels' counts."""
    labels: dict[str, list[Label]] = {}
    targets: dict[str, list[Target]] = {}
    batches = [unpack(batch) for batch in packed]
    for found, _ in batches:
        for join_id, label in found:
            labels.setdefault(join_id, []).append(label)
    if not labels:
        return
    for _, offered in batches:
        for join_id, target in offered:
            if join_id in labels:
                targets.setdefault(join_id, []).append(Target(*target))
    for join_id in sorted(labels):
        joined, counts = resolve(labels[join_id], targets.get(join_id, []))
        for item in joined:
            yield (_OUTPUT, bucket_of((item.format, item.group), buckets)), item
        if counts:
            yield (_OUTPUT, bucket_of(("", join_id), buckets)), {"labels": counts}


def by_output_shard(
    keyed: tuple[tuple[Any, ...], list], work: ShardWork, buckets: int, claims: ConversationClaims | None = None
) -> Iterator[tuple]:
    """The groups' combine -> each result as it was; labels and conversations by output shard;
    the states of groups linked by response id by their root's slot; with ``claims`` (the
    chaining across groups), the conversations' claims, made here where they are whole."""
    key, (results, packed) = keyed
    if key[0] == _RESULT:
        for result in results:
            yield (_RESULT, result.shard), result
        return
    if key[0] == _JOINS:
        yield from _joined_labels(packed, buckets)
        return
    if key[0] == _ANY:
        # Each output shard gets an element, so each is written, an empty one too: the plan
        # (--dry-run) names them all once it sees call logs.
        for bucket in range(buckets):
            yield (_OUTPUT, bucket), None
        return
    if key[0] != _GROUPS:
        return
    states = _unpacked_states(packed)
    # The slot's states live until its conversations are made: out of the cyclic collector's
    # sight, as a shard's are while it is read (they hold no cycle; freed by reference counts),
    # or each full collection scans them all again (measured: a sixth of this step's CPU).
    gc.freeze()
    # Groups linked by response id to others: their states go to where they all meet, a batch
    # per slot of their roots (an element per group, pickled by Beam's coder, costs more).
    moves = {group: root for joins in results for group, root in joins.roots.items()}
    linked: dict[int, list[tuple[tuple[str, str], tuple[str, str], GroupState]]] = {}
    by_bucket: dict[int, list[AssemblyOutput]] = {}
    for group, state in states.items():
        root = moves.get(group)
        if root is not None:
            linked.setdefault(_slot(root, buckets), []).append((root, group, state))
            continue
        for bucket, made in conversations_of((group, state), work.settings, buckets):
            by_bucket.setdefault(bucket, []).append(made)
    for slot, batch in linked.items():
        yield (_JOINED, slot), pack(batch)
    for bucket, outputs in by_bucket.items():  # one: a slot's groups are an output shard's
        if claims is not None:
            yield from claims.keyed(outputs)
        yield (_OUTPUT, bucket), packed_outputs(outputs)


def _links(keyed: tuple[tuple[Any, ...], Iterable[bytes]]) -> Iterator[tuple[tuple[str, str], Any]]:
    """One bucket of response ids' groups -> their links, a list, all of a format at one key."""
    links = links_of(pair for packed in keyed[1] for pair in unpack(packed))
    if links:
        yield (_LINKS, keyed[0][1]), links


def _verdicts(keyed: tuple[tuple[str, str], Iterable[list]], buckets: int) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Every link of a format (group keys only, two per call continuing another group's
    response) -> the linked groups' verdicts (``Joins``), a batch under each slot of groups."""
    by_slot: dict[int, dict[tuple[str, str], tuple[str, str]]] = {}
    for group, root in sorted(roots(link for links in keyed[1] for link in links).items()):
        by_slot.setdefault(_slot(group, buckets), {})[group] = root
    for slot, moves in by_slot.items():
        yield (_GROUPS, slot), Joins(moves)


def joined_conversations(
    keyed: tuple[tuple[Any, ...], list], work: ShardWork, buckets: int, claims: ConversationClaims
) -> Iterator[tuple]:
    """A slot of roots: the states of the groups linked by response id to each, merged -> its
    conversations, packed by output shard, and their claims. The other groups' claims, riding
    this shuffle, go on as they came."""
    key, (_, packed) = keyed
    if key[0] == CLAIMS_TAG:
        yield from _passed_on(keyed)
        return
    by_root: dict[tuple[str, str], GroupState] = {}
    for batch in packed:
        with _collector_paused():
            found = unpack(batch)
        for root, _, state in found:
            known = by_root.get(root)
            if known is None:
                by_root[root] = state
            else:
                known.merge(state)
    gc.freeze()  # as ``by_output_shard``'s states
    by_bucket: dict[int, list[AssemblyOutput]] = {}
    for root in sorted(by_root):
        for bucket, made in conversations_of((root, by_root[root]), work.settings, buckets):
            by_bucket.setdefault(bucket, []).append(made)
    for bucket, outputs in by_bucket.items():
        yield from claims.keyed(outputs)
        yield (_OUTPUT, bucket), packed_outputs(outputs)


class _ProcessAssembled(beam.DoFn):
    """An input shard's result, as it was; an output shard's conversations, processed and
    written by the job's step, as that shard's result (its ``call_logs`` counts added)."""

    def __init__(self, work: ShardWork, temp_root: str, first_shard: int) -> None:
        # The assembled conversations are flat records: read as such, whatever --format said.
        settings = dataclasses.replace(work.settings, input_format="flat", calls=False)
        self._work = dataclasses.replace(work, settings=settings)
        self._temp_root = temp_root
        self._first_shard = first_shard

    def setup(self) -> None:
        freeze_gc()

    def process(self, keyed):
        key, values = keyed
        if key[0] == _RESULT:
            yield from values
            return
        # The verdicts of a chaining across groups (``chain_groups``), if any, applied first;
        # then the labels that came to this output shard are put on its conversations.
        with _collector_paused():
            values = [one for value in values if value is not None for one in each_output(value)]
        gc.freeze()  # this output shard's conversations, likewise (``by_output_shard``)
        assembled = [value for value in values if isinstance(value, AssemblyOutput)]
        labels = [value for value in values if isinstance(value, (Joined, dict))]  # labels, their counts
        settings = self._work.settings
        chained = chained_conversations(
            [v for v in values if not isinstance(v, (Joined, dict))], settings.id_field, settings.messages_field
        )
        made, label_partial = labelled(chained + labels)
        number = self._first_shard + key[1]
        place = numbered_place(self._temp_root, number, 0, uuid.uuid4().hex)
        batches = shard_batches((key[1], made), self._first_shard, self._work.batch_size)
        result = process_batches(batches, number, 0, self._work, place, read=False, empty_files=True)
        pause_point("write")
        partial = summaries.merge(result.partial, assembly_partial((key[1], made), assembled))
        yield result._replace(partial=summaries.merge(partial, label_partial))


@beam.typehints.with_input_types(beam.typehints.Any)
@beam.typehints.with_output_types(beam.typehints.Any)
class AssembleShardCalls(beam.PTransform):
    """Shard results -> the same results, and one more per output shard of conversations
    assembled from their call-log pieces (numbered from ``first_shard``)."""

    def __init__(
        self, work: ShardWork, temp_root: str, buckets: int, first_shard: int, chain: beam.PTransform | None = None
    ) -> None:
        super().__init__()
        #: Applied to the conversations keyed by output shard, before they are gathered; with
        #: it, groups linked by response id are joined first (``transforms.calllogs.response_links``).
        self._chain = chain
        self._work = work
        self._temp_root = temp_root
        self._buckets = buckets
        self._first_shard = first_shard

    def _combined(self, keyed, name: str, dispatch, *args):
        """One shuffle of the assembly: its values kept by key (a key's packed batches unpacked
        only by ``dispatch``, where the combine's output is read), then dispatched by key tag."""
        return (
            keyed
            | name >> beam.CombinePerKey(KeepResultsAssembleGroups())
            | f"{name}Out" >> beam.FlatMap(dispatch, *args)
        )

    def expand(self, results):
        buckets, chain = self._buckets, self._chain
        responses = chain is not None
        keyed = results | "Keyed" >> beam.FlatMap(keyed_results, buckets, responses)
        # Fragments, and the whole groups' response ids, meet by key first; the states go on to
        # the groups' combine, where the fragments' joined states and the links' verdicts join them.
        joined = self._combined(
            keyed | "ToJoin" >> beam.Filter(tagged, _JOIN_FIRST), "JoinFragments", joined_groups, buckets, responses
        )
        inputs: tuple[Any, ...] = (keyed | "Whole" >> beam.Filter(untagged, _JOIN_FIRST), joined)
        if chain is not None:
            verdicts = (
                joined
                | "ResponseKeys" >> beam.Filter(tagged, _TO_LINKS)
                | "ByResponse" >> beam.GroupByKey()
                | "Links" >> beam.FlatMap(_links)
                | "AllLinks" >> beam.GroupByKey()
                | "LinkVerdicts" >> beam.FlatMap(_verdicts, buckets)
            )
            inputs = (inputs[0], joined | "JoinedStates" >> beam.Filter(untagged, _TO_LINKS), verdicts)
        assembled = self._combined(
            inputs | "WithJoined" >> beam.Flatten(),
            "AssembleGroups",
            by_output_shard,
            self._work,
            buckets,
            chain.claims if chain is not None else None,
        )
        gathered: Any = assembled
        if chain is not None:
            # The linked groups' states meet by their root's slot; the other groups' claims
            # ride that shuffle, to meet the linked groups' in ``chain``'s.
            linked = self._combined(
                assembled | "ToLinked" >> beam.Filter(tagged, _TO_LINKED),
                "JoinLinkedGroups",
                joined_conversations,
                self._work,
                buckets,
                chain.claims,
            )
            chain_verdicts = linked | "Claims" >> beam.Filter(tagged, _TO_CHAIN) | "ChainAcrossGroups" >> chain
            gathered = (
                assembled | "Unlinked" >> beam.Filter(untagged, _TO_LINKED),
                linked | "Linked" >> beam.Filter(untagged, _TO_CHAIN),
                chain_verdicts,
            ) | "WithVerdicts" >> beam.Flatten()
        return (
            gathered
            | "Gather" >> beam.GroupByKey()
            | "ProcessAssembled" >> beam.ParDo(_ProcessAssembled(self._work, self._temp_root, self._first_shard))
        )
