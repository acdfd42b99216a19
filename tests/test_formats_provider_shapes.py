"""The provider-shape checker itself: valid examples pass, each rule catches its violation.

A checker that passes everything would make the writer tests meaningless, so every rule the
writers rely on is shown to fire here.
"""

from __future__ import annotations

import copy

import provider_shapes as shapes
import pytest

CHAT = [
    {"role": "system", "content": "You are a booking agent."},
    {"role": "user", "content": "Flights JFK to SEA?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": "{}"}},
            {"id": "call_2", "type": "custom", "custom": {"name": "python", "input": "print(1)"}},
        ],
    },
    {"role": "tool", "tool_call_id": "call_2", "content": "1"},
    {"role": "tool", "tool_call_id": "call_1", "content": "[]"},
    {"role": "assistant", "content": "No direct flights."},
]
ANTHROPIC = {
    "model": "claude-x",
    "max_tokens": 100,
    "system": "You are a booking agent.",
    "messages": [
        {"role": "user", "content": "Flights JFK to SEA?"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": "toolu_01", "name": "search", "input": {"origin": "JFK"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01", "content": "[]"},
                {"type": "text", "text": "Thanks"},
            ],
        },
        {"role": "assistant", "content": "No direct flights."},
    ],
    "tools": [{"name": "search", "description": "d", "input_schema": {"type": "object"}}],
}


def test_valid_examples_pass():
    assert shapes.openai_message_errors(CHAT) == []
    assert (
        shapes.openai_finetune_errors(
            {
                "messages": CHAT,
                "tools": [{"type": "function", "function": {"name": "search"}}],
                "parallel_tool_calls": True,
            }
        )
        == []
    )
    line = {
        "custom_id": "r1",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": "m", "messages": CHAT},
    }
    assert shapes.openai_batch_errors(line) == []
    assert shapes.anthropic_request_errors(ANTHROPIC) == []


def _chat(edit):
    messages = copy.deepcopy(CHAT)
    edit(messages)
    return shapes.openai_message_errors(messages)


@pytest.mark.parametrize(
    "edit,fragment",
    [
        (lambda m: m.pop(3), "not answered right after"),
        (lambda m: m.insert(3, {"role": "user", "content": "wait"}), "not answered right after"),
        (lambda m: m.append({"role": "tool", "tool_call_id": "call_9", "content": "x"}), "without a preceding call"),
        (lambda m: m.append({"role": "tool", "tool_call_id": "call_1", "content": "x"}), "without a preceding call"),
        (lambda m: m.__setitem__(5, {"role": "assistant", "content": None}), "content missing"),
        (lambda m: m[2]["tool_calls"][0]["function"].__setitem__("arguments", {}), "not a string"),
        (lambda m: m[2]["tool_calls"][1].__setitem__("id", "call_1"), "used twice"),
        (lambda m: m[2]["tool_calls"][0].pop("type"), "not {id, type"),
        (lambda m: m[0].__setitem__("role", "moderator"), "role 'moderator'"),
        (lambda m: m[1].__setitem__("metadata", {}), "unexpected keys"),
        (lambda m: m.pop(), None),
        (lambda m: m.__delitem__(slice(3, None)), "never answered"),
    ],
)
def test_openai_rules_fire(edit, fragment):
    errors = _chat(edit)
    if fragment is None:
        assert errors == []  # ending on results is fine for the chat shape
    else:
        assert any(fragment in e for e in errors), errors


def test_openai_line_rules_fire():
    assert any("no assistant message" in e for e in shapes.openai_finetune_errors({"messages": CHAT[:2]}))
    assert any("unexpected keys" in e for e in shapes.openai_finetune_errors({"messages": CHAT, "id": "x"}))
    assert shapes.openai_finetune_errors({"messages": CHAT, "tools": [{"name": "f"}]})
    line = {
        "custom_id": "",
        "method": "GET",
        "url": "/v1/responses",
        "body": {"messages": CHAT, "parallel_tool_calls": True},
    }
    errors = shapes.openai_batch_errors(line)
    for fragment in ("custom_id", "method", "url", "body.model", "parallel_tool_calls without tools"):
        assert any(fragment in e for e in errors), (fragment, errors)


def _anthropic(edit):
    body = copy.deepcopy(ANTHROPIC)
    edit(body)
    return shapes.anthropic_request_errors(body)


