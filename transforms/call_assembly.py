"""Beam around the assembly of call logs (``transforms.calllogs.assemble``): the call-log
records a step handed on (``CallLogged``) -> batches of the conversations they make, for the
same step to normalize or check, and the assembly's partial summaries.

::

    CallLogged | pieces keyed by (format, group) | CombinePerKey(AssembleCalls)
               | conversations keyed by bucket | GroupByKey | sorted into batches

The combine keeps one state per group (its maximal histories, not every call's), and Beam
lifts it before the shuffle, so a trace of thousands of calls is not shuffled call by call.
The second shuffle puts a group's conversations in one of ``buckets`` output shards (a hash of
the group: the same on every runner and rerun), sorted, so each shard's file has the same bytes
whatever the order groups finish in.
"""

from __future__ import annotations

import zlib
from typing import Any, Iterable, Iterator, NamedTuple

import apache_beam as beam
from apache_beam.transforms import trigger
from apache_beam.transforms import window as beam_window
from apache_beam.utils import windowed_value

from transforms.calllogs.assemble import Assembled, GroupState, NoCalls, assemble, group_key
from transforms.calllogs.calls import ToolResult
from transforms.inputs import Batch, Parsed, RawRecord, Unreadable
from transforms.jsontext import canonical_json
from transforms.record_settings import Settings
from transforms.record_steps import CallLogged, DeadLetterReason

#: The shard of batches of conversations assembled on a stream (``STREAM_SHARD`` is the input's).
STREAM_ASSEMBLED_SHARD = -2
#: On a stream, a conversation closes after this long without a call (event time), and a call
#: up to this much later than that re-opens it (``AssembleConversations``).
DEFAULT_SESSION_GAP_S = 30 * 60.0
DEFAULT_ALLOWED_LATENESS_S = 24 * 3600.0

#: The output shards of assembled conversations, by default (a library user's graph): past
#: any input shard a plan makes. ``convnorm run`` numbers them after its input shards.
FIRST_ASSEMBLED_SHARD = 1 << 20


def keyed_pieces(logged: CallLogged) -> Iterator[tuple[tuple[str, str], tuple[str, int, Any]]]:
    for piece in logged.pieces:
        yield group_key(piece), (logged.source, logged.position, piece)


def call_log_partial(logged: Iterable[CallLogged]) -> dict[str, Any]:
    """The summary's ``call_logs`` counts of the records handed on: records, calls, tool results."""
    records = calls = results = 0
    for item in logged:
        records += 1
        n = sum(1 for piece in item.pieces if isinstance(piece, ToolResult))
        results += n
        calls += len(item.pieces) - n
    return {"call_logs": {"records": records, "calls": calls, "tool_results": results}}


class AssembleCalls(beam.CombineFn):
    """``(source, position, piece)`` of one group -> its ``GroupState``."""

    def create_accumulator(self) -> GroupState:
        return GroupState()

    def add_input(self, state: GroupState, item: tuple[str, int, Any]) -> GroupState:
        return state.add(*item)

    def merge_accumulators(self, states: Iterable[GroupState]) -> GroupState:
        states = iter(states)
        first = next(states)
        for state in states:
            first.merge(state)
        return first

    def extract_output(self, state: GroupState) -> GroupState:
        return state


class _Conversation(NamedTuple):
    """One output of the assembly, with its place in its shard's sorted order."""

    order: bytes
    raw: RawRecord
    #: The partial summary's counts this output adds.
    counts: dict[str, int]


def bucket_of(key: tuple[str, str], buckets: int) -> int:
    return zlib.crc32(canonical_json(list(key))) % buckets


def conversations_of(
    keyed: tuple[tuple[str, str], GroupState], settings: Settings, buckets: int
) -> Iterator[tuple[int, _Conversation]]:
    """One group's state -> its conversations (or its dead letter), each keyed by its bucket."""
    (fmt, group), state = keyed
    bucket = bucket_of((fmt, group), buckets)
    made = assemble(
        fmt,
        group,
        state,
        id_field=settings.id_field,
        messages_field=settings.messages_field,
        tools_field=settings.tools_field,
    )
    if isinstance(made, NoCalls):
        letter = Unreadable(DeadLetterReason.NO_LLM_CALLS.value, made.detail)
        order = canonical_json([fmt, group, 0])
        yield bucket, _Conversation(order, RawRecord(made.source, made.position, letter), {"conversations": 1})
        return
    for index, conversation in enumerate(made):
        yield bucket, _made(fmt, group, index, conversation)


def _made(fmt: str, group: str, index: int, conversation: Assembled) -> _Conversation:
    raw = RawRecord(
        conversation.source, conversation.position, Parsed(conversation.record, None, conversation.assembly)
    )
    counts = {
        "conversations": 1,
        "prefixes_collapsed": conversation.assembly["collapsed"],
        "branches": 1 if index else 0,
        "tool_results_filled": len(conversation.assembly.get("tool_results_filled", ())),
    }
    return _Conversation(canonical_json([fmt, group, index]), raw, counts)


