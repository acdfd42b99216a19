"""Beam transforms around the pure core, for library users: normalize or check conversations
in a Beam pipeline of your own, and count.

convnorm's own job does not apply them: its graph (``pipeline.graph.per_shard``, the one every
runner runs) reads, processes and writes each input shard in one step
(``pipeline.graph.shard_step``) with the same ``RecordStep`` and the same per-record code
(``records.normalize_batch``), so the records and counts are the same.

One routing DoFn (``RouteConversations``) runs a job's per-record step over batches of raw
records (``transforms.record.inputs.Batch`` of ``RawRecord``) and routes what it gives; a
``RecordStep`` (``transforms.totals.record_step``, the pure core) names the step and its
outputs, and ``pipeline.graph.conversation_batches.ProcessConversationBatches`` is the one
composite around it (with the assembly of call logs, ``pipeline.graph.call_assembly``). The
two steps:

- ``NORMALIZE`` (``NormalizeConversationBatches``, what ``convnorm run`` does) returns a ``NormalizedOutputs``
  with three PCollections of batches:

  - ``records``      — output records: each input record with its messages normalized (and
                       written by the chosen sink writer);
  - ``drops``        — one drop-metrics record per conversation (``id``, ``source``,
                       ``position``, ``dropped``, ``drops`` by reason, ``healed``,
                       ``messages_in``, ``messages_out``; ``discarded``, the ledger of what
                       coercion discarded, when it discarded something; ``repairs`` /
                       ``violations`` when on);
  - ``dead_letters`` — one record per input that could not be processed, with its reason.

- ``CHECK`` (``CheckConversationBatches``, what ``convnorm validate`` does) returns a ``CheckedOutputs``: one
  violation report per conversation (``reports``) and the ``dead_letters``.

Elements are batches, not single records: Beam's per-element cost in Python is several times
the cost of normalizing a typical conversation, and a batch keeps its input shard, which names
the output files deterministically. ``Unbatch`` gives per-record PCollections; for a stream
of single records, ``BatchRawRecords`` makes the batches.

Drop policy: nothing is skipped. A record that cannot be parsed, read, normalized or written
becomes a dead letter with a reason; an unexpected exception does too (``internal_error``)
instead of failing the bundle, which some runners would retry forever.

Counters live under the namespace ``convnorm`` (``transforms.totals.counters``); they are for
monitoring, ``summary.json`` is for comparing runs. The transforms only use ParDo and
stateless maps, so they also apply to an unbounded input.
"""

from __future__ import annotations

import gc
import os
from typing import Any, Iterable, Iterator

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.pvalue import TaggedOutput
from apache_beam.utils.windowed_value import WindowedValue

from transforms.record.inputs import (
    DEFAULT_BATCH_BYTES,
    Batch,
    Parsed,
    RawRecord,
    batch_is_full,
    raw_size,
)
from transforms.record.record_settings import Settings
from transforms.record.record_settings import problems as settings_problems
from transforms.record.record_steps import ReaderHint
from transforms.record.records import BatchResult, normalize_batch
from transforms.totals.counters import COUNTED_BY_KIND, COUNTED_TOTALS, COUNTER_NAMES, DISTRIBUTION_NAMES, NAMESPACE

# The step descriptions live in the pure core; named here too, where library users found them.
from transforms.totals.record_step import CALLS as CALLS
from transforms.totals.record_step import CHECK as CHECK
from transforms.totals.record_step import DEAD_LETTER as DEAD_LETTER
from transforms.totals.record_step import DROPS as DROPS
from transforms.totals.record_step import NORMALIZE as NORMALIZE
from transforms.totals.record_step import CheckedOutputs as CheckedOutputs
from transforms.totals.record_step import NormalizedOutputs as NormalizedOutputs
from transforms.totals.record_step import RecordStep as RecordStep


class BatchCounters:
    """The ``convnorm`` counters and distributions of a step's batches (``transforms.totals.counters``).

    Made in a DoFn's ``setup``; ``count`` tallies per batch first: one counter update per name
    per batch, not per record.
    """

    def __init__(self, step: RecordStep) -> None:
        self._step = step
        # Beam's metric objects are untyped.
        self._counters: dict[str, Any] = {name: Metrics.counter(NAMESPACE, name) for name, _ in COUNTER_NAMES}
        self._distributions: list[Any] = [Metrics.distribution(NAMESPACE, name) for name in DISTRIBUTION_NAMES]
        self._totals = COUNTED_TOTALS[step.view.command]

    def blank_line(self) -> None:
        self._counters["blank_lines"].inc()

    def count(self, records_in: int, result: BatchResult, part: dict[str, Any] | None = None) -> None:
        """Count one batch's result; ``part``: its partial summary, when the caller made it."""
        if part is None:
            part = self._step.partial(records_in, result)
        inc = self._counters
        for name in self._totals:
            if part[name]:
                inc[name].inc(part[name])
        for key, prefix in COUNTED_BY_KIND:
            for kind, n in part.get(key, {}).items():
                inc[prefix + kind].inc(n)
        for counts in part.get("discarded", {}).values():
            inc["discarded_fields"].inc(counts["fields"])
            if counts["chars"]:
                inc["discarded_chars"].inc(counts["chars"])
        messages, drops = self._distributions
        for metrics in result.metrics:
            messages.update(metrics["messages_in"])
            drops.update(metrics["dropped"])


