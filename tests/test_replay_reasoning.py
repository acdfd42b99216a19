"""Reasoning kept for the provider that made it (transforms.formats.reasoning).

Each record of tests/data/replay/reasoning.jsonl (shapes: SOURCES.md there) goes through the
record path: written back to its own provider, its reasoning comes back byte for byte, in
place, and the body validates against the provider's own SDK types (skipped where the SDK is
not installed); written to any other sink, or with ``--reasoning drop``, it is left out and
counted in the ledger under its own name; MEM-5's output is the same either way.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sdk_checks

from transforms.core.ledger import text_chars
from transforms.formats import reasoning
from transforms.record.inputs import RawRecord
from transforms.record.record_settings import Settings
from transforms.record.records import process_record

RECORDS = {
    r["id"]: r
    for r in map(json.loads, (Path(__file__).parent / "data/replay/reasoning.jsonl").read_text().splitlines())
}


def run(record_id: str, sink: str, **settings):
    outcome = process_record(
        RawRecord("reasoning.jsonl", 0, json.dumps(RECORDS[record_id]).encode()), Settings(sink=sink, **settings)
    )
    assert outcome.dead_letter is None, outcome.dead_letter
    return outcome.record, outcome.metrics


def test_anthropic_thinking_blocks_and_config_come_back_unmodified_first():
    source = RECORDS["an-thinking-tools"]["messages"]
    body, metrics = run("an-thinking-tools", "anthropic")
    assistants = [m["content"] for m in body["messages"] if m["role"] == "assistant"]
    assert assistants[0][:2] == source[1]["content"][:2]  # thinking + redacted_thinking, as they were
    assert assistants[0][2]["type"] == "tool_use"
    assert assistants[1][0] == source[3]["content"][0]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert "discarded" not in metrics  # nothing left out


@pytest.mark.slow  # the first use of an SDK imports it (about a second or more)
def test_anthropic_body_validates_with_the_sdk_types():
    sdk_checks.needs("anthropic")
    body, _ = run("an-thinking-tools", "anthropic")
    assert sdk_checks.anthropic_errors(body) == []
    # The check itself catches a thinking block without its signature.
    broken = json.loads(json.dumps(body))
    del broken["messages"][1]["content"][0]["signature"]
    assert sdk_checks.anthropic_errors(broken)


def test_thinking_on_without_the_blocks_drops_the_config_counted():
    body, metrics = run("an-thinking-tools", "anthropic", reasoning="drop")
    assert "thinking" not in body
    assert all(b["type"] not in ("thinking", "redacted_thinking") for m in body["messages"] for b in m["content"])
    assert metrics["writer_report"] == {"thinking_config_dropped": 1}
    assert metrics["discarded"] == {
        "redacted_thinking": {"fields": 1, "chars": 0},
        "thinking": {"fields": 2, "chars": len("Let me search for that.") + len("The search found one item.")},
    }


@pytest.mark.parametrize("sink", ["openai-finetune", "gemini", "flat", "openai-responses", "bedrock-converse"])
def test_another_sink_leaves_anthropic_thinking_out_counted(sink):
    # A body for another provider names that provider's model: --model (the record's is Claude).
    model = {"openai-responses": "gpt-4.1", "bedrock-converse": "anthropic.claude-sonnet-4-5"}.get(sink)
    out, metrics = run("an-thinking-tools", sink, model=model)
    assert reasoning.FIELD not in json.dumps(out) and "EqQBCgIYAhIMsig456" not in json.dumps(out)
    assert metrics["discarded"]["thinking"] == {"fields": 2, "chars": 49}
    assert metrics["discarded"]["redacted_thinking"] == {"fields": 1, "chars": 0}


def test_gemini_thought_signatures_go_back_on_their_parts():
    body, metrics = run("gm-thought-signatures", "gemini")
    model_turns = [c["parts"] for c in body["contents"] if c["role"] == "model"]
    assert model_turns[0][0] == {"text": "Two cities: call both.", "thought": True}
    # Only the first of the parallel calls carries it, as the API returned them.
    assert model_turns[0][1]["thoughtSignature"] == "Cp4BZ2VtaW5pLXNpZ25hdHVyZS1wYXJpcw=="
    assert model_turns[0][1]["functionCall"]["args"] == {"location": "Paris"}
    assert "thoughtSignature" not in model_turns[0][2]
    assert model_turns[1] == [
        {"text": "Paris is 18C and London 14C.", "thoughtSignature": "CiIBZ2VtaW5pLXNpZ25hdHVyZS10ZXh0"}
    ]
    assert "discarded" not in metrics


@pytest.mark.slow  # the first use of an SDK imports it (about a second or more)
def test_gemini_body_validates_with_the_sdk_types():
    sdk_checks.needs("google.genai")
    body, _ = run("gm-thought-signatures", "gemini")
    assert sdk_checks.gemini_errors(body) == []


def test_gemini_signatures_to_another_sink_are_counted():
    _, metrics = run("gm-thought-signatures", "anthropic", model="m", max_tokens=100)
    assert metrics["discarded"] == {
        "thought": {"fields": 1, "chars": len("Two cities: call both.")},
        "thoughtSignature": {"fields": 2, "chars": 0},
    }


def test_deepseek_reasoning_content_comes_back_on_every_assistant_turn():
    line, metrics = run("ds-reasoning-content", "openai-batch")
    assistants = [m for m in line["body"]["messages"] if m["role"] == "assistant"]
    source = [m for m in RECORDS["ds-reasoning-content"]["messages"] if m["role"] == "assistant"]
    assert [m["reasoning_content"] for m in assistants] == [m["reasoning_content"] for m in source]
    assert assistants[1]["reasoning_content"] == ""  # DeepSeek refuses a tool-call turn without the key
    assert "discarded" not in metrics


def test_openrouter_reasoning_details_come_back_as_they_were():
    line, _ = run("or-reasoning-details", "openai-batch")
    source = RECORDS["or-reasoning-details"]["messages"][1]
    written = line["body"]["messages"][1]
    assert written["reasoning_details"] == source["reasoning_details"]
    assert written["reasoning"] == source["reasoning"]


@pytest.mark.slow  # the first use of an SDK imports it (about a second or more)
def test_openai_chat_bodies_validate_with_the_sdk_types():
    sdk_checks.needs("openai")
    for record_id in ("ds-reasoning-content", "or-reasoning-details"):
        line, _ = run(record_id, "openai-batch")
        assert sdk_checks.openai_chat_errors(line["body"]) == []


def test_openai_finetune_leaves_chat_reasoning_out_counted():
    line, metrics = run("ds-reasoning-content", "openai-finetune")
    assert all("reasoning_content" not in m for m in line["messages"])
    # The same names and counts the ledger gave before reasoning was carried (the empty one holds nothing).
    assert metrics["discarded"] == {"reasoning_content": {"fields": 2, "chars": 69}}


def test_responses_reasoning_item_goes_back_right_before_its_call():
    body, metrics = run("rs-encrypted-reasoning", "openai-responses")
    source = RECORDS["rs-encrypted-reasoning"]["input"]
    kinds = [item.get("type") for item in body["input"]]
    assert kinds == ["message", "reasoning", "function_call", "function_call_output", "message", "message"]
    assert body["input"][1] == source[1]  # encrypted_content byte for byte
    assert "discarded" not in metrics


@pytest.mark.slow  # the first use of an SDK imports it (about a second or more)
def test_responses_body_validates_with_the_sdk_types():
    sdk_checks.needs("openai")
    body, _ = run("rs-encrypted-reasoning", "openai-responses")
    assert body["tools"] and sdk_checks.responses_errors(body) == []


def test_bedrock_reasoning_content_comes_back_first():
    body, metrics = run("br-reasoning-content", "bedrock-converse")
    source = RECORDS["br-reasoning-content"]["messages"][1]["content"]
    assert body["messages"][1]["content"] == source
    assert "discarded" not in metrics


@pytest.mark.slow  # the first use of an SDK imports it (about a second or more)
def test_bedrock_body_validates_with_botocore():
    sdk_checks.needs("botocore")
    body, _ = run("br-reasoning-content", "bedrock-converse")
    assert sdk_checks.bedrock_errors(body) == []


@pytest.mark.parametrize("record_id", sorted(RECORDS))
def test_mem5_output_is_the_same_with_reasoning_kept_or_dropped(record_id):
    kept, _ = run(record_id, "flat", reasoning="keep")
    dropped, _ = run(record_id, "flat")
    assert any(reasoning.FIELD in m for m in kept["messages"])
    without = [{k: v for k, v in m.items() if k != reasoning.FIELD} for m in kept["messages"]]
    assert without == dropped["messages"]
    assert all(reasoning.FIELD not in m for m in dropped["messages"])


#: Each record's reasoning as its source holds it: what the ledger must count when it is dropped.
SOURCE_REASONING = {
    "an-thinking-tools": lambda r: [
        b
        for m in r["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"].endswith("thinking")
    ],
    # Thought parts' text; signatures are opaque (no characters).
    "gm-thought-signatures": lambda r: [p["text"] for c in r["contents"] for p in c["parts"] if p.get("thought")],
    "ds-reasoning-content": lambda r: [m.get("reasoning_content") for m in r["messages"]],
    "or-reasoning-details": lambda r: [[m.get("reasoning"), m.get("reasoning_details")] for m in r["messages"]],
    "rs-encrypted-reasoning": lambda r: [i for i in r["input"] if i["type"] == "reasoning"],
    "br-reasoning-content": lambda r: [b for m in r["messages"] for b in m["content"] if "reasoningContent" in b],
}


@pytest.mark.parametrize("record_id", sorted(RECORDS))
def test_the_ledger_balances_with_reasoning_dropped(record_id):
    """Text in = text out + text discarded, reasoning included: dropped (the flat sink's default),
    the ledger counts exactly the text of the source's reasoning; kept, it counts none of it."""
    source = json.loads(json.dumps(RECORDS[record_id]))
    _, metrics = run(record_id, "flat")
    discarded = sum(entry["chars"] for entry in (metrics.get("discarded") or {}).values())
    assert discarded == text_chars(SOURCE_REASONING[record_id](source)) > 0
    _, kept_metrics = run(record_id, "flat", reasoning="keep")
    assert "discarded" not in kept_metrics


@pytest.mark.parametrize(
    "record_id,sink",
    [
        ("an-thinking-tools", "anthropic"),
        ("gm-thought-signatures", "gemini"),
        ("rs-encrypted-reasoning", "openai-responses"),
    ],
)
def test_flat_output_kept_then_written_to_its_provider_restores_the_reasoning(record_id, sink):
    """Two steps (flat with --reasoning keep, then the provider sink) give the one-step body."""
    flat, _ = run(record_id, "flat", reasoning="keep")
    direct, _ = run(record_id, sink, model="m", max_tokens=4096)
    outcome = process_record(
        RawRecord("flat.jsonl", 0, json.dumps(flat).encode()), Settings(sink=sink, model="m", max_tokens=4096)
    )
    assert outcome.dead_letter is None, outcome.dead_letter
    two_step = outcome.record
    key = {"anthropic": "messages", "gemini": "contents", "openai-responses": "input"}[sink]
    assert two_step[key] == direct[key]


def test_a_part_holding_only_a_signature_comes_back_after_the_turn():
    """Gemini can send a signature as a part of its own after the text (seen in public client tests)."""
    model = {
        "role": "model",
        "parts": [
            {"text": "internal", "thought": True},
            {"text": "I am happy today.", "thoughtSignature": "ZGVmNDU2"},
            {"thoughtSignature": "YWJjMTIz"},
        ],
    }
    record = {"contents": [{"role": "user", "parts": [{"text": "How are you?"}]}, model]}
    outcome = process_record(RawRecord("g.jsonl", 0, json.dumps(record).encode()), Settings(sink="gemini"))
    assert outcome.record["contents"] == record["contents"]
    dropped = process_record(
        RawRecord("g.jsonl", 0, json.dumps(record).encode()), Settings(sink="gemini", reasoning="drop")
    )
    assert dropped.metrics["discarded"] == {
        "thought": {"fields": 1, "chars": len("internal")},
        "thoughtSignature": {"fields": 2, "chars": 0},
    }
