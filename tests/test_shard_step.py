"""The per-shard step (pipeline.graph.shard_step.process_shard): one shard read, processed and written
in one call, each file measured while written, the shard's partial summary returned."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from pipeline.graph.shard_step import ShardWork, process_shard, temp_place
from pipeline.io.planning import plan_shards
from pipeline.io.shard import Shard
from transforms.conversations import CHECK, NORMALIZE
from transforms.record.record_settings import Settings
from transforms.record.records import normalize_batch
from transforms.totals import summary as summaries

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "conversations.jsonl"


def _place(directory: Path):
    def place(name: str) -> str:
        (directory / name).mkdir(parents=True, exist_ok=True)
        return str(directory / name / "part")

    return place


def _whole(path: Path, index: int = 0) -> Shard:
    return Shard(index, str(path), ".jsonl", 0, None)


def _measure(path: str) -> tuple[int, int, str]:
    data = Path(path).read_bytes()
    return data.count(b"\n"), len(data), hashlib.sha256(data).hexdigest()


def test_the_sample_gives_the_outputs_and_summary_of_the_step_over_the_whole_file(tmp_path):
    settings = Settings()
    result = process_shard(_whole(SAMPLE, 7), ShardWork(NORMALIZE, settings), _place(tmp_path))
    assert result.shard == 7
    assert sorted(result.files) == ["dead_letter", "drops", "normalized"]
    # The same records as the per-record step over the whole file in one batch (no file state
    # between batches but the unique-field one, which the flat sink does not use).
    raw = [r for batch in _batches(_whole(SAMPLE)) for r in batch.items]
    whole = normalize_batch(raw, settings, taken={})
    expected = {
        "normalized": b"".join(line + b"\n" for line in whole.lines),
        "drops": b"".join(
            json.dumps(m, ensure_ascii=False, separators=(",", ":")).encode() + b"\n" for m in whole.metrics
        ),
    }
    assert Path(result.files["normalized"].temp).read_bytes() == expected["normalized"]
    assert [json.loads(line) for line in Path(result.files["drops"].temp).read_bytes().splitlines()] == whole.metrics
    letters = [json.loads(line) for line in Path(result.files["dead_letter"].temp).read_bytes().splitlines()]
    assert letters == whole.dead_letters
    doc = summaries.finalize(result.partial)
    assert (doc["records_in"], doc["records_out"], doc["dead_letters"], doc["accounted"]) == (307, 301, 6, True)
    assert doc["blank_lines"] == result.partial["blank_lines"] > 0


def _batches(shard: Shard, batch_size: int = 256):
    from pipeline.io.read_shard import iter_batches

    return list(iter_batches(shard, batch_size, {"records": 0, "blank_lines": 0}))


def test_each_file_is_measured_while_written(tmp_path):
    result = process_shard(_whole(SAMPLE), ShardWork(NORMALIZE, Settings(), batch_size=16), _place(tmp_path))
    for written in result.files.values():
        assert (written.records, written.size, written.sha256) == _measure(written.temp)
        assert (written.shard, written.start) == (0, 0)
    assert result.files["normalized"].records == 301


def test_parquet_files_count_rows(tmp_path):
    import pyarrow.parquet as pq

    work = ShardWork(NORMALIZE, Settings(), {"normalized": "parquet"}, batch_size=50)
    result = process_shard(_whole(SAMPLE), work, _place(tmp_path))
    written = result.files["normalized"]
    data = Path(written.temp).read_bytes()
    assert (written.size, written.sha256) == (len(data), hashlib.sha256(data).hexdigest())
    assert written.records == pq.ParquetFile(written.temp).metadata.num_rows == 301
    assert work.extension("normalized") == ".parquet" and work.extension("drops") == ".jsonl"


def test_batches_follow_the_jobs_limits(tmp_path):
    seen = []
    work = ShardWork(NORMALIZE, Settings(), batch_size=5, batch_bytes=12000)
    process_shard(_whole(SAMPLE), work, _place(tmp_path), observe=lambda batch, result: seen.append(batch))
    assert sum(len(b.items) for b in seen) == 307
    causes = set()
    for batch in seen[:-1]:
        sizes = [len(r.payload) for r in batch.items]
        assert len(sizes) <= 5 and sum(sizes[:-1]) < 12000
        causes.add("count" if len(sizes) == 5 else "bytes")
        assert len(sizes) == 5 or sum(sizes) >= 12000
    assert causes == {"count", "bytes"}


def test_a_record_over_the_limit_is_a_dead_letter(tmp_path):
    source = tmp_path / "in.jsonl"
    small = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
    big = {"messages": [{"role": "user", "content": "x" * 5000}]}
    source.write_text(json.dumps(small) + "\n" + json.dumps(big) + "\n" + json.dumps(small) + "\n")
    work = ShardWork(NORMALIZE, Settings(), max_record_bytes=1024)
    result = process_shard(_whole(source), work, _place(tmp_path / "out"))
    letters = [json.loads(line) for line in Path(result.files["dead_letter"].temp).read_text().splitlines()]
    assert [letter["reason"] for letter in letters] == ["record_too_large"]
    assert result.files["normalized"].records == 2


def test_byte_ranges_split_a_file_without_losing_or_repeating_a_record(tmp_path):
    shards = plan_shards([str(SAMPLE)], shard_bytes=65536)
    assert len(shards) > 2
    work = ShardWork(NORMALIZE, Settings())
    results = [process_shard(s, work, _place(tmp_path / str(s.number))) for s in shards]
    joined = b"".join(Path(r.files["normalized"].temp).read_bytes() for r in results)
    whole = process_shard(_whole(SAMPLE), work, _place(tmp_path / "whole"))
    assert joined == Path(whole.files["normalized"].temp).read_bytes()
    total: dict = {}
    for r in results:
        total = summaries.merge(total, r.partial)
    assert summaries.finalize(total) == summaries.finalize(whole.partial)
    assert [r.files["normalized"].start for r in results] == [s.start for s in shards]


def test_a_unique_field_is_unique_in_the_shards_file_across_batches(tmp_path):
    chat = {"id": "same", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
    source = tmp_path / "in.jsonl"
    source.write_text((json.dumps(chat) + "\n") * 5)
    work = ShardWork(NORMALIZE, Settings(sink="openai-batch", model="m"), batch_size=2)
    result = process_shard(_whole(source), work, _place(tmp_path / "out"))
    ids = [json.loads(line)["custom_id"] for line in Path(result.files["normalized"].temp).read_text().splitlines()]
    assert ids == ["same", "same~2", "same~3", "same~4", "same~5"]
    assert summaries.finalize(result.partial)["writer_report"] == {"duplicate_custom_id_renamed": 4}


def test_the_check_step_writes_reports_and_dead_letters(tmp_path):
    result = process_shard(_whole(SAMPLE), ShardWork(CHECK, Settings()), _place(tmp_path))
    assert sorted(result.files) == ["dead_letter", "violations"]
    doc = summaries.finalize_validation(result.partial)
    assert doc["records_in"] == 307 and doc["conversations_checked"] == 301 and doc["accounted"]
    assert result.files["violations"].records == 301


def test_outputs_without_items_get_a_file_only_when_asked(tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n")
    work = ShardWork(NORMALIZE, Settings())
    assert sorted(process_shard(_whole(source), work, _place(tmp_path / "a")).files) == ["drops", "normalized"]
    every = process_shard(_whole(source), work, _place(tmp_path / "b"), empty_files=True)
    assert sorted(every.files) == ["dead_letter", "drops", "normalized"]
    assert every.files["dead_letter"][3:] == (0, 0, hashlib.sha256(b"").hexdigest())
    assert Path(every.files["dead_letter"].temp).read_bytes() == b""


def test_a_failure_deletes_the_files_begun_and_raises(tmp_path, monkeypatch):
    from pipeline.io import file_formats as sinks

    class Boom(RuntimeError):
        pass

    opened = []
    original = sinks.FILE_FORMATS["jsonl"]

    def failing_open(path, *args):
        opened.append(path)
        writer = original.open(path, *args)
        if "dead_letter" in path:

            def fail(items, lines=None):
                raise Boom("disk full")

            writer.write = fail
        return writer

    monkeypatch.setitem(sinks.FILE_FORMATS, "jsonl", original._replace(open=failing_open))
    with pytest.raises(Boom):
        process_shard(_whole(SAMPLE), ShardWork(NORMALIZE, Settings()), _place(tmp_path))
    assert opened and not [p for p in opened if Path(p).exists()]


def test_temp_place_names_files_as_the_batch_writer_does(tmp_path):
    place = temp_place(str(tmp_path), Shard(3, "x.jsonl", ".jsonl", 65536, None), "abc")
    assert place("drops") == str(tmp_path / "drops" / "00003-000000000065536-abc")
