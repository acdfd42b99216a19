"""Replay on recorded shapes: request bodies that providers' real APIs took and answered, as the
public test cassettes of pydantic/pydantic-ai hold them (tests/data/replay/recorded.jsonl; each
record's source, commit and licence in SOURCES.md there).

Each record goes through the record path to its own provider's sink and to every other one:

- on its own provider's sink the reasoning (thinking blocks and their signatures, a redacted
  block's payload, a call's thought signature, DeepSeek's ``reasoning_content``) comes back byte
  for byte, where it stood;
- on any other sink it is left out and counted in the ledger under its own name;
- the reasoning balances on every sink: its text in the source = its text written + its text
  counted as discarded;
- a recorded image (by URL) is kept where the sink can carry it, else its placeholder stays,
  counted;
- the body validates with the provider's own SDK types, offline (``sdk_checks``).

And the writer rules these bodies called for: an empty Converse tool description left out,
``strict`` on every Responses function tool, Claude's thinking config on Bedrock, a thinking
budget not below ``max_tokens`` refused, thinking blocks with no config written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest
import sdk_checks

from transforms.core.ledger import text_chars
from transforms.formats import reasoning
from transforms.record.inputs import RawRecord
from transforms.record.record_settings import Settings
from transforms.record.records import process_record

RECORDS = {
    r["id"]: r for r in map(json.loads, (Path(__file__).parent / "data/replay/recorded.jsonl").read_text().splitlines())
}

#: The ledger's names for reasoning (transforms.formats.reasoning.note_dropped).
REASONING_NAMES = frozenset(
    ("thinking", "redacted_thinking", "thought", "thoughtSignature", *reasoning.CHAT_KEYS, "reasoningContent")
)

#: Anthropic's reasoning blocks.
ANTHROPIC_TYPES = frozenset(("thinking", "redacted_thinking"))


def _turns(body: dict[str, Any], key: str) -> list[Any]:
    return [block for turn in body.get(key, ()) for block in turn.get("content" if key == "messages" else "parts", ())]


def _anthropic(body: dict[str, Any]) -> list[Any]:
    return [b for b in _turns(body, "messages") if isinstance(b, dict) and b.get("type") in ANTHROPIC_TYPES]


def _gemini(body: dict[str, Any]) -> list[Any]:
    thoughts = [p for p in _turns(body, "contents") if p.get("thought")]
    # A signature is opaque: kept under its own key, it holds no characters of text.
    return thoughts + [
        {"thoughtSignature": p["thoughtSignature"]} for p in _turns(body, "contents") if "thoughtSignature" in p
    ]


def _chat(body: dict[str, Any]) -> list[Any]:
    messages = body.get("messages") or body.get("body", {}).get("messages", ())
    return [{k: m[k]} for m in messages for k in reasoning.CHAT_KEYS if k in m]


def _responses(body: dict[str, Any]) -> list[Any]:
    return [item for item in body.get("input", ()) if item.get("type") == "reasoning"]


def _bedrock(body: dict[str, Any]) -> list[Any]:
    return [b["reasoningContent"] for b in _turns(body, "messages") if isinstance(b, dict) and "reasoningContent" in b]


#: Each sink's reasoning as written in its body; the same function reads a source record of
#: that provider (the recorded bodies are request bodies).
WRITTEN: dict[str, Callable[[dict[str, Any]], list[Any]]] = {
    "anthropic": _anthropic,
    "gemini": _gemini,
    "openai-batch": _chat,
    "openai-responses": _responses,
    "bedrock-converse": _bedrock,
}
#: The sink that writes each record holding reasoning back to its own provider.
OWN_SINK = {
    "pa-an-tool-with-thinking": "anthropic",
    "pa-an-thinking-then-text": "anthropic",
    "pa-br-reasoning-text": "bedrock-converse",
    "pa-br-redacted": "bedrock-converse",
    "pa-gm-call-signature": "gemini",
    "pa-gm-text-signature": "gemini",
    "pa-ds-reasoner-tools": "openai-batch",
    "pa-rs-reasoning-call": "openai-responses",
    "pa-or-reasoning-details": "openai-batch",
}
SINKS = sorted(WRITTEN)


def run(record_id: str, sink: str, **settings: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    raw = RawRecord("recorded.jsonl", 0, json.dumps(RECORDS[record_id]).encode())
    outcome = process_record(raw, Settings(sink=sink, **{"model": "m", "max_tokens": 4096, **settings}))
    assert outcome.dead_letter is None, outcome.dead_letter
    return outcome.record, outcome.metrics


def _empty(piece: Any) -> bool:
    """A chat reasoning key holding nothing (``{"reasoning_content": ""}``)."""
    return isinstance(piece, dict) and len(piece) == 1 and next(iter(piece.values())) in ("", None)


def source_reasoning(record_id: str) -> list[Any]:
    return WRITTEN[OWN_SINK[record_id]](RECORDS[record_id])


def discarded_reasoning(metrics: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in (metrics.get("discarded") or {}).items() if k in REASONING_NAMES}


#: The records holding media (an image by URL).
MEDIA_RECORDS = ("pa-an-image-url",)


def test_every_record_is_tested():
    assert sorted([*OWN_SINK, *MEDIA_RECORDS]) == sorted(RECORDS)
    assert all(source_reasoning(record_id) for record_id in OWN_SINK)  # each holds some


@pytest.mark.parametrize("record_id", sorted(OWN_SINK))
def test_own_provider_gets_the_reasoning_back_byte_for_byte(record_id):
    sink = OWN_SINK[record_id]
    body, metrics = run(record_id, sink)
    assert WRITTEN[sink](body) == source_reasoning(record_id)
    assert discarded_reasoning(metrics) == {}


def test_anthropic_thinking_block_opens_the_tool_use_turn_with_its_config():
    source = RECORDS["pa-an-tool-with-thinking"]
    body, _ = run("pa-an-tool-with-thinking", "anthropic")
    assert body["thinking"] == {"budget_tokens": 3000, "type": "enabled"}
    assistant = body["messages"][1]["content"]
    assert assistant[0] == source["messages"][1]["content"][0]  # signature included
    assert [b["type"] for b in assistant] == ["thinking", "text", "tool_use"]
    assert body["messages"][2]["content"][0]["tool_use_id"] == "toolu_01YGzqpRE16Vricda3Aqcejo"


def test_gemini_call_keeps_its_signature_and_id():
    source = RECORDS["pa-gm-call-signature"]["contents"][1]["parts"][0]
    body, _ = run("pa-gm-call-signature", "gemini")
    part = body["contents"][1]["parts"][0]
    assert part["thoughtSignature"] == source["thoughtSignature"]  # the URL-safe base64 as sent
    assert part["functionCall"]["id"] == source["functionCall"]["id"]
    # The record's parametersJsonSchema (in the SDK's snake_case) is written as parameters.
    assert body["tools"][0]["functionDeclarations"][0]["parameters"] == {
        "additionalProperties": False,
        "properties": {},
        "type": "object",
    }


def test_gemini_text_signature_goes_back_on_the_answer_and_the_calls_on_its_call():
    """A signature on the answer's text part (Gemini 2.5's, real) and the documented
    ``skip_thought_signature_validator`` one on a call each go back on their own part."""
    source = RECORDS["pa-gm-text-signature"]["contents"]
    body, _ = run("pa-gm-text-signature", "gemini")
    contents = body["contents"]
    assert contents[1]["parts"][0]["thoughtSignature"] == source[1]["parts"][0]["thoughtSignature"]
    assert contents[-1] == {"role": "model", "parts": source[-1]["parts"]}


def test_bedrock_blocks_open_their_turn():
    for record_id in ("pa-br-reasoning-text", "pa-br-redacted"):
        body, _ = run(record_id, "bedrock-converse")
        assert body["messages"][1]["content"][0] == RECORDS[record_id]["messages"][1]["content"][0]


def test_openrouter_reasoning_details_come_back_as_they_were():
    """OpenRouter's ``reasoning_details`` (a summary, and the encrypted reasoning of the OpenAI
    model behind it, ``id: null`` on the first) go back on their assistant message unchanged."""
    line, _ = run("pa-or-reasoning-details", "openai-batch")
    source = RECORDS["pa-or-reasoning-details"]["messages"][1]
    written = line["body"]["messages"][1]
    assert written["reasoning_details"] == source["reasoning_details"]
    assert written["content"] == source["content"]


def test_responses_reasoning_item_goes_back_right_before_its_call():
    """The encrypted reasoning gpt-5 returned with its call (the response's output, after the
    request's input) comes back byte for byte right before that call; the call, left without
    a result at the end of the log, gets MEM-5's synthetic one (healed)."""
    source = RECORDS["pa-rs-reasoning-call"]["input"]
    body, metrics = run("pa-rs-reasoning-call", "openai-responses")
    kinds = [(item.get("type"), item.get("call_id")) for item in body["input"]]
    assert kinds[3:] == [
        ("message", None),
        ("reasoning", None),
        ("function_call", "call_LIXPi261Xx3dGYzlDsOoyHGk"),
        ("function_call_output", "call_LIXPi261Xx3dGYzlDsOoyHGk"),
    ]
    assert body["input"][4] == source[4]
    assert metrics["healed"] == 1
    assert body["tools"][0]["strict"] is True


def test_deepseek_reasoning_content_on_every_assistant_turn_the_empty_one_too():
    line, _ = run("pa-ds-reasoner-tools", "openai-batch")
    written = [m for m in line["body"]["messages"] if m["role"] == "assistant"]
    source = [m for m in RECORDS["pa-ds-reasoner-tools"]["messages"] if m["role"] == "assistant"]
    assert [m["reasoning_content"] for m in written] == [m["reasoning_content"] for m in source]
    assert written[1]["reasoning_content"] == ""


@pytest.mark.parametrize("record_id", sorted(OWN_SINK))
@pytest.mark.parametrize("sink", SINKS)
def test_the_reasoning_balances_on_every_sink(record_id, sink):
    """Text of the source's reasoning = text written + text counted as discarded; on another
    provider's sink nothing of it is written and every piece is counted under its own name."""
    body, metrics = run(record_id, sink)
    source = source_reasoning(record_id)
    written = WRITTEN[sink](body)
    discarded = discarded_reasoning(metrics)
    assert text_chars(source) == text_chars(written) + sum(v["chars"] for v in discarded.values())
    if sink == OWN_SINK[record_id]:
        assert discarded == {}
    else:
        assert written == []
        # One field per piece; an empty one (DeepSeek's "" on a call turn) is not a discard.
        assert sum(v["fields"] for v in discarded.values()) == len([p for p in source if not _empty(p)])


@pytest.mark.parametrize("record_id", sorted(OWN_SINK))
def test_reasoning_drop_on_the_own_sink_counts_it_all(record_id):
    body, metrics = run(record_id, OWN_SINK[record_id], reasoning="drop")
    assert WRITTEN[OWN_SINK[record_id]](body) == []
    discarded = discarded_reasoning(metrics)
    assert sum(v["chars"] for v in discarded.values()) == text_chars(source_reasoning(record_id))


def test_a_redacted_block_is_opaque_and_counted_without_text():
    _, metrics = run("pa-br-redacted", "anthropic")
    assert metrics["discarded"] == {"reasoningContent": {"fields": 1, "chars": 0}}


IMAGE_URL = RECORDS["pa-an-image-url"]["messages"][0]["content"][1]["source"]["url"]
#: Where and how each sink that takes an image by URL writes the recorded one.
IMAGE_WRITTEN = {
    "anthropic": (lambda b: b["messages"][0]["content"][1], RECORDS["pa-an-image-url"]["messages"][0]["content"][1]),
    "openai-batch": (
        lambda b: b["body"]["messages"][0]["content"][1],
        {"type": "image_url", "image_url": {"url": IMAGE_URL}},
    ),
    "openai-responses": (
        lambda b: b["input"][0]["content"][1],
        {"type": "input_image", "image_url": IMAGE_URL, "detail": "auto"},
    ),
}


@pytest.mark.parametrize("sink", SINKS)
def test_a_recorded_image_url_is_kept_where_the_sink_can_carry_it(sink):
    """Anthropic, Chat Completions and Responses take an image by URL; Gemini (``fileData``
    needs a MIME type a URL does not give) and Converse (it fetches no URL) do not: there the
    placeholder stays, counted ``media_image`` with the URL's characters, so the media's text
    balances too (the URL's characters in = written + discarded)."""
    body, metrics = run("pa-an-image-url", sink)
    discarded = (metrics.get("discarded") or {}).get("media_image")
    if sink in IMAGE_WRITTEN:
        where, expected = IMAGE_WRITTEN[sink]
        assert where(body) == expected
        assert discarded is None
    else:
        assert IMAGE_URL not in json.dumps(body) and "[image]" in json.dumps(body)
        assert discarded == {"fields": 1, "chars": len(IMAGE_URL)}


def test_a_recorded_image_url_with_media_drop_is_counted_everywhere():
    body, metrics = run("pa-an-image-url", "anthropic", media="drop")
    assert IMAGE_URL not in json.dumps(body)
    assert metrics["discarded"] == {"media_image": {"fields": 1, "chars": len(IMAGE_URL)}}


#: The SDK check of each sink's body.
SDK = {
    "anthropic": ("anthropic", sdk_checks.anthropic_errors),
    "gemini": ("google.genai", sdk_checks.gemini_errors),
    "openai-batch": ("openai", lambda line: sdk_checks.openai_chat_errors(line["body"])),
    "openai-responses": ("openai", sdk_checks.responses_errors),
    "bedrock-converse": ("botocore", sdk_checks.bedrock_errors),
}


@pytest.mark.slow  # the first use of an SDK imports it (about a second or more)
@pytest.mark.parametrize("record_id", sorted(RECORDS))
@pytest.mark.parametrize("sink", SINKS)
def test_every_body_validates_with_the_providers_sdk(record_id, sink):
    module, errors = SDK[sink]
    sdk_checks.needs(module)
    body, _ = run(record_id, sink)
    assert errors(body) == []


def test_an_empty_tool_description_is_left_out_of_converse_counted():
    """Converse refuses a toolSpec description of length 0; pydantic-ai sends ``description: ''``."""
    body, metrics = run("pa-an-tool-with-thinking", "bedrock-converse")
    assert body["toolConfig"]["tools"] == [
        {
            "toolSpec": {
                "name": "get_user_country",
                "inputSchema": {"json": {"additionalProperties": False, "properties": {}, "type": "object"}},
            }
        }
    ]
    assert metrics["writer_report"] == {"discarded_tool_fields": {"description": 1}}


def test_responses_function_tools_carry_strict_and_always_have_it():
    """FunctionToolParam requires ``strict`` (and ``parameters``), each may be null: a source's
    flag is carried; a tool without one gets false (its source's default: Chat Completions and
    the other providers' tools are not strict), counted ``derived_tool_fields.strict``."""
    body, metrics = run("pa-ds-reasoner-tools", "openai-responses")
    assert [(t["name"], t["strict"]) for t in body["tools"]] == [
        ("load_capability", True),
        ("get_player_name", False),
        ("roll_dice", False),
        ("search_tools", True),
    ]
    assert metrics["writer_report"] == {"derived_tool_fields": {"strict": 2}}


@pytest.mark.parametrize(
    "tool,strict",
    [
        ({"type": "function", "name": "f", "parameters": {"type": "object"}}, None),  # the API's own default
        ({"type": "function", "name": "f", "parameters": {"type": "object"}, "strict": False}, False),
        ({"type": "function", "function": {"name": "f", "parameters": {"type": "object"}, "strict": None}}, None),
        ({"name": "f", "input_schema": {"type": "object"}}, False),
    ],
    ids=["responses-none", "responses-false", "chat-null", "anthropic"],
)
def test_responses_strict_of_each_source_shape(tool, strict):
    record = {"messages": [{"role": "user", "content": "hi"}], "tools": [tool]}
    outcome = process_record(
        RawRecord("x.jsonl", 0, json.dumps(record).encode()), Settings(sink="openai-responses", model="m")
    )
    assert outcome.record["tools"] == [
        {"type": "function", "name": "f", "parameters": {"type": "object"}, "strict": strict}
    ]


def test_responses_tool_without_parameters_gets_null():
    record = {
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "f"}}],
    }
    outcome = process_record(
        RawRecord("x.jsonl", 0, json.dumps(record).encode()), Settings(sink="openai-responses", model="m")
    )
    assert outcome.record["tools"] == [{"type": "function", "name": "f", "parameters": None, "strict": False}]
    assert outcome.metrics["writer_report"] == {"derived_tool_fields": {"parameters": 1, "strict": 1}}