@pytest.mark.parametrize(
    "edit,fragment",
    [
        (lambda b: b["messages"].insert(0, {"role": "system", "content": "s"}), "role 'system'"),
        (lambda b: b["messages"].insert(1, {"role": "user", "content": "again"}), "second user message"),
        (lambda b: b["messages"][2]["content"].reverse(), "tool_result after other content"),
        (lambda b: b["messages"][2]["content"].pop(0), "have no tool_result"),
        (lambda b: b["messages"][2]["content"][0].__setitem__("tool_use_id", "toolu_99"), "without a tool_use"),
        (lambda b: b["messages"][1]["content"][1].__setitem__("input", "{}"), "input is not an object"),
        (lambda b: b["messages"][1]["content"][1].__setitem__("id", "call.1"), "id 'call.1'"),
        (lambda b: b["messages"][1]["content"][0].__setitem__("text", " "), "empty text block"),
        (lambda b: b["messages"][3].__setitem__("content", ""), "empty string content"),
        (lambda b: b["messages"][3].__setitem__("content", []), "non-empty block list"),
        (lambda b: b.__setitem__("system", ""), "system is not"),
        (lambda b: b.__setitem__("messages", b["messages"][:2]), "never answered"),
        (lambda b: b.__setitem__("tools", [{"name": "f", "parameters": {}}]), "input_schema"),
        (lambda b: b.__setitem__("custom_id", "x"), "unexpected keys"),
    ],
)
def test_anthropic_rules_fire(edit, fragment):
    errors = _anthropic(edit)
    assert any(fragment in e for e in errors), errors


# --------------------------------------------------------------------------------------------
# Responses bodies and LLaMA-Factory records (the checkers of the openai-responses and
# sharegpt writers)

RESPONSES = {  # FORMATS.md §3 minimal example, plus a custom tool call
    "model": "m",
    "instructions": "You are a booking agent.",
    "input": [
        {"type": "message", "role": "user", "content": "Flights JFK to SEA?"},
        {"type": "function_call", "call_id": "call_1", "name": "search", "arguments": "{}"},
        {"type": "custom_tool_call", "call_id": "call_2", "name": "python", "input": "print(1)"},
        {"type": "custom_tool_call_output", "call_id": "call_2", "output": "1"},
        {"type": "function_call_output", "call_id": "call_1", "output": "[]"},
        {"type": "message", "role": "assistant", "content": "No direct flights."},
    ],
    "tools": [
        {"type": "function", "name": "search", "parameters": {"type": "object"}},
        {"type": "custom", "name": "python"},
    ],
}
LLAMA_FACTORY = {  # FORMATS.md §6, the glaive_toolcall demo shape
    "conversations": [
        {"from": "human", "value": "I have chicken and rice."},
        {"from": "function_call", "value": '{"name": "search_recipes", "arguments": {"ingredients": ["chicken"]}}'},
        {"from": "observation", "value": '{"recipes": []}'},
        {"from": "gpt", "value": "Nothing found."},
    ],
    "system": "You help.",
    "tools": '[{"name": "search_recipes", "description": "d", "parameters": {"type": "object"}}]',
}


def test_new_valid_examples_pass():
    assert shapes.openai_responses_errors(RESPONSES) == []
    assert shapes.sharegpt_training_errors(LLAMA_FACTORY) == []


def _edited(example, edit):
    body = copy.deepcopy(example)
    edit(body)
    return body


@pytest.mark.parametrize(
    "edit,fragment",
    [
        (lambda b: b["input"].pop(4), "have no output"),
        (lambda b: b["input"].insert(1, b["input"].pop(4)), "no function_call with call_id"),
        (
            lambda b: b["input"].append({"type": "function_call_output", "call_id": "call_1", "output": "x"}),
            "second output",
        ),
        (lambda b: b["input"][2].__setitem__("call_id", "call_1"), "used twice"),
        (lambda b: b["input"][1].__setitem__("arguments", {}), "not a string"),
        (lambda b: b["input"][3].__setitem__("type", "function_call_output"), "no function_call with call_id"),
        (lambda b: b["input"].append({"type": "web_search_call"}), "item type 'web_search_call'"),
        (lambda b: b.__setitem__("instructions", ["x"]), "instructions is not a string"),
        (lambda b: b["tools"][0].__setitem__("function", {}), "unexpected keys"),
        (lambda b: b.__setitem__("messages", []), "unexpected keys"),
    ],
)
def test_responses_rules_fire(edit, fragment):
    errors = shapes.openai_responses_errors(_edited(RESPONSES, edit))
    assert any(fragment in e for e in errors), errors


