"""Output parts (pipeline/io/parts.py): consecutive small inputs read by one task and written into
one file per output, the same names and bytes on every runner and rerun.

Found: 3,000 input files of two conversations gave 3,000 normalized part files (and as many
drops and dead-letter parts): every downstream reader paid for 3 files per input.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.cli.main import main
from pipeline.io.parts import START_STRIDE, Part, plan_parts, start_in_part
from pipeline.io.shard import Shard

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "conversations.jsonl"


def whole(number: int, size: int | None) -> Shard:
    return Shard(number, f"/in/{number:03d}.jsonl", ".jsonl", 0, None, file_size=size)


def numbers(parts: list[Part]) -> list[list[int]]:
    return [[s.number for s in part.shards] for part in parts]


def test_small_files_are_grouped_in_plan_order_up_to_the_target():
    shards = [whole(i, 40) for i in range(7)]
    parts = plan_parts(shards, 100)
    assert numbers(parts) == [[0, 1], [2, 3], [4, 5], [6]]
    assert [p.number for p in parts] == [0, 1, 2, 3]
    assert plan_parts(shards, 100) == parts  # the plan alone decides


def test_big_shards_byte_ranges_and_unknown_sizes_are_parts_alone():
    # The last range of a cut file runs to the end of the file (end None): a part alone too.
    ranges = [
        Shard(2, "/in/big.jsonl", ".jsonl", 0, 50, file_size=100),
        Shard(3, "/in/big.jsonl", ".jsonl", 50, None, file_size=100),
    ]
    shards = [whole(0, 10), whole(1, 500), *ranges, whole(4, 10), whole(5, 10), whole(6, None), whole(7, 10)]
    assert numbers(plan_parts(shards, 100)) == [[0], [1], [2], [3], [4, 5], [6], [7]]


def test_a_plan_of_many_small_files_is_spread_over_sixteen_parts_of_a_mebibyte_or_more():
    mib = 1 << 20
    parts = plan_parts([whole(i, mib) for i in range(64)], 64 * mib)
    assert numbers(parts) == [list(range(i, i + 4)) for i in range(0, 64, 4)]
    # Under 16 MiB in all: parts of 1 MiB, not smaller.
    assert numbers(plan_parts([whole(i, mib // 4) for i in range(8)], 64 * mib)) == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_part_bytes_zero_is_a_part_per_shard():
    shards = [whole(i, 1) for i in range(3)]
    assert numbers(plan_parts(shards, 0)) == [[0], [1], [2]]


def test_batch_starts_are_unique_and_ordered_within_a_part():
    starts = [start_in_part(index, position) for index in range(3) for position in (0, 10, START_STRIDE - 1)]
    assert starts == sorted(set(starts))


def _write_inputs(directory: Path) -> str:
    directory.mkdir()
    lines = SAMPLE.read_bytes().splitlines(keepends=True)
    for i in range(0, 60, 2):
        (directory / f"session-{i:03d}.jsonl").write_bytes(b"".join(lines[i : i + 2]))
    return str(directory / "*.jsonl")


def _files(out: Path, name: str) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((out / name).glob("part-*"))}


@pytest.mark.slow
def test_many_small_inputs_give_one_part_file_with_the_bytes_of_a_file_each(tmp_path):
    pattern = _write_inputs(tmp_path / "in")
    common = ["--input", pattern, "--no-report", "--quiet"]
    assert main([*common, "--output", str(tmp_path / "parts")]) == 0
    assert main([*common, "--output", str(tmp_path / "each"), "--part-bytes", "0"]) == 0
    for name in ("normalized", "drops", "dead_letter"):
        parts, each = _files(tmp_path / "parts", name), _files(tmp_path / "each", name)
        assert list(parts) == ["part-00000.jsonl"], name
        assert len(each) > (1 if name != "dead_letter" else 0), name  # the sample's few dead letters: one file
        assert parts["part-00000.jsonl"] == b"".join(each.values()), name
    summaries = [json.loads((tmp_path / d / "summary.json").read_text()) for d in ("parts", "each")]
    assert summaries[0] == summaries[1]
    manifest = json.loads((tmp_path / "parts" / "_convnorm_manifest.json").read_text())
    assert [e["path"] for e in manifest["files"] if e["path"].startswith("normalized/")] == [
        "normalized/part-00000.jsonl"
    ]