def _anthropic_outcome(record: dict[str, Any], **settings: Any):
    raw = RawRecord("recorded.jsonl", 0, json.dumps(record).encode())
    return process_record(raw, Settings(sink="anthropic", **settings))


@pytest.mark.parametrize("own", [2048, None], ids=["record-max-tokens", "max-tokens-option"])
def test_a_thinking_budget_not_below_max_tokens_is_refused_by_name(own):
    """Anthropic refuses ``budget_tokens`` >= ``max_tokens``: the record is a dead letter that
    says so (the budget is the logged one; raising max_tokens would change the replay)."""
    record = {k: v for k, v in RECORDS["pa-an-tool-with-thinking"].items() if k != "max_tokens"}
    if own is not None:
        record["max_tokens"] = own
    letter = _anthropic_outcome(record, max_tokens=2048).dead_letter
    assert letter["reason"] == "unwritable"
    assert letter["detail"].startswith("anthropic: thinking_budget_too_large: thinking.budget_tokens 3000")
    assert "max_tokens 2048" in letter["detail"]
    assert ("the record's own" if own else "--max-tokens: pass a larger one") in letter["detail"]
    # One more token than the budget is enough.
    assert _anthropic_outcome(record | {"max_tokens": 3001}).dead_letter is None


def _without_config(*, ending_on_the_answer: bool) -> dict[str, Any]:
    """The recorded thinking-then-text body as a log that kept no ``thinking`` config; ending on
    the answer: without the user's turn after it."""
    record = {k: v for k, v in RECORDS["pa-an-thinking-then-text"].items() if k != "thinking"}
    if ending_on_the_answer:
        record["messages"] = record["messages"][:2]
    return record