class RouteConversations(beam.DoFn):
    """The one routing DoFn: a job's per-record step (``normalize_batch``) over each element,
    what it gives routed by tag, counters updated. Records go to the main output, drop
    metrics to ``DROPS`` (only the normalizing step makes them), unreadable records to
    ``DEAD_LETTER``.

    An element is a ``Batch`` of ``RawRecord`` (the outputs are batches of the same shard) or a
    single record (the outputs are single items): a ``RawRecord``, a JSON line (``str`` or
    ``bytes``, as ``ReadFromText`` gives), a ``(file name, line)`` pair
    (``ReadFromTextWithFilename``), or a ``dict`` already parsed. A single record has no
    position in a file unless it is a ``RawRecord``: its ``position`` is ``UNKNOWN_POSITION``
    and its ``source`` the file name it came with, or ``source``. A blank line is not a record
    (as in convnorm's readers): it gives no output and is counted (``blank_lines``).

    ``lines_only`` (normalizing batches, for a JSON Lines writer): the main output's batches
    hold each record as its JSON line, the bytes the writer writes, in ``items`` and ``lines``
    both; the records themselves are not kept alive until the batch is written.
    """

    #: The position of a single record read without one (``ReadFromText`` does not say).
    UNKNOWN_POSITION = -1

    def __init__(self, step: RecordStep, settings: Settings, lines_only: bool = False, source: str = "") -> None:
        self._step = step
        self._settings = settings
        self._source = source
        self._lines_only = lines_only

    @property
    def step(self) -> RecordStep:
        return self._step

    @property
    def settings(self) -> Settings:
        return self._settings

    @property
    def lines_only(self) -> bool:
        return self._lines_only

    def setup(self) -> None:
        freeze_gc()
        self._counters = BatchCounters(self._step)

    def start_bundle(self) -> None:
        # The state that keeps a unique field (openai-batch's custom_id) unique lives for one
        # shard in one bundle; each such run of it is a scope, stamped on its batches, and the
        # writer starts a new file per scope (``Batch.scope``). The reader hint lives as long:
        # a shard's records are one file's (detection's shortcut gives full detection's answer
        # at any boundary; it only saves the first record's).
        self._file_shard: int | None = None
        self._taken: dict[str, int] = {}
        self._hint = ReaderHint()
        self._scope = 0

    def process(self, element: Any) -> Iterable[Any]:
        if not isinstance(element, Batch):
            yield from self._process_one(element)
            return
        if element.shard != self._file_shard:
            self._file_shard, self._taken, self._hint = element.shard, {}, ReaderHint()
            self._scope = new_scope()
        result = normalize_batch(
            element.items,
            self._settings,
            self._step.step,
            taken=self._taken,
            keep_records=not self._lines_only,
            hint=self._hint,
        )
        self._counters.count(len(element.items), result)
        for name, items, lines in self._step.routed(result, self._lines_only):
            out = Batch(element.shard, element.start, items, lines, self._scope)
            yield out if name == self._step.main_output else TaggedOutput(name, out)

    def _process_one(self, element: Any) -> Iterator[Any]:
        raw = self._raw(element)
        if isinstance(raw.payload, (str, bytes)) and not raw.payload.strip():
            self._counters.blank_line()  # as convnorm's readers: a blank line is not a record
            return
        result = normalize_batch([raw], self._settings, self._step.step, taken=self._taken)
        self._counters.count(1, result)
        for name, items, _ in self._step.routed(result):
            for item in items:
                yield item if name == self._step.main_output else TaggedOutput(name, item)

    def _raw(self, element: Any) -> RawRecord:
        if isinstance(element, RawRecord):
            return element
        source = self._source
        if isinstance(element, tuple) and len(element) == 2 and isinstance(element[0], str):
            source, element = element
        payload = Parsed(element) if isinstance(element, dict) else element
        return RawRecord(source, self.UNKNOWN_POSITION, payload)


def new_scope() -> int:
    """A scope no other normalizer, in this process or another, will stamp: only compared for
    equality by the writer, never written, so it need not be reproducible."""
    return int.from_bytes(os.urandom(8), "big") | 1


