"""Big single-file inputs: a Parquet file over ``--shard-bytes`` is cut into shards of whole row
groups (from its metadata, nothing decoded) that read, together, the records the whole file
gives, and write the same bytes; a compressed JSONL file, which cannot be cut, is read as a
stream whose batches are written as they come, in memory that does not grow with the file.

Found: a ``.parquet`` file was one shard however large, so one worker read all of it.
"""

from __future__ import annotations

import gzip
import json
import tracemalloc
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.cli.main import main
from pipeline.graph.shard_step import ShardWork, process_shard
from pipeline.io.parquet_rows import row_ranges
from pipeline.io.parts import plan_parts, planned_bytes
from pipeline.io.planning import plan_shards
from pipeline.io.read_shard import read_shard
from transforms.conversations import NORMALIZE
from transforms.record.record_settings import Settings

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho".split()


def _text(seed: int, length: int) -> str:
    # Deterministic words that do not compress to nothing: the file must pass --shard-bytes.
    return " ".join(WORDS[(seed * 7 + i * i * 13 + i) % len(WORDS)] + str((seed * 31 + i) % 997) for i in range(length))


def _records(count: int) -> list[dict]:
    out = []
    for n in range(count):
        base = n - n % 3 if n % 5 == 0 else n  # some exact duplicates, for --dedupe
        messages = [
            {"role": "user", "content": _text(base, 12)},
            {"role": "assistant", "content": _text(base + 1, 20)},
        ]
        if n % 4 == 0:  # longer conversations that earlier ones begin, for --dedupe prefix
            messages += [{"role": "user", "content": _text(base + 2, 8)}, {"role": "assistant", "content": "ok"}]
        if n % 17 == 0:  # a dead letter now and then
            messages = [{"role": "wizard", "content": "?"}]
        out.append({"id": f"r{n:05d}", "group": f"g{n % 23}", "messages": messages})
    return out


def _write_parquet(path: Path, records: list[dict], rows_per_group: int) -> Path:
    pq.write_table(pa.Table.from_pylist(records), path, row_group_size=rows_per_group)
    return path


@pytest.fixture(scope="module")
def big_parquet(tmp_path_factory) -> Path:
    path = _write_parquet(tmp_path_factory.mktemp("parquet") / "big.parquet", _records(3000), 100)
    assert path.stat().st_size > 3 * 65536  # cut into at least three shards at --shard-bytes 65536
    return path


def test_row_ranges_cover_every_row_once_on_row_group_bounds(big_parquet):
    metadata = pq.ParquetFile(big_parquet).metadata
    bounds = {sum(metadata.row_group(g).num_rows for g in range(k)) for k in range(metadata.num_row_groups + 1)}
    ranges = row_ranges(str(big_parquet), 65536)
    assert len(ranges) >= 3
    assert ranges[0][0] == 0 and ranges[-1][1] == metadata.num_rows
    for (_, end, _), (first, _, _) in zip(ranges, ranges[1:]):
        assert end == first  # contiguous: no row twice, none left out
    assert all(first in bounds and end in bounds and end > first for first, end, _ in ranges)
    sizes = [size for _, _, size in ranges]
    assert max(sizes) < 2 * min(sizes)  # equal shares, no small tail
    assert row_ranges(str(big_parquet), 1 << 30) == [(0, metadata.num_rows, sum(sizes))]


def test_a_big_parquet_file_is_planned_as_row_ranges_each_a_part_alone(big_parquet):
    size = big_parquet.stat().st_size
    shards = plan_shards([str(big_parquet)], 65536)
    assert len(shards) >= 3
    assert [s.number for s in shards] == list(range(len(shards)))
    assert shards[0].start == 0 and shards[-1].end is None
    assert all(s.range_bytes is not None for s in shards)
    assert sum(planned_bytes(s) or 0 for s in shards) == size  # as the file whole counts
    assert [len(p.shards) for p in plan_parts(shards)] == [1] * len(shards)
    # Under --shard-bytes: one whole shard, as before (names and bytes of small inputs unchanged).
    (whole,) = plan_shards([str(big_parquet)], size)
    assert (whole.start, whole.end, whole.range_bytes) == (0, None, None)


