"""The hf sink (transforms/formats/hf.py): Hugging Face's conversational shape, one fixed schema."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pipeline.config.options import _output_format_problems
from pipeline.io.schema_parquet import MissingFromSchema, storage_row
from transforms.core.jsontext import dumps_line
from transforms.formats import WRITERS, FormatError, WriteContext
from transforms.formats.hf import MESSAGE_KEYS
from transforms.record.inputs import RawRecord
from transforms.record.record_settings import Settings
from transforms.record.records import process_record


def write(messages, **fields):
    ctx = WriteContext("r1")
    return WRITERS["hf"].write({"id": "r1", "messages": messages, **fields}, ctx), ctx.report


CALL = {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c1", "name": "f", "args": '{"a": 1}'}]}


def test_every_message_has_the_same_keys_and_arguments_are_objects():
    out, report = write(
        [
            {"role": "developer", "content": "be brief"},
            {"role": "user", "content": "go"},
            CALL,
            {"role": "tool", "content": "done", "tool_call_id": "c1"},
            {"role": "assistant", "content": "ok", "reasoning_content": "thought", "weight": 0},
        ],
        tools=[{"name": "f", "description": "d", "parameters": {"type": "object"}}],
    )
    assert list(out) == ["id", "messages", "tools"]
    assert all(tuple(m) == MESSAGE_KEYS for m in out["messages"])
    system, _, call, result, answer = out["messages"]
    assert system["role"] == "system" and report == {"developer_as_system": 1}
    assert call["tool_calls"] == [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]
    assert result["name"] == "f" and result["tool_call_id"] == "c1"  # the result names its function
    assert answer["reasoning_content"] == "thought" and answer["weight"] == 0
    assert out["tools"] == [
        {"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object"}}}
    ]


def test_arguments_that_are_not_an_object_are_kept_as_text_and_counted():
    call = {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c1", "name": "f", "args": "ls -la"}]}
    none = {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c2", "name": "g"}]}
    out, report = write(
        [{"role": "user", "content": "go"}, call, {"role": "tool", "content": "r", "tool_call_id": "c1"}, none]
    )
    assert out["messages"][1]["tool_calls"][0]["function"]["arguments"] == "ls -la"
    assert out["messages"][3]["tool_calls"][0]["function"]["arguments"] == {}  # no arguments: {}
    assert report == {"arguments_kept_as_text": 1}
    assert out["tools"] is None


def test_what_the_hf_sink_refuses():
    with pytest.raises(FormatError) as err:
        write([{"role": "user", "content": "only a question"}])
    assert err.value.reason == "no_assistant_message"
    with pytest.raises(FormatError) as err:
        write(
            [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
            tools=[{"type": "custom", "name": "sh"}],
        )
    assert err.value.reason == "unconvertible_tool"
    with pytest.raises(FormatError) as err:  # a call needs its result, but for the last message's
        write(
            [
                {"role": "user", "content": "q"},
                CALL,
                {"role": "user", "content": "?"},
                {"role": "assistant", "content": "a"},
            ]
        )
    assert err.value.reason == "unanswered_call"
    assert write([{"role": "user", "content": "q"}, CALL])[0]["messages"][-1]["tool_calls"]


def test_the_job_keeps_weights_and_trims_for_hf():
    record = {
        "id": 7,
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "a", "weight": 0},
            {"role": "user", "content": "thanks"},
        ],
    }
    outcome = process_record(RawRecord("in.jsonl", 0, dumps_line(record)), Settings(sink="hf"))
    assert outcome.record["id"] == "7"  # text in every part
    assert [m["weight"] for m in outcome.record["messages"]] == [None, 0]
    assert outcome.metrics["training"] == {"weights_kept": 1, "trailing_trimmed": 1, "conversations_trimmed": 1}


def test_a_parquet_row_holds_the_declared_columns_only():
    out, _ = write([{"role": "user", "content": "q"}, CALL, {"role": "tool", "content": "r", "tool_call_id": "c1"}])
    row = storage_row(out, "hf")
    assert row["messages"][1]["tool_calls"][0]["function"]["arguments"] == '{"a":1}'  # JSON text in storage
    with pytest.raises(MissingFromSchema):
        storage_row({**out, "extra": 1}, "hf")


def test_parquet_output_is_refused_for_a_sink_without_a_parquet_schema():
    (problem,) = _output_format_problems(SimpleNamespace(output_format="parquet", sink="sharegpt"))
    assert (
        problem == "--output-format parquet holds the records of --sink flat, hf, trl-dpo, trl-kto or trl-prompts only"
    )
    assert _output_format_problems(SimpleNamespace(output_format="parquet", sink="hf")) == []
