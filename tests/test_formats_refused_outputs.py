"""Wrong or refused outputs: each case a real shape that went wrong.

- ``content: []`` became the literal text ``"[]"``: an empty part list is empty text.
- The anthropic writer copied OpenAI built-in tools (``{"type": "web_search_preview"}``,
  ``openrouter:*``) verbatim: they have no Anthropic equivalent.
- ``--format anthropic`` refused genuine Anthropic bodies whose content is text parts.
- A Responses request whose ``input`` is a plain string with no ``instructions`` was
  ``unknown_format``.
- Tool definitions without ``type`` (Mistral, xAI logs) were refused: ``type: function`` is
  all they lack.
- A Responses request continuing an earlier one (``previous_response_id``) loses its
  ``function_call_output`` as an orphan: the drop metrics say the conversation is partial.
"""

from __future__ import annotations

import json

import pytest

from transforms.core.jsontext import dumps_line
from transforms.formats import READERS, WRITERS, FormatError, WriteContext, detect_reader, read_forced
from transforms.record.inputs import RawRecord
from transforms.record.record_settings import Settings
from transforms.record.records import process_record
from transforms.totals.summary import finalize, partial


def run(record, **settings):
    return process_record(RawRecord("in.jsonl", 0, dumps_line(record)), Settings(**settings))


def test_an_empty_part_list_is_empty_text():
    record = {
        "messages": [
            {"role": "user", "content": "Weather?"},
            {
                "role": "assistant",
                "content": [],
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": []},
            {"role": "assistant", "content": "Sunny."},
        ]
    }
    outcome = run(record)
    assert [m["content"] for m in outcome.record["messages"]] == ["Weather?", "", "", "Sunny."]


@pytest.mark.parametrize(
    "tool",
    [
        {"type": "web_search_preview"},
        {"type": "openrouter:web_search"},
        {"type": "file_search", "vector_store_ids": ["v"]},
    ],
    ids=lambda t: t["type"],
)
def test_the_anthropic_writer_refuses_openai_built_in_tools(tool):
    record = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}], "tools": [tool]}
    with pytest.raises(FormatError) as err:
        WRITERS["anthropic"].write(record, WriteContext("r1", max_tokens=5))
    assert err.value.reason == "unconvertible_tool"


def test_the_anthropic_writer_keeps_its_own_server_tools():
    tools = [{"type": "web_search_20250305", "name": "web_search", "max_uses": 3}]
    record = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}], "tools": tools}
    assert WRITERS["anthropic"].write(record, WriteContext("r1", max_tokens=5))["tools"] == tools


ANTHROPIC_TEXT_PARTS = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 1024,
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "Hello"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Hi! How can I help?"}]},
        {"role": "user", "content": "Tell me a joke."},
    ],
}


def test_a_forced_reader_accepts_a_record_valid_in_its_own_format():
    # Auto-detection calls text parts OpenAI's; the record is a valid Messages API body too.
    assert detect_reader(ANTHROPIC_TEXT_PARTS, "messages").name == "openai"
    conversation = read_forced(READERS["anthropic"], ANTHROPIC_TEXT_PARTS, "messages")
    assert [m["content"] for m in conversation.messages] == ["Hello", "Hi! How can I help?", "Tell me a joke."]
    outcome = run(ANTHROPIC_TEXT_PARTS, input_format="anthropic")
    assert outcome.dead_letter is None
    # Still refused: what Anthropic's format cannot hold (an OpenAI call, a tool role).
    openai_calls = {
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}},
        ]
    }
    with pytest.raises(FormatError) as err:
        read_forced(READERS["anthropic"], openai_calls, "messages")
    assert err.value.reason == "wrong_format"


def test_a_responses_request_with_a_string_input_is_read_in_auto_mode():
    record = {"model": "gpt-4.1", "input": "Tell me a three sentence bedtime story about a unicorn."}
    assert detect_reader(record, "messages").name == "openai-responses"
    outcome = run(record)
    assert outcome.record["messages"] == [{"role": "user", "content": record["input"]}]


