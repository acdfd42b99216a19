"""The batch graph's assembly of call logs: one chain of steps, no tagged output, one leaf
(what every runner, DaskRunner included, can run).

::

    ShardResult | keyed: each result by its shard, each call-log piece by its group, each
                  label and each call's and trace's id (a label's target) by that id
                | (fragments: CombinePerKey by their join key | the pieces they make, by group)
                | CombinePerKey(results kept, pieces assembled, labels and targets gathered)
                | conversations keyed by output shard, labels by their group's output shard
                | GroupByKey | each output shard's conversations chained, labelled, processed and written

Fragments (parts of one call read apart: a LangSmith patch sent after its post, OTel events
split over documents) take a branch of their own and meet by key before their pieces join the
groups' (``transforms.calllogs.joins``): one more combine, of the fragments only.

Shard results pass through it untouched (less their pieces), so ``MergeShardResults`` after it
sees every shard's result and every assembled output shard's alike. A ``chain`` step
(``chain_groups.ChainAcrossGroups``, --chain-groups) adds its verdicts to the conversations
keyed by output shard before the GroupByKey; each output shard applies them
(``chained_conversations``) before its conversations are processed. With it, groups linked by
response id (``transforms.calllogs.response_links``) are joined first: their response ids,
packed by bucket of ids, meet by bucket; the links meet at one key per format; each linked
group's verdict (``JoinsGroup``) goes into the groups' combine, and only those groups' states
are combined once more, under their root's key, before their conversations join the others.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any, Iterable, Iterator

import apache_beam as beam

from pipeline.graph.chain_groups import chained_conversations
from pipeline.graph.shard_step import ShardResult, ShardWork, numbered_place, process_batches
from pipeline.testhooks import pause_point
from transforms.calllogs.assemble import GroupState, call_traces
from transforms.calllogs.calls import Label
from transforms.calllogs.joins import is_join_key, joined_states
from transforms.calllogs.labels import Joined, Target, resolve, targets_of
from transforms.calllogs.response_links import JoinsGroup, links_of, response_keys, roots
from transforms.conversations import freeze_gc
from transforms.record.assembled_calls import (
    AssemblyOutput,
    assembly_partial,
    bucket_of,
    conversations_of,
    shard_batches,
)
from transforms.record.dedupe import pack, unpack
from transforms.record.labelled_calls import labelled
from transforms.totals import summary as summaries

_RESULT, _GROUP, _OUTPUT, _ANY, _JOIN = "result", "group", "output", "any", "join"
#: The key's tags of the response-id chaining: a group's response ids, the links (one key), a
#: group joining its root's.
_RESPONSE, _LINKS, _JOINED = "response", "links", "joined"
#: The key's tag of the conversations keyed by output shard (what ``ChainAcrossGroups`` reads).
OUTPUT_TAG = _OUTPUT


def keyed_results(result: ShardResult) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """A shard's result keyed by its shard, and each of its groups' states by its group."""
    yield (_RESULT, result.shard), result._replace(calls=())
    for key, state in result.calls:
        for label in state.labels:
            yield (_JOIN, label.group), label
        state.labels = []
        if state.holds_pieces():
            yield from _group_and_targets(key, state)
    if result.calls:
        yield (_ANY,), None  # the run holds call logs: every output shard of them is written


def is_fragments(keyed: tuple[tuple[Any, ...], Any]) -> bool:
    """Whether a keyed item holds fragments to join (not a group's state, not a result)."""
    key = keyed[0]
    return key[0] == _GROUP and is_join_key(key[1:])


def joined_groups(keyed: tuple[tuple[Any, ...], list]) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """One join key's fragments (the shards' merged) -> the states of the groups their pieces go
    to, and the ids their calls offer labels (``Target``)."""
    key, (_, state) = keyed
    for group, joined in joined_states((key[1], key[2]), state):
        yield from _group_and_targets(group, joined)


def _group_and_targets(group: tuple[str, str], state: GroupState) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """A group's state under its key, and the ids its calls offer labels (``Target``)."""
    yield (_GROUP, *group), state
    for join_id, target in targets_of(group, call_traces(state)):
        yield (_JOIN, join_id), target


class KeepResultsAssembleGroups(beam.CombineFn):
    """A shard result's key holds that result; a group's, its ``GroupState`` (the shards' merged)."""

    def create_accumulator(self) -> list:
        return [[], GroupState()]

    def add_input(self, accumulator: list, value: Any) -> list:
        if isinstance(value, (ShardResult, Label, Target, JoinsGroup)):  # a result's key; a join id's; a verdict
            accumulator[0].append(value)
        elif value is not None:
            accumulator[1].merge(value)  # a shard's state of the group
        return accumulator

    def merge_accumulators(self, accumulators: Iterable[list]) -> list:
        accumulators = iter(accumulators)
        first = next(accumulators)
        for more in accumulators:
            first[0].extend(more[0])
            first[1].merge(more[1])
        return first

    def extract_output(self, accumulator: list) -> list:
        return accumulator


def by_output_shard(keyed: tuple[tuple[Any, ...], list], work: ShardWork, buckets: int) -> Iterator[tuple]:
    key, (results, state) = keyed
    if key[0] == _RESULT:
        for result in results:
            yield (_RESULT, result.shard), result
        return
    if key[0] == _JOIN:
        # A label goes to the output shard of the group it joins, to be put on its conversation.
        labels = [item for item in results if isinstance(item, Label)]
        if labels:
            joined, counts = resolve(labels, [item for item in results if isinstance(item, Target)])
            for item in joined:
                yield (_OUTPUT, bucket_of((item.format, item.group), buckets)), item
            if counts:
                yield (_OUTPUT, bucket_of(("", key[1]), buckets)), {"labels": counts}
        return
    if key[0] == _ANY:
        # Each output shard gets an element, so each is written, an empty one too: the plan
        # (--dry-run) names them all once it sees call logs.
        for bucket in range(buckets):
            yield (_OUTPUT, bucket), None
        return
    moves = [item for item in results if isinstance(item, JoinsGroup)]
    if moves:
        # Linked by response id to other groups: its state goes to where they all meet.
        yield (_JOINED, *moves[0].root), state
        return
    for bucket, made in conversations_of(((key[1], key[2]), state), work.settings, buckets):
        yield (_OUTPUT, bucket), made


def _response_keys(keyed: tuple[tuple[Any, ...], Any], buckets: int) -> Iterator[tuple[tuple[Any, ...], bytes]]:
    """A group's (or one input shard's part of it) response ids held and lacked, packed, one
    value per bucket of ids: an element per call (each may hold a response id) would be a
    shuffle call by call, which the groups' combine is there to avoid."""
    key, state = keyed
    if key[0] != _GROUP or not isinstance(state, GroupState) or is_join_key(key[1:]):
        return
    by_bucket: dict[tuple[str, str, int], list[Any]] = {}
    for (fmt, response_id), value in response_keys((key[1], key[2]), state):
        by_bucket.setdefault((_RESPONSE, fmt, bucket_of((fmt, response_id), buckets)), []).append(
            ((fmt, response_id), value)
        )
    for where, pairs in by_bucket.items():
        yield where, pack(pairs)


def _links(keyed: tuple[tuple[Any, ...], Iterable[bytes]]) -> Iterator[tuple[tuple[str, str], Any]]:
    """One bucket of response ids' groups -> their links, all of a format at one key."""
    for link in links_of(pair for packed in keyed[1] for pair in unpack(packed)):
        yield (_LINKS, keyed[0][1]), link


def _verdicts(keyed: tuple[tuple[str, str], Iterable[Any]]) -> Iterator[tuple[tuple[Any, ...], JoinsGroup]]:
    """Every link of a format (group keys only, two per call continuing another group's
    response) -> each linked group's verdict, under its key."""
    for group, root in sorted(roots(keyed[1]).items()):
        yield (_GROUP, *group), JoinsGroup(root)


def is_linked(keyed: tuple[tuple[Any, ...], Any]) -> bool:
    """Whether a keyed item is the state of a group linked by response id to others."""
    return keyed[0][0] == _JOINED


def joined_conversations(keyed: tuple[tuple[Any, ...], list], work: ShardWork, buckets: int) -> Iterator[tuple]:
    """The merged state of groups linked by response id (under their root's key) -> its
    conversations, by output shard."""
    key, (_, state) = keyed
    for bucket, made in conversations_of(((key[1], key[2]), state), work.settings, buckets):
        yield (_OUTPUT, bucket), made


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
        values = [value for value in values if value is not None]
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

    def _response_verdicts(self, whole, joined):
        """Each group linked by response id to others: its ``JoinsGroup``, under its key. Only
        keys travel: response ids by group, then the links, all at one key."""
        return (
            (
                whole | "ResponseKeys" >> beam.FlatMap(_response_keys, self._buckets),
                joined | "JoinedResponseKeys" >> beam.FlatMap(_response_keys, self._buckets),
            )
            | "AllResponseKeys" >> beam.Flatten()
            | "ByResponse" >> beam.GroupByKey()
            | "Links" >> beam.FlatMap(_links)
            | "AllLinks" >> beam.GroupByKey()
            | "LinkVerdicts" >> beam.FlatMap(_verdicts)
        )

    def expand(self, results):
        keyed = results | "Keyed" >> beam.FlatMap(keyed_results)
        joined = (
            keyed
            | "Fragments" >> beam.Filter(is_fragments)
            | "JoinFragments" >> beam.CombinePerKey(KeepResultsAssembleGroups())
            | "Joined" >> beam.FlatMap(joined_groups)
        )
        whole = keyed | "Whole" >> beam.Filter(lambda item: not is_fragments(item))
        inputs: tuple[Any, ...] = (whole, joined)
        if self._chain is not None:
            inputs = (*inputs, self._response_verdicts(whole, joined))
        keyed = (
            inputs
            | "WithJoined" >> beam.Flatten()
            | "AssembleGroups" >> beam.CombinePerKey(KeepResultsAssembleGroups())
            | "ByOutputShard" >> beam.FlatMap(by_output_shard, self._work, self._buckets)
        )
        if self._chain is not None:
            # Only the states of the groups linked by response id move once more, to merge.
            linked = (
                keyed
                | "Linked" >> beam.Filter(is_linked)
                | "JoinLinkedGroups" >> beam.CombinePerKey(KeepResultsAssembleGroups())
                | "LinkedConversations" >> beam.FlatMap(joined_conversations, self._work, self._buckets)
            )
            unlinked = keyed | "Unlinked" >> beam.Filter(lambda item: not is_linked(item))
            keyed = (unlinked, linked) | "ChainAcrossGroups" >> self._chain
        return (
            keyed
            | "Gather" >> beam.GroupByKey()
            | "ProcessAssembled" >> beam.ParDo(_ProcessAssembled(self._work, self._temp_root, self._first_shard))
        )
