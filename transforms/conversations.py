"""Beam transforms around the pure core: normalize conversations, count, summarize.

``NormalizeConversations`` is the composite a pipeline applies to batches of raw records
(``transforms.records.Batch`` of ``RawRecord``); it returns a ``NormalizedOutputs`` with three
PCollections of batches:

- ``records``      — output records: each input record with its messages normalized (and
                     written by the chosen sink writer);
- ``drops``        — one drop-metrics record per conversation (``id``, ``source``,
                     ``position``, ``dropped``, ``drops`` by reason, ``healed``,
                     ``messages_in``, ``messages_out``; ``discarded``, the ledger of what
                     coercion discarded, when it discarded something; ``repairs`` /
                     ``violations`` when on);
- ``dead_letters`` — one record per input that could not be processed, with its reason.

Elements are batches, not single records: Beam's per-element cost in Python is several times
the cost of normalizing a typical conversation, and a batch keeps its input shard, which names
the output files deterministically. ``Unbatch`` gives per-record PCollections; for a stream
of single records, ``BatchRawRecords`` makes the batches.

Drop policy: nothing is skipped. A record that cannot be parsed, read, normalized or written
becomes a dead letter with a reason; an unexpected exception does too (``internal_error``)
instead of failing the bundle, which some runners would retry forever.

Counters live under the namespace ``convnorm`` (see ``COUNTER_NAMES``); they are for
monitoring, ``summary.json`` is for comparing runs. The transforms only use ParDo and
stateless maps, so they also apply to an unbounded input; the global summary is separate
(``SummarizeRun``).
"""

from __future__ import annotations

import functools
import gc
from typing import Iterable, NamedTuple

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.pvalue import TaggedOutput
from apache_beam.utils.windowed_value import WindowedValue

from transforms import summary as summaries
from transforms.normalize import REASONS
from transforms.profiles import REPAIRS
from transforms.records import DEAD_LETTER_REASONS, Batch, Settings, check_record, normalize_batch
from transforms.validate import VIOLATION_KINDS

#: The metrics namespace of every convnorm counter and distribution.
NAMESPACE = "convnorm"

#: Every counter the job reports (run and validate), documented in docs/operations.md ("Metrics").
COUNTER_NAMES = (
    ("records_in", "raw input records processed"),
    ("records_out", "records written to the normalized output"),
    ("dead_letters", "records routed to the dead-letter output"),
    *((f"dead_letter_{r}", f"dead letters with reason {r}") for r in DEAD_LETTER_REASONS),
    ("messages_in", "messages in normalized conversations, before normalization"),
    ("messages_out", "messages in normalized conversations, after normalization"),
    ("dropped", "messages (entries) dropped by normalization"),
    *((f"dropped_{r}", f"entries dropped with reason {r}") for r in REASONS),
    ("healed", "synthetic interrupted results inserted"),
    ("discarded_fields", "non-empty fields coercion discarded (the ledger; not message drops)"),
    ("discarded_chars", "characters of text in the fields coercion discarded"),
    *((f"repair_{r}", f"opt-in repairs {r} (lossless profile)") for r in REPAIRS),
    *((f"violation_{k}", f"sendability violations {k} (with --check)") for k in VIOLATION_KINDS),
    ("blank_lines", "blank JSONL lines skipped (not records)"),
    ("shards_read", "planned input shards read (counted by pipeline.sources)"),
    # convnorm validate (CheckConversations); it counts dead letters under dead_letters too.
    ("conversations_checked", "conversations checked by convnorm validate"),
    ("conversations_with_violations", "checked conversations with at least one violation"),
)

#: Distributions, per conversation.
DISTRIBUTION_NAMES = ("messages_per_conversation", "drops_per_conversation")