class NormalizeConversation(RouteConversations):
    """Normalize conversations by MEM-5: the design card's DoFn, for any Beam pipeline.

    Main output: each record with its messages normalized (written by the chosen sink, a
    ``dict``). Tagged outputs: ``DROPS``, one drop-metrics record per conversation (what was
    dropped and why, by reason); ``DEAD_LETTER``, one record per input that could not be
    processed, with its reason. Every input ends in exactly one of the main output and the
    dead letters. Elements: see ``RouteConversations`` (a JSON line, a ``(file name, line)``
    pair, a ``dict``, a ``RawRecord``, or a ``Batch`` of them)::

        import apache_beam as beam
        from transforms.conversations import NormalizeConversation

        with beam.Pipeline() as p:
            out = (
                p
                | beam.io.ReadFromText("logs/*.jsonl")
                | beam.ParDo(NormalizeConversation(sink="openai-finetune")).with_outputs(
                    NormalizeConversation.DROPS, NormalizeConversation.DEAD_LETTER, main="records"
                )
            )
            out.records | "Records" >> beam.Map(json.dumps) | "WriteRecords" >> beam.io.WriteToText("clean")
            out[NormalizeConversation.DROPS] | ...

    ``settings`` (a ``transforms.record.record_settings.Settings``) or its fields as keywords (``sink``,
    ``profile``, ``id_field``, ...) choose what convnorm's flags choose. Per-element input pays
    Beam's per-element cost (several times normalizing a record); ``BatchRawRecords`` before it
    (or ``NormalizeConversationBatches``) moves records in batches. A unique field (openai-batch's
    ``custom_id``) is kept unique within a bundle.

    convnorm's own job does not use this DoFn: it runs the same per-record step inside its
    per-shard step (``pipeline.graph.shard_step``), which gives the same records.
    """

    DROPS = DROPS
    DEAD_LETTER = DEAD_LETTER

    def __init__(
        self, settings: Settings | None = None, *, source: str = "", lines_only: bool = False, **fields: Any
    ) -> None:
        super().__init__(NORMALIZE, checked_settings(settings, fields), lines_only, source)


class CheckConversation(RouteConversations):
    """Check conversations as they are (``convnorm validate``): violation reports on the main
    output, unreadable records on ``DEAD_LETTER``."""

    DEAD_LETTER = DEAD_LETTER

    def __init__(self, settings: Settings | None = None, *, source: str = "", **fields: Any) -> None:
        super().__init__(CHECK, checked_settings(settings, fields), source=source)


def checked_settings(settings: Settings | None, fields: dict[str, Any]) -> Settings:
    """``settings``, or a ``Settings`` of ``fields``, checked (``ValueError`` naming every
    problem): a bad name fails where the pipeline is built, not on a worker."""
    if settings is not None and fields:
        raise TypeError("give settings or their fields as keywords, not both")
    made = settings if settings is not None else Settings(**fields)
    found = settings_problems(made)
    if found:
        raise ValueError("; ".join(found))
    return made


def freeze_gc() -> None:
    """Move everything alive now (Beam's and the SDK worker's own objects) out of the cyclic
    collector's sight, or each full collection re-scans it while the job allocates millions of
    short-lived dicts (measured: 12% of a run's time). For a DoFn's ``setup``."""
    gc.freeze()


#: The shard of batches made from a stream rather than from planned input files.
STREAM_SHARD = -1


class BatchRawRecords(beam.PTransform):
    """Single ``RawRecord`` elements (from a queue, say) -> batches ``NormalizeConversationBatches`` takes.

    Batches close at ``max_batch_size`` records or ``max_batch_bytes`` raw bytes, whichever
    comes first, within a bundle, so this works on unbounded input; file inputs do not need it
    (convnorm's job reads in batches already, by the same rule).
    """

    def __init__(self, max_batch_size: int = 256, max_batch_bytes: int = DEFAULT_BATCH_BYTES) -> None:
        super().__init__()
        self._max = max_batch_size
        self._max_bytes = max_batch_bytes

    def expand(self, records):
        return records | "Group" >> beam.ParDo(_BatchBySize(self._max, self._max_bytes))


class _BatchBySize(beam.DoFn):
    """Collects a bundle's records into ``Batch``es per window; what is left of each window's
    batch is emitted at the bundle's end, in that window (as ``BatchElements`` does)."""

    def __init__(self, max_records: int, max_bytes: int) -> None:
        self._max_records = max_records
        self._max_bytes = max_bytes

    def start_bundle(self) -> None:
        self._open: dict = {}  # window -> [items, raw bytes]

    def process(self, raw, window=beam.DoFn.WindowParam):
        batch = self._open.setdefault(window, [[], 0])
        batch[0].append(raw)
        batch[1] += raw_size(raw)
        if batch_is_full(len(batch[0]), batch[1], self._max_records, self._max_bytes):
            del self._open[window]
            yield _batch(batch[0])

    def finish_bundle(self):
        for window, (items, _) in self._open.items():
            yield WindowedValue(_batch(items), window.max_timestamp(), (window,))
        self._open = {}


def _batch(items: list) -> Batch:
    return Batch(STREAM_SHARD, items[0].position, items)


@beam.typehints.with_input_types(Batch)
class Unbatch(beam.PTransform):
    """Batches -> their items, one element each, in batch order."""

    def expand(self, batches):
        return batches | "Unbatch" >> beam.FlatMap(lambda batch: batch.items)
