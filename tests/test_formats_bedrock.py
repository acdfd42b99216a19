"""AWS Bedrock Converse: the ``bedrock-converse`` reader and writer.

Converse request bodies (``{system: [{text}], messages: [{role, content: [ContentBlock]}],
toolConfig: {tools: [{toolSpec: {name, description, inputSchema: {json}}}]}}``) were claimed by
the anthropic reader because of their top-level ``system`` list: their untyped blocks
(``{"toolUse": ...}``, ``{"toolResult": ...}``) became JSON text, with no dead letter and no
ledger entry. The records here are written from the Converse API reference (``ContentBlock``,
``ToolUseBlock``, ``ToolResultBlock``, ``ToolResultContentBlock``, ``ReasoningContentBlock``,
``SystemContentBlock``, ``ToolConfiguration``).
"""

from __future__ import annotations

import copy

import pytest

from transforms.core.jsontext import dumps_line
from transforms.core.normalize import normalize_conversation
from transforms.formats import READERS, WRITERS, FormatError, WriteContext, detect_reader, read_forced, reasoning
from transforms.record.inputs import RawRecord
from transforms.record.record_settings import Settings
from transforms.record.records import process_record

CONVERSE = {
    "modelId": "anthropic.claude-3-5-sonnet-20240620-v1:0",
    "system": [{"text": "You are a booking agent."}, {"cachePoint": {"type": "default"}}],
    "messages": [
        {"role": "user", "content": [{"text": "Flights JFK to SEA on May 20?"}]},
        {
            "role": "assistant",
            "content": [
                {"reasoningContent": {"reasoningText": {"text": "Search both kinds.", "signature": "c2ln"}}},
                {"text": "Let me check."},
                {"toolUse": {"toolUseId": "tooluse_1", "name": "search_direct", "input": {"origin": "JFK"}}},
                {"toolUse": {"toolUseId": "tooluse_2", "name": "search_onestop", "input": {"origin": "JFK"}}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"toolResult": {"toolUseId": "tooluse_1", "content": [{"json": {"flights": []}}], "status": "success"}},
                {
                    "toolResult": {
                        "toolUseId": "tooluse_2",
                        "content": [{"text": "service unavailable"}],
                        "status": "error",
                    }
                },
                {"text": "Any luck?"},
            ],
        },
        {"role": "assistant", "content": [{"text": "No direct flights; the other search failed."}]},
    ],
    "inferenceConfig": {"maxTokens": 512, "temperature": 0.2},
    "toolConfig": {
        "tools": [
            {
                "toolSpec": {
                    "name": "search_direct",
                    "description": "Direct flights",
                    "inputSchema": {"json": {"type": "object", "properties": {"origin": {"type": "string"}}}},
                }
            },
            {"toolSpec": {"name": "search_onestop", "inputSchema": {"json": {"type": "object"}}}},
        ],
        "toolChoice": {"auto": {}},
    },
}


def test_a_converse_body_is_detected_as_bedrock_not_anthropic():
    assert detect_reader(CONVERSE, "messages").name == "bedrock-converse"
    # Its untyped blocks are not Anthropic blocks: forcing anthropic refuses it.
    with pytest.raises(FormatError) as err:
        read_forced(READERS["anthropic"], CONVERSE, "messages")
    assert err.value.reason == "wrong_format" and "bedrock-converse" in str(err.value)


def test_calls_results_status_system_and_tool_config():
    before = copy.deepcopy(CONVERSE)
    conversation = READERS["bedrock-converse"].read(CONVERSE, "messages")
    assert CONVERSE == before
    assert conversation.messages == [
        {"role": "system", "content": "You are a booking agent."},
        {"role": "user", "content": "Flights JFK to SEA on May 20?"},
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [
                {"tool_call_id": "tooluse_1", "name": "search_direct", "args": {"origin": "JFK"}},
                {"tool_call_id": "tooluse_2", "name": "search_onestop", "args": {"origin": "JFK"}},
            ],
            # The reasoning block, carried as it was for a Bedrock replay (transforms.formats.reasoning).
            "provider_reasoning": {
                "provider": "bedrock-converse",
                "blocks": [
                    {"reasoningContent": {"reasoningText": {"text": "Search both kinds.", "signature": "c2ln"}}}
                ],
            },
        },
        {"role": "tool", "content": '{"flights":[]}', "tool_call_id": "tooluse_1"},
        {"role": "tool", "content": "[error] service unavailable", "tool_call_id": "tooluse_2"},
        {"role": "user", "content": "Any luck?"},
        {"role": "assistant", "content": "No direct flights; the other search failed."},
    ]
    # The reasoning is carried, not discarded by the reader; a sink that does not take it counts
    # it in the ledger (its text; the signature is opaque).
    assert conversation.discarded is None
    ledger: dict = {}
    reasoning.note_all(reasoning.lift(conversation.messages)[1], ledger)
    assert ledger == {"reasoningContent": [1, len("Search both kinds.")]}
    fields = conversation.fields
    assert "system" not in fields and "toolConfig" not in fields
    assert fields["tools"] == [
        {
            "name": "search_direct",
            "description": "Direct flights",
            "parameters": {"type": "object", "properties": {"origin": {"type": "string"}}},
        },
        {"name": "search_onestop", "parameters": {"type": "object"}},
    ]
    assert fields["toolChoice"] == {"auto": {}}
    assert fields["inferenceConfig"] == CONVERSE["inferenceConfig"]
    result = normalize_conversation(conversation.messages)
    assert (result.dropped, result.healed) == (0, 0)


