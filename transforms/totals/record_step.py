"""A job's per-record step, and where what it gives goes (no Beam import): ``RecordStep``, its
two instances (``NORMALIZE``: ``convnorm run``; ``CHECK``: ``convnorm validate``) and the
names of their outputs. The per-shard step (``pipeline.graph.shard_step``, the job's), the
streaming driver and the routing DoFn (``transforms.conversations``, library users') follow it.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Iterator, NamedTuple

from transforms.record.assembled_calls import call_log_partial
from transforms.record.record_settings import Settings
from transforms.record.records import BatchResult, process_record
from transforms.record.validate_step import check_record
from transforms.totals import summary as summaries

#: Tags of the routing DoFn's outputs besides the main one (also the output directories' names).
DROPS = "drops"
DEAD_LETTER = "dead_letter"
#: The tag of the call-log records a step hands on to be assembled (``CallLogged``): not an
#: output of the job, the assembly's input.
CALLS = "calls"


class NormalizedOutputs(NamedTuple):
    """What ``NORMALIZE`` gives, each a Beam PCollection of batches (held as ``Any``: the core
    imports no Beam)."""

    records: Any
    drops: Any
    dead_letters: Any
    #: Batches of the assembly's partial summaries (``pipeline.graph.call_assembly``); ``None``
    #: when the composite does not assemble call logs.
    assembly: Any = None


class CheckedOutputs(NamedTuple):
    """What ``CHECK`` gives, each a Beam PCollection of batches."""

    reports: Any
    dead_letters: Any
    assembly: Any = None


class RecordStep(NamedTuple):
    """A job's per-record step, and where what it gives goes: the one description the per-shard
    step (``pipeline.graph.shard_step``, the job's) and the routing DoFn (library users') follow."""

    #: The ParDo's label in the graph.
    label: str
    #: ``step(raw, settings, ...) -> Outcome`` (``transforms.record.records``), run by ``normalize_batch``.
    step: Callable[..., Any]
    #: The summary view whose partial totals the counters count.
    view: summaries.View
    #: The batch result's field that view summarizes (``metrics`` or ``records``).
    summarized: str
    #: Tagged outputs besides the main one (the records), in the order of ``outputs``.
    tags: tuple[str, ...]
    #: The composite's result: the main output, then the tagged ones.
    outputs: type
    #: The main output's name (its directory under ``--output``); the tags name the others.
    main_output: str
    #: ``finalize(total, settings)``: the total of the partials -> the summary document.
    finalize: Callable[[dict[str, Any], Settings], dict[str, Any]]

    @property
    def output_names(self) -> tuple[str, ...]:
        """Every output's name, the main one first."""
        return (self.main_output, *self.tags)

    def routed(
        self, result: BatchResult, lines_only: bool = False
    ) -> Iterator[tuple[str, list[Any], list[bytes] | None]]:
        """``(output name, items, their JSON lines or None)`` for each output the batch result
        has items for: records to the main output, drop metrics to ``DROPS``, unreadable
        records to ``DEAD_LETTER``. ``lines_only`` (a JSON Lines main output, normalizing with
        ``keep_records=False``): the main output's items are the records' lines."""
        records = result.lines if lines_only and result.lines is not None else result.records
        if records:
            yield self.main_output, records, result.lines
        if result.metrics and DROPS in self.tags:
            yield DROPS, result.metrics, None
        if result.dead_letters:
            yield DEAD_LETTER, result.dead_letters, None
        if result.calls:
            yield CALLS, list(result.calls), None

    def partial(self, records_in: int, result: BatchResult) -> dict[str, Any]:
        """The view's partial summary of one batch's result (``records_in`` records read)."""
        part = self.view.partial(records_in, getattr(result, self.summarized), result.dead_letters)
        if result.calls:
            part.update(call_log_partial(result.calls))
        return part

    def finish(self, settings: Settings) -> Callable[[dict[str, Any]], dict[str, Any]]:
        """The total of the partials -> the summary document, for a job's settings (picklable)."""
        return functools.partial(_finalize_with, self.finalize, settings)


def _finalize_with(
    finalize: Callable[[dict[str, Any], Settings], dict[str, Any]], settings: Settings, total: dict[str, Any]
) -> dict[str, Any]:
    return finalize(total, settings)


def _finalize_validation(total: dict[str, Any], settings: Settings) -> dict[str, Any]:
    # validation.json depends on no setting.
    return summaries.finalize_validation(total)


NORMALIZE = RecordStep(
    label="Normalize",
    step=process_record,
    view=summaries.RUN,
    summarized="metrics",
    tags=(DROPS, DEAD_LETTER),
    outputs=NormalizedOutputs,
    main_output="normalized",
    finalize=summaries.finalize_run,
)
CHECK = RecordStep(
    label="Check",
    step=check_record,
    view=summaries.VALIDATE,
    summarized="records",
    tags=(DEAD_LETTER,),
    outputs=CheckedOutputs,
    main_output="violations",
    finalize=_finalize_validation,
)
