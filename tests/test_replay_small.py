"""Small replay fixes: a Responses item's refusal does not depend on its position, an
unknown Gemini role is read alike by auto and forced readers, and the Cohere v1 chat reader
(samples/formats/cohere-v1.jsonl, copied to tests/data/formats/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from transforms.formats import READERS, detect_reader
from transforms.record.inputs import RawRecord
from transforms.record.record_settings import Settings
from transforms.record.records import process_record

COHERE = {
    r["id"]: r
    for r in map(json.loads, (Path(__file__).parent / "data/formats/cohere-v1.jsonl").read_text().splitlines())
}
CLICK = {"type": "computer_call", "call_id": "c1", "action": {"type": "click", "x": 1, "y": 2}}
HI = {"type": "message", "role": "user", "content": "hi"}


def outcome(record, **settings):
    return process_record(RawRecord("x.jsonl", 0, json.dumps(record).encode()), Settings(**settings))


@pytest.mark.parametrize("items", [[CLICK], [CLICK, HI], [HI, CLICK]], ids=["alone", "first", "later"])
@pytest.mark.parametrize("bare", [False, True])
def test_an_unsupported_responses_item_is_refused_alike_wherever_it_stands(items, bare):
    letter = outcome(items if bare else {"input": items}).dead_letter
    assert (letter["reason"], letter["detail"].split(": ")[:2]) == (
        "format_error",
        ["openai-responses", "unsupported_item"],
    )


@pytest.mark.parametrize("role", ["assistant", "bot", "system"])
def test_an_unknown_gemini_role_is_read_alike_by_auto_and_forced(role):
    record = {"contents": [{"role": role, "parts": [{"text": "yo"}]}]}
    auto, forced = outcome(record), outcome(record, input_format="gemini")
    assert auto.dead_letter is None and forced.dead_letter is None
    assert auto.record == forced.record
    assert auto.record["messages"] == [{"role": role, "content": "yo"}]
    # A sink that cannot take the role says so, naming the role and --map-role.
    if role == "bot":
        letter = outcome(record, sink="gemini").dead_letter
        assert "'bot'" in letter["detail"] and "--map-role" in letter["detail"]


def test_cohere_v1_calls_pair_by_the_call_they_repeat():
    record = COHERE["co-tool-use"]
    assert detect_reader(record, "messages").name == "cohere-v1"
    conversation = READERS["cohere-v1"].read(record, "messages")
    assert conversation.messages[0] == {"role": "system", "content": "You help with the weather."}
    calls = conversation.messages[2]["tool_calls"]
    assert [(c["tool_call_id"], c["name"]) for c in calls] == [
        ("call_1_0", "query_daily_sales_report"),
        ("call_1_1", "get_weather"),
    ]
    # The results come in another order: each answers the call it repeats.
    results = conversation.messages[3:5]
    assert [(r["tool_call_id"], json.loads(r["content"])[0]) for r in results] == [
        ("call_1_1", {"temperature": "20C", "conditions": "sunny"}),
        ("call_1_0", {"date": "2023-09-29", "summary": "Total Sales Amount: 10000, Total Units Sold: 250"}),
    ]
    assert conversation.fields["tools"][0] == {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"location": {"type": "string", "description": "The city"}},
            "required": ["location"],
        },
    }


def test_cohere_v1_defects_are_repaired_by_mem5_and_counted():
    orphan = outcome(COHERE["co-orphan-result"])
    assert orphan.metrics["drops"] == {"orphan_result": 1}
    unanswered = outcome(COHERE["co-unanswered-call"])
    assert unanswered.metrics["healed"] == 1


def test_cohere_v1_request_with_results_and_a_current_message():
    record = {
        "message": "",
        "chat_history": [
            {"role": "USER", "message": "Weather in Oslo?"},
            {
                "role": "CHATBOT",
                "message": "",
                "tool_calls": [{"name": "get_weather", "parameters": {"location": "Oslo"}}],
            },
        ],
        "tool_results": [
            {"call": {"name": "get_weather", "parameters": {"location": "Oslo"}}, "outputs": [{"t": "3C"}]}
        ],
    }
    messages = READERS["cohere-v1"].read(record, "messages").messages
    assert [m["role"] for m in messages] == ["user", "assistant", "tool"]
    assert messages[2]["tool_call_id"] == messages[1]["tool_calls"][0]["tool_call_id"]
    record["message"] = "And tomorrow?"
    assert READERS["cohere-v1"].read(record, "messages").messages[-1] == {"role": "user", "content": "And tomorrow?"}


def test_cohere_v1_writes_to_every_provider_sink():
    for sink in ("openai-finetune", "anthropic", "gemini", "bedrock-converse", "openai-responses", "sharegpt"):
        result = outcome(COHERE["co-tool-use"], sink=sink, model="m", max_tokens=100)
        assert result.dead_letter is None, (sink, result.dead_letter)


def test_cohere_v1_single_step_tool_results_read_as_the_call_they_repeat():
    """cohere-python's own single-step request: no chat_history, the user's message beside the
    results; each result's ``call`` is the call (read, not a ledger entry), then its result."""
    record = json.loads((Path(__file__).parent / "data/replay/cohere-v1-sdk.jsonl").read_text())
    assert detect_reader(record, "messages").name == "cohere-v1"
    conversation = READERS["cohere-v1"].read(record, "messages")
    assert conversation.discarded is None
    user, turn, result = conversation.messages
    assert user == {"role": "user", "content": "How good were the sales on September 29?"}
    assert turn["tool_calls"] == [{"tool_call_id": "call_0", "name": "sales_database", "args": {"day": "2023-09-29"}}]
    assert result["tool_call_id"] == "call_0" and json.loads(result["content"])[0]["total_revenue"] == 48500
    done = outcome(record)
    assert done.dead_letter is None and done.metrics["dropped"] == 0 and done.metrics["messages_out"] == 3