def shard_batches(keyed: tuple[int, Iterable[_Conversation]], first_shard: int, batch_size: int) -> Iterator[Batch]:
    """One bucket's conversations, sorted, as the batches of output shard ``first_shard + bucket``."""
    bucket, made = keyed
    ordered = sorted(made, key=lambda c: c.order)
    shard = first_shard + bucket
    for start in range(0, len(ordered), batch_size):
        yield Batch(shard, start, [c.raw for c in ordered[start : start + batch_size]])


def assembly_partial(keyed: tuple[int, Iterable[_Conversation]]) -> dict[str, Any]:
    """The ``call_logs`` counts of one bucket's outputs."""
    total: dict[str, int] = {}
    for made in keyed[1]:
        for name, n in made.counts.items():
            total[name] = total.get(name, 0) + n
    return {"call_logs": total}


def _at_start(item: tuple[tuple[str, str], tuple[str, int, Any]]) -> Any:
    """A piece at its start time (event time), when it has one."""
    start = item[1][2].start
    return beam_window.TimestampedValue(item, start / 1e9) if start > 0 else item


class _SessionConversations(beam.DoFn):
    """A group's state at one firing of its session -> its conversations, marked with the
    firing (``pane``) and counted ``reopened`` when the firing is a late one."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    def process(self, keyed, pane=beam.DoFn.PaneInfoParam):
        for _, made in conversations_of(keyed, self._settings, 1):
            if isinstance(made.raw.payload, Parsed) and made.raw.payload.assembly is not None:
                made.raw.payload.assembly["pane"] = pane.index
            if pane.timing == windowed_value.PaneInfoTiming.LATE:
                made = made._replace(counts={**made.counts, "reopened": 1})
            yield made


#: The "shard" of the batches that carry the assembly's partial summaries (never written).
TOTALS_SHARD = -3


def _as_batches(partials: tuple[Any, ...]) -> Any:
    """Partial summaries as batches of one (the composites' every output is batches)."""
    return (
        partials
        | "AssemblyTotals" >> beam.Flatten()
        | "AsBatches" >> beam.Map(lambda part: Batch(TOTALS_SHARD, 0, [part])).with_output_types(Batch)
    )


class AssembledBatches(NamedTuple):
    #: Batches of raw records (assembled conversations, a group's dead letter), by output shard.
    batches: beam.PCollection
    #: Partial summaries (``{"call_logs": ...}``) of the records handed on and of the outputs,
    #: as batches of one.
    partials: beam.PCollection


class AssembleConversations(beam.PTransform):
    """``CallLogged`` batches -> the conversations their calls make, as raw-record batches, and
    the assembly's partial summaries (``AssembledBatches``)."""

    def __init__(
        self,
        settings: Settings,
        batch_size: int,
        buckets: int = 1,
        first_shard: int = FIRST_ASSEMBLED_SHARD,
        session_gap_s: float = DEFAULT_SESSION_GAP_S,
        allowed_lateness_s: float = DEFAULT_ALLOWED_LATENESS_S,
    ):
        super().__init__()
        self._settings = settings
        self._batch_size = batch_size
        self._buckets = max(1, buckets)
        self._first_shard = first_shard
        self._gap = session_gap_s
        self._lateness = allowed_lateness_s

    def _sessions(self, pieces, handed_on):
        """On a stream: a group's conversation closes after ``session_gap_s`` without a call (in
        event time: the calls' start times) and is emitted then; a call that arrives later, within
        ``allowed_lateness_s``, re-opens it and the conversation is emitted again, whole (with
        every call so far: ``assembly.pane`` counts the emissions), counted ``reopened``."""
        made = (
            pieces
            | "AtStart" >> beam.Map(_at_start)
            | "Sessions"
            >> beam.WindowInto(
                beam_window.Sessions(self._gap),
                trigger=trigger.AfterWatermark(late=trigger.AfterCount(1)),
                accumulation_mode=trigger.AccumulationMode.ACCUMULATING,
                allowed_lateness=self._lateness,
            )
            | "AssembleGroups" >> beam.CombinePerKey(AssembleCalls())
            | "Conversations" >> beam.ParDo(_SessionConversations(self._settings))
        )
        batches = made | "Batches" >> beam.Map(lambda c: Batch(STREAM_ASSEMBLED_SHARD, 0, [c.raw])).with_output_types(
            Batch
        )
        counted = made | "Made" >> beam.Map(lambda c: {"call_logs": c.counts})
        return AssembledBatches(batches, _as_batches((handed_on, counted)))

    def expand(self, logged_batches):
        handed_on = logged_batches | "HandedOn" >> beam.Map(lambda batch: call_log_partial(batch.items))
        pieces = (
            logged_batches
            | "Records" >> beam.FlatMap(lambda batch: batch.items)
            | "Pieces" >> beam.FlatMap(keyed_pieces)
        )
        if not logged_batches.is_bounded:
            return self._sessions(pieces, handed_on)
        by_bucket = (
            pieces
            | "AssembleGroups" >> beam.CombinePerKey(AssembleCalls())
            | "Conversations" >> beam.FlatMap(conversations_of, self._settings, self._buckets)
            | "ByShard" >> beam.GroupByKey()
        )
        batches = by_bucket | "Batches" >> beam.FlatMap(
            shard_batches, self._first_shard, self._batch_size
        ).with_output_types(Batch)
        made = by_bucket | "Made" >> beam.Map(assembly_partial)
        return AssembledBatches(batches, _as_batches((handed_on, made)))
