"""Beam around the assembly of call logs (``transforms.record.assembled_calls``), for the
composites library users apply (``pipeline.graph.conversation_batches``): the call-log records
a step handed on (``CallLogged``) -> batches of the conversations they make, for the same step
to normalize or check, and the assembly's partial summaries.

::

    CallLogged | pieces keyed by (format, group) | CombinePerKey(AssembleCalls)
               | conversations keyed by bucket | GroupByKey | sorted into batches

The combine keeps one state per group (its maximal histories, not every call's), and Beam
lifts it before the shuffle, so a trace of thousands of calls is not shuffled call by call.
convnorm's own batch graph assembles in ``pipeline.graph.shard_assembly`` with the same helpers.
"""

from __future__ import annotations

from typing import Any, Iterable, NamedTuple

import apache_beam as beam
from apache_beam import coders
from apache_beam.transforms import userstate
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import Timestamp

from transforms.calllogs.assemble import GroupState, call_traces
from transforms.calllogs.calls import Label
from transforms.calllogs.joins import is_join_key, joined_states
from transforms.calllogs.labels import label_counts, targets_of
from transforms.record.assembled_calls import (
    DEFAULT_REOPEN_S,
    DEFAULT_SESSION_GAP_S,
    FIRST_ASSEMBLED_SHARD,
    STREAM_ASSEMBLED_SHARD,
    call_log_partial,
    conversations_of,
    emitted_again,
    keyed_pieces,
)
from transforms.record.inputs import Batch
from transforms.record.labelled_calls import joined_by_bucket, labelled_batches, labelled_partial
from transforms.record.record_settings import Settings


class AssembleCalls(beam.CombineFn):
    """``(source, position, piece)`` of one group (or a ``GroupState`` of its joined pieces:
    ``JoinFragments``) -> its ``GroupState``."""

    def create_accumulator(self) -> GroupState:
        return GroupState()

    def add_input(self, state: GroupState, item: tuple[str, int, Any] | GroupState) -> GroupState:
        if isinstance(item, GroupState):
            return state.merge(item)
        return state.add(*item)

    def merge_accumulators(self, states: Iterable[GroupState]) -> GroupState:
        states = iter(states)
        first = next(states)
        for state in states:
            first.merge(state)
        return first

    def extract_output(self, state: GroupState) -> GroupState:
        return state


_CALLS = userstate.CombiningValueStateSpec("calls", coders.PickleCoder(), AssembleCalls())
_LATEST = userstate.ReadModifyWriteStateSpec("latest", coders.PickleCoder())
_PANES = userstate.ReadModifyWriteStateSpec("panes", coders.PickleCoder())
_GAP = userstate.TimerSpec("gap", TimeDomain.WATERMARK)
_EXPIRE = userstate.TimerSpec("expire", TimeDomain.WATERMARK)
# Beam's state and timer parameters, as the DoFn's defaults take them.
_CALLS_STATE, _LATEST_STATE = beam.DoFn.StateParam(_CALLS), beam.DoFn.StateParam(_LATEST)
_PANES_STATE = beam.DoFn.StateParam(_PANES)
_GAP_TIMER, _EXPIRE_TIMER = beam.DoFn.TimerParam(_GAP), beam.DoFn.TimerParam(_EXPIRE)