def test_thinking_blocks_without_a_config_leave_a_final_assistant_turn_counted():
    """With no config the replay runs with thinking off. The API takes thinking blocks in an
    earlier turn then (it ignores them): they stay, as they were. It refuses them in the final
    assistant turn ("When thinking is disabled, an assistant message in the final position
    cannot contain thinking"): there they are left out, counted in the ledger under their own
    name, and the text stays."""
    earlier = _without_config(ending_on_the_answer=False)
    outcome = _anthropic_outcome(earlier)
    assert "thinking" not in outcome.record
    assert outcome.record["messages"][1]["content"] == earlier["messages"][1]["content"]
    assert "discarded" not in outcome.metrics and "writer_report" not in outcome.metrics

    source = _without_config(ending_on_the_answer=True)
    outcome = _anthropic_outcome(source)
    body = outcome.record
    assert "thinking" not in body
    assert body["messages"][-1]["content"] == source["messages"][1]["content"][1:]
    thinking = source["messages"][1]["content"][0]
    assert outcome.metrics["discarded"] == {"thinking": {"fields": 1, "chars": text_chars(thinking)}}
    assert outcome.metrics["writer_report"] == {"final_thinking_dropped": 1}


@pytest.mark.slow  # the first use of an SDK imports it (about a second or more)
def test_bodies_without_a_thinking_config_validate():
    sdk_checks.needs("anthropic")
    for ending in (False, True):
        assert (
            sdk_checks.anthropic_errors(_anthropic_outcome(_without_config(ending_on_the_answer=ending)).record) == []
        )


