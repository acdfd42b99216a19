"""The pieces the call-log readers share: times, OTLP values, GenAI parts, embedded payloads."""

from __future__ import annotations

import os
import time

import pytest

from transforms.calllogs import embedded, genai
from transforms.calllogs.spans import any_value, attributes_of
from transforms.calllogs.times import epoch_nanos, iso_nanos, time_nanos
from transforms.formats import FormatError


@pytest.mark.parametrize(
    ("text", "nanos"),
    [
        ("1970-01-01T00:00:00Z", 0),
        ("2025-09-30T09:04:01.001Z", 1759223041001000000),
        ("2025-09-30T11:04:01.001+02:00", 1759223041001000000),
        ("2025-09-30T04:04:01.001-0500", 1759223041001000000),
        ("2025-09-30 09:04:01.001000", 1759223041001000000),  # Langfuse, LiteLLM: UTC
        ("2025-09-30T09:04:01.001", 1759223041001000000),  # naive: UTC
        ("2026-11-30T10:00:00.123456789+00:00", 1796032800123456789),  # nanoseconds kept
        ("2026-11-30T10:00:00.1234567891Z", 1796032800123456789),  # beyond: cut, not rounded
        ("2025-09-30", 1759190400000000000),
        ("2025-09-30 09:04:01 UTC", 1759223041000000000),
    ],
)
def test_iso_times(text, nanos):
    assert iso_nanos(text) == nanos


@pytest.mark.parametrize("text", ["yesterday", "2025-13-01T00:00:00Z", "2025-02-30", "2025-09-30T25:00:00Z", "12:00"])
def test_bad_iso_times(text):
    with pytest.raises(FormatError) as raised:
        iso_nanos(text)
    assert raised.value.reason == "bad_timestamp"


def test_naive_times_ignore_the_local_zone():
    before = iso_nanos("2025-01-24 09:20:46.847371")
    old = os.environ.get("TZ")
    os.environ["TZ"] = "Asia/Kolkata"
    time.tzset()
    try:
        assert iso_nanos("2025-01-24 09:20:46.847371") == before == 1737710446847371000
    finally:
        if old is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = old
        time.tzset()


def test_epoch_numbers_by_size():
    assert epoch_nanos(1759223041) == 1759223041000000000  # seconds
    assert epoch_nanos(1728803137170) == 1728803137170000000  # milliseconds (LangSmith JS)
    assert epoch_nanos(1728803137170123) == 1728803137170123000  # microseconds
    assert epoch_nanos(1757346066000000000) == 1757346066000000000  # nanoseconds
    assert epoch_nanos(1759223041.5) == 1759223041500000000
    assert time_nanos("1757346066000000000") == 1757346066000000000  # OTLP's decimal string
    assert time_nanos(None) == time_nanos("") == 0
    with pytest.raises(FormatError):
        time_nanos(True)
    with pytest.raises(FormatError):
        time_nanos({"seconds": 1})


@pytest.mark.parametrize(
    "value",
    [
        1e300,  # Found: taken, a start of 301 digits
        10**19,  # Found: taken, past a 64-bit count of nanoseconds
        2**63,
        -(2**63) - 1,
        9.3e18,
        float("inf"),
        float("nan"),
        "10000000000000000000",  # OTLP's decimal string, past 64 bits
        "9" * 5000,  # past what int() reads
        "99999-01-01T00:00:00Z",  # was refused, as not a time at all
        "9999-12-31T23:59:59Z",  # was taken
        "2262-04-11T23:47:17Z",
        "1677-09-21T00:12:43Z",
    ],
)
def test_every_spelling_of_a_time_has_one_range(value):
    """Numbers, digit strings and ISO dates out of a 64-bit count of nanoseconds are refused alike."""
    with pytest.raises(FormatError) as raised:
        time_nanos(value, "startTime")
    assert raised.value.reason == "bad_timestamp"
    assert "out of range" in str(raised.value) and "1677-09-21 to 2262-04-11" in str(raised.value)


def test_the_edges_of_the_range_are_read():
    assert time_nanos("2262-04-11T23:47:16.854775807Z") == time_nanos(2**63 - 1) == 2**63 - 1
    assert time_nanos("1677-09-21T00:12:43.145224192Z") == time_nanos(-(2**63)) == -(2**63)
    assert time_nanos("9223372036854775807") == 2**63 - 1
    with pytest.raises(FormatError, match="not a time convnorm reads"):
        time_nanos("²")  # a digit to str.isdigit, not to int(): refused, never a crash


def test_otlp_values():
    assert any_value({"stringValue": "a"}) == any_value({"string_value": "a"}) == "a"
    assert any_value({"intValue": "57"}) == any_value({"intValue": 57}) == any_value({"int_value": "57"}) == 57
    assert any_value({"doubleValue": 0.5}) == 0.5
    assert any_value({"boolValue": False}) is False
    assert any_value({"arrayValue": {"values": [{"stringValue": "stop"}]}}) == ["stop"]
    assert any_value({"arrayValue": {}}) == []
    kv = {"kvlistValue": {"values": [{"key": "role", "value": {"stringValue": "user"}}]}}
    assert any_value(kv) == {"role": "user"}
    assert any_value({}) is None
    assert attributes_of([{"key": "a", "value": {"intValue": "1"}}, "junk", {"value": {}}]) == {"a": 1}
    assert attributes_of({"flat": 1}) == {"flat": 1}


