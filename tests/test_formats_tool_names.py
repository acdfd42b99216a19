"""Calls whose ``function`` is the name string, and tool names providers refuse.

Eval frameworks log a call as ``{"id", "function": "web_browser_go", "arguments": {...}}``
(Inspect AI's ``ToolCall``: ``function`` is the name, ``arguments`` an object). The name was
erased to ``""``, counted nowhere, written as an empty tool name by every writer, and
``convnorm validate`` called the result sendable. Providers require a tool name matching
``^[a-zA-Z0-9_-]{1,64}$`` (OpenAI function names, Anthropic ``tool_use`` / tool names, Bedrock
``ToolSpecification.name``); the Gemini API also allows dots and colons.
"""

from __future__ import annotations

import pytest

from transforms.core.jsontext import dumps_line
from transforms.core.validate import check_sendable
from transforms.formats import READERS, WRITERS, FormatError, WriteContext, detect_reader, read_forced
from transforms.record.inputs import RawRecord
from transforms.record.record_settings import Settings
from transforms.record.records import process_record
from transforms.record.validate_step import check_record

INSPECT = {
    "id": "inspect-sample-1",
    "messages": [
        {"role": "system", "content": "You are a browsing agent.", "source": None},
        {"role": "user", "content": "Open example.com", "source": "input"},
        {
            "role": "assistant",
            "content": "",
            "source": "generate",
            "tool_calls": [
                {
                    "id": "call_abc",
                    "function": "web_browser_go",
                    "arguments": {"url": "https://example.com"},
                    "parse_error": None,
                    "type": "function",
                }
            ],
        },
        {
            "role": "tool",
            "content": "Example Domain",
            "tool_call_id": "call_abc",
            "function": "web_browser_go",
            "error": None,
        },
        {"role": "assistant", "content": "The page says Example Domain."},
    ],
}


def test_inspect_calls_keep_their_name():
    assert detect_reader(INSPECT, "messages").name == "openai"
    outcome = process_record(RawRecord("in.jsonl", 0, dumps_line(INSPECT)), Settings())
    call = outcome.record["messages"][2]["tool_calls"][0]
    assert call == {"tool_call_id": "call_abc", "name": "web_browser_go", "args": {"url": "https://example.com"}}
    out = process_record(RawRecord("in.jsonl", 0, dumps_line(INSPECT)), Settings(sink="openai-finetune"))
    assert out.record["messages"][2]["tool_calls"][0]["function"] == {
        "name": "web_browser_go",
        "arguments": '{"url":"https://example.com"}',
    }


def test_forced_flat_refuses_what_the_core_would_erase():
    with pytest.raises(FormatError) as err:
        read_forced(READERS["flat"], INSPECT, "messages")
    assert err.value.reason == "wrong_format" and "--format openai" in str(err.value)


@pytest.mark.parametrize("name", ["", "   ", "web browser", "x" * 65, "naïve", "a.b"])
def test_validate_flags_an_empty_or_invalid_tool_name(name):
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c1", "name": name}]},
        {"role": "tool", "content": "ok", "tool_call_id": "c1"},
    ]
    found = check_sendable(messages)
    assert [(v.kind, v.index, v.tool_call_id) for v in found] == [("invalid_tool_name", 1, "c1")]
    report = check_record(RawRecord("in.jsonl", 0, dumps_line({"messages": messages})), Settings())
    assert report.record["violations"] == {"invalid_tool_name": 1}


def test_validate_takes_a_valid_name():
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c1", "name": "Get_weather-2"}]},
        {"role": "tool", "content": "ok", "tool_call_id": "c1"},
    ]
    assert check_sendable(messages) == []


EMPTY_NAME = [
    {"role": "user", "content": "go"},
    {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c1", "name": ""}]},
    {"role": "tool", "content": "ok", "tool_call_id": "c1"},
    {"role": "assistant", "content": "done"},
]


@pytest.mark.parametrize(
    "sink", ["openai-finetune", "openai-batch", "openai-responses", "anthropic", "gemini", "bedrock-converse"]
)
def test_provider_writers_refuse_an_empty_tool_name(sink):
    with pytest.raises(FormatError) as err:
        WRITERS[sink].write({"messages": EMPTY_NAME}, WriteContext("r1", model="m", max_tokens=5))
    assert err.value.reason == "invalid_tool_name"


def test_gemini_allows_dots_and_colons_the_others_refuse():
    messages = [dict(m) for m in EMPTY_NAME]
    messages[1] = {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c1", "name": "maps.lookup:v1"}]}
    out = WRITERS["gemini"].write({"messages": messages}, WriteContext("r1"))
    assert out["contents"][1]["parts"][0]["functionCall"]["name"] == "maps.lookup:v1"
    with pytest.raises(FormatError):
        WRITERS["openai-finetune"].write({"messages": messages}, WriteContext("r1"))
