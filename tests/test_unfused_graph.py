"""The graph's contract holds without fusion: a unique field (openai-batch's ``custom_id``) is
unique within every file the writer writes, whichever normalizer bundles its batches came from.

The normalizer keeps ``custom_id`` unique among the records of one shard in one bundle (its
state), and the writer starts a file per shard per bundle. The two agree only when a runner
fuses them into one stage; a runner that does not (or a graph with a step between them) can
hand one writer bundle the batches of two normalizer bundles of the same shard. Here the
writer is fed, through a Flatten, by two normalizers of the same shard: each batch says which
run of the normalizer's state made it (``Batch.scope``), and the writer starts a new file when
that changes.
"""

from __future__ import annotations

import json
from pathlib import Path

import apache_beam as beam

from pipeline.graph.write import WriteShards
from transforms.conversations import NormalizeConversation
from transforms.record.inputs import Batch, RawRecord


def _record(i: int) -> RawRecord:
    line = {"id": "same-id", "messages": [{"role": "user", "content": f"question {i}"}]}
    return RawRecord("in.jsonl", i * 100, json.dumps(line).encode())


def _custom_ids(path: Path) -> list[str]:
    return [json.loads(line)["custom_id"] for line in path.read_text().splitlines()]


def test_a_writer_fed_by_two_normalizer_bundles_keeps_custom_id_unique_in_each_file(tmp_path):
    # Found: the file boundaries lived in the writer and the uniqueness in the normalizer; fed
    # by two normalizers of one shard, the writer put two 'same-id' custom_ids in one file.
    with beam.Pipeline() as pipeline:
        halves = []
        for half in (0, 1):
            batch = Batch(0, half * 1000, [_record(half * 10 + i) for i in range(2)])
            halves.append(
                pipeline
                | f"Create{half}" >> beam.Create([batch])
                | f"Normalize{half}"
                >> beam.ParDo(NormalizeConversation(sink="openai-batch", model="gpt-4o-mini")).with_outputs(
                    NormalizeConversation.DROPS, NormalizeConversation.DEAD_LETTER, main="records"
                )
            )
        _ = [half.records for half in halves] | beam.Flatten() | WriteShards(str(tmp_path), "normalized", id_field="id")
    written = sorted((tmp_path / "normalized").iterdir())
    every_id = [custom_id for path in written for custom_id in _custom_ids(path)]
    assert len(every_id) == 4, every_id  # nothing lost
    for path in written:
        ids = _custom_ids(path)
        assert len(ids) == len(set(ids)), f"{path.name} repeats a custom_id: {ids}"


def test_a_normalizer_keeps_one_scope_for_a_shard_within_a_bundle():
    # What fused runs rely on: one bundle, one shard, one scope, so one file as before.
    normalize = NormalizeConversation(sink="openai-batch", model="gpt-4o-mini")
    normalize.setup()
    normalize.start_bundle()

    def scope(shard: int, start: int) -> int:
        (records,) = [out for out in normalize.process(Batch(shard, start, [_record(start)])) if isinstance(out, Batch)]
        return records.scope

    first, second, other = scope(0, 0), scope(0, 100), scope(1, 0)
    assert first == second != other
    normalize.start_bundle()
    assert scope(0, 200) != first  # a new bundle: a new scope, so a new file
