"""Batches close at a count or at a byte size, whichever comes first; no boundary shows in the outputs."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to

from pipeline.graph.conversation_batches import NormalizeConversationBatches
from pipeline.io.read_shard import iter_batches
from pipeline.io.shard import Shard
from transforms.conversations import BatchRawRecords, Unbatch, raw_size
from transforms.record.records import RawRecord, Settings

SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "conversations.jsonl"


def _record(i: int, words: int) -> bytes:
    return json.dumps({"id": f"r{i}", "messages": [{"role": "user", "content": "w " * words}]}).encode()


def test_iter_batches_closes_at_the_byte_size_or_the_count(tmp_path):
    lines = [_record(i, 0 if i < 100 else 300) for i in range(200)]  # ~55 B, then ~660 B
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in lines) + b"\n")  # one blank line too
    shard = Shard(0, str(path), ".jsonl", 0, None)
    stats = {"records": 0, "blank_lines": 0}
    batches = list(iter_batches(shard, 30, stats, batch_bytes=2000))
    assert stats == {"records": 200, "blank_lines": 1}
    assert [raw.payload.rstrip(b"\n") for b in batches for raw in b.items] == lines
    assert all(b.start == b.items[0].position and b.shard == 0 for b in batches)
    for batch in batches[:-1]:
        sizes = [raw_size(raw) for raw in batch.items]
        # Closed by the first limit reached, not before.
        assert len(sizes) == 30 or sum(sizes) >= 2000
        assert len(sizes) < 30 and sum(sizes[:-1]) < 2000 or len(sizes) == 30
    assert any(len(b.items) < 30 for b in batches[:-1]) and any(len(b.items) == 30 for b in batches)


def test_batch_raw_records_by_bytes():
    raws = [RawRecord("queue", i, _record(i, i % 50)) for i in range(60)]
    with BeamTestPipeline(options=PipelineOptions(["--runner=FnApiRunner"])) as p:
        batches = p | beam.Create(raws) | BatchRawRecords(max_batch_size=25, max_batch_bytes=900)
        within = batches | "Limits" >> beam.Map(lambda b: len(b.items) <= 25 and sum(map(raw_size, b.items[:-1])) < 900)
        assert_that(within, _all_true, label="limits")
        out = batches | NormalizeConversationBatches(Settings())
        assert_that(
            out.records | Unbatch() | beam.Map(lambda r: r["id"]),
            equal_to([f"r{i}" for i in range(60)]),
            label="records",
        )


def _all_true(got) -> None:
    got = list(got)
    assert got and all(got), got
    assert len(got) > 60 // 25 + 1  # the byte limit cut batches before the count did


def _run_outputs(tmp_path, name: str, batch_size: int) -> dict:
    from pipeline.cli.main import main

    out = tmp_path / name
    assert (
        main(["--input", str(SAMPLE), "--output", str(out), "--batch-size", str(batch_size), "--no-report", "--quiet"])
        == 0
    )
    return {
        str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(out.rglob("*"))
        if p.is_file() and p.name != "_convnorm_manifest.json"
    }


@pytest.mark.slow
def test_batch_boundaries_do_not_show_in_the_outputs(tmp_path):
    # One record per batch against batches cut by the byte limit alone.
    assert _run_outputs(tmp_path, "one", 1) == _run_outputs(tmp_path, "all", 1 << 20)
