"""Server-side tool blocks, documents and unknown blocks.

A server-side tool runs at the provider: its call and its result come back in the model's own
message. They are not client tool calls (MEM-5 must not pair them); every reader keeps their
text in the flat content in one rendering (``transforms.formats._rendered``), and the
provider's own writer puts the blocks back as they were. A block type a reader does not know
is a dead letter (``unknown_block``), never text. The records are written from the providers'
API references: Anthropic's Messages API content blocks (``server_tool_use``,
``web_search_tool_result``, ``web_fetch_tool_result``, ``code_execution_tool_result``,
``bash_code_execution_tool_result``, ``mcp_tool_use`` / ``mcp_tool_result``,
``container_upload``, ``compaction``, ``document``, ``search_result``).
"""

from __future__ import annotations

import json

import pytest

from transforms.core.jsontext import dumps_line
from transforms.formats import READERS, WRITERS, FormatError, WriteContext
from transforms.record.inputs import RawRecord
from transforms.record.record_settings import Settings
from transforms.record.records import process_record
from transforms.repairs.profiles import normalize_with_profile

SERVER_TURN = [
    {"type": "text", "text": "Let me look that up."},
    {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search", "input": {"query": "Paris weather"}},
    {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_01",
        "content": [
            {
                "type": "web_search_result",
                "url": "https://example.com/paris",
                "title": "Paris forecast",
                "encrypted_content": "EqgfCioIARgBIiQ3YTAwMjY1Mi1mZjM5",
                "page_age": "April 30, 2025",
            }
        ],
    },
    {
        "type": "server_tool_use",
        "id": "srvtoolu_02",
        "name": "web_fetch",
        "input": {"url": "https://example.com/paris"},
    },
    {
        "type": "web_fetch_tool_result",
        "tool_use_id": "srvtoolu_02",
        "content": {
            "type": "web_fetch_result",
            "url": "https://example.com/paris",
            "retrieved_at": "2025-04-30T10:00:00Z",
            "content": {
                "type": "document",
                "source": {"type": "text", "media_type": "text/plain", "data": "Sunny, 24C."},
                "title": "Paris forecast",
            },
        },
    },
    {
        "type": "server_tool_use",
        "id": "srvtoolu_03",
        "name": "code_execution",
        "input": {"code": "print(24 * 9 / 5 + 32)"},
    },
    {
        "type": "code_execution_tool_result",
        "tool_use_id": "srvtoolu_03",
        "content": {"type": "code_execution_result", "stdout": "75.2\n", "stderr": "", "return_code": 0, "content": []},
    },
    {
        "type": "server_tool_use",
        "id": "srvtoolu_04",
        "name": "bash_code_execution",
        "input": {"command": "date"},
    },
    {
        "type": "bash_code_execution_tool_result",
        "tool_use_id": "srvtoolu_04",
        "content": {
            "type": "bash_code_execution_result",
            "stdout": "Wed Apr 30",
            "stderr": "",
            "return_code": 0,
            "content": [],
        },
    },
    {
        "type": "mcp_tool_use",
        "id": "mcptoolu_05",
        "name": "get_alerts",
        "server_name": "weather",
        "input": {"city": "Paris"},
    },
    {
        "type": "mcp_tool_result",
        "tool_use_id": "mcptoolu_05",
        "is_error": False,
        "content": [{"type": "text", "text": "No alerts."}],
    },
    {"type": "text", "text": "Sunny and 24C (75.2F), no alerts."},
    {"type": "tool_use", "id": "toolu_06", "name": "save_note", "input": {"text": "Paris sunny"}},
]
RECORD = {
    "model": "claude-sonnet-4-5",
    "messages": [
        {
            "role": "user",
            "content": [
                {"type": "container_upload", "file_id": "file_011CNha8iCJcU1wXNR6q4V8w"},
                {"type": "text", "text": "Weather in Paris, in F too?"},
            ],
        },
        {"role": "assistant", "content": SERVER_TURN},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_06", "content": "saved"}]},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "compaction",
                    "content": "Earlier: the user asked about Paris.",
                    "encrypted_content": "b3BhcXVl",
                },
                {"type": "text", "text": "Done."},
            ],
        },
    ],
}

EXPECTED_ASSISTANT_TEXT = "\n".join(
    [
        "Let me look that up.",
        "[server tool call: web_search]",
        "query: Paris weather",
        "[server tool result: web_search]",
        "url: https://example.com/paris",
        "title: Paris forecast",
        "page_age: April 30, 2025",
        "[server tool call: web_fetch]",
        "url: https://example.com/paris",
        "[server tool result: web_fetch]",
        "url: https://example.com/paris",
        "retrieved_at: 2025-04-30T10:00:00Z",
        "media_type: text/plain",
        "Sunny, 24C.",
        "title: Paris forecast",
        "[server tool call: code_execution]",
        "print(24 * 9 / 5 + 32)",
        "[server tool result: code_execution]",
        "stdout: 75.2\n",
        "return_code: 0",
        "[server tool call: bash_code_execution]",
        "command: date",
        "[server tool result: bash_code_execution]",
        "stdout: Wed Apr 30",
        "return_code: 0",
        "[server tool call: get_alerts]",
        "server_name: weather",
        "city: Paris",
        "[server tool result: get_alerts]",
        "is_error: false",
        "No alerts.",
        "Sunny and 24C (75.2F), no alerts.",
    ]
)


