"""The batch graph, on every runner: each input shard read, processed and written in one step.

::

    Create(plan) | expand | Reshuffle | ParDo(process_shard) | CombineGlobally(merge) | write lists + summary

Built for what every runner can run, DaskRunner's limits included (it gives every consumer
every tagged output, drops what ``finish_bundle`` emits and runs only the last leaf of a graph):
one element per shard, no tagged output, no ``finish_bundle`` emission, one leaf. Its parts: the
per-shard step (``pipeline.graph.shard_step``: the reader, the per-record step, the
``FILE_FORMATS`` writers) and the summary partials; it writes the temporary part files, each
output's ``<name>.files.json`` list and the summary document, which
``pipeline.execution.finalize.finalize`` moves into place.

It does not rely on fusion to keep a shard's records together: a shard is one call, so its
files, their names and a unique field's values within a file (openai-batch's ``custom_id``)
depend on the input only.
"""

from __future__ import annotations

import pickle
import uuid
from typing import NamedTuple

import apache_beam as beam
from apache_beam.metrics import Metrics

from pipeline.graph.chain_groups import ChainAcrossGroups, chain_enabled
from pipeline.graph.read import CreateParts, PartProgress
from pipeline.graph.shard_assembly import OUTPUT_TAG, AssembleShardCalls
from pipeline.graph.shard_dataset import DedupeShards
from pipeline.graph.shard_pairs import PairShards
from pipeline.graph.shard_step import ShardResult, ShardWork, process_shard, temp_place
from pipeline.graph.tally import Tally
from pipeline.io.object_store import WorkerFilesystems
from pipeline.io.parts import DEFAULT_PART_BYTES, Part, plan_parts
from pipeline.io.shard import Shard
from pipeline.io.written_files import WrittenFile, report_path, write_report, write_summary
from pipeline.testhooks import pause_point
from transforms.conversations import BatchCounters, freeze_gc
from transforms.totals import summary as summaries
from transforms.totals.counters import NAMESPACE


class ShardResultCoder(beam.coders.Coder):
    """A shard's result, pickled as Beam's coder for any value would; its size estimated
    without its call logs' states. Beam encodes the first elements of every collection to count
    their bytes, and a shard's states hold its conversations: a whole pickle of every state,
    thrown away (measured: 4% of a call-log run's CPU), although the states cross no shuffle as
    part of the result (``shard_assembly`` takes them out where the result is made)."""

    def encode(self, value: ShardResult) -> bytes:
        return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)

    def decode(self, encoded: bytes) -> ShardResult:
        result: ShardResult = pickle.loads(encoded)  # noqa: S301 — the run's own results
        return result

    def is_deterministic(self) -> bool:
        return False

    def estimate_size(self, value: ShardResult) -> int:
        return len(self.encode(value._replace(calls=()) if value.calls else value))


beam.coders.registry.register_coder(ShardResult, ShardResultCoder)


class _ProcessShard(beam.DoFn):
    """Thin: ``process_shard`` on each shard, its files named in the run's temporary
    directory; counters and local progress updated per batch."""

    def __init__(self, work: ShardWork, temp_root: str) -> None:
        self._work = work
        self._temp_root = temp_root
        self._filesystems = WorkerFilesystems()

    def setup(self) -> None:
        self._filesystems.apply()
        freeze_gc()
        self._counters = BatchCounters(self._work.step)
        self._blank = Metrics.counter(NAMESPACE, "blank_lines")
        self._shards = Metrics.counter(NAMESPACE, "shards_read")
        self._tally = Tally("shard")  # the live progress of local runs (pipeline/cli/progress.py)

    def process(self, part: Part):
        pause_point("read")  # tests kill a run here (pipeline.testhooks)
        step = self._work.step
        progress = PartProgress(self._tally)

        def observe(batch, result) -> None:
            self._counters.count(len(batch.items), result)
            for name, items, _ in step.routed(result):
                self._tally.add(name, len(items))
            pause_point("write")

        # A name unique per attempt: a retried part never clobbers another attempt's files.
        place = temp_place(self._temp_root, part, uuid.uuid4().hex)
        # Every planned part has its file in every output, an empty one too: the plan (--dry-run)
        # names the files a run writes whatever the records turn out to be.
        result = process_shard(
            part, self._work, place, observe=observe, read=progress.read, done=progress.done, empty_files=True
        )
        self._blank.inc(result.partial["blank_lines"])
        self._shards.inc(len(part.shards))
        self._tally.flush()
        yield result


