"""Every sink's whole multi-part output loads as one ``datasets`` dataset and one pyarrow table.

The job writes one part file per shard. ``datasets.load_dataset("json", data_files=<all parts>)``
infers its columns from the first part and casts the others to them: parts whose optional keys
or free-form objects (tool schemas, call inputs, a Batch line's body) differ failed ("Couldn't
cast ..."). Each writer declares the schema of its records (``Writer.schema``), free-form
objects as JSON; ``transforms.formats.datasets.datasets_features`` turns it into the
``datasets.Features`` that load every part as one dataset, whose ``data.table`` is one pyarrow
table. The flat sink's records carry whatever fields the input had: its multi-part answer is
``--output-format parquet``, one fixed set of columns.

The parts here are written as the job writes them (the per-record path and the job's file
writer, one part per input file), without a Beam run.
"""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.io.file_formats import FILE_FORMATS
from transforms.formats import WRITERS
from transforms.formats.datasets import datasets_features
from transforms.record.inputs import RawRecord
from transforms.record.record_settings import Settings
from transforms.record.records import normalize_batch

ROOT = Path(__file__).resolve().parent.parent
INPUTS = [
    ROOT / "samples" / "conversations.jsonl",
    *sorted((ROOT / "samples" / "formats").glob("*.jsonl")),
    # Labelled conversations: the TRL sinks write rows from more than one part.
    ROOT / "tests" / "data" / "labels" / "conversations.jsonl",
]


def _raw_records(path: Path) -> list:
    found, offset = [], 0
    for line in path.read_bytes().splitlines(keepends=True):
        if line.strip():
            found.append(RawRecord(path.name, offset, line))
        offset += len(line)
    return found


def write_parts(sink: str, out: Path, file_format: str = "jsonl") -> tuple[list[str], list[dict]]:
    """One part per input file, as the job's file writer writes them; and every record written."""
    settings = Settings(sink=sink, profile="lossless", model="m", max_tokens=64)
    parts, written = [], []
    for n, path in enumerate(INPUTS):
        result = normalize_batch(_raw_records(path), settings, taken={})
        if not result.records:
            continue
        part = out / f"part-{n:05d}{FILE_FORMATS[file_format].extension}"
        writer = FILE_FORMATS[file_format].open(str(part), "id", "messages", sink)
        writer.write(result.records, *([result.lines] if FILE_FORMATS[file_format].takes_lines else []))
        writer.close()
        parts.append(str(part))
        written.extend(result.records)
    return parts, written


def _load(parts: list[str], sink: str, cache: Path) -> datasets.Dataset:
    datasets.disable_progress_bars()
    features = datasets.Features.from_dict(datasets_features(sink))
    return datasets.load_dataset("json", data_files=parts, split="train", features=features, cache_dir=str(cache))


@pytest.mark.slow
@pytest.mark.parametrize("sink", sorted(name for name in WRITERS if name != "flat"))
def test_a_sinks_parts_load_as_one_dataset_and_one_arrow_table(sink, tmp_path):
    parts, written = write_parts(sink, tmp_path / "normalized")
    assert len(parts) > 1, "a multi-part output"
    dataset = _load(parts, sink, tmp_path / "cache")
    assert len(dataset) == len(written)
    table = dataset.data.table
    assert isinstance(table, pa.Table) and table.num_rows == len(written)
    # Every record comes back: the declared columns hold exactly what was written (JSON values
    # decoded as they were; absent keys as nulls).
    for row, record in zip(dataset, written):
        assert _without_nulls(row) == _without_nulls(record), (sink, record.get("id"))


def _without_nulls(value):
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


@pytest.mark.slow
def test_the_flat_sinks_parquet_parts_load_as_one_dataset_and_one_arrow_table(tmp_path):
    parts, written = write_parts("flat", tmp_path / "normalized", "parquet")
    assert len(parts) > 1
    datasets.disable_progress_bars()
    dataset = datasets.load_dataset("parquet", data_files=parts, split="train", cache_dir=str(tmp_path / "cache"))
    assert len(dataset) == len(written)
    table = pq.ParquetDataset(parts).read()
    assert table.num_rows == len(written)


@pytest.mark.slow
def test_the_hf_sinks_parquet_parts_load_plainly_as_one_dataset_of_the_records_written(tmp_path):
    # No features given: every part has the one schema the writer declares, its free-form
    # values (arguments, tools) as Arrow JSON columns that datasets decodes to objects.
    parts, written = write_parts("hf", tmp_path / "normalized", "parquet")
    assert len(parts) > 1
    datasets.disable_progress_bars()
    dataset = datasets.load_dataset("parquet", data_files=parts, split="train", cache_dir=str(tmp_path / "cache"))
    assert list(dataset) == written
    calls = [c for r in written for m in r["messages"] for c in (m["tool_calls"] or [])]
    assert calls and all(isinstance(c["function"]["arguments"], dict) for c in calls)
    assert pq.ParquetDataset(parts).read().num_rows == len(written)


def test_every_writer_but_flat_declares_its_schema():
    assert sorted(name for name, writer in WRITERS.items() if writer.schema is None) == ["flat"]
    for name in WRITERS:
        if name != "flat":
            datasets.Features.from_dict(datasets_features(name))  # a valid description
    assert json.loads(json.dumps(datasets_features("openai-finetune")))["tools"]["feature"] == {"_type": "Json"}
