"""Parquet output keeps call arguments exact and reads back (pyarrow, Hugging Face ``datasets``)
as the same flat records the JSON Lines output holds; ``datasets`` reads that output too."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import ModuleType

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.cli.main import main
from transforms.core.jsontext import int_text, parse_json
from transforms.record.flat_rows import flat_record, flat_row, parquet_schema

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "formats"


def _datasets() -> ModuleType:
    """Hugging Face ``datasets``, imported by the two tests that read with it (a second or more
    to import: the file's other tests, and the fast tier, do without it)."""
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")  # packaged loaders only: never the network
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import datasets

    return datasets


RECORD = {
    "id": 7,  # a non-text id keeps its type
    "messages": [
        {"role": "system", "content": "Sé breve."},
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"tool_call_id": "a", "name": "f", "args": '{"x": 1}'},  # a JSON string stays that string
                {"tool_call_id": "b", "name": "g", "args": {"y": [1, 2], "z": None}},  # an object
                {"tool_call_id": "c", "name": "h", "args": "not json"},  # free text
                {"tool_call_id": "d", "name": "k"},  # no arguments
                {"tool_call_id": "e", "name": "m", "args": [1, "two"]},
            ],
        },
        *({"role": "tool", "content": str(n), "tool_call_id": i} for n, i in enumerate("abcde")),
        {"role": "assistant", "content": "done"},
    ],
    "tools": [{"type": "function", "function": {"name": "f"}}],
    "meta": {"n": 12345678901234567890},
}


def test_rows_keep_arguments_exact_and_read_back_as_the_record(tmp_path):
    row = flat_row(RECORD)
    calls = row["messages"][2]["tool_calls"]
    assert [(c["args"], c["args_kind"]) for c in calls] == [
        ('{"x": 1}', "string"),
        ('{"y":[1,2],"z":null}', "json"),
        ("not json", "string"),
        (None, None),
        ('[1,"two"]', "json"),
    ]
    path = tmp_path / "t.parquet"
    pq.write_table(pa.Table.from_pylist([row], schema=parquet_schema(pa)), path)
    (back,) = pq.read_table(path).to_pylist()
    assert flat_record(back) == RECORD
    assert flat_record(flat_row({"id": "x", "messages": []})) == {"id": "x", "messages": []}


def _jsonl(directory: Path) -> list:
    return [json.loads(line) for p in sorted(directory.glob("part-*.jsonl")) for line in p.read_text().splitlines()]


@pytest.mark.slow
def test_job_parquet_reads_back_with_pyarrow_and_datasets_as_the_jsonl_records(tmp_path):
    source = str(SAMPLES / "*.jsonl")  # object arguments (Anthropic, Gemini) and string ones (OpenAI)
    assert main(["--input", source, "--output", str(tmp_path / "j")]) == 0
    assert main(["--input", source, "--output", str(tmp_path / "p"), "--output-format", "parquet"]) == 0
    expected = _jsonl(tmp_path / "j" / "normalized")
    assert any(isinstance(c.get("args"), str) for r in expected for m in r["messages"] for c in m.get("tool_calls", ()))
    assert any(
        isinstance(c.get("args"), dict) for r in expected for m in r["messages"] for c in m.get("tool_calls", ())
    )

    files = sorted((tmp_path / "p" / "normalized").glob("part-*.parquet"))
    rows = [row for path in files for row in pq.read_table(path).to_pylist()]
    assert [flat_record(row) for row in rows] == expected

    cache = str(tmp_path / "hf-cache")
    datasets = _datasets()
    parquet = datasets.load_dataset("parquet", data_files=[str(p) for p in files], split="train", cache_dir=cache)
    assert [flat_record(row) for row in parquet] == expected

    # The JSON Lines output itself, as `datasets` reads it (one file at a time: its JSON loader
    # needs the same top-level columns in every file, which records of different formats do
    # not have; the Parquet columns are fixed): the same messages, call arguments with their
    # types, and every field a record has (datasets adds nulls for the fields it lacks).
    back = []
    for path in sorted((tmp_path / "j" / "normalized").glob("part-*.jsonl")):
        back += datasets.load_dataset("json", data_files=str(path), split="train", cache_dir=cache)
    assert len(back) == len(expected)
    for row, record in zip(back, expected):
        assert row["messages"] == record["messages"]
        assert {k: v for k, v in row.items() if k in record} == record


@pytest.mark.slow
def test_sharegpt_training_output_loads_with_datasets_json(tmp_path):
    assert (
        main(["--input", str(SAMPLES / "sharegpt.jsonl"), "--output", str(tmp_path / "s"), "--sink", "sharegpt"]) == 0
    )
    expected = _jsonl(tmp_path / "s" / "normalized")
    (path,) = sorted((tmp_path / "s" / "normalized").glob("part-*.jsonl"))
    rows = _datasets().load_dataset("json", data_files=str(path), split="train", cache_dir=str(tmp_path / "hf"))
    assert [{k: v for k, v in row.items() if v is not None} for row in rows] == expected


@pytest.mark.slow
def test_a_five_thousand_digit_id_is_written_to_parquet_as_in_jsonl(tmp_path):
    # Found: str() of the id in the Parquet writer hit Python's 4,300-digit limit and failed
    # the whole job: no output at all.
    big = "7" * 5000
    source = tmp_path / "in.jsonl"
    source.write_text(
        '{"id":%s,"messages":[{"role":"user","content":"hi"}]}\n{"id":"b","messages":[{"role":"user","content":"x"}]}\n'
        % big
    )
    out = tmp_path / "p"
    argv = ["--input", str(source), "--output", str(out), "--output-format", "parquet", "--no-report", "--quiet"]
    assert main(argv) == 0
    rows = [
        row for path in sorted((out / "normalized").glob("part-*.parquet")) for row in pq.read_table(path).to_pylist()
    ]
    assert [row["id"] for row in rows] == [big, "b"]
    typed = flat_record(rows[0])["id"]  # the typed id in fields reads back as the integer
    assert isinstance(typed, int) and int_text(typed) == big
    assert main(["--input", str(source), "--output", str(tmp_path / "j"), "--no-report", "--quiet"]) == 0
    jsonl = [
        parse_json(line) for line in (tmp_path / "j" / "normalized" / "part-00000.jsonl").read_bytes().splitlines()
    ]
    assert [flat_record(row) for row in rows] == jsonl


def test_any_id_the_json_lines_output_can_hold_has_a_parquet_id_text():
    big = 10**5000
    for rid, text in (
        (big, int_text(big)),
        (-big, "-" + int_text(big)),
        ([big], "[" + int_text(big) + "]"),
        (1.5, "1.5"),
    ):
        assert flat_row({"id": rid, "messages": []})["id"] == text
