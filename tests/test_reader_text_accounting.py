"""Every character of text a reader is given is accounted for.

For every reader: characters of text in = characters out + characters in the ledger, on
generated records holding every block type the provider documents (server-side tool calls and
results, documents, search results, citations, reasoning, media ...).

"Text" here is what a person wrote or read: message text, reasoning, tool inputs and outputs,
titles, URLs, code and its output, citations. The generators draw every such string from a
sentinel alphabet no structural string uses (Greek letters); ids, roles, type tags, tool names,
media types, enumerations and opaque payloads (signatures, encrypted or base64 content) are
ASCII. So the characters of text are the sentinel characters, wherever they stand:

- in: those of the record;
- out: those of the conversation the reader made (its messages, whatever the core then keeps
  or counts, and the fields it carries);
- ledger: those of what the reader left out (``Conversation.discarded``).

A reader that drops text, invents it, or counts what it kept breaks the equality.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from transforms.formats import READERS

SENTINEL = "αβγδεζηθικλμ"
TEXT = st.text(alphabet=SENTINEL, min_size=1, max_size=6)
ASCII = st.text(alphabet="abcdefxyz0123456789", min_size=1, max_size=6)
NAME = st.sampled_from(["get_weather", "search", "add"])
ID = st.sampled_from(["a1", "b2", "c3", "d4"])


def sentinel_chars(value) -> int:
    return sum(json.dumps(value, ensure_ascii=False).count(c) for c in SENTINEL)


def ledger_chars(discarded) -> int:
    return sum(chars for _fields, chars in (discarded or {}).values())


def assert_accounted(reader: str, record) -> None:
    conversation = READERS[reader].read(record, "messages")
    # A reader may leave the message field among the fields: the job replaces it with the output.
    fields = {k: v for k, v in conversation.fields.items() if k != "messages"}
    out = sentinel_chars(conversation.messages) + sentinel_chars(fields)
    assert sentinel_chars(record) == out + ledger_chars(conversation.discarded), conversation


ARGS = st.dictionaries(st.sampled_from(["q", "city", "n"]), st.one_of(TEXT, st.integers(0, 9)), max_size=2)


def SETTINGS(test):  # noqa: N802 - a decorator, named like the settings it applies
    """The slow marker: each property runs for about a second (under the suite's one Hypothesis
    profile, tests/conftest.py)."""
    return pytest.mark.slow(test)


# --------------------------------------------------------------------------------------------
# Anthropic Messages

A_TEXT = st.builds(lambda t: {"type": "text", "text": t}, TEXT)
A_CITED = st.builds(
    lambda t, c, title, url: {
        "type": "text",
        "text": t,
        "citations": [
            {
                "type": "char_location",
                "cited_text": c,
                "document_index": 0,
                "document_title": title,
                "start_char_index": 0,
                "end_char_index": 3,
            },
            {
                "type": "web_search_result_location",
                "cited_text": c,
                "url": url,
                "title": title,
                "encrypted_index": "x1",
            },
        ],
    },
    TEXT,
    TEXT,
    TEXT,
    TEXT,
)
A_IMAGE = st.just({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo"}})
A_DOCUMENT = st.one_of(
    st.builds(
        lambda d, title, ctx: {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": d},
            "title": title,
            "context": ctx,
            "citations": {"enabled": True},
        },
        TEXT,
        TEXT,
        TEXT,
    ),
    st.just({"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0"}}),
    st.builds(lambda u: {"type": "document", "source": {"type": "url", "url": u}}, TEXT),
    st.builds(
        lambda t: {"type": "document", "source": {"type": "content", "content": [{"type": "text", "text": t}]}}, TEXT
    ),
)
A_SEARCH_RESULT = st.builds(
    lambda src, title, t: {
        "type": "search_result",
        "source": src,
        "title": title,
        "content": [{"type": "text", "text": t}],
    },
    TEXT,
    TEXT,
    TEXT,
)
A_THINKING = st.one_of(
    st.builds(lambda t: {"type": "thinking", "thinking": t, "signature": "c2lnbmF0dXJl"}, TEXT),
    st.just({"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"}),
)


def _server_pair(name, result):
    return st.builds(
        lambda i, inp, res: [
            {"type": "server_tool_use", "id": f"srvtoolu_{i}", "name": name, "input": inp},
            {"type": f"{name}_tool_result", "tool_use_id": f"srvtoolu_{i}", "content": res},
        ],
        ID,
        ARGS,
        result,
    )


A_SERVER = st.one_of(
    _server_pair(
        "web_search",
        st.one_of(
            st.lists(
                st.builds(
                    lambda u, t, age: {
                        "type": "web_search_result",
                        "url": u,
                        "title": t,
                        "encrypted_content": "RXE",
                        "page_age": age,
                    },
                    TEXT,
                    TEXT,
                    TEXT,
                ),
                max_size=2,
            ),
            st.just({"type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"}),
        ),
    ),
    _server_pair(
        "web_fetch",
        st.builds(
            lambda u, d, t: {
                "type": "web_fetch_result",
                "url": u,
                "retrieved_at": "2025-04-30T10:00:00Z",
                "content": {
                    "type": "document",
                    "source": {"type": "text", "media_type": "text/plain", "data": d},
                    "title": t,
                },
            },
            TEXT,
            TEXT,
            TEXT,
        ),
    ),
    _server_pair(
        "code_execution",
        st.builds(
            lambda out, err: {
                "type": "code_execution_result",
                "stdout": out,
                "stderr": err,
                "return_code": 0,
                "content": [{"type": "code_execution_output", "file_id": "file_1"}],
            },
            TEXT,
            TEXT,
        ),
    ),
    _server_pair(
        "bash_code_execution",
        st.builds(
            lambda out: {
                "type": "bash_code_execution_result",
                "stdout": out,
                "stderr": "",
                "return_code": 1,
                "content": [],
            },
            TEXT,
        ),
    ),
    _server_pair(
        "text_editor_code_execution",
        st.builds(
            lambda c: {
                "type": "text_editor_code_execution_view_result",
                "content": c,
                "file_type": "text",
                "num_lines": 1,
                "start_line": 1,
                "total_lines": 1,
            },
            TEXT,
        ),
    ),
    st.builds(
        lambda i, inp, out: [
            {"type": "mcp_tool_use", "id": f"mcptoolu_{i}", "name": "lookup", "server_name": "crm", "input": inp},
            {
                "type": "mcp_tool_result",
                "tool_use_id": f"mcptoolu_{i}",
                "is_error": False,
                "content": [{"type": "text", "text": out}],
            },
        ],
        ID,
        ARGS,
        TEXT,
    ),
)
A_SINGLE = st.one_of(
    A_TEXT,
    A_CITED,
    A_IMAGE,
    A_DOCUMENT,
    A_SEARCH_RESULT,
    A_THINKING,
    st.just({"type": "container_upload", "file_id": "file_011"}),
    st.builds(lambda t: {"type": "compaction", "content": t, "encrypted_content": "b3BhcXVl"}, TEXT),
).map(lambda b: [b])
A_RESULT_CONTENT = st.one_of(
    TEXT,
    st.lists(
        st.one_of(
            A_TEXT, A_IMAGE, A_DOCUMENT, A_SEARCH_RESULT, st.just({"type": "tool_reference", "tool_name": "add"})
        ),
        max_size=3,
    ),
)


@st.composite
def anthropic_records(draw):
    messages = []
    for turn in range(draw(st.integers(1, 4))):
        blocks = [b for group in draw(st.lists(st.one_of(A_SINGLE, A_SERVER), max_size=3)) for b in group]
        calls = draw(
            st.lists(st.builds(lambda i, n, a: (i, n, a), ID, NAME, ARGS), max_size=2, unique_by=lambda c: c[0])
        )
        blocks += [{"type": "tool_use", "id": f"toolu_{turn}_{i}", "name": n, "input": a} for i, n, a in calls]
        messages.append({"role": "assistant", "content": blocks or [{"type": "text", "text": draw(TEXT)}]})
        results = [
            {
                "type": "tool_result",
                "tool_use_id": f"toolu_{turn}_{i}",
                "content": draw(A_RESULT_CONTENT),
                "is_error": draw(st.booleans()),
            }
            for i, _, _ in calls
        ]
        user = results + [b for group in draw(st.lists(A_SINGLE, max_size=2)) for b in group]
        if draw(st.booleans()):
            user.append({"type": "mid_conv_system", "content": [{"type": "text", "text": draw(TEXT)}]})
        messages.append({"role": "user", "content": user or draw(TEXT)})
    system = draw(st.one_of(TEXT, st.lists(A_TEXT, min_size=1, max_size=2)))
    return {"model": "claude-sonnet-4-5", "system": system, "messages": messages}


@SETTINGS
@given(anthropic_records())
def test_anthropic_accounts_for_every_character(record):
    assert_accounted("anthropic", record)


# --------------------------------------------------------------------------------------------
# Gemini

G_PART = st.one_of(
    st.builds(lambda t: {"text": t}, TEXT),
    st.builds(lambda t: {"text": t, "thought": True, "thoughtSignature": "c2ln"}, TEXT),
    st.just({"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo"}}),
    st.just({"fileData": {"mimeType": "application/pdf", "fileUri": "gs://bucket/file.pdf"}}),
    st.builds(lambda c: {"executableCode": {"language": "PYTHON", "code": c}, "thoughtSignature": "c2ln"}, TEXT),
    st.builds(lambda o: {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": o}}, TEXT),
    st.builds(lambda i, a: {"toolCall": {"id": i, "toolType": "GOOGLE_SEARCH_WEB", "args": a}}, ID, ARGS),
    st.builds(
        lambda i, r: {"toolResponse": {"id": i, "toolType": "URL_CONTEXT", "response": {"summary": r}}}, ID, TEXT
    ),
)
G_RESPONSE = st.one_of(
    st.builds(lambda t: {"output": t}, TEXT),
    st.builds(lambda t: {"error": t}, TEXT),
    st.builds(lambda t, n: {"result": t, "n": n}, TEXT, st.integers(0, 9)),
)


@st.composite
def gemini_records(draw):
    contents = [{"role": "user", "parts": draw(st.lists(G_PART, min_size=1, max_size=3))}]
    for _ in range(draw(st.integers(0, 3))):
        calls = draw(st.lists(st.builds(lambda n, a: {"name": n, "args": a}, NAME, ARGS), max_size=2))
        parts = draw(st.lists(G_PART, max_size=3)) + [{"functionCall": c} for c in calls]
        contents.append({"role": "model", "parts": parts or [{"text": draw(TEXT)}]})
        responses = [{"functionResponse": {"name": c["name"], "response": draw(G_RESPONSE)}} for c in calls]
        if responses:
            contents.append({"role": "user", "parts": responses + draw(st.lists(G_PART, max_size=1))})
    record = {"contents": contents, "systemInstruction": {"parts": [{"text": draw(TEXT)}]}}
    declaration = {"name": "search", "description": draw(TEXT), "parameters": {"type": "object"}}
    record["tools"] = [{"functionDeclarations": [declaration]}, {"googleSearch": {}}]
    return record


@SETTINGS
@given(gemini_records())
def test_gemini_accounts_for_every_character(record):
    assert_accounted("gemini", record)


# --------------------------------------------------------------------------------------------
# Bedrock Converse

B_SHARED = st.one_of(
    st.builds(lambda t: {"text": t}, TEXT),
    st.just({"image": {"format": "png", "source": {"bytes": "iVBORw0KGgo"}}}),
    st.just({"video": {"format": "mp4", "source": {"s3Location": {"uri": "s3://b/v.mp4"}}}}),
    st.builds(lambda n, t: {"document": {"format": "txt", "name": n, "source": {"text": t}}}, TEXT, TEXT),
    st.builds(lambda n, t: {"document": {"format": "md", "name": n, "source": {"content": [{"text": t}]}}}, TEXT, TEXT),
    st.builds(lambda s, t, c: {"searchResult": {"source": s, "title": t, "content": [{"text": c}]}}, TEXT, TEXT, TEXT),
)
B_BLOCK = st.one_of(
    B_SHARED,
    st.just({"audio": {"format": "mp3", "source": {"bytes": "SUQz"}}}),
    st.builds(lambda t: {"guardContent": {"text": {"text": t, "qualifiers": ["query"]}}}, TEXT),
    st.just({"cachePoint": {"type": "default"}}),
    st.builds(lambda t: {"reasoningContent": {"reasoningText": {"text": t, "signature": "c2ln"}}}, TEXT),
    st.just({"reasoningContent": {"redactedContent": "cmVkYWN0ZWQ"}}),
    st.builds(
        lambda t, title, c: {
            "citationsContent": {
                "content": [{"text": t}],
                "citations": [
                    {
                        "title": title,
                        "sourceContent": [{"text": c}],
                        "location": {"documentChar": {"documentIndex": 0, "start": 0, "end": 2}},
                    }
                ],
            }
        },
        TEXT,
        TEXT,
        TEXT,
    ),
)
B_RESULT = st.one_of(
    st.builds(lambda t: {"text": t}, TEXT),
    st.builds(lambda a: {"json": a}, ARGS),
    st.just({"image": {"format": "png", "source": {"bytes": "iVBORw0KGgo"}}}),
    B_SHARED,
)


@st.composite
def bedrock_records(draw):
    messages = []
    for turn in range(draw(st.integers(1, 3))):
        messages.append({"role": "user", "content": draw(st.lists(B_BLOCK, min_size=1, max_size=3))})
        calls = draw(st.lists(st.builds(lambda n, a: (n, a), NAME, ARGS), max_size=2))
        blocks = draw(st.lists(B_BLOCK, max_size=2))
        blocks += [
            {"toolUse": {"toolUseId": f"tooluse_{turn}_{k}", "name": n, "input": a}} for k, (n, a) in enumerate(calls)
        ]
        if draw(st.booleans()):
            use_id = f"srv_{turn}"
            blocks += [
                {
                    "toolUse": {
                        "toolUseId": use_id,
                        "name": "nova_grounding",
                        "type": "server_tool_use",
                        "input": draw(ARGS),
                    }
                },
                {"toolResult": {"toolUseId": use_id, "content": draw(st.lists(B_RESULT, min_size=1, max_size=2))}},
            ]
        messages.append({"role": "assistant", "content": blocks or [{"text": draw(TEXT)}]})
        if calls:
            results = [
                {
                    "toolResult": {
                        "toolUseId": f"tooluse_{turn}_{k}",
                        "content": draw(st.lists(B_RESULT, min_size=1, max_size=2)),
                        "status": draw(st.sampled_from(["success", "error"])),
                    }
                }
                for k in range(len(calls))
            ]
            messages.append({"role": "user", "content": results})
    system = [
        {"text": draw(TEXT)},
        {"cachePoint": {"type": "default"}},
        {"guardContent": {"text": {"text": draw(TEXT)}}},
    ]
    tool = {"toolSpec": {"name": "search", "description": draw(TEXT), "inputSchema": {"json": {"type": "object"}}}}
    return {
        "modelId": "m",
        "system": system,
        "messages": messages,
        "toolConfig": {"tools": [tool, {"cachePoint": {"type": "default"}}]},
    }


@SETTINGS
@given(bedrock_records())
def test_bedrock_converse_accounts_for_every_character(record):
    assert_accounted("bedrock-converse", record)


# --------------------------------------------------------------------------------------------
# OpenAI Chat Completions (function, custom, legacy and Inspect-style calls; parts; refusals)

O_PART = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, TEXT),
    st.just({"type": "image_url", "image_url": {"url": "https://x/a.png", "detail": "low"}}),
    st.just({"type": "input_audio", "input_audio": {"data": "UklGRg", "format": "wav"}}),
    st.just({"type": "file", "file": {"file_id": "file-1"}}),
    st.builds(lambda t: {"type": "refusal", "refusal": t}, TEXT),
)


def _json_args(args: dict) -> str:
    return json.dumps(args, ensure_ascii=False)


@st.composite
def openai_records(draw):
    messages = [
        {
            "role": draw(st.sampled_from(["system", "developer"])),
            "content": draw(
                st.one_of(TEXT, st.lists(O_PART.filter(lambda p: p["type"] == "text"), min_size=1, max_size=2))
            ),
        }
    ]
    for turn in range(draw(st.integers(1, 3))):
        messages.append({"role": "user", "content": draw(st.one_of(TEXT, st.lists(O_PART, min_size=1, max_size=3)))})
        kind = draw(st.sampled_from(["function", "custom", "inspect", "legacy", "none"]))
        assistant: dict = {"role": "assistant", "content": draw(st.one_of(st.none(), TEXT))}
        if draw(st.booleans()):
            assistant["refusal"] = draw(TEXT)
        call_id = f"call_{turn}"
        args = draw(ARGS)
        if kind == "function":
            assistant["tool_calls"] = [
                {"id": call_id, "type": "function", "function": {"name": draw(NAME), "arguments": _json_args(args)}}
            ]
        elif kind == "custom":
            assistant["tool_calls"] = [
                {"id": call_id, "type": "custom", "custom": {"name": "python", "input": draw(TEXT)}}
            ]
        elif kind == "inspect":
            assistant["tool_calls"] = [{"id": call_id, "function": draw(NAME), "arguments": args, "type": "function"}]
        elif kind == "legacy":
            assistant["function_call"] = {"name": draw(NAME), "arguments": _json_args(args)}
        messages.append(assistant)
        if kind == "legacy":
            messages.append({"role": "function", "name": "search", "content": draw(TEXT)})
        elif kind != "none":
            result = {
                "role": "tool",
                "content": draw(st.one_of(TEXT, st.lists(O_PART.filter(lambda p: p["type"] == "text"), min_size=1))),
            }
            result.update({"tool_call_ids": [call_id]} if draw(st.booleans()) else {"tool_call_id": call_id})
            messages.append(result)
    tools = [
        {
            "type": "function",
            "function": {"name": "search", "description": draw(TEXT), "parameters": {"type": "object"}},
        }
    ]
    return {"model": "gpt-4.1", "messages": messages, "tools": tools}


@SETTINGS
@given(openai_records())
def test_openai_accounts_for_every_character(record):
    assert_accounted("openai", record)


# --------------------------------------------------------------------------------------------
# OpenAI Responses (messages, calls, outputs, reasoning and the built-in tools it runs)

R_ITEM = st.one_of(
    st.builds(lambda t: {"type": "message", "role": "user", "content": t}, TEXT),
    st.builds(
        lambda t, title, url: {
            "type": "message",
            "role": "assistant",
            "content": [
                {
                    "type": "output_text",
                    "text": t,
                    "annotations": [
                        {"type": "url_citation", "url": url, "title": title, "start_index": 0, "end_index": 1}
                    ],
                }
            ],
        },
        TEXT,
        TEXT,
        TEXT,
    ),
    st.builds(
        lambda t: {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": t},
                {"type": "input_image", "image_url": "https://x/a.png"},
                {"type": "input_file", "file_id": "file-1"},
            ],
        },
        TEXT,
    ),
    st.builds(
        lambda s: {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": s}],
            "encrypted_content": "gAAAA",
        },
        TEXT,
    ),
    st.builds(
        lambda q, u: {
            "type": "web_search_call",
            "id": "ws_1",
            "status": "completed",
            "action": {"type": "search", "query": q, "sources": [{"type": "url", "url": u}]},
        },
        TEXT,
        TEXT,
    ),
    st.builds(
        lambda q, f, t: {
            "type": "file_search_call",
            "id": "fs_1",
            "status": "completed",
            "queries": [q],
            "results": [{"file_id": "file-1", "filename": f, "score": 0.5, "text": t}],
        },
        TEXT,
        TEXT,
        TEXT,
    ),
    st.builds(
        lambda c, logs: {
            "type": "code_interpreter_call",
            "id": "ci_1",
            "status": "completed",
            "container_id": "cntr_1",
            "code": c,
            "outputs": [{"type": "logs", "logs": logs}, {"type": "image", "url": "https://x/p.png"}],
        },
        TEXT,
        TEXT,
    ),
    st.builds(
        lambda p: {
            "type": "image_generation_call",
            "id": "ig_1",
            "status": "completed",
            "revised_prompt": p,
            "result": "iVBORw0KGgo",
        },
        TEXT,
    ),
    st.builds(
        lambda a, o: {
            "type": "mcp_call",
            "id": "mcp_1",
            "server_label": "crm",
            "name": "lookup",
            "arguments": _json_args(a),
            "output": o,
        },
        ARGS,
        TEXT,
    ),
    st.builds(
        lambda d: {
            "type": "mcp_list_tools",
            "id": "ml_1",
            "server_label": "crm",
            "tools": [{"name": "lookup", "description": d, "input_schema": {"type": "object"}}],
        },
        TEXT,
    ),
    st.builds(
        lambda a: {
            "type": "mcp_approval_request",
            "id": "ar_1",
            "server_label": "crm",
            "name": "lookup",
            "arguments": _json_args(a),
        },
        ARGS,
    ),
    st.builds(
        lambda r: {"type": "mcp_approval_response", "approval_request_id": "ar_1", "approve": True, "reason": r}, TEXT
    ),
    st.just({"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAA"}),
)


@st.composite
def responses_records(draw):
    items = []
    for turn in range(draw(st.integers(1, 3))):
        items += draw(st.lists(R_ITEM, min_size=1, max_size=3))
        if draw(st.booleans()):
            items.append(
                {
                    "type": "function_call",
                    "call_id": f"call_{turn}",
                    "name": draw(NAME),
                    "arguments": _json_args(draw(ARGS)),
                }
            )
            output = draw(
                st.one_of(
                    TEXT, st.lists(st.builds(lambda t: {"type": "input_text", "text": t}, TEXT), min_size=1, max_size=2)
                )
            )
            items.append({"type": "function_call_output", "call_id": f"call_{turn}", "output": output})
        if draw(st.booleans()):
            items.append({"type": "custom_tool_call", "call_id": f"cc_{turn}", "name": "python", "input": draw(TEXT)})
            items.append({"type": "custom_tool_call_output", "call_id": f"cc_{turn}", "output": draw(TEXT)})
    return {"model": "gpt-4.1", "instructions": draw(TEXT), "input": items}


@SETTINGS
@given(responses_records())
def test_openai_responses_accounts_for_every_character(record):
    assert_accounted("openai-responses", record)


# --------------------------------------------------------------------------------------------
# ShareGPT / LLaMA-Factory (function_call / observation turns, v1 blocks, system and tools)


@st.composite
def sharegpt_records(draw):
    turns = []
    for _ in range(draw(st.integers(1, 3))):
        turns.append({"from": "human", "value": draw(TEXT)})
        if draw(st.booleans()):
            calls = draw(
                st.lists(st.builds(lambda n, a: {"name": n, "arguments": a}, NAME, ARGS), min_size=1, max_size=2)
            )
            turns.append(
                {
                    "from": "function_call",
                    "value": json.dumps(calls[0] if len(calls) == 1 else calls, ensure_ascii=False),
                }
            )
            values = [draw(TEXT) for _ in calls]
            turns.append(
                {
                    "from": "observation",
                    "value": values[0] if len(values) == 1 else json.dumps(values, ensure_ascii=False),
                }
            )
        turns.append({"from": "gpt", "value": draw(TEXT)})
    tools = json.dumps(
        [{"name": "search", "description": draw(TEXT), "parameters": {"type": "object"}}], ensure_ascii=False
    )
    return {"conversations": turns, "system": draw(TEXT), "tools": tools}


@st.composite
def sharegpt_v1_records(draw):
    messages = [{"role": "user", "content": [{"type": "text", "value": draw(TEXT)}]}]
    blocks = [{"type": "reasoning", "value": draw(TEXT)}, {"type": "text", "value": draw(TEXT)}]
    call = {"name": draw(NAME), "arguments": draw(ARGS)}
    blocks.append({"type": "tool_call", "value": json.dumps(call, ensure_ascii=False)})
    messages.append({"role": "assistant", "content": blocks})
    messages.append({"role": "tool", "content": [{"type": "text", "value": draw(TEXT)}]})
    return {"messages": messages}


@SETTINGS
@given(st.one_of(sharegpt_records(), sharegpt_v1_records()))
def test_sharegpt_accounts_for_every_character(record):
    assert_accounted("sharegpt", record)


# --------------------------------------------------------------------------------------------
# Flat: the core reads the list itself; what rule 1 does not keep is the core's ledger


@SETTINGS
@given(
    st.lists(
        st.fixed_dictionaries(
            {"role": st.sampled_from(["user", "assistant", "tool"]), "content": TEXT},
            optional={"name": TEXT, "reasoning_content": TEXT, "weight": st.integers(0, 1)},
        ),
        max_size=5,
    )
)
def test_flat_accounts_for_every_character(messages):
    assert_accounted("flat", {"messages": messages})


# --------------------------------------------------------------------------------------------
# Cohere v1 chat


@st.composite
def cohere_records(draw):
    params = draw(ARGS)
    call = {"name": draw(NAME), "parameters": params}
    history = [
        {"role": "SYSTEM", "message": draw(TEXT)},
        {"role": "USER", "message": draw(TEXT)},
        {"role": "CHATBOT", "message": draw(TEXT), "tool_calls": [call]},
        {"role": "TOOL", "tool_results": [{"call": call, "outputs": [{"out": draw(TEXT)}]}]},
        {"role": "CHATBOT", "message": draw(TEXT), "citations": [{"text": draw(TEXT)}]},
    ]
    record = {"chat_history": history, "preamble": draw(TEXT), "message": draw(st.one_of(st.just(""), TEXT))}
    if draw(st.booleans()):
        record["tool_results"] = [{"call": call, "outputs": [{"late": draw(TEXT)}]}]
    return record


@SETTINGS
@given(cohere_records())
def test_cohere_v1_accounts_for_every_character(record):
    assert_accounted("cohere-v1", record)


# --------------------------------------------------------------------------------------------
# Braintrust log rows (input, output and expected in every shape, scores, metadata) and
# OpenPipe dataset entries (a Chat Completions record and the message it was preferred to)


def _braintrust_output(draw):
    text = draw(TEXT)
    return draw(
        st.sampled_from(
            [
                text,
                {"content": text},
                {"role": "assistant", "content": text},
                {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]},
                [{"index": 0, "message": {"role": "assistant", "content": text}}],
                [{"role": "assistant", "content": text}],
            ]
        )
    )


@st.composite
def braintrust_records(draw):
    chat = draw(openai_records())
    shape = draw(st.sampled_from(["request", "list", "text"]))
    if shape == "request":
        prompt = {"messages": chat["messages"], "tools": chat["tools"]}
    else:
        prompt = chat["messages"] if shape == "list" else draw(TEXT)
    record = {
        "id": draw(ASCII),
        "input": prompt,
        "output": None if draw(st.integers(0, 4)) == 0 else _braintrust_output(draw),  # null: no answer
        "scores": draw(st.dictionaries(ASCII, st.one_of(st.none(), st.floats(0, 1)), max_size=3)),
        "metadata": draw(st.dictionaries(st.sampled_from(["note", "model"]), TEXT, max_size=2)),
        "span_id": draw(ASCII),
        "root_span_id": draw(ASCII),
    }
    if draw(st.booleans()):
        record["expected"] = _braintrust_output(draw)
    if draw(st.booleans()):
        record["tags"] = draw(st.lists(ASCII, max_size=3))
    return record


@SETTINGS
@given(braintrust_records())
def test_braintrust_accounts_for_every_character(record):
    assert_accounted("braintrust", record)


@st.composite
def openpipe_records(draw):
    record = draw(openai_records())
    record["rejected_message"] = {"role": "assistant", "content": draw(TEXT)}
    record["split"] = draw(st.sampled_from(["TRAIN", "TEST"]))
    if draw(st.booleans()):
        record["metadata"] = {"labels": [{"name": "helpful", "value": draw(TEXT), "source": "openpipe"}]}
    return record


@SETTINGS
@given(openpipe_records())
def test_openpipe_dataset_accounts_for_every_character(record):
    assert_accounted("openpipe-dataset", record)


def test_every_reader_is_covered():
    covered = {"anthropic", "gemini", "bedrock-converse", "openai", "openai-responses", "sharegpt", "flat", "cohere-v1"}
    covered |= {"braintrust", "openpipe-dataset"}
    assert set(READERS) == covered


@pytest.mark.parametrize("reader", ["anthropic", "gemini", "bedrock-converse"])
def test_the_check_itself_catches_a_lost_character(reader, monkeypatch):
    # A reader that lost the text of its server-side blocks would break the equality.
    from transforms.formats import _rendered

    monkeypatch.setattr(_rendered, "body_text", lambda body: "")
    record = {
        "anthropic": {
            "messages": [
                {
                    "role": "assistant",
                    "content": [{"type": "server_tool_use", "id": "s", "name": "web_search", "input": {"q": "αβ"}}],
                }
            ]
        },
        "gemini": {
            "contents": [{"role": "model", "parts": [{"executableCode": {"language": "PYTHON", "code": "αβ"}}]}]
        },
        "bedrock-converse": {
            "messages": [{"role": "user", "content": [{"document": {"name": "d", "source": {"text": "αβ"}}}]}]
        },
    }[reader]
    with pytest.raises(AssertionError):
        assert_accounted(reader, record)