def test_bedrock_thinking_config_comes_back_with_its_reasoning():
    """Claude on Bedrock takes its ``thinking`` config in ``additionalModelRequestFields``: the
    recorded one comes back with the body (else the replay would run with thinking off)."""
    for record_id in ("pa-br-reasoning-text", "pa-br-redacted"):
        body, metrics = run(record_id, "bedrock-converse")
        assert body["additionalModelRequestFields"] == RECORDS[record_id]["additionalModelRequestFields"]
        assert "writer_report" not in metrics


#: A Converse call turn with Claude's reasoning before it, thinking on (hand-written, in the
#: recorded records' shape).
CONVERSE_CALL = {
    "modelId": "us.anthropic.claude-sonnet-4-20250514-v1:0",
    "additionalModelRequestFields": {"thinking": {"budget_tokens": 1024, "type": "enabled"}, "top_k": 5},
    "inferenceConfig": {"maxTokens": 4096},
    "toolConfig": {"tools": [{"toolSpec": {"name": "get_weather", "inputSchema": {"json": {"type": "object"}}}}]},
    "messages": [
        {"role": "user", "content": [{"text": "Weather in Lima?"}]},
        {
            "role": "assistant",
            "content": [
                {"reasoningContent": {"reasoningText": {"text": "Call the tool.", "signature": "EqwCCkgI"}}},
                {"toolUse": {"toolUseId": "tooluse_1", "name": "get_weather", "input": {"city": "Lima"}}},
            ],
        },
        {"role": "user", "content": [{"toolResult": {"toolUseId": "tooluse_1", "content": [{"text": "19C"}]}}]},
    ],
}


