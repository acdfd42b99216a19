"""openai-batch: custom_ids unique within each output file, renamed deterministically, counted."""

from __future__ import annotations

import json

import pytest

from pipeline.cli.main import main
from transforms.record.records import make_unique


def test_make_unique_renames_in_order_and_never_collides():
    outputs = [{"custom_id": v} for v in ("a", "b", "a", "a~2", "a", "b")]
    metrics = [{} for _ in outputs]
    taken: dict = {}
    make_unique(outputs[:3], metrics[:3], "custom_id", taken)  # one batch ...
    make_unique(outputs[3:], metrics[3:], "custom_id", taken)  # ... and the next, same file
    assert [o["custom_id"] for o in outputs] == ["a", "b", "a~2", "a~2~2", "a~3", "b~2"]
    assert [m.get("writer_report") for m in metrics] == [
        None,
        None,
        {"duplicate_custom_id_renamed": 1},
        {"duplicate_custom_id_renamed": 1},
        {"duplicate_custom_id_renamed": 1},
        {"duplicate_custom_id_renamed": 1},
    ]


def _lines(path) -> list:
    return [json.loads(line) for p in sorted(path.glob("part-*.jsonl")) for line in p.read_text().splitlines()]


@pytest.mark.slow
def test_repeated_records_get_unique_custom_ids_in_the_job(tmp_path):
    chat = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
    other = {"messages": [{"role": "user", "content": "bye"}, {"role": "assistant", "content": "ciao"}]}
    records = [chat, other, chat, {"id": "x", **chat}, {"id": "x", **other}, chat]
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    args = ["--input", str(source), "--sink", "openai-batch", "--model", "m", "--batch-size", "2"]
    assert main([*args, "--output", str(tmp_path / "a")]) == 0
    lines = _lines(tmp_path / "a" / "normalized")
    ids = [line["custom_id"] for line in lines]
    assert len(set(ids)) == len(ids) == 6
    derived = ids[0]
    assert ids == [derived, ids[1], f"{derived}~2", "x", "x~2", f"{derived}~3"]
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["writer_report"] == {"duplicate_custom_id_renamed": 3}
    drops = _lines(tmp_path / "a" / "drops")
    assert [d.get("writer_report") for d in drops].count({"duplicate_custom_id_renamed": 1}) == 3
    # Deterministic: a second run writes the same bytes.
    assert main([*args, "--output", str(tmp_path / "b")]) == 0
    assert (tmp_path / "a" / "normalized" / "part-00000.jsonl").read_bytes() == (
        tmp_path / "b" / "normalized" / "part-00000.jsonl"
    ).read_bytes()


@pytest.mark.parametrize(
    ("part_bytes", "expected"),
    [
        # Both small inputs in one part file (pipeline.io.parts): unique across the two.
        (None, [["same", "same~2", "same~3", "same~4"]]),
        # A part per input shard: unique within each.
        ("0", [["same", "same~2"], ["same", "same~2"]]),
    ],
)
def test_uniqueness_is_per_output_file(tmp_path, part_bytes, expected):
    # Each part file is one Batch API upload: ids are unique within it.
    chat = {"id": "same", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
    for name in ("one.jsonl", "two.jsonl"):
        (tmp_path / name).write_text(json.dumps(chat) + "\n" + json.dumps(chat) + "\n")
    args = ["--input", str(tmp_path / "*.jsonl"), "--output", str(tmp_path / "out"), "--sink", "openai-batch"]
    args += ["--model", "m", *(["--part-bytes", part_bytes] if part_bytes else [])]
    assert main(args) == 0
    files = sorted((tmp_path / "out" / "normalized").glob("part-*.jsonl"))
    assert [[json.loads(line)["custom_id"] for line in path.read_text().splitlines()] for path in files] == expected


def test_the_lines_a_batch_carries_are_its_records_serialized_renames_included():
    # The JSONL writer writes these lines as they are (each record serialized once): a record
    # renamed after the per-record guard serialized it must carry its new line.
    from transforms.core.jsontext import dumps_line
    from transforms.record.inputs import RawRecord
    from transforms.record.record_settings import Settings
    from transforms.record.records import normalize_batch

    chat = b'{"id": "x", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}'
    raws = [RawRecord("f", i, line) for i, line in enumerate([chat, b"not json", chat, chat])]
    result = normalize_batch(raws, Settings(sink="openai-batch", model="m"), taken={})
    assert [r["custom_id"] for r in result.records] == ["x", "x~2", "x~3"]
    assert result.lines == [dumps_line(r) for r in result.records]