def test_the_shards_of_a_cut_parquet_file_read_the_records_of_the_whole_file(big_parquet):
    (whole,) = plan_shards([str(big_parquet)], 1 << 30)
    expected = list(read_shard(whole))
    got = [record for shard in plan_shards([str(big_parquet)], 65536) for record in read_shard(shard)]
    assert len(expected) == 3000
    assert got == expected  # the same positions (rows of the file) and payloads, in order


def _concatenated(out: Path) -> dict[str, bytes]:
    """Each output's part files, concatenated in name order, and the summary."""
    found = {
        sub.name: b"".join(p.read_bytes() for p in sorted(sub.glob("part-*")))
        for sub in sorted(out.iterdir())
        if sub.is_dir() and not sub.name.startswith(("_", "."))
    }
    found["summary"] = json.dumps(json.loads((out / "summary.json").read_text()), sort_keys=True).encode()
    return found


@pytest.mark.slow
@pytest.mark.parametrize(
    "flags",
    [[], ["--dedupe", "prefix", "--split", "eval=0.2", "--split-by", "group"]],
    ids=["plain", "dedupe-prefix-split"],
)
def test_a_cut_parquet_file_gives_the_bytes_of_the_uncut_run(big_parquet, tmp_path, flags):
    common = ["--input", str(big_parquet), "--no-report", "--quiet", *flags]
    assert main([*common, "--output", str(tmp_path / "whole")]) == 0
    assert main([*common, "--output", str(tmp_path / "cut"), "--shard-bytes", "65536"]) == 0
    whole, cut = _concatenated(tmp_path / "whole"), _concatenated(tmp_path / "cut")
    assert whole == cut
    assert sorted(p.name for p in (tmp_path / "whole" / "normalized").glob("part-*")) == ["part-00000.jsonl"]
    assert len(list((tmp_path / "cut" / "normalized").glob("part-*"))) >= 3  # read as several parts
    if flags:
        assert b'"reason":"duplicate"' in whole["dead_letter"]  # the dedupe decided across the cuts
        assert whole["eval"]


def _gzip_jsonl(path: Path, count: int) -> Path:
    with gzip.open(path, "wb", compresslevel=1) as handle:
        for record in _records(count):
            handle.write(json.dumps(record).encode() + b"\n")
    return path


def _peak_of_step(path: Path, out: Path) -> tuple[int, int]:
    """(peak bytes traced while one compressed shard goes through the per-shard step, records written)."""
    (shard,) = plan_shards([str(path)], 65536)
    work = ShardWork(NORMALIZE, Settings(), batch_size=64, batch_bytes=64 << 10)
    out.mkdir()
    tracemalloc.start()
    try:
        result = process_shard(shard, work, lambda name: str(out / name))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, sum(written.records for written in result.files.values())


@pytest.mark.slow
def test_a_compressed_jsonl_file_goes_through_the_step_in_memory_that_does_not_grow_with_it(tmp_path):
    small = _gzip_jsonl(tmp_path / "small.jsonl.gz", 1000)
    large = _gzip_jsonl(tmp_path / "large.jsonl.gz", 6000)
    assert len(plan_shards([str(large)], 65536)) == 1  # cannot be cut: one reader
    _peak_of_step(small, tmp_path / "warm-up")  # imports and caches filled once, outside the measure
    small_peak, small_written = _peak_of_step(small, tmp_path / "small")
    large_peak, large_written = _peak_of_step(large, tmp_path / "large")
    assert large_written > 5 * small_written
    # Six times the records, not six times the memory: batches are written as they come.
    assert large_peak < 1.5 * small_peak, (small_peak, large_peak)