def test_anthropic_server_blocks_keep_their_text_and_are_not_client_calls():
    conversation = READERS["anthropic"].read(RECORD, "messages")
    user, assistant, result, last = conversation.messages
    assert user == {
        "role": "user",
        "content": "[container upload]\nfile_id: file_011CNha8iCJcU1wXNR6q4V8w\nWeather in Paris, in F too?",
    }
    assert assistant["content"] == EXPECTED_ASSISTANT_TEXT
    # Only the client tool_use is a call: MEM-5 pairs nothing else.
    assert assistant["tool_calls"] == [
        {"tool_call_id": "toolu_06", "name": "save_note", "args": {"text": "Paris sunny"}}
    ]
    assert result == {"role": "tool", "content": "saved", "tool_call_id": "toolu_06"}
    assert last["content"] == "[compaction summary]\nEarlier: the user asked about Paris.\nDone."
    # Nothing with text was left out: the ledger has nothing (ids and opaque payloads are no text).
    assert conversation.discarded is None
    assert normalize_with_profile(conversation.messages, "spec").dropped == 0


@pytest.mark.parametrize("profile", ["lossless", "spec"])
def test_anthropic_to_anthropic_puts_the_server_blocks_back_byte_identical(profile):
    settings = Settings(sink="anthropic", profile=profile, max_tokens=1024)
    outcome = process_record(RawRecord("in.jsonl", 0, dumps_line(RECORD)), settings)
    assert outcome.dead_letter is None, outcome.dead_letter
    written = outcome.record["messages"]
    assert written[0]["content"] == RECORD["messages"][0]["content"]
    rendered_types = [b["type"] for b in SERVER_TURN if b["type"] != "text"]
    assert [b["type"] for b in written[1]["content"]] == ["text"] + rendered_types[:-1] + ["text", "tool_use"]
    originals = [b for b in SERVER_TURN if b["type"] not in ("text", "tool_use")]
    restored = [b for b in written[1]["content"] if b["type"] not in ("text", "tool_use")]
    assert [dumps_line(b) for b in restored] == [dumps_line(b) for b in originals]
    assert written[3]["content"][0] == RECORD["messages"][3]["content"][0]


def test_other_writers_keep_the_rendered_text():
    settings = Settings(sink="openai-finetune")
    outcome = process_record(RawRecord("in.jsonl", 0, dumps_line(RECORD)), settings)
    assistant = outcome.record["messages"][1]
    assert assistant["content"] == EXPECTED_ASSISTANT_TEXT
    assert [c["function"]["name"] for c in assistant["tool_calls"]] == ["save_note"]


def test_a_document_with_a_text_source_keeps_its_text():
    record = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {
                        "type": "document",
                        "source": {"type": "text", "media_type": "text/plain", "data": "The grass is green."},
                        "title": "Facts",
                        "context": "A test document",
                        "citations": {"enabled": True},
                    },
                    {
                        "type": "search_result",
                        "source": "https://example.com/sky",
                        "title": "Sky",
                        "content": [{"type": "text", "text": "The sky is blue."}],
                    },
                    {"type": "text", "text": "What colour is the grass?"},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "text",
                        "text": "Green.",
                        "citations": [
                            {
                                "type": "char_location",
                                "cited_text": "The grass is green.",
                                "document_index": 0,
                                "document_title": "Facts",
                                "start_char_index": 0,
                                "end_char_index": 19,
                            }
                        ],
                    }
                ],
            },
        ]
    }
    conversation = READERS["anthropic"].read(record, "messages")
    assert conversation.messages[0]["content"] == (
        "[document: Facts]\nmedia_type: text/plain\nThe grass is green.\ncontext: A test document\n"
        "[search result: Sky]\nsource: https://example.com/sky\nThe sky is blue.\nWhat colour is the grass?"
    )
    assert conversation.messages[1] == {"role": "assistant", "content": "Green."}
    # The citations are not kept: counted (their text: the cited text and the title).
    assert conversation.discarded == {"citations": [1, len("The grass is green.") + len("Facts")]}


