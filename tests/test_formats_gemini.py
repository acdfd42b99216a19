"""The Gemini reader: each mapping rule, the id pairing rule, tools, detection.

Fixtures are ``tests/data/formats/gemini.jsonl`` (hand-written from Google's documentation,
see the README there).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from transforms.core.normalize import normalize_conversation  # noqa: E402
from transforms.core.validate import check_sendable  # noqa: E402
from transforms.formats import READERS, FormatError, detect_reader  # noqa: E402

DATA = Path(__file__).parent / "data" / "formats"


def fixture(rid: str) -> dict:
    for line in (DATA / "gemini.jsonl").open(encoding="utf-8"):
        record = json.loads(line)
        if isinstance(record, dict) and record.get("id") == rid:
            return record
    raise KeyError(rid)


def read(record):
    return READERS["gemini"].read(record, "messages")


def test_minimal_example_system_instruction_and_unwrapped_output():
    conversation = read(fixture("gm-minimal"))
    assert conversation.messages == [
        {"role": "system", "content": "You are a booking agent."},
        {"role": "user", "content": "Flights JFK to SEA?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "tool_call_id": "call_1",
                    "name": "search_direct_flight",
                    "args": {"origin": "JFK", "destination": "SEA"},
                }
            ],
        },
        {"role": "tool", "content": "[]", "tool_call_id": "call_1"},
        {"role": "assistant", "content": "No direct flights."},
    ]
    # Function declarations become bare schemas the writers convert.
    assert conversation.fields["tools"] == [fixture("gm-minimal")["tools"][0]["functionDeclarations"][0]]
    assert "systemInstruction" not in conversation.fields and "contents" not in conversation.fields


def test_parallel_responses_without_ids_pair_by_name_in_any_order():
    messages = read(fixture("gm-parallel-disco")).messages
    calls = {c["name"]: c["tool_call_id"] for c in messages[1]["tool_calls"]}
    assert list(calls.values()) == ["call_1_0", "call_1_1", "call_1_2"]
    results = [(m["tool_call_id"], json.loads(m["content"])) for m in messages if m["role"] == "tool"]
    assert results == [
        (calls["start_music"], {"result": {"music_type": "energetic", "volume": "loud"}}),
        (calls["power_disco_ball"], {"result": {"status": "Disco ball powered on"}}),
        (calls["dim_lights"], {"result": {"brightness": 0.5}}),
    ]
    assert check_sendable(normalize_conversation(messages).messages) == []


def test_snake_case_real_ids_and_parameters_json_schema():
    conversation = read(fixture("gm-snake-case-ids"))
    messages = conversation.messages
    assert messages[0]["role"] == "system"
    assert [c["tool_call_id"] for c in messages[2]["tool_calls"]] == ["fc-01", "fc-02"]
    assert [(m["tool_call_id"], m["content"]) for m in messages[3:5]] == [
        ("fc-02", "color set"),
        ("fc-01", "lights on"),
    ]
    tools = conversation.fields["tools"]
    assert tools[0] == {"name": "enable_lights", "description": "Turn on the lighting system."}
    assert tools[1]["parameters"]["required"] == ["rgb_hex"] and "parameters_json_schema" not in tools[1]
    assert conversation.fields["tool_config"] == {"function_calling_config": {"mode": "auto"}}


def test_error_response_media_thought_default_role_and_function_role():
    messages = read(fixture("gm-error-media-thought")).messages
    assert {k: v for k, v in messages[0].items() if k != "media"} == {
        "role": "user",
        "content": "What is on this label? Then look it up.\n[image]",
    }
    # The media themselves travel beside their placeholders (transforms.formats.media).
    assert [(m["kind"], m["placeholder"], m["mime"]) for m in messages[0]["media"]] == [
        ("image", "[image]", "image/png")
    ]
    assert messages[1]["content"] == "Looking it up."  # the thought part is dropped
    assert messages[2] == {"role": "tool", "content": "[error] not found", "tool_call_id": "call_1"}
    assert {k: v for k, v in messages[4].items() if k != "media"} == {
        "role": "user",
        "content": "[file]\nTry this catalog.",
    }
    assert [(m["kind"], m["mime"]) for m in messages[4]["media"]] == [("file", "application/pdf")]
    # Found: the code of an executableCode part is kept (it was "[executableCode]").
    assert messages[5] == {
        "role": "assistant",
        "content": "[server tool call: code_execution]\nlanguage: PYTHON\nprint(1)\nFound it on page 3.",
    }


def test_trimmed_history_orphan_response_text_after_responses_and_trailing_call():
    messages = read(fixture("gm-defects-trimmed")).messages
    # The first response has no call before it: no id, the core drops it as an orphan.
    assert messages[0] == {"role": "tool", "content": "18C", "tool_call_id": None}
    # Text beside a response comes after it, as a message of the turn's role.
    assert [m["role"] for m in messages[3:5]] == ["tool", "user"]
    result = normalize_conversation(messages)
    assert (result.drops, result.healed) == ({"orphan_result": 1}, 1)


def test_responses_only_answer_the_model_turn_right_before():
    record = {
        "contents": [
            {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}}]},
            {"role": "user", "parts": [{"text": "never mind"}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {"output": "late"}}}]},
        ]
    }
    messages = read(record).messages
    assert messages[2] == {"role": "tool", "content": "late", "tool_call_id": None}


def test_response_ids_win_and_a_response_id_takes_its_call_off_the_positional_queue():
    record = {
        "contents": [
            {
                "role": "model",
                "parts": [
                    {"functionCall": {"id": "a", "name": "f", "args": {}}},
                    {"functionCall": {"name": "f", "args": {"n": 2}}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"id": "a", "name": "f", "response": {"output": 1}}},
                    {"functionResponse": {"name": "f", "response": {"output": 2}}},
                ],
            },
        ]
    }
    messages = read(record).messages
    assert [c["tool_call_id"] for c in messages[0]["tool_calls"]] == ["a", "call_0_1"]
    assert [(m["tool_call_id"], m["content"]) for m in messages[1:]] == [("a", "1"), ("call_0_1", "2")]


def test_synthesized_ids_never_reuse_a_real_one():
    record = {
        "contents": [
            {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {}}}]},
            {"role": "model", "parts": [{"functionCall": {"id": "call_0", "name": "g", "args": {}}}]},
            {"role": "user", "parts": [{"functionResponse": {"id": "call_0", "name": "g", "response": {}}}]},
        ]
    }
    messages = read(record).messages
    assert messages[0]["tool_calls"][0]["tool_call_id"] == "call_0_1"
    assert messages[1]["tool_call_id"] == "call_0_1"


def test_response_objects_with_other_keys_stay_whole():
    record = {
        "contents": [
            {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {"output": "x", "error": "y"}}}]},
        ]
    }
    assert read(record).messages[1]["content"] == '{"output":"x","error":"y"}'


def test_other_tool_kinds_are_kept_beside_declarations():
    record = {
        "contents": [{"parts": [{"text": "hi"}]}],
        "tools": [{"googleSearch": {}}, {"functionDeclarations": [{"name": "f"}], "codeExecution": {}}],
    }
    assert read(record).fields["tools"] == [{"googleSearch": {}}, {"name": "f"}, {"codeExecution": {}}]


@pytest.mark.parametrize(
    "record,reason",
    [
        ("text", "not_a_record"),
        ({"contents": "hi"}, "missing_contents"),
        ({"id": 1}, "missing_contents"),
    ],
)
def test_unreadable_records(record, reason):
    with pytest.raises(FormatError) as err:
        read(record)
    assert err.value.reason == reason


def test_auto_detects_request_bodies_that_used_to_read_as_empty_flat_messages():
    # Found: these were read as flat and their text erased.
    record = fixture("gm-minimal")
    assert detect_reader(record, "messages").name == "gemini"
    assert detect_reader({"messages": record["contents"]}, "messages").name == "gemini"


@pytest.mark.parametrize("sink", ["openai-finetune", "anthropic", "sharegpt", "openai-responses"])
def test_a_tool_kind_no_writer_has_is_refused_saying_what_it_is(sink):
    from transforms.formats import WRITERS, WriteContext

    conversation = read(
        {
            "contents": [{"parts": [{"text": "hi"}]}, {"role": "model", "parts": [{"text": "yo"}]}],
            "tools": [{"googleSearch": {}}],
        }
    )
    record = {**conversation.fields, "id": "g", "messages": normalize_conversation(conversation.messages).messages}
    with pytest.raises(FormatError) as err:
        WRITERS[sink].write(record, WriteContext("g", model="m"))
    assert err.value.reason == "unconvertible_tool"
    assert "googleSearch" in str(err.value)