@pytest.mark.parametrize(
    "edit,fragment",
    [
        (lambda r: r["conversations"].pop(), "not an even number"),
        (lambda r: r["conversations"].insert(3, {"from": "human", "value": "and?"}), "where ('gpt', 'function_call')"),
        (lambda r: r["conversations"][0].__setitem__("from", "gpt"), "where ('human', 'observation')"),
        (lambda r: r["conversations"][1].__setitem__("value", "not json"), "not JSON"),
        (lambda r: r["conversations"][1].__setitem__("value", '{"name": "f"}'), "not {name, arguments}"),
        (lambda r: r["conversations"][2].__setitem__("value", 3), "not {from, value: str}"),
        (lambda r: r.__setitem__("tools", [{"name": "f"}]), "tools is not a JSON string"),
        (lambda r: r.__setitem__("tools", '[{"type": "function", "function": {}}]'), "tools is not a JSON string"),
        (lambda r: r.__setitem__("system", None), "system is not a string"),
    ],
)
def test_llama_factory_rules_fire(edit, fragment):
    errors = shapes.sharegpt_training_errors(_edited(LLAMA_FACTORY, edit))
    assert any(fragment in e for e in errors), errors


def test_anthropic_strict_must_be_a_boolean():
    body = _edited(ANTHROPIC, lambda b: b["tools"][0].__setitem__("strict", None))
    assert any("strict is not a boolean" in e for e in shapes.anthropic_request_errors(body))
    body = _edited(ANTHROPIC, lambda b: b["tools"][0].__setitem__("strict", True))
    assert shapes.anthropic_request_errors(body) == []


GEMINI = {  # FORMATS.md §5 minimal example, with ids and two parallel calls
    "systemInstruction": {"parts": [{"text": "You are a booking agent."}]},
    "contents": [
        {"role": "user", "parts": [{"text": "Flights JFK to SEA?"}]},
        {
            "role": "model",
            "parts": [
                {"functionCall": {"id": "a", "name": "search", "args": {"origin": "JFK"}}},
                {"functionCall": {"id": "b", "name": "price", "args": {}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"id": "b", "name": "price", "response": {"output": 1}}},
                {"functionResponse": {"id": "a", "name": "search", "response": {"output": []}}},
                {"text": "Thanks"},
            ],
        },
        {"role": "model", "parts": [{"text": "No direct flights."}]},
    ],
    "tools": [{"functionDeclarations": [{"name": "search"}, {"name": "price", "parameters": {"type": "object"}}]}],
}


def test_gemini_valid_example_passes():
    assert shapes.gemini_request_errors(GEMINI) == []


@pytest.mark.parametrize(
    "edit,fragment",
    [
        (lambda b: b["contents"][2]["parts"].pop(0), "1 function responses for 2 calls"),
        (
            lambda b: b["contents"].insert(2, {"role": "user", "parts": [{"text": "wait"}]}),
            "0 function responses for 2 calls",
        ),
        (lambda b: b["contents"][2]["parts"][0]["functionResponse"].__setitem__("name", "other"), "names do not match"),
        (lambda b: b["contents"][2]["parts"][0]["functionResponse"].__setitem__("id", "z"), "ids do not match"),
        (lambda b: b["contents"][1]["parts"][0]["functionCall"].__setitem__("args", "{}"), "not {name, args: object}"),
        (
            lambda b: b["contents"][0]["parts"].append({"functionCall": {"name": "f", "args": {}}}),
            "outside a model content",
        ),
        (lambda b: b["contents"][3]["parts"].append({"text": " "}), "blank text"),
        (lambda b: b["contents"][3].__setitem__("role", "user"), "second user content in a row"),
        (lambda b: b["contents"][3].__setitem__("role", "assistant"), "not {role: user|model, parts}"),
        (lambda b: b["contents"].__delitem__(slice(2, None)), "never answered"),
        (lambda b: b["tools"][0]["functionDeclarations"][0].__setitem__("strict", True), "tools[0]"),
        (lambda b: b.__setitem__("messages", []), "unexpected keys"),
    ],
)
def test_gemini_rules_fire(edit, fragment):
    errors = shapes.gemini_request_errors(_edited(GEMINI, edit))
    assert any(fragment in e for e in errors), errors