@pytest.mark.parametrize(
    "block",
    [
        {"type": "some_future_block", "text": "secret"},
        {"type": "input_text", "text": "an OpenAI part in an Anthropic body"},
        {"type": "fallback", "to": {"model": "m"}},
    ],
    ids=lambda b: b["type"],
)
def test_an_unknown_anthropic_block_is_a_dead_letter_not_text(block):
    record = {"system": "Be brief.", "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}, block]}]}
    with pytest.raises(FormatError) as err:
        READERS["anthropic"].read(record, "messages")
    assert err.value.reason == "unknown_block"
    outcome = process_record(RawRecord("in.jsonl", 0, json.dumps(record).encode()), Settings())
    assert outcome.dead_letter["reason"] == "format_error"
    assert outcome.dead_letter["detail"].startswith("anthropic: unknown_block")


def test_the_writer_restores_only_what_its_source_held():
    # A normalized record whose text merely looks like a rendering is written as text.
    messages = [
        {"role": "user", "content": "[server tool call: web_search]\nquery: x"},
        {"role": "assistant", "content": "ok"},
    ]
    out = WRITERS["anthropic"].write({"messages": messages}, WriteContext("r1", max_tokens=5, source=RECORD))
    assert out["messages"][0]["content"] == [{"type": "text", "text": "[server tool call: web_search]\nquery: x"}]


# --------------------------------------------------------------------------------------------
# Gemini: executableCode / codeExecutionResult (the code execution tool), toolCall /
# toolResponse (server-side tool calls the client passes back, not executes)

GEMINI = {
    "contents": [
        {"role": "user", "parts": [{"text": "What is the sum of the first 5 primes? Also search the news."}]},
        {
            "role": "model",
            "parts": [
                {"text": "I will compute it."},
                {
                    "executableCode": {"language": "PYTHON", "code": "print(sum([2, 3, 5, 7, 11]))"},
                    "thoughtSignature": "c2lnbmF0dXJl",
                },
                {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "28\n"}},
                {"toolCall": {"id": "tc_1", "toolType": "GOOGLE_SEARCH_WEB", "args": {"query": "prime news"}}},
                {"toolResponse": {"id": "tc_1", "toolType": "GOOGLE_SEARCH_WEB", "response": {"summary": "No news."}}},
                {"text": "The sum is 28; no news."},
                {"functionCall": {"id": "fc_1", "name": "save", "args": {"value": 28}}},
            ],
        },
        {"role": "user", "parts": [{"functionResponse": {"id": "fc_1", "name": "save", "response": {"output": "ok"}}}]},
    ]
}


def test_gemini_server_parts_keep_their_text_and_are_not_client_calls():
    conversation = READERS["gemini"].read(GEMINI, "messages")
    model = conversation.messages[1]
    assert model["content"] == "\n".join(
        [
            "I will compute it.",
            "[server tool call: code_execution]",
            "language: PYTHON",
            "print(sum([2, 3, 5, 7, 11]))",
            "[server tool result: code_execution]",
            "outcome: OUTCOME_OK",
            "28\n",
            "[server tool call: GOOGLE_SEARCH_WEB]",
            "query: prime news",
            "[server tool result: GOOGLE_SEARCH_WEB]",
            "summary: No news.",
            "The sum is 28; no news.",
        ]
    )
    assert model["tool_calls"] == [{"tool_call_id": "fc_1", "name": "save", "args": {"value": 28}}]
    assert conversation.discarded is None


@pytest.mark.parametrize("profile", ["lossless", "spec"])
def test_gemini_to_gemini_puts_the_server_parts_back_byte_identical(profile):
    outcome = process_record(RawRecord("in.jsonl", 0, dumps_line(GEMINI)), Settings(sink="gemini", profile=profile))
    assert outcome.dead_letter is None, outcome.dead_letter
    parts = outcome.record["contents"][1]["parts"]
    originals = GEMINI["contents"][1]["parts"][1:5]
    assert [dumps_line(p) for p in parts[1:5]] == [dumps_line(p) for p in originals]
    assert parts[0] == {"text": "I will compute it."} and parts[5] == {"text": "The sum is 28; no news."}
    assert parts[6]["functionCall"]["name"] == "save"


def test_an_unknown_gemini_part_is_a_dead_letter_not_text():
    record = {"contents": [{"role": "user", "parts": [{"text": "hi"}, {"someFuturePart": {"text": "secret"}}]}]}
    with pytest.raises(FormatError) as err:
        READERS["gemini"].read(record, "messages")
    assert err.value.reason == "unknown_block"


# --------------------------------------------------------------------------------------------
# OpenAI Responses: built-in tool items the provider runs (they were `unsupported_item` dead
# letters); items of client-run built-in tools stay refused, and unknown item types are
# unknown_block.