class _Sessions(beam.DoFn):
    """A stream's pieces, by group -> each group's conversations, once the stream's watermark
    is ``gap_s`` past the group's latest call (its start time: event time); a call whose start
    time is unknown holds its group open to the end of the stream.

    A stateful DoFn in the global window, not session windows: a window drops what comes
    behind the watermark past its allowed lateness, and a replay of old logs is all behind it;
    here no call is ever dropped. The group's state (a ``GroupState``, combined call by call)
    is kept until the watermark is ``keep_s`` past that: a call in that time re-opens it, and
    the conversation is emitted again, whole, with every call so far (``assembly.pane`` counts
    the emissions; the summary counts it ``reopened``): the newest record of an id is the one
    to keep. A call after that starts the group afresh; its history makes the conversation
    again (less the calls and the tool results recorded apart before it)."""

    def __init__(self, settings: Settings, gap_s: float, keep_s: float) -> None:
        self._settings = settings
        self._gap = gap_s
        self._keep = keep_s

    def process(
        self,
        element,
        calls=_CALLS_STATE,
        latest=_LATEST_STATE,
        gap=_GAP_TIMER,
        expire=_EXPIRE_TIMER,
    ):
        calls.add(element[1])
        start = element[1][2].start
        before = latest.read() or 0
        # -1: a call of unknown time, now or before: the group is open to the end of the stream.
        seen = -1 if start <= 0 or before == -1 else max(before, start)
        latest.write(seen)
        end = GlobalWindow().max_timestamp()
        if seen == -1:
            gap.set(end)  # no expiry: the state ends with the stream (a timer there too could fire first)
            return
        close = Timestamp(micros=seen // 1000) + self._gap
        gap.set(min(close, end))
        expire.set(min(close + self._keep, end))

    @userstate.on_timer(_GAP)
    def closed(self, key=beam.DoFn.KeyParam, calls=_CALLS_STATE, panes=_PANES_STATE):
        pane = panes.read() or 0
        state = calls.read()
        if not state.holds_pieces():
            return  # expired already: nothing left to emit
        for _, made in conversations_of((key, state), self._settings, 1):
            yield emitted_again(made, pane)
        panes.write(pane + 1)

    @userstate.on_timer(_EXPIRE)
    def expired(self, calls=_CALLS_STATE, latest=_LATEST_STATE, panes=_PANES_STATE):
        calls.clear()
        latest.clear()
        panes.clear()


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
        reopen_s: float = DEFAULT_REOPEN_S,
    ):
        super().__init__()
        self._settings = settings
        self._batch_size = batch_size
        self._buckets = max(1, buckets)
        self._first_shard = first_shard
        self._gap = session_gap_s
        self._lateness = reopen_s

    def _sessions(self, pieces, handed_on):
        """On a stream: ``_Sessions`` (a group's conversation emitted after ``session_gap_s``
        without a call; a later call re-opens it). ``handed_on``: the partial summaries to add."""
        made = pieces | "Sessions" >> beam.ParDo(_Sessions(self._settings, self._gap, self._lateness))
        batches = made | "Batches" >> beam.Map(lambda c: Batch(STREAM_ASSEMBLED_SHARD, 0, [c.raw])).with_output_types(
            Batch
        )
        counted = made | "Made" >> beam.Map(lambda c: {"call_logs": c.counts})
        return AssembledBatches(batches, _as_batches((*handed_on, counted)))

    def expand(self, logged_batches):
        handed_on = logged_batches | "HandedOn" >> beam.Map(lambda batch: call_log_partial(batch.items))
        pieces = (
            logged_batches
            | "Records" >> beam.FlatMap(lambda batch: batch.items)
            | "Pieces" >> beam.FlatMap(keyed_pieces)
        )
        call_pieces = pieces | "CallPieces" >> beam.Filter(lambda keyed: not isinstance(keyed[1][2], Label))
        labels = (
            pieces
            | "LabelPieces" >> beam.Filter(lambda keyed: isinstance(keyed[1][2], Label))
            | "ByJoinId" >> beam.Map(lambda keyed: (keyed[1][2].group, keyed[1][2]))
        )
        if not logged_batches.is_bounded:
            # A stream's labels are not joined here (the landing-directory driver joins them at a
            # window's close): counted unmatched, never lost silently.
            unmatched = labels | "LabelsUnmatched" >> beam.Map(
                lambda keyed: label_counts(label_unmatched={keyed[1].source: 1})
            )
            return self._sessions(call_pieces, (handed_on, unmatched))
        # Fragments (parts of one call read apart) meet by their key first; the pieces they make
        # go to their groups with the others.
        joined_calls = (
            call_pieces
            | "Fragments" >> beam.Filter(lambda item: is_join_key(item[0]))
            | "JoinFragments" >> beam.CombinePerKey(AssembleCalls())
            | "JoinedCalls" >> beam.FlatMap(lambda keyed: joined_states(*keyed))
        )
        whole = call_pieces | "Whole" >> beam.Filter(lambda item: not is_join_key(item[0]))
        states = (
            (whole, joined_calls)
            | "WithJoined" >> beam.Flatten()
            | "AssembleGroups" >> beam.CombinePerKey(AssembleCalls())
        )
        conversations = states | "Conversations" >> beam.FlatMap(conversations_of, self._settings, self._buckets)
        # Labels meet the ids groups offer (keys, not conversations), then go to their group's shard.
        targets = states | "Targets" >> beam.FlatMap(lambda keyed: targets_of(keyed[0], call_traces(keyed[1])))
        joined = (
            (targets, labels)
            | "LabelsAndTargets" >> beam.Flatten()
            | "JoinLabels" >> beam.GroupByKey()
            | "Joined" >> beam.FlatMap(joined_by_bucket, self._buckets)
        )
        by_bucket = (conversations, joined) | "WithLabels" >> beam.Flatten() | "ByShard" >> beam.GroupByKey()
        batches = by_bucket | "Batches" >> beam.FlatMap(
            labelled_batches, self._first_shard, self._batch_size
        ).with_output_types(Batch)
        made = by_bucket | "Made" >> beam.Map(labelled_partial)
        return AssembledBatches(batches, _as_batches((handed_on, made)))