@pytest.mark.parametrize(
    "block",
    [
        {"somethingNew": {"text": "x"}},
        {"text": "a", "toolUse": {"toolUseId": "t", "name": "f", "input": {}}},  # a union holds one member
    ],
    ids=["unknown-member", "two-members"],
)
def test_an_unknown_block_is_a_dead_letter_never_text(block):
    record = {"messages": [{"role": "user", "content": [{"text": "hi"}, block]}]}
    with pytest.raises(FormatError) as err:
        READERS["bedrock-converse"].read(record, "messages")
    assert err.value.reason == "unknown_block"
    outcome = process_record(RawRecord("in.jsonl", 0, dumps_line(record)), Settings())
    assert outcome.dead_letter is not None
    assert outcome.dead_letter["reason"] == "format_error"
    assert "unknown_block" in outcome.dead_letter["detail"]


def test_media_documents_guard_and_citations_content():
    record = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"image": {"format": "png", "source": {"bytes": "iVBORw0KGgo="}}},
                    {"document": {"format": "txt", "name": "Q3", "source": {"text": "Revenue up 12%."}}},
                    {"guardContent": {"text": {"text": "Is it safe?", "qualifiers": ["query"]}}},
                    {"video": {"format": "mp4", "source": {"s3Location": {"uri": "s3://b/v.mp4"}}}},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {
                        "citationsContent": {
                            "content": [{"text": "Revenue rose 12%."}],
                            "citations": [{"title": "Q3", "sourceContent": [{"text": "Revenue up 12%."}]}],
                        }
                    }
                ],
            },
        ]
    }
    conversation = READERS["bedrock-converse"].read(record, "messages")
    user, assistant = conversation.messages
    assert user["content"].split("\n")[0] == "[image]"
    assert "[document: Q3]" in user["content"] and "Revenue up 12%." in user["content"]
    assert "Is it safe?" in user["content"] and user["content"].endswith("[video]")
    assert assistant == {"role": "assistant", "content": "Revenue rose 12%."}
    assert conversation.discarded == {"citations": [1, len("Q3") + len("Revenue up 12%.")]}


def _normalized_record(record: dict) -> dict:
    conversation = READERS["bedrock-converse"].read(record, "messages")
    return {**conversation.fields, "messages": normalize_conversation(conversation.messages).messages}


def test_the_writer_writes_a_converse_body_that_reads_back_the_same():
    normalized = _normalized_record(CONVERSE)
    out = WRITERS["bedrock-converse"].write(normalized, WriteContext("r1", source=CONVERSE))
    assert out["modelId"] == CONVERSE["modelId"]
    assert out["system"] == [{"text": "You are a booking agent."}]
    assert out["inferenceConfig"] == CONVERSE["inferenceConfig"]
    assert out["toolConfig"] == {
        "tools": [
            {
                "toolSpec": {
                    "name": "search_direct",
                    "description": "Direct flights",
                    "inputSchema": {"json": {"type": "object", "properties": {"origin": {"type": "string"}}}},
                }
            },
            {"toolSpec": {"name": "search_onestop", "inputSchema": {"json": {"type": "object"}}}},
        ],
        "toolChoice": {"auto": {}},
    }
    assert [m["role"] for m in out["messages"]] == ["user", "assistant", "user", "assistant"]
    assert out["messages"][2]["content"] == [
        {"toolResult": {"toolUseId": "tooluse_1", "content": [{"text": '{"flights":[]}'}]}},
        {"toolResult": {"toolUseId": "tooluse_2", "content": [{"text": "service unavailable"}], "status": "error"}},
        {"text": "Any luck?"},
    ]
    assert detect_reader(out, "messages").name == "bedrock-converse"
    again = _normalized_record(out)
    assert again["messages"] == normalized["messages"]


def test_the_writer_derives_tool_specs_and_refuses_what_converse_cannot_hold():
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c.1", "name": "f", "args": "{}"}]},
        {"role": "tool", "content": "ok", "tool_call_id": "c.1"},
    ]
    ctx = WriteContext("r1", model="amazon.nova-pro-v1:0")
    out = WRITERS["bedrock-converse"].write({"messages": messages}, ctx)
    assert out["modelId"] == "amazon.nova-pro-v1:0"
    # Converse ids match [a-zA-Z0-9_-]+: rewritten in the call and its result alike.
    assert out["messages"][1]["content"] == [{"toolUse": {"toolUseId": "c_1", "name": "f", "input": {}}}]
    assert out["messages"][2]["content"][0]["toolResult"]["toolUseId"] == "c_1"
    assert out["toolConfig"] == {"tools": [{"toolSpec": {"name": "f", "inputSchema": {"json": {"type": "object"}}}}]}
    assert ctx.report == {"derived_tool_definitions": 1}
    bad = [{"role": "user", "content": "x"}, {"role": "exit", "content": "bye"}]
    with pytest.raises(FormatError) as err:
        WRITERS["bedrock-converse"].write({"messages": bad}, WriteContext("r1"))
    assert err.value.reason == "unsupported_role"