RESPONSES = {
    "model": "gpt-4.1",
    "input": [
        {"type": "message", "role": "user", "content": "Find the Q3 numbers and chart them."},
        {
            "type": "web_search_call",
            "id": "ws_1",
            "status": "completed",
            "action": {
                "type": "search",
                "query": "Q3 revenue",
                "sources": [{"type": "url", "url": "https://ex.com/q3"}],
            },
        },
        {
            "type": "file_search_call",
            "id": "fs_1",
            "status": "completed",
            "queries": ["Q3 report"],
            "results": [{"file_id": "file-1", "filename": "q3.pdf", "score": 0.9, "text": "Revenue up 12%."}],
        },
        {
            "type": "code_interpreter_call",
            "id": "ci_1",
            "status": "completed",
            "container_id": "cntr_1",
            "code": "print(1.12 * 100)",
            "outputs": [{"type": "logs", "logs": "112.0"}],
        },
        {
            "type": "mcp_call",
            "id": "mcp_1",
            "server_label": "crm",
            "name": "lookup",
            "arguments": '{"account":"acme"}',
            "output": "ACME Corp",
        },
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Revenue rose 12%."}]},
        {"type": "function_call", "call_id": "call_1", "name": "save_chart", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "saved"},
    ],
}


def test_responses_server_items_are_read_as_text_not_dead_letters():
    conversation = READERS["openai-responses"].read(RESPONSES, "messages")
    user, server, assistant, result = conversation.messages
    assert user == {"role": "user", "content": "Find the Q3 numbers and chart them."}
    assert server == {
        "role": "assistant",
        "content": "\n".join(
            [
                "[server tool call: web_search]",
                "query: Q3 revenue",
                "url: https://ex.com/q3",
                "[server tool call: file_search]",
                "queries: Q3 report",
                "[server tool result: file_search]",
                "file_id: file-1",
                "filename: q3.pdf",
                "score: 0.9",
                "Revenue up 12%.",
                "[server tool call: code_interpreter]",
                "container_id: cntr_1",
                "print(1.12 * 100)",
                "[server tool result: code_interpreter]",
                "logs: 112.0",
                "[server tool call: lookup]",
                "server_label: crm",
                'arguments: {"account":"acme"}',
                "[server tool result: lookup]",
                "ACME Corp",
            ]
        ),
    }
    # The client call folds into the assistant message of the output text, not into the
    # server items: those are not client calls.
    assert assistant["tool_calls"] == [{"tool_call_id": "call_1", "name": "save_chart", "args": "{}"}]
    assert result == {"role": "tool", "content": "saved", "tool_call_id": "call_1"}
    assert conversation.discarded is None


@pytest.mark.parametrize(
    "item,reason",
    [
        ({"type": "computer_call", "call_id": "c", "action": {"type": "click", "x": 1, "y": 2}}, "unsupported_item"),
        ({"type": "item_reference", "id": "msg_1"}, "unsupported_item"),
        ({"type": "some_future_item", "text": "secret"}, "unknown_block"),
    ],
    ids=lambda v: v["type"] if isinstance(v, dict) else v,
)
def test_responses_items_it_cannot_read_are_refused(item, reason):
    with pytest.raises(FormatError) as err:
        READERS["openai-responses"].read({"input": [{"role": "user", "content": "x"}, item]}, "messages")
    assert err.value.reason == reason


# --------------------------------------------------------------------------------------------
# Content parts of the other readers: an unknown part type is a dead letter too


@pytest.mark.parametrize(
    "fmt,record",
    [
        (
            "openai",
            {
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "hologram", "data": 1}]}
                ]
            },
        ),
        (
            "openai-responses",
            {
                "input": [
                    {"role": "user", "content": [{"type": "input_text", "text": "hi"}, {"type": "input_hologram"}]}
                ]
            },
        ),
        (
            "sharegpt",
            {"messages": [{"role": "user", "content": [{"type": "text", "value": "hi"}, {"type": "sticker"}]}]},
        ),
    ],
    ids=["openai", "openai-responses", "sharegpt"],
)
def test_an_unknown_part_type_is_a_dead_letter_not_a_placeholder(fmt, record):
    with pytest.raises(FormatError) as err:
        READERS[fmt].read(record, "messages")
    assert err.value.reason == "unknown_block"


def test_known_media_parts_stay_placeholders_and_annotations_are_counted():
    record = {
        "input": [
            {
                "type": "message",
                "role": "assistant",
                "content": [
                    {
                        "type": "output_text",
                        "text": "Paris is sunny.",
                        "annotations": [{"type": "url_citation", "url": "https://ex.com", "title": "Forecast"}],
                    }
                ],
            },
            {"role": "user", "content": [{"type": "input_image", "image_url": "https://ex.com/a.png"}]},
        ]
    }
    conversation = READERS["openai-responses"].read(record, "messages")
    assert [m["content"] for m in conversation.messages] == ["Paris is sunny.", "[image]"]
    assert conversation.discarded == {"annotations": [1, len("https://ex.com") + len("Forecast")]}