def test_indexed_keys_in_numeric_order():
    attributes = {f"p.{n}.content": str(n) for n in (10, 2, 1, 0)} | {"p.x.content": "no", "q.0.content": "no"}
    assert [e["content"] for e in genai.indexed(attributes, "p")] == ["0", "1", "2", "10"]


def test_genai_parts():
    messages = [
        {
            "role": "user",
            "parts": [
                {"type": "text", "content": "Look"},
                {"type": "blob", "modality": "image", "mime_type": "image/png", "content": "aGk="},
                {"type": "uri", "modality": "video", "uri": "gs://b/v.mp4"},
                {"type": "file", "mime_type": "audio/wav", "file_id": "f1"},
                {"type": "file", "file_id": "f2"},
            ],
        },
        {
            "role": "model",
            "parts": [{"type": "reasoning", "content": "hmm"}, {"type": "tool_call", "id": "c1 ", "name": "f"}],
        },
        {
            "role": "user",
            "parts": [
                {"type": "tool_call_response", "id": "c1", "response": {"ok": True}},
                {"type": "tool_call_response", "id": "c2", "content": "two"},
            ],
        },
        {
            "role": "assistant",
            "parts": [{"type": "server_tool_call", "name": "code_interpreter", "server_tool_call": {"code": "1+1"}}],
        },
        {"role": "user", "content": "an OpenAI message among them"},
    ]
    ledger: dict = {}
    assert genai.genai_to_flat(messages, ledger) == [
        {"role": "user", "content": "Look\n[image]\n[video]\n[audio]\n[file]"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"tool_call_id": "c1", "name": "f"}],
        },  # no arguments: no args
        {"role": "tool", "content": '{"ok":true}', "tool_call_id": "c1"},
        {"role": "tool", "content": "two", "tool_call_id": "c2"},
        {"role": "assistant", "content": "[server tool call: code_interpreter]\n1+1"},
        {"role": "user", "content": "an OpenAI message among them"},
    ]
    assert ledger == {"reasoning": [1, 3]}
    assert genai.system_to_flat([{"type": "text", "content": "A"}, {"type": "text", "content": "B"}]) == [
        {"role": "system", "content": "A\nB"}
    ]
    assert genai.system_to_flat([]) == genai.system_to_flat(None) == []


def test_strict_flat_counts_what_it_leaves_out():
    ledger: dict = {}
    messages = [
        {"role": "assistant", "content": None, "refusal": "no", "tool_calls": None},
        {"role": "tool", "content": 3, "metadata": {"tool_call_id": "c1"}},
        "junk",
        {"content": "no role"},
    ]
    assert embedded.strict_flat(messages, ledger) == [
        {"role": "assistant", "content": ""},
        {"role": "tool", "content": "3", "tool_call_id": "c1"},
        "junk",  # the core drops these, counted
        {"content": "no role"},
    ]
    assert ledger == {"refusal": [1, 2]}


def test_read_output_shapes():
    assert embedded.read_output({"choices": [{"text": "legacy"}]}, "x").messages == [
        {"role": "assistant", "content": "legacy"}
    ]
    converse = {"output": {"message": {"role": "assistant", "content": [{"text": "Hi from Bedrock"}]}}}
    assert embedded.read_output(converse, "x").messages == [{"role": "assistant", "content": "Hi from Bedrock"}]
    assert embedded.read_output({"choices": []}, "x").messages == []
    assert embedded.read_output("plain", "x").messages == [{"role": "assistant", "content": "plain"}]
    assert embedded.read_output(None, "x").messages == []


def test_read_history_shapes():
    assert embedded.read_history("plain text", "x").messages == [{"role": "user", "content": "plain text"}]
    single = embedded.read_history('{"role": "user", "content": "one"}', "x")
    assert single.messages == [{"role": "user", "content": "one"}]
    anthropic = embedded.read_history(
        {"system": "S", "messages": [{"role": "user", "content": [{"type": "text", "text": "q"}]}]}, "x"
    )
    assert anthropic.messages == [{"role": "system", "content": "S"}, {"role": "user", "content": "q"}]


def test_tools_are_openai_function_tools():
    tools = embedded.tools_of(
        '[{"type": "function", "name": "a", "parameters": {}}, {"name": "b", "input_schema": {"type": "object"}},'
        ' {"type": "web_search_preview"}]'
    )
    assert tools == [
        {"type": "function", "function": {"name": "a", "parameters": {}}},
        {"type": "function", "function": {"name": "b", "parameters": {"type": "object"}}},
        {"type": "web_search_preview"},  # a built-in tool has no function form: kept as it is
    ]
    assert embedded.tools_of([]) is None and embedded.tools_of(None) is None


def test_result_text():
    assert embedded.result_text('"sunny"') == "sunny"  # a string exported as JSON
    assert embedded.result_text('{"a": 1}') == '{"a": 1}'  # as it was written
    assert embedded.result_text({"a": 1}) == '{"a":1}'
    assert embedded.result_text("plain") == "plain"