def _converse(record: dict[str, Any], **settings: Any):
    raw = RawRecord("x.jsonl", 0, json.dumps(record).encode())
    return process_record(raw, Settings(sink="bedrock-converse", **settings))


def test_bedrock_thinking_config_without_the_reasoning_before_the_call_is_dropped_counted():
    """As on Anthropic: thinking on, the turn that opens the last tool use must start with its
    reasoning; without it the ``thinking`` key is left out (the other fields stay), counted."""
    kept = _converse(CONVERSE_CALL)
    assert kept.record["additionalModelRequestFields"] == CONVERSE_CALL["additionalModelRequestFields"]
    dropped = _converse(CONVERSE_CALL, reasoning="drop")
    assert dropped.record["additionalModelRequestFields"] == {"top_k": 5}
    assert dropped.metrics["writer_report"] == {"thinking_config_dropped": 1}
    only_thinking = {
        **CONVERSE_CALL,
        "additionalModelRequestFields": {"thinking": {"type": "enabled", "budget_tokens": 1024}},
    }
    assert "additionalModelRequestFields" not in _converse(only_thinking, reasoning="drop").record


def test_bedrock_thinking_budget_not_below_max_tokens_is_refused_by_name():
    record = {**CONVERSE_CALL, "inferenceConfig": {"maxTokens": 1024}}
    letter = _converse(record).dead_letter
    assert letter["reason"] == "unwritable"
    assert letter["detail"].startswith("bedrock-converse: thinking_budget_too_large: thinking.budget_tokens 1024")
    assert "maxTokens 1024" in letter["detail"]


@pytest.mark.slow  # the first use of an SDK imports it (about a second or more)
def test_converse_bodies_with_model_fields_validate():
    sdk_checks.needs("botocore")
    for settings in ({}, {"reasoning": "drop"}):
        assert sdk_checks.bedrock_errors(_converse(CONVERSE_CALL, **settings).record) == []


def test_a_disabled_thinking_config_is_written_and_the_final_turn_left_without_its_blocks():
    source = _without_config(ending_on_the_answer=True) | {"thinking": {"type": "disabled"}}
    outcome = _anthropic_outcome(source)
    assert outcome.record["thinking"] == {"type": "disabled"}
    assert [b["type"] for b in outcome.record["messages"][-1]["content"]] == ["text"]
    assert outcome.metrics["writer_report"] == {"final_thinking_dropped": 1}
