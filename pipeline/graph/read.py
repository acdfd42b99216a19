"""The Beam side of reading: the plan's parts as a PCollection (packed, ``CreateParts``), and
the progress of reading them (``PartProgress``; the reading itself is the per-shard step's)."""

from __future__ import annotations

import pickle
import zlib

import apache_beam as beam

from pipeline.graph.tally import Tally
from pipeline.io.parts import Part
from pipeline.io.shard import FILE_KINDS, Shard
from transforms.record.inputs import Batch


class ReadProgress:
    """The progress of reading one shard, for the live tally of local runs: records, bytes read
    (file offsets in uncompressed JSONL; other files count once read whole), shards done. Files
    read show in the progress line, not as a log line each (100 files: 100 lines)."""

    def __init__(self, shard: Shard, tally: Tally) -> None:
        self._shard = shard
        self._tally = tally
        self._byte_offsets = FILE_KINDS[shard.suffix] == ("jsonl", None, True)

    def batch_read(self, batch: Batch) -> None:
        self._tally.add("records", len(batch.items))
        if self._byte_offsets:
            self._tally.at(self._shard.number, batch.items[-1].position - self._shard.start)

    def done(self) -> None:
        self._tally.shard_done(self._shard.number)


class PartProgress:
    """The progress of reading a part's shards, as ``iter_part_batches`` reports them: each
    shard's ``ReadProgress``, made when its first batch is read, done at its end."""

    def __init__(self, tally: Tally) -> None:
        self._tally = tally
        self._shards: dict[int, ReadProgress] = {}

    def read(self, shard: Shard, batch: Batch) -> None:
        progress = self._shards.get(shard.number)
        if progress is None:
            progress = self._shards[shard.number] = ReadProgress(shard, self._tally)
        progress.batch_read(batch)

    def done(self, shard: Shard) -> None:
        (self._shards.pop(shard.number, None) or ReadProgress(shard, self._tally)).done()


#: Elements of the plan the graph carries, at most: a job of up to this many parts gets one
#: element per part; a bigger one, chunks of parts. Beam's ``Create`` costs per element, and
#: whatever it holds is pickled and bz2-compressed into the graph (with one element per shard,
#: 100,000 files spent ~50 s there before the first record was read).
MAX_PLAN_ELEMENTS = 1000


def pack_parts(parts: list[Part]) -> bytes:
    """A chunk of the plan as the graph carries it: each part's number and its shards as plain
    tuples, pickled and compressed (paths share most of their bytes; a pickled ``Shard`` per
    element cost 10x)."""
    rows = [(part.number, [tuple(s) for s in part.shards]) for part in parts]
    return zlib.compress(pickle.dumps(rows, protocol=pickle.HIGHEST_PROTOCOL), 6)


def unpack_parts(chunk: bytes) -> list[Part]:
    """``pack_parts`` undone, in a worker."""
    return [Part(number, tuple(Shard(*row) for row in rows)) for number, rows in pickle.loads(zlib.decompress(chunk))]


@beam.typehints.with_output_types(Part)
class CreateParts(beam.PTransform):
    """Planned parts -> a PCollection of them, spread over the workers: ``Create`` of the plan
    in ``chunks`` (default: one per part, at most ``MAX_PLAN_ELEMENTS``; a part is never cut
    between chunks), ``Reshuffle``, then each chunk unpacked where it landed, so a big plan is
    neither carried element by element nor shuffled part by part. A runner whose ``Reshuffle``
    does nothing (DaskRunner) spreads by ``Create``'s partitions: give it one chunk per partition."""

    def __init__(self, parts: list[Part], chunks: int | None = None) -> None:
        super().__init__()
        self._parts = parts
        self._chunks = max(1, min(len(parts), chunks or MAX_PLAN_ELEMENTS))

    def expand(self, pbegin):
        size = -(-len(self._parts) // self._chunks)
        chunks = [pack_parts(self._parts[i : i + size]) for i in range(0, len(self._parts), size)]
        return (
            pbegin
            | "Parts" >> beam.Create(chunks, reshuffle=False)
            # Spread the chunks over workers; each is a few KB.
            | "Spread" >> beam.Reshuffle()
            | "Unpack" >> beam.FlatMap(unpack_parts).with_output_types(Part)
        )