class NormalizeConversation(beam.DoFn):
    """Thin adapter: ``normalize_batch`` on each batch, outputs routed, counters updated."""

    DROPS = "drops"
    DEAD_LETTER = "dead_letter"

    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    def setup(self) -> None:
        # Everything alive now (Beam's and the SDK worker's own objects) stays alive: move it
        # out of the cyclic collector's sight, or each full collection re-scans it while the
        # job allocates millions of short-lived dicts (measured: 12% of a run's time).
        gc.freeze()
        self._counters = {name: Metrics.counter(NAMESPACE, name) for name, _ in COUNTER_NAMES}
        self._messages, self._drops = (Metrics.distribution(NAMESPACE, name) for name in DISTRIBUTION_NAMES)

    def start_bundle(self) -> None:
        # The writer starts a new output file per bundle and per shard: so does the state
        # that keeps a unique field (openai-batch's custom_id) unique within a file.
        self._file_shard, self._taken = None, {}

    def process(self, batch: Batch) -> Iterable:
        if batch.shard != self._file_shard:
            self._file_shard, self._taken = batch.shard, {}
        result = normalize_batch(batch.items, self._settings, taken=self._taken)
        self._count(len(batch.items), result)
        if result.records:
            # With their lines: the JSONL writer writes the bytes the per-record guard made.
            yield Batch(batch.shard, batch.start, result.records, result.lines)
        if result.metrics:
            yield TaggedOutput(self.DROPS, Batch(batch.shard, batch.start, result.metrics))
        if result.dead_letters:
            yield TaggedOutput(self.DEAD_LETTER, Batch(batch.shard, batch.start, result.dead_letters))

    def _count(self, records_in: int, result) -> None:
        # Tally per batch first: one counter update per name per batch, not per record.
        part = summaries.partial(records_in, result.metrics, result.dead_letters)
        inc = self._counters
        for name in ("records_in", "records_out", "dead_letters", "messages_in", "messages_out",
                     "dropped", "healed"):
            if part[name]:
                inc[name].inc(part[name])
        for reason, n in part["dead_letters_by_reason"].items():
            inc[f"dead_letter_{reason}"].inc(n)
        for reason, n in part["dropped_by_reason"].items():
            inc[f"dropped_{reason}"].inc(n)
        for counts in part["discarded"].values():
            inc["discarded_fields"].inc(counts["fields"])
            if counts["chars"]:
                inc["discarded_chars"].inc(counts["chars"])
        for kind, n in part["repairs"].items():
            inc[f"repair_{kind}"].inc(n)
        for kind, n in part["violations"].items():
            inc[f"violation_{kind}"].inc(n)
        for metrics in result.metrics:
            self._messages.update(metrics["messages_in"])
            self._drops.update(metrics["dropped"])


class NormalizedOutputs(NamedTuple):
    records: beam.PCollection
    drops: beam.PCollection
    dead_letters: beam.PCollection


class NormalizeConversations(beam.PTransform):
    """Batches of raw records -> normalized records, drop metrics and dead letters."""

    def __init__(self, settings: Settings) -> None:
        super().__init__()
        self._settings = settings

    def expand(self, raw_batches):
        fn = NormalizeConversation(self._settings)
        outputs = raw_batches | "Normalize" >> beam.ParDo(fn).with_outputs(
            fn.DROPS, fn.DEAD_LETTER, main="records"
        )
        return NormalizedOutputs(outputs.records, outputs[fn.DROPS], outputs[fn.DEAD_LETTER])


#: The shard of batches made from a stream rather than from planned input files.
STREAM_SHARD = -1

#: A batch closes at this many raw bytes of its records, or at its count (``--batch-size``),
#: whichever comes first: it bounds what a batch of large records holds (its lines and ~20x
#: their bytes in Python objects); CPU per record did not measurably change between 64 KiB
#: and 1 MiB (docs/per-record-speed.md).
DEFAULT_BATCH_BYTES = 256 << 10


def raw_size(raw) -> int:
    """A raw record's bytes as read (a JSONL line); 0 for one read as a value (Parquet, .json)."""
    payload = raw.payload
    return len(payload) if isinstance(payload, (bytes, str)) else 0


