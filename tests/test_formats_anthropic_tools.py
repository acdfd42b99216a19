"""The Anthropic writer against real OpenAI-style tool definitions and records without tools.

Tool shapes: OpenAI's ``FunctionDefinition`` (``strict: Optional[bool]``, openai-python types,
FORMATS.md §1) as logged by LiteLLM-style agent traces (``strict: null``, a redundant
``function.type``, a ``required`` list beside ``parameters``); Anthropic's ``ToolParam``
(``name``, ``description``, ``input_schema``, ``strict: bool``, anthropic-sdk-python
``types/tool_param.py``). Hand-written.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import provider_shapes as shapes  # noqa: E402

from transforms.core.normalize import normalize_conversation  # noqa: E402
from transforms.formats import WRITERS, FormatError, WriteContext  # noqa: E402

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
CALLING = [
    {"role": "user", "content": "Weather in Oslo?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"tool_call_id": "c1", "name": "get_weather", "args": '{"city": "Oslo"}'}],
    },
    {"role": "tool", "content": "4C", "tool_call_id": "c1"},
    {"role": "assistant", "content": "4C in Oslo."},
]


def write(record: dict, **ctx):
    context = WriteContext("r1", model="claude-test", max_tokens=64, **ctx)
    out = WRITERS["anthropic"].write(
        {**record, "messages": normalize_conversation(record["messages"]).messages}, context
    )
    assert shapes.anthropic_request_errors(out) == []
    return out, context.report


def test_strict_null_redundant_type_and_function_level_required_are_mapped_and_counted():
    tools = [
        {
            "type": "function",
            "function": {
                "type": "function",
                "name": "get_weather",
                "description": "Weather now.",
                "strict": None,
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                "required": ["city"],
            },
        }
    ]
    out, report = write({"messages": CALLING, "tools": tools})
    assert out["tools"] == [{"name": "get_weather", "description": "Weather now.", "input_schema": SCHEMA}]
    assert report == {"discarded_tool_fields": {"function.type": 1, "strict": 1}, "mapped_tool_fields": {"required": 1}}


def test_a_required_list_equal_to_the_schemas_is_dropped_and_strict_booleans_are_kept():
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": SCHEMA,
                "required": ["city"],
                "strict": True,
                "description": None,
            },
        }
    ]
    out, report = write({"messages": CALLING, "tools": tools})
    assert out["tools"] == [{"name": "get_weather", "input_schema": SCHEMA, "strict": True}]
    assert report == {"discarded_tool_fields": {"description": 1, "required": 1}}


@pytest.mark.parametrize(
    "function,why",
    [
        ({"name": "get_weather", "parameters": SCHEMA, "required": ["other"]}, "differs from parameters.required"),
        ({"name": "get_weather", "parameters": SCHEMA, "examples": []}, "['examples']"),
        ({"name": "get_weather", "parameters": SCHEMA, "strict": "yes"}, "strict is a str"),
        ({"name": "get_weather", "parameters": "{}"}, "parameters is a str"),
    ],
)
def test_what_has_no_equivalent_is_refused_and_the_error_names_the_tool(function, why):
    with pytest.raises(FormatError) as err:
        write({"messages": CALLING, "tools": [{"type": "function", "function": function}]})
    assert err.value.reason == "unconvertible_tool"
    assert "tool 'get_weather'" in str(err.value) and why in str(err.value)


def test_tools_from_a_dotted_tools_field():
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA}}]
    record = {"messages": CALLING, "kwargs": {"tools": tools, "temperature": 0}}
    out, report = write(record, tools_field="kwargs.tools")
    assert out["tools"] == [{"name": "get_weather", "input_schema": SCHEMA}] and report == {}
    # Without the option the tools are not found: the called tool gets a derived definition.
    out, report = write(record)
    assert out["tools"] == [{"name": "get_weather", "input_schema": {"type": "object"}}]
    assert report == {"derived_tool_definitions": 1}


def test_tool_use_without_any_tools_derives_one_definition_per_called_name():
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"tool_call_id": "a", "name": "search", "args": {}},
                {"tool_call_id": "b", "name": "fetch", "args": {}},
            ],
        },
        {"role": "tool", "content": "1", "tool_call_id": "a"},
        {"role": "tool", "content": "2", "tool_call_id": "b"},
        {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c", "name": "search", "args": {}}]},
        {"role": "tool", "content": "3", "tool_call_id": "c"},
    ]
    out, report = write({"messages": messages})
    assert [t["name"] for t in out["tools"]] == ["search", "fetch"]
    assert report == {"derived_tool_definitions": 2}
    # A record that defines some of its tools gets only the missing ones.
    out, report = write({"messages": messages, "tools": [{"name": "fetch", "input_schema": {"type": "object"}}]})
    assert [t["name"] for t in out["tools"]] == ["fetch", "search"] and report == {"derived_tool_definitions": 1}


def test_the_checker_refuses_a_tool_use_of_an_undefined_tool():
    body = {
        "model": "m",
        "max_tokens": 1,
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "search", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "x"}]},
        ],
    }
    assert any("no tool definition" in e for e in shapes.anthropic_request_errors(body))


@pytest.mark.slow
def test_tools_field_option_in_the_job(tmp_path):
    import json

    from pipeline.cli.main import main

    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA, "strict": None}}]
    record = {"id": "r1", "messages": CALLING, "kwargs": {"tools": tools}}
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps(record) + "\n")
    for sink in ("anthropic", "openai-finetune", "openai-responses", "sharegpt"):
        out = tmp_path / sink
        assert (
            main(
                [
                    "--input",
                    str(source),
                    "--output",
                    str(out),
                    "--sink",
                    sink,
                    "--tools-field",
                    "kwargs.tools",
                    "--model",
                    "m",
                    "--max-tokens",
                    "8",
                ]
            )
            == 0
        )
        (line,) = [json.loads(x) for p in (out / "normalized").glob("*.jsonl") for x in p.read_text().splitlines()]
        written = json.loads(line["tools"]) if sink == "sharegpt" else line["tools"]
        assert [t.get("name") or t["function"]["name"] for t in written] == ["get_weather"], sink
    summary = json.loads((tmp_path / "anthropic" / "summary.json").read_text())
    assert summary["writer_report"] == {"discarded_tool_fields": {"strict": 1}}
    assert main(["--input", str(source), "--output", str(tmp_path / "bad"), "--tools-field", "kwargs..tools"]) == 2
