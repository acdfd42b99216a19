"""Writers keep what is not theirs to change: ``openai-batch`` rewriting Batch lines.

Every body parameter and top-level key of a Batch API input line survives; only the message
list changes. A line with nothing to repair reads back byte-identical.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.cli.main import main
from transforms.formats import WRITERS, WriteContext
from transforms.record.inputs import RawRecord
from transforms.record.record_settings import Settings
from transforms.record.records import process_record

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        "strict": True,
    },
}


def _line(custom_id: str, body: dict) -> dict:
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}


# Realistic lines as the OpenAI SDK users write them (messages in the writer's own spelling).
LINES = [
    _line(
        "req-1",
        {
            "model": "gpt-4o-mini",
            "messages": [
                {"role": "system", "content": "You are a terse assistant."},
                {"role": "user", "content": "Name three primes."},
            ],
            "temperature": 0.2,
            "max_tokens": 64,
            "stop": ["\n\n", "END"],
            "seed": 7,
            "n": 1,
            "top_p": 0.9,
            "metadata": {"project": "eval-3", "run": "2026-11-30"},
            "service_tier": "default",
        },
    ),
    _line(
        "req-2",
        {
            # (A developer message would come back as system: the reader maps one to the other.)
            "model": "o3-mini",
            "messages": [
                {"role": "system", "content": "Answer in JSON."},
                {"role": "user", "content": "Capital of France?"},
            ],
            "reasoning_effort": "high",
            "max_completion_tokens": 2048,
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": "answer",
                    "strict": True,
                    "schema": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                        "required": ["city"],
                        "additionalProperties": False,
                    },
                },
            },
            "service_tier": "flex",
            "store": False,
            "user": "u-42",
        },
    ),
    _line(
        "req-3",
        {
            "model": "gpt-4.1",
            "messages": [
                {"role": "user", "content": "Weather in Paris?"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_a1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "call_a1", "content": '{"temp_c":21}'},
                {"role": "assistant", "content": "21 °C in Paris."},
                {"role": "user", "content": "And tomorrow?"},
            ],
            "tools": [WEATHER_TOOL],
            "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
            "parallel_tool_calls": False,
            "temperature": 0,
            "frequency_penalty": 0.5,
            "logit_bias": {"50256": -100},
            "max_tokens": 300,
        },
    ),
    _line(
        "req-4",
        {
            "messages": [{"role": "user", "content": "Hi"}],
            "model": "gpt-4o",
            "tool_choice": "none",
            "tools": [WEATHER_TOOL],
            "logprobs": True,
            "top_logprobs": 2,
        },
    ),
]


def _dump(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _run(tmp_path: Path, lines: list, *extra: str) -> list[str]:
    source = tmp_path / "batch.jsonl"
    source.write_text("".join(_dump(line) + "\n" for line in lines), encoding="utf-8")
    out = tmp_path / "out"
    assert main(["--input", str(source), "--output", str(out), "--sink", "openai-batch", *extra]) == 0
    return [
        row
        for p in sorted((out / "normalized").glob("part-*.jsonl"))
        for row in p.read_text(encoding="utf-8").splitlines()
    ]


@pytest.mark.slow
def test_a_batch_line_with_nothing_to_repair_reads_back_byte_identical(tmp_path):
    # Its custom_id is its id by default: the Batch API matches each result to it.
    assert _run(tmp_path, LINES) == [_dump(line) for line in LINES]
    (tmp_path / "b").mkdir()
    assert _run(tmp_path / "b", LINES, "--id-field", "custom_id") == [_dump(line) for line in LINES]


def test_an_id_field_the_line_has_replaces_custom_id(tmp_path):
    lines = [{**line, "request": f"r{i}"} for i, line in enumerate(LINES)]
    written = [json.loads(row) for row in _run(tmp_path, lines, "--id-field", "request")]
    for i, (line, out) in enumerate(zip(lines, written)):
        assert out["custom_id"] == f"r{i}"
        assert {**out, "custom_id": line["custom_id"]} == line
        assert list(out) == list(line) and list(out["body"]) == list(line["body"])


def test_a_batch_line_keeps_its_custom_id_as_its_id_in_every_output(tmp_path):
    source = tmp_path / "batch.jsonl"
    source.write_text(_dump(LINES[0]) + "\n", encoding="utf-8")
    assert main(["--input", str(source), "--output", str(tmp_path / "out"), "--quiet"]) == 0
    [flat] = [json.loads(p.read_text()) for p in (tmp_path / "out" / "normalized").glob("part-*.jsonl")]
    [drops] = [json.loads(p.read_text()) for p in (tmp_path / "out" / "drops").glob("part-*.jsonl")]
    assert flat["id"] == drops["id"] == "req-1"


def test_a_repaired_line_changes_only_its_messages(tmp_path):
    broken = json.loads(_dump(LINES[2]))
    broken["body"]["messages"].insert(1, {"role": "tool", "tool_call_id": "call_zz", "content": "stray"})
    [row] = _run(tmp_path, [broken], "--id-field", "custom_id")
    out = json.loads(row)
    assert out["body"]["messages"] == LINES[2]["body"]["messages"]  # the orphan result is dropped
    assert {k: v for k, v in out["body"].items() if k != "messages"} == {
        k: v for k, v in broken["body"].items() if k != "messages"
    }


def test_model_option_replaces_only_the_model(tmp_path):
    written = [json.loads(row) for row in _run(tmp_path, LINES, "--id-field", "custom_id", "--model", "gpt-5")]
    for line, out in zip(LINES, written):
        assert out["body"]["model"] == "gpt-5"
        assert list(out["body"]) == list(line["body"])
        assert {**out["body"], "model": line["body"]["model"]} == line["body"]


def test_logged_chats_still_get_a_fresh_body():
    # A record that is not a Batch line: the writer writes only its format's keys, as before.
    record = {
        "id": "chat-1",
        "model": "gpt-4o",
        "temperature": 0.3,
        "user_id": "u1",
        "messages": [{"role": "user", "content": "hi"}],
    }
    outcome = process_record(RawRecord("t", 0, _dump(record).encode()), Settings(sink="openai-batch"))
    assert outcome.record == {
        "custom_id": "chat-1",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
    }


def test_the_writer_alone_without_a_source_writes_a_fresh_body():
    record = {"id": "x", "model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 1}
    out = WRITERS["openai-batch"].write(record, WriteContext("x"))
    assert out["body"] == {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
