"""The composites library users apply to batches of raw records: ``NormalizeConversationBatches``
(what ``convnorm run`` does) and ``CheckConversationBatches`` (``convnorm validate``), around the
routing DoFn of ``transforms.conversations``, with the call-log records a batch hands on
assembled into conversations (``pipeline.graph.call_assembly``) and processed by the same step.

convnorm's own job does not apply them: its graph (``pipeline.graph.per_shard``) runs the same
per-record step inside its per-shard step, which gives the same records and counts.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import apache_beam as beam

from pipeline.graph.call_assembly import AssembleConversations
from transforms.conversations import CALLS, CheckConversation, NormalizeConversation, RouteConversations
from transforms.record.assembled_calls import DEFAULT_REOPEN_S, DEFAULT_SESSION_GAP_S, FIRST_ASSEMBLED_SHARD
from transforms.record.inputs import DEFAULT_BATCH_SIZE, Batch
from transforms.record.record_settings import Settings

#: The routing DoFn's main output's tag.
_MAIN = "main"


@beam.typehints.with_input_types(Batch)
@beam.typehints.with_output_types(Batch)  # every output: records, drops, dead letters, assembly totals
class ProcessConversationBatches(beam.PTransform):
    """Batches of raw records -> the step's outputs (a ``step.outputs`` of PCollections of
    batches), by the routing DoFn it is given.

    When the route's settings hand call-log records on (``Settings.calls``), their calls are
    assembled into conversations (``pipeline.graph.call_assembly.AssembleConversations``: a
    shuffle), which the same step then processes; its outputs join the others', and the
    assembly's partial summaries are the outputs' ``assembly``. ``call_shards`` output shards,
    numbered from ``first_call_shard``, hold the assembled conversations. On a stream, a
    conversation is emitted after ``session_gap_s`` without a call, and again if a call comes
    within ``reopen_s`` after that (``pipeline.graph.call_assembly._Sessions``).
    """

    def __init__(
        self,
        route: RouteConversations,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        call_shards: int = 1,
        first_call_shard: int = FIRST_ASSEMBLED_SHARD,
        session_gap_s: float = DEFAULT_SESSION_GAP_S,
        reopen_s: float = DEFAULT_REOPEN_S,
    ) -> None:
        super().__init__()
        self._route = route
        self._batch_size = batch_size
        self._call_shards = call_shards
        self._first_call_shard = first_call_shard
        self._sessions = (session_gap_s, reopen_s)

    def expand(self, raw_batches):
        route = self._route
        step = route.step
        outputs = raw_batches | step.label >> beam.ParDo(route).with_input_types(Batch).with_outputs(
            *step.tags, CALLS, main=_MAIN
        )
        direct = [outputs[_MAIN], *(outputs[tag] for tag in step.tags)]
        if not route.settings.calls:
            return step.outputs(*direct)
        assembled = outputs[CALLS] | "AssembleCalls" >> AssembleConversations(
            route.settings, self._batch_size, self._call_shards, self._first_call_shard, *self._sessions
        )
        # The assembled conversations are flat records: read as such, whatever --format said.
        again = RouteConversations(
            step, dataclasses.replace(route.settings, input_format="flat", calls=False), route.lines_only
        )
        more = assembled.batches | step.label + "Assembled" >> beam.ParDo(again).with_input_types(Batch).with_outputs(
            *step.tags, main=_MAIN
        )
        theirs = [more[_MAIN], *(more[tag] for tag in step.tags)]
        joined = [
            (mine, other) | f"Join{tag.title()}" >> beam.Flatten()
            for mine, other, tag in zip(direct, theirs, (_MAIN, *step.tags))
        ]
        return step.outputs(*joined, assembly=assembled.partials)


class NormalizeConversationBatches(ProcessConversationBatches):
    """Batches of raw records -> normalized records, drop metrics and dead letters (a
    ``NormalizedOutputs``): ``NormalizeConversation`` applied to batches.

    ``lines_only``: the records as their JSON lines (``RouteConversations``), for a JSON Lines
    writer."""

    def __init__(self, settings: Settings, lines_only: bool = False, *, assemble: bool = True, **shards: Any) -> None:
        settings = dataclasses.replace(settings, calls=assemble)
        super().__init__(NormalizeConversation(settings, lines_only=lines_only), **shards)


class CheckConversationBatches(ProcessConversationBatches):
    """Batches of raw records -> per-conversation violation reports and dead letters.

    ``lines_only`` is accepted so both composites are made alike; a check has no records to
    hand on as lines (its reports are always objects)."""

    def __init__(self, settings: Settings, lines_only: bool = False, *, assemble: bool = True, **shards: Any) -> None:
        super().__init__(CheckConversation(dataclasses.replace(settings, calls=assemble)), **shards)