class BatchRawRecords(beam.PTransform):
    """Single ``RawRecord`` elements (from a queue, say) -> batches ``NormalizeConversations`` takes.

    Batches close at ``max_batch_size`` records or ``max_batch_bytes`` raw bytes, whichever
    comes first, within a bundle, so this works on unbounded input; file inputs do not need it
    (``ReadConversationLogs`` reads in batches already, by the same rule).
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
        if len(batch[0]) >= self._max_records or batch[1] >= self._max_bytes:
            del self._open[window]
            yield _batch(batch[0])

    def finish_bundle(self):
        for window, (items, _) in self._open.items():
            yield WindowedValue(_batch(items), window.max_timestamp(), [window])
        self._open = {}


def _batch(items: list) -> Batch:
    return Batch(STREAM_SHARD, items[0].position, items)


class Unbatch(beam.PTransform):
    """Batches -> their items, one element each, in batch order."""

    def expand(self, batches):
        return batches | "Unbatch" >> beam.FlatMap(lambda batch: batch.items)


class _MergeSummaries(beam.CombineFn):
    """Adds partial summaries; ``finish`` turns the total into the summary document."""

    def __init__(self, finish) -> None:
        self._finish = finish

    def create_accumulator(self) -> dict:
        return {}

    def add_input(self, accumulator: dict, part: dict) -> dict:
        return summaries.merge(accumulator, part)

    def merge_accumulators(self, accumulators) -> dict:
        total: dict = {}
        for accumulator in accumulators:
            total = summaries.merge(total, accumulator)
        return total

    def extract_output(self, accumulator: dict) -> dict:
        return self._finish(accumulator)


class _Summarize(beam.PTransform):
    """Read statistics + per-record outputs + dead letters -> one summary document.

    ``partial(records_in, outputs, dead_letters, blank_lines)`` summarizes one piece;
    ``finish`` turns the total into the document. ``records_in`` comes from the reader's
    statistics, not from the outputs, so the ``accounted`` flag is a real check that every
    record ended in exactly one output.
    """

    def __init__(self, partial, finish) -> None:
        super().__init__()
        self._partial = partial
        self._finish = finish

    def expand(self, inputs):
        read_stats, outputs, dead_letters = inputs
        partial = self._partial
        parts = (
            read_stats | "ReadTotals" >> beam.Map(lambda s: partial(s["records"], blank_lines=s["blank_lines"])),
            outputs | "OutputTotals" >> beam.Map(lambda b: partial(0, b.items)),
            dead_letters | "DeadLetterTotals" >> beam.Map(lambda b: partial(0, (), b.items)),
        ) | "AllTotals" >> beam.Flatten()
        return parts | "Merge" >> beam.CombineGlobally(_MergeSummaries(self._finish))


class SummarizeRun(_Summarize):
    """Dataset totals of a normalization run, from (read stats, drops, dead letters)."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(summaries.partial, functools.partial(
            summaries.finalize, profile=settings.profile, check=settings.check))


class CheckConversation(beam.DoFn):
    """Thin adapter for ``convnorm validate``: ``check_record`` on each batch, no changes."""

    DEAD_LETTER = "dead_letter"

    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    def setup(self) -> None:
        self._checked = Metrics.counter(NAMESPACE, "conversations_checked")
        self._flagged = Metrics.counter(NAMESPACE, "conversations_with_violations")
        self._dead = Metrics.counter(NAMESPACE, "dead_letters")

    def process(self, batch: Batch) -> Iterable:
        result = normalize_batch(batch.items, self._settings, check_record)
        self._checked.inc(len(result.records))
        self._flagged.inc(sum(1 for r in result.records if r["violations"]))
        self._dead.inc(len(result.dead_letters))
        if result.records:
            yield Batch(batch.shard, batch.start, result.records)
        if result.dead_letters:
            yield TaggedOutput(self.DEAD_LETTER, Batch(batch.shard, batch.start, result.dead_letters))


class CheckedOutputs(NamedTuple):
    reports: beam.PCollection
    dead_letters: beam.PCollection


class CheckConversations(beam.PTransform):
    """Batches of raw records -> per-conversation violation reports and dead letters."""

    def __init__(self, settings: Settings) -> None:
        super().__init__()
        self._settings = settings

    def expand(self, raw_batches):
        fn = CheckConversation(self._settings)
        outputs = raw_batches | "Check" >> beam.ParDo(fn).with_outputs(fn.DEAD_LETTER, main="reports")
        return CheckedOutputs(outputs.reports, outputs[fn.DEAD_LETTER])


class SummarizeValidation(_Summarize):
    """Totals of a validation run, from (read stats, reports, dead letters)."""

    def __init__(self) -> None:
        super().__init__(summaries.validation_partial, summaries.finalize_validation)