@pytest.mark.parametrize("sink", ["openai-finetune", "anthropic", "gemini", "openai-responses", "bedrock-converse"])
def test_tool_definitions_without_type_are_written(sink):
    untyped = {"function": {"name": "get_weather", "description": "Weather", "parameters": {"type": "object"}}}
    record = {
        "messages": [
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c1", "name": "get_weather"}]},
            {"role": "tool", "content": "sunny", "tool_call_id": "c1"},
            {"role": "assistant", "content": "Sunny."},
        ],
        "tools": [untyped],
    }
    out = WRITERS[sink].write(record, WriteContext("r1", model="m", max_tokens=5))
    written = {
        "openai-finetune": lambda: out["tools"][0]["function"],
        "anthropic": lambda: out["tools"][0],
        "gemini": lambda: out["tools"][0]["functionDeclarations"][0],
        "openai-responses": lambda: out["tools"][0],
        "bedrock-converse": lambda: out["toolConfig"]["tools"][0]["toolSpec"],
    }[sink]()
    assert (written["name"], written["description"]) == ("get_weather", "Weather")
    assert {"type": "object"} in (
        written.get("parameters"),
        written.get("input_schema"),
        written.get("inputSchema", {}).get("json"),
    )


def test_a_continued_responses_request_is_flagged_partial():
    record = {
        "model": "gpt-4.1",
        "previous_response_id": "resp_123",
        "input": [{"type": "function_call_output", "call_id": "call_1", "output": "sunny"}],
    }
    outcome = run(record)
    metrics = outcome.metrics
    assert metrics["drops"] == {"orphan_result": 1}
    assert metrics["partial_conversation"] is True
    assert "partial_conversation" not in run({"model": "gpt-4.1", "input": "hi"}).metrics
    summary = finalize(partial(2, [metrics, run({"model": "gpt-4.1", "input": "hi"}).metrics]))
    assert summary["partial_conversations"] == 1


# --------------------------------------------------------------------------------------------
# A replay body never names another provider's model


@pytest.mark.parametrize(
    ("sink", "model", "owner"),
    [
        ("anthropic", "gpt-4o-mini", "OpenAI"),
        ("anthropic", "gemini-2.0-flash", "Google"),
        ("bedrock-converse", "claude-sonnet-4-5", "Anthropic"),
        ("openai-responses", "claude-sonnet-4-5", "Anthropic"),
    ],
)
def test_a_body_for_one_provider_refuses_another_providers_model_counted(sink, model, owner):
    record = {"id": "c", "model": model, "messages": [{"role": "user", "content": "hi"}]}
    outcome = process_record(RawRecord("calls.jsonl", 0, json.dumps(record).encode()), Settings(sink=sink))
    letter = outcome.dead_letter
    assert letter is not None and letter["reason"] == "unwritable"
    assert letter["detail"].startswith(f"{sink}: foreign_model: the record's model '{model}' is {owner}'s")
    assert "--model" in letter["detail"]
    # --model names the provider's own model instead: the record is written.
    given = {"anthropic": "claude-haiku-4-5", "bedrock-converse": "anthropic.claude-haiku-4-5"}.get(sink, "gpt-4.1")
    written = process_record(
        RawRecord("calls.jsonl", 0, json.dumps(record).encode()), Settings(sink=sink, model=given, max_tokens=64)
    )
    assert written.dead_letter is None and given in json.dumps(written.record)


@pytest.mark.parametrize(
    ("sink", "model"),
    [("anthropic", "claude-sonnet-4-5"), ("anthropic", "my-finetune-7b"), ("openai-batch", "claude-sonnet-4-5")],
)
def test_a_providers_own_or_an_unknown_model_is_kept(sink, model):
    # Unknown names (a self-hosted model, a proxy's alias) are the user's; OpenAI's chat format is
    # taken by many providers, so the openai-batch sink keeps any name.
    record = {"id": "c", "model": model, "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
    outcome = process_record(RawRecord("calls.jsonl", 0, json.dumps(record).encode()), Settings(sink=sink))
    assert outcome.dead_letter is None and model in json.dumps(outcome.record)
