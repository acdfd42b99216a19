"""Every output's list of the files written for it (``<name>.files.json``, which finalize reads)
comes from one global combine for the whole run (``pipeline.graph.per_shard.MergeShardResults``): three combines were
six stages of the runner's, two on every worker (docs/per-record-speed.md)."""

from __future__ import annotations

import json
from pathlib import Path

import apache_beam as beam

from pipeline.config.options import load_job
from pipeline.graph.build import build, build_validate
from pipeline.io.written_files import WrittenFile, report_path, write_reports

SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "conversations.jsonl"


def _file(shard: int, start: int = 0) -> WrittenFile:
    return WrittenFile(shard, start, f"/tmp/{shard}-{start}", 2, 10, "0" * 64)


def test_each_output_gets_its_sorted_list_and_an_empty_one_when_it_wrote_nothing(tmp_path):
    written = [("drops", _file(1)), ("normalized", _file(1)), ("normalized", _file(0, 5)), ("normalized", _file(0))]
    assert write_reports(written, str(tmp_path), ("normalized", "drops", "dead_letter")) == 4
    lists = {
        name: json.loads(Path(report_path(str(tmp_path), name)).read_text())
        for name in ("normalized", "drops", "dead_letter")
    }
    assert [(row["shard"], row["start"]) for row in lists["normalized"]] == [(0, 0), (0, 5), (1, 0)]
    assert [row["shard"] for row in lists["drops"]] == [1]
    assert lists["dead_letter"] == []


def _global_combines(build_graph, tmp_path: Path) -> list[str]:
    job = load_job(["--input", str(SAMPLE), "--output", str(tmp_path / "out")])
    pipeline = beam.Pipeline()
    build_graph(pipeline, job, str(tmp_path / "temp"))
    found: list[str] = []

    class Combines(beam.pipeline.PipelineVisitor):
        def enter_composite_transform(self, node) -> None:
            if isinstance(node.transform, beam.CombineGlobally):
                found.append(node.full_label)

    pipeline.visit(Combines())
    return found


def test_a_run_and_a_validation_list_their_files_in_one_combine(tmp_path):
    # The shards' results (their files and partial summaries) merged once for the whole run.
    assert _global_combines(build, tmp_path) == ["NormalizeShards/Merge"]
    assert _global_combines(build_validate, tmp_path) == ["CheckShards/Merge"]