class RunFiles(NamedTuple):
    """What the whole run wrote: the summary document and, by output, its files."""

    summary: dict
    files: dict[str, list[WrittenFile]]


class MergeShardResults(beam.CombineFn):
    """Shard results -> ``RunFiles``: partial summaries added, file lists joined."""

    def __init__(self, work: ShardWork) -> None:
        self._finish = work.step.finish(work.settings)
        self._outputs = work.outputs

    def create_accumulator(self) -> tuple[dict, dict[str, list]]:
        return {}, {name: [] for name in self._outputs}

    def add_input(self, accumulator, result: ShardResult):
        partial, files = accumulator
        for name, written in result.files.items():
            files[name].append(written)
        return summaries.merge(partial, result.partial), files

    def merge_accumulators(self, accumulators):
        accumulators = iter(accumulators)
        partial, files = next(accumulators)
        for more_partial, more_files in accumulators:
            partial = summaries.merge(partial, more_partial)
            for name, written in more_files.items():
                files[name].extend(written)
        return partial, files

    def extract_output(self, accumulator) -> RunFiles:
        partial, files = accumulator
        return RunFiles(self._finish(partial), files)


def write_run_files(
    run: RunFiles, temp_root: str, summary_path: str, filesystems: WorkerFilesystems | None = None
) -> dict:
    """The run's file lists (``<name>.files.json``) and its
    summary, into the temporary directory; the summary document."""
    if filesystems is not None:
        filesystems.apply()
    for name, written in run.files.items():
        write_report(written, report_path(temp_root, name))
    return write_summary(run.summary, summary_path)


# Summaries and shard results are plain Python values, hinted Any (pickled).
@beam.typehints.with_input_types(beam.typehints.Any)
@beam.typehints.with_output_types(beam.typehints.Any)
class ProcessShards(beam.PTransform):
    """Planned shards -> every output's temporary files and list, and the summary, under
    ``temp_root``; the result is the summary document (a PCollection of one)."""

    def __init__(
        self,
        shards: list[Shard],
        work: ShardWork,
        temp_root: str,
        summary_path: str,
        chunks: int | None = None,
        call_shards: int = 1,
        *,
        part_bytes: int = DEFAULT_PART_BYTES,
    ) -> None:
        super().__init__()
        self._shards = shards
        self._part_bytes = part_bytes
        self._work = work
        self._temp_root = temp_root
        self._summary_path = summary_path
        self._chunks = chunks
        self._call_shards = call_shards

    def expand(self, pbegin):
        results = (
            pbegin
            # The plan in chunks, spread over workers (``chunks``: DaskRunner's partitions).
            | "Plan" >> CreateParts(plan_parts(self._shards, self._part_bytes), self._chunks)
            | "Process" >> beam.ParDo(_ProcessShard(self._work, self._temp_root)).with_output_types(ShardResult)
        )
        if self._work.settings.calls:
            # Call-log records: their conversations assembled, written as shards after the input's.
            settings = self._work.settings
            chain = None
            if chain_enabled(settings):  # --chain-groups: one conversation whatever groups its calls are in
                chain = ChainAcrossGroups(settings.id_field, self._call_shards, OUTPUT_TAG, settings.messages_field)
            results = results | "AssembleCalls" >> AssembleShardCalls(
                self._work, self._temp_root, self._call_shards, len(self._shards), chain
            )
        if self._work.holds and self._work.settings.pairs_across:
            # --sink trl-dpo: candidates paired across every shard by prompt, then written by shard.
            results = results | "Pairs" >> PairShards(self._work, self._temp_root, len(self._shards))
        elif self._work.holds:
            # --dedupe: the held outputs of every shard brought together, then written by shard.
            results = results | "Dataset" >> DedupeShards(self._work, self._temp_root, len(self._shards))
        return (
            results
            # At least one shard is always planned: no default needed for an empty input.
            | "Merge" >> beam.CombineGlobally(MergeShardResults(self._work)).without_defaults()
            | "Write" >> beam.Map(write_run_files, self._temp_root, self._summary_path, WorkerFilesystems())
        )
