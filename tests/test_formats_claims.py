"""Readers never claim what they cannot read.

``--format auto`` takes a list as a chat only when its entries look like messages; a list in a
shape no reader knows (Gemini ``contents`` / ``parts``, a ``text`` key) is an ``unknown_format``
dead letter that says why, not a conversation with its text erased. A reader named with
``--format`` refuses a record another reader recognizes, or whose messages it cannot read
(``format_error``), instead of emptying it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.cli.main import main
from transforms.formats import READERS, detect_reader
from transforms.record.inputs import RawRecord
from transforms.record.record_settings import Settings
from transforms.record.records import process_record

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "formats"

# A Gemini generateContent request body (the shape of real logged ones): text lives in
# ``parts``, calls in ``functionCall`` parts, results in ``functionResponse`` parts.
GEMINI_CONTENTS = [
    {"role": "user", "parts": [{"text": "What is the weather in Paris?"}]},
    {"role": "model", "parts": [{"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}]},
    {"role": "user", "parts": [{"functionResponse": {"name": "get_weather", "response": {"temp": 21}}}]},
    {"role": "model", "parts": [{"text": "It is 21 degrees in Paris."}]},
]
GEMINI_BODY = {"contents": GEMINI_CONTENTS, "generationConfig": {"temperature": 0.2}}

# Gemini Contents are the gemini reader's: read, their text kept, wherever they stand.
GEMINI_SHAPED = [
    pytest.param({"messages": GEMINI_CONTENTS}, id="gemini-parts-at-messages"),
    pytest.param(GEMINI_CONTENTS, id="gemini-parts-bare-list"),
    pytest.param(GEMINI_BODY, id="gemini-body"),
    pytest.param(
        {"messages": [{"role": "user", "content": "hi"}, {"role": "model", "parts": [{"text": "yo"}]}]}, id="mixed"
    ),
    pytest.param(
        {"system": "Be brief.", "messages": [{"role": "user", "parts": [{"text": "hi"}]}]},
        id="anthropic-system-and-parts",
    ),
]

FOREIGN = [
    pytest.param({"messages": [{"role": "user", "text": "hi"}]}, id="text-key"),
    pytest.param([{"role": "user", "text": "hi"}], id="text-key-bare"),
    # One foreign entry among real messages is enough: its text would go.
    pytest.param({"messages": [{"role": "user", "content": "hi"}, {"role": "user", "text": "yo"}]}, id="mixed"),
    # Provider signals do not make a foreign entry readable.
    pytest.param(
        {"messages": [{"role": "developer", "content": "x"}, {"role": "user", "text": "hi"}]},
        id="openai-signal-and-text-key",
    ),
    pytest.param(
        {"system": "Be brief.", "messages": [{"role": "user", "text": "hi"}]}, id="anthropic-system-and-text-key"
    ),
    pytest.param({"input": [{"role": "user", "parts": [{"text": "hi"}]}]}, id="responses-input-parts"),
    pytest.param({"custom_id": "r1", "body": {"messages": [{"role": "user", "text": "hi"}]}}, id="batch-line-text-key"),
]


def _process(record, **settings):
    return process_record(RawRecord("t.jsonl", 0, json.dumps(record).encode()), Settings(**settings))


@pytest.mark.parametrize("record", FOREIGN)
def test_auto_detection_claims_no_foreign_message_list(record):
    assert detect_reader(record, "messages") is None


@pytest.mark.parametrize("record", FOREIGN)
def test_a_foreign_message_list_is_an_unknown_format_dead_letter_that_says_why(record):
    outcome = _process(record)
    assert outcome.record is None
    letter = outcome.dead_letter
    assert letter["reason"] == "unknown_format"
    assert "none of content, tool_calls, tool_call_id" in letter["detail"]


def test_the_hint_names_the_keys_of_the_foreign_entry():
    detail = _process({"messages": [{"role": "user", "text": "hi"}]}).dead_letter["detail"]
    assert "'messages' entry 0" in detail and "role, text" in detail


@pytest.mark.parametrize("record", GEMINI_SHAPED)
def test_gemini_contents_are_read_by_the_gemini_reader_with_their_text(record):
    assert detect_reader(record, "messages").name == "gemini"
    outcome = _process(record)
    assert outcome.dead_letter is None
    messages = outcome.record["messages"]
    assert all(m["content"] or m.get("tool_calls") for m in messages), messages  # nothing emptied


@pytest.mark.parametrize(
    "record",
    [
        pytest.param({"messages": []}, id="empty"),
        pytest.param([{"role": "user"}, {"role": "assistant", "content": None}], id="role-only-entry"),
        pytest.param([None, 1, "text", {}], id="junk-the-core-counts"),
        pytest.param([{"content": "no role"}], id="role-less-message"),
        pytest.param(
            [
                {"role": "assistant", "content": "", "metadata": {"tool_calls": [{"tool_call_id": "c", "name": "f"}]}},
                {"role": "tool", "metadata": {"tool_call_id": "c"}, "timestamp": 1},
            ],
            id="stored-buffer-rows",
        ),
        pytest.param([{"role": "user", "content": "hi", "reasoning_content": "hmm", "name": "bob"}], id="extra-keys"),
    ],
)
def test_message_lists_stay_flat(record):
    assert detect_reader(record, "messages").name == "flat"


# --------------------------------------------------------------------------------------------
# Forced readers


def test_forced_anthropic_refuses_openai_function_call_logs_instead_of_erasing_the_calls():
    for line in (SAMPLES / "openai.jsonl").read_text().splitlines():
        record = json.loads(line)
        outcome = _process(record, input_format="anthropic")
        assert outcome.record is None, record["id"]
        assert outcome.dead_letter["reason"] == "format_error"
        detail = outcome.dead_letter["detail"]
        assert detail.startswith("anthropic: wrong_format: expected Anthropic Messages")
        assert "it looks like openai" in detail and "--format openai" in detail


def test_forced_anthropic_on_the_openai_sample_end_to_end(tmp_path):
    out = tmp_path / "out"
    # Every record refused: the run normalized none, so it fails (exit 1), outputs written.
    assert main(["--input", str(SAMPLES / "openai.jsonl"), "--output", str(out), "--format", "anthropic"]) == 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["records_out"] == 0
    assert summary["dead_letters_by_reason"]["format_error"] == summary["records_in"] == 18


@pytest.mark.parametrize("reader", ["openai", "anthropic", "sharegpt", "flat"])
def test_forced_readers_refuse_foreign_messages(reader):
    outcome = _process({"messages": GEMINI_CONTENTS}, input_format=reader)
    assert outcome.dead_letter["reason"] == "format_error"
    assert outcome.dead_letter["detail"].startswith(f"{reader}: ")
    assert "parts" in outcome.dead_letter["detail"]


def test_forced_responses_refuses_message_items_without_content():
    outcome = _process({"input": [{"role": "user", "parts": [{"text": "hi"}]}]}, input_format="openai-responses")
    assert outcome.dead_letter["reason"] == "format_error"
    assert "parts" in outcome.dead_letter["detail"]


@pytest.mark.parametrize("reader", ["openai", "anthropic", "sharegpt", "flat"])
def test_forced_readers_still_read_plain_chats(reader):
    record = {"id": "p", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
    outcome = _process(record, input_format=reader)
    assert outcome.dead_letter is None
    assert outcome.record["messages"] == record["messages"]


def test_forced_openai_refuses_an_anthropic_tool_use_record():
    record = {
        "messages": [
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "w", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "sunny"}]},
        ]
    }
    letter = _process(record, input_format="openai").dead_letter
    assert letter["reason"] == "format_error" and "it looks like anthropic" in letter["detail"]


def test_forced_flat_reads_provider_calls_the_core_reads():
    # The core reads OpenAI-shaped calls leniently: forced flat keeps reading them.
    record = {
        "messages": [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        ]
    }
    assert detect_reader(record, "messages") is READERS["openai"]
    outcome = _process(record, input_format="flat")
    assert outcome.dead_letter is None
    assert outcome.record["messages"][0]["tool_calls"] == [{"tool_call_id": "c1", "name": "f", "args": "{}"}]


def test_forced_flat_refuses_custom_tool_calls_the_core_cannot_read():
    # The core reads no {"type": "custom", "custom": {name, input}} call: under forced flat the
    # call became {"tool_call_id": "c1", "name": ""}, its name and input gone, nothing counted.
    record = {
        "messages": [
            {"role": "user", "content": "2**100?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "type": "custom", "custom": {"name": "python", "input": "print(2**100)"}}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "1267650600228229401496703205376"},
        ]
    }
    letter = _process(record, input_format="flat").dead_letter
    assert letter is not None and letter["reason"] == "format_error"
    assert "custom" in letter["detail"] and "--format openai" in letter["detail"]
    assert _process(record).record["messages"][1]["tool_calls"][0]["name"] == "python"


def test_a_record_with_both_a_message_list_and_sharegpt_conversations_loses_neither():
    # Auto gave it to sharegpt, which read 'conversations' and wrote the result over
    # 'messages': the record's own message list vanished, counted nowhere.
    record = {"messages": [{"role": "user", "content": "hi"}], "conversations": [{"from": "human", "value": "other"}]}
    for fmt in ("auto", "sharegpt"):
        out = _process(record, input_format=fmt).record
        assert out["messages"] == [{"role": "user", "content": "hi"}], fmt
        assert out["conversations"] == record["conversations"], fmt


@pytest.mark.parametrize(
    "turns",
    [
        [{"role": "user", "value": "hi"}, {"role": "assistant", "value": "yo"}],
        [{"from": "human", "content": "hi"}, {"from": "gpt", "content": "yo"}],
    ],
)
def test_forced_sharegpt_reads_turns_with_mixed_tag_spellings(turns):
    # LLaMA-Factory lets a dataset name its role and content tags: a turn tagged 'role' whose
    # text is under 'value' (or 'from' with 'content') was read as empty text.
    out = _process({"conversations": turns}, input_format="sharegpt").record
    assert [m["content"] for m in out["messages"]] == ["hi", "yo"]


@pytest.mark.parametrize(
    "other, fmt",
    [
        ({"contents": [{"role": "user", "parts": [{"text": "other"}]}]}, "gemini"),
        (
            {
                "input": [
                    {"role": "user", "content": "other"},
                    {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
                ]
            },
            "openai-responses",
        ),
    ],
)
def test_a_record_with_both_a_message_list_and_provider_items_loses_neither(other, fmt):
    # The Gemini and Responses readers read 'contents' / 'input' and the job wrote the result
    # over the record's own 'messages': that list vanished, counted nowhere.
    record = {"messages": [{"role": "user", "content": "hi"}], **other}
    out = _process(record).record
    assert out["messages"] == [{"role": "user", "content": "hi"}]
    assert {k: out[k] for k in other} == other
    forced = _process(record, input_format=fmt)
    if forced.record is not None:
        assert forced.record["messages"] == [{"role": "user", "content": "hi"}]
        assert {k: forced.record[k] for k in other} == other
    else:
        assert forced.dead_letter["reason"] == "format_error" and "messages" in forced.dead_letter["detail"]
