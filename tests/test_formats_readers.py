"""Readers: every fixture and the ToolBench corpus read into the flat shape, plus each mapping rule.

Fixtures are in ``tests/data/formats`` (hand-written from FORMATS.md, see its README) and
``tests/data/corpora`` (real ToolBench logs, see SOURCES.md there); nothing is read from the
shared folder at run time.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from transforms.core.normalize import INTERRUPTED_RESULT, normalize_conversation  # noqa: E402
from transforms.core.validate import check_sendable  # noqa: E402
from transforms.formats import READERS, FormatError  # noqa: E402

DATA = Path(__file__).parent / "data"
FORMATS = ("openai", "openai-responses", "anthropic", "sharegpt", "gemini", "bedrock-converse")
TOOLBENCH = sorted((DATA / "corpora" / "ToolBench").rglob("*.json"))


def load(fmt: str) -> list:
    with (DATA / "formats" / f"{fmt}.jsonl").open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def fixture(fmt: str, rid: str) -> dict:
    return next(r for r in load(fmt) if isinstance(r, dict) and r.get("id") == rid)


def read(fmt: str, record, field: str = "messages"):
    return READERS[fmt].read(record, field)


def flat(fmt: str, record) -> list:
    """The record read and normalized: what the job hands a writer."""
    return normalize_conversation(read(fmt, record).messages).messages


ALL = [(fmt, n, r) for fmt in FORMATS for n, r in enumerate(load(fmt))]
ALL_IDS = [f"{fmt}-{r.get('id', n) if isinstance(r, dict) else n}" for fmt, n, r in ALL]

# What MEM-5 does to each fixture after reading: (drops by reason, healed). Every other
# fixture reads clean: nothing dropped, nothing healed.
DEFECTS = {
    "oa-defects-trimmed-context": ({"orphan_result": 2, "duplicate_result": 1}, 2),
    "an-defects-compacted": ({"orphan_result": 1}, 1),
    "rs-defects": ({"orphan_result": 1}, 1),
    "sg-defects": ({"orphan_result": 1}, 1),
    "sg-parallel-batched-text": ({}, 1),
    "gm-defects-trimmed": ({"orphan_result": 1}, 1),
    "bc-defects-trimmed": ({"orphan_result": 1}, 1),
}


# --------------------------------------------------------------------------------------------
# Every fixture


@pytest.mark.parametrize("fmt,n,record", ALL, ids=ALL_IDS)
def test_fixture_reads_and_normalizes_as_expected(fmt, n, record):
    before = copy.deepcopy(record)
    conversation = read(fmt, record)
    assert record == before, "a reader must not mutate its input"
    assert isinstance(conversation.messages, list) and isinstance(conversation.fields, dict)
    result = normalize_conversation(conversation.messages)
    rid = record.get("id") if isinstance(record, dict) else None
    drops, healed = DEFECTS.get(rid, ({}, 0))
    assert (result.drops, result.healed) == (drops, healed)
    # Deterministic: the same record reads the same way twice.
    assert read(fmt, copy.deepcopy(record)) == conversation


@pytest.mark.parametrize("fmt,n,record", ALL, ids=ALL_IDS)
def test_fields_carry_everything_but_the_conversation(fmt, n, record):
    fields = read(fmt, record).fields
    if not isinstance(record, dict):
        assert fields == {}
        return
    if fmt == "bedrock-converse":
        # toolConfig is split into tools (converted) and its other keys (toolChoice).
        config = record.get("toolConfig", {})
        keys = [k for key in record if key != "system" for k in (config if key == "toolConfig" else [key])]
        assert list(fields) == keys
        record = {**{k: v for k, v in record.items() if k != "toolConfig"}, **config}
    consumed = {
        "openai": set(),  # the message key stays for the job to replace in place
        "anthropic": {"system"},
        "openai-responses": {"input", "instructions"},
        "sharegpt": {"conversations", "system"},
        "gemini": {"contents", "systemInstruction", "system_instruction"},
        "bedrock-converse": {"system"},
    }[fmt]
    assert sorted(fields) == sorted(k for k in record if k not in consumed)
    for key, value in fields.items():
        if key != "tools" or fmt not in ("sharegpt", "gemini", "bedrock-converse"):
            assert value == record[key]


# --------------------------------------------------------------------------------------------
# openai


def test_openai_calls_map_with_arguments_verbatim():
    record = fixture("openai", "oa-parallel-calls")
    messages = read("openai", record).messages
    calls = messages[2]["tool_calls"]
    assert calls == [
        {
            "tool_call_id": "call_9pWq1",
            "name": "search_direct_flight",
            "args": '{"origin":"JFK","destination":"SEA","date":"2024-05-20"}',
        },
        {
            "tool_call_id": "call_9pWq2",
            "name": "search_onestop_flight",
            "args": '{"origin":"JFK","destination":"SEA","date":"2024-05-20"}',
        },
    ]
    assert flat("openai", record)[3] == {"role": "tool", "content": "[]", "tool_call_id": "call_9pWq1"}


def test_openai_parts_developer_and_refusal():
    out = flat("openai", fixture("openai", "oa-parts-developer-refusal"))
    assert out == [
        {"role": "system", "content": "Answer in one sentence.\nNever identify people in photos."},
        {"role": "user", "content": "Who is this?\n[image]"},
        {"role": "assistant", "content": "I can't help identify people in images."},
        {"role": "user", "content": "Then describe the background."},
        {"role": "assistant", "content": "A harbour at dusk with sailing boats."},
    ]


def test_openai_refusal_only_replaces_missing_content():
    messages = [
        {"role": "assistant", "content": "Partial answer.", "refusal": "I can't."},
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "Not that."}]},
        {"role": "assistant", "content": None, "refusal": None},
    ]
    assert [m["content"] for m in read("openai", messages).messages] == ["Partial answer.", "Not that.", None]


def test_openai_audio_and_file_parts_become_placeholders():
    content = [
        {"type": "text", "text": "Transcribe and summarize."},
        {"type": "input_audio", "input_audio": {"data": "UklGR", "format": "wav"}},
        {"type": "file", "file": {"file_id": "file-1"}},
        {"type": "text", "text": ""},
    ]
    assert read("openai", [{"role": "user", "content": content}]).messages[0]["content"] == (
        "Transcribe and summarize.\n[audio]\n[file]"
    )


def test_openai_legacy_function_calls_get_positional_ids():
    out = flat("openai", fixture("openai", "oa-legacy-functions"))
    assert out[2]["tool_calls"] == [
        {"tool_call_id": "call_2", "name": "get_weather", "args": '{\n  "city": "Paris"\n}'}
    ]
    assert out[3] == {"role": "tool", "content": '{"temp_c": 18, "sky": "cloudy"}', "tool_call_id": "call_2"}
    assert out[6]["content"] == "Checking Lyon." and out[6]["tool_calls"][0]["tool_call_id"] == "call_6"
    assert out[7]["tool_call_id"] == "call_6"


def test_openai_synthesized_ids_never_collide_with_real_ones():
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "call_2", "type": "function", "function": {"name": "a", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "call_2", "content": "ok"},
        {"role": "assistant", "content": None, "function_call": {"name": "b", "arguments": "{}"}},
        {"role": "function", "name": "b", "content": "done"},
    ]
    # The legacy call moves to position 4 (call_4), an id the record already uses for a result.
    messages.insert(1, {"role": "tool", "tool_call_id": "call_4", "content": "stale"})
    out = read("openai", messages).messages
    assert out[4]["tool_calls"][0]["tool_call_id"] == "call_4_1"
    assert out[5]["tool_call_id"] == "call_4_1"


def test_openai_positional_pairing_prefers_the_same_name_and_stops_at_a_new_turn():
    messages = [
        {"role": "assistant", "content": None, "function_call": {"name": "a", "arguments": "{}"}},
        {"role": "assistant", "content": None, "function_call": {"name": "b", "arguments": "{}"}},
        {"role": "function", "name": "b", "content": "B"},
        {"role": "function", "name": "a", "content": "A"},
        {"role": "assistant", "content": None, "function_call": {"name": "c", "arguments": "{}"}},
        {"role": "user", "content": "never mind"},
        {"role": "function", "name": "c", "content": "late"},
    ]
    out = read("openai", messages).messages
    assert [out[2]["tool_call_id"], out[3]["tool_call_id"]] == ["call_1", "call_0"]
    assert out[6]["role"] == "tool" and out[6].get("tool_call_id") is None
    result = normalize_conversation(out)
    assert result.drops == {"orphan_result": 1} and result.healed == 1


def test_openai_hugging_face_calls_without_ids():
    out = flat("openai", fixture("openai", "oa-hf-no-ids"))
    assert [c["tool_call_id"] for c in out[1]["tool_calls"]] == ["call_1_0", "call_1_1"]
    assert out[1]["tool_calls"][0]["args"] == {"room": "living room", "state": "on"}
    assert [m["tool_call_id"] for m in out[2:4]] == ["call_1_0", "call_1_1"]


def test_openai_custom_tool_call_input_is_the_arguments():
    out = flat("openai", fixture("openai", "oa-custom-tool"))
    assert out[1]["tool_calls"] == [{"tool_call_id": "call_cx1", "name": "python", "args": "print(2**100)"}]


def test_openai_flat_calls_and_stored_rows_pass_through():
    messages = [
        {
            "role": "assistant",
            "content": "",
            "metadata": {"tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": "{}"}}]},
        },
        {"role": "tool", "content": "r", "metadata": {"tool_call_id": "c1"}},
        {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c2", "name": "g", "args": {"x": 1}}]},
        {"role": "tool", "content": "s", "tool_call_id": "c2"},
    ]
    assert flat("openai", messages) == normalize_conversation(messages).messages
    assert normalize_conversation(messages).dropped == 0


def test_openai_call_only_turns_read_as_empty_text_and_other_nulls_stay():
    function = {"name": "f", "arguments": "{}"}
    messages = [
        {"role": "user", "content": None},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": function}]},
        {"role": "tool", "tool_call_id": "c1", "content": None},
        {"role": "assistant", "tool_calls": [{"id": "c2", "type": "function", "function": function}]},
        {"role": "tool", "tool_call_id": "c2", "content": "ok"},
        {"role": "assistant", "content": None, "function_call": function},
        {"role": "function", "name": "f", "content": "ok"},
        {
            "role": "assistant",
            "content": None,
            "refusal": "No.",
            "tool_calls": [{"id": "c3", "type": "function", "function": function}],
        },
        {"role": "tool", "tool_call_id": "c3", "content": "ok"},
        {"role": "assistant", "content": None},
        {"role": "assistant", "content": None, "tool_calls": []},
    ]
    out = read("openai", messages).messages
    assert [m.get("content", "<missing>") for m in out] == [None, "", None, "", "ok", "", "ok", "No.", "ok", None, None]
    # What convnorm validate sees: null text is still reported, except on call-only turns.
    flagged = [v.index for v in check_sendable(out) if v.kind == "content_not_string"]
    assert flagged == [0, 2, 9, 10]
    # The core casts null to "" anyway: the mapping changes nothing after normalization.
    nulls = [{**m, "content": None} if m.get("content") == "" else m for m in out]
    assert normalize_conversation(out) == normalize_conversation(nulls)


@pytest.mark.parametrize(
    "record,reason",
    [
        ("text", "not_a_record"),
        ({"id": 1}, "missing_messages"),
        ({"messages": "hi"}, "messages_not_a_list"),
        ({"custom_id": "r1", "body": {"input": "hi"}}, "missing_messages"),
        ({"custom_id": "r1", "body": {"messages": "hi"}}, "messages_not_a_list"),
        (
            {"custom_id": "r1", "url": "/v1/chat/completions", "body": {"url": "x", "messages": []}},
            "batch_field_collision",
        ),
    ],
)
def test_openai_unreadable_records(record, reason):
    with pytest.raises(FormatError) as err:
        read("openai", record)
    assert err.value.reason == reason


BATCH_LINE = {
    "custom_id": "conv-7",
    "method": "POST",
    "url": "/v1/chat/completions",
    "body": {
        "model": "gpt-4.1-mini",
        "messages": [
            {"role": "user", "content": "Weather in Oslo?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "w", "arguments": '{"city":"Oslo"}'}}
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "4C"},
        ],
        "tools": [{"type": "function", "function": {"name": "w"}}],
        "temperature": 0,
    },
}


def test_openai_reads_a_batch_input_line():
    before = copy.deepcopy(BATCH_LINE)
    conversation = read("openai", BATCH_LINE)
    assert BATCH_LINE == before, "a reader must not mutate its input"
    assert conversation.messages == [
        {"role": "user", "content": "Weather in Oslo?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"tool_call_id": "call_1", "name": "w", "args": '{"city":"Oslo"}'}],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "4C"},
    ]
    # The line's fields, with the body's fields (message key included) where the body was.
    body = BATCH_LINE["body"]
    assert list(conversation.fields) == ["custom_id", "method", "url", "model", "messages", "tools", "temperature"]
    assert conversation.fields == {"custom_id": "conv-7", "method": "POST", "url": "/v1/chat/completions", **body}
    assert check_sendable(conversation.messages) == []
    # The configured message field is looked for in the body too.
    renamed = {**BATCH_LINE, "body": {"turns": body["messages"]}}
    assert read("openai", renamed, "turns").messages == conversation.messages
    # A record with its own message list is a record, whatever else it holds.
    own = {"custom_id": "x", "messages": [{"role": "user", "content": "a"}], "body": body}
    assert read("openai", own).messages == [{"role": "user", "content": "a"}]
    assert read("openai", own).fields == own


# --------------------------------------------------------------------------------------------
# openai-responses


def test_responses_minimal_example():
    assert flat("openai-responses", fixture("openai-responses", "rs-minimal")) == [
        {"role": "system", "content": "You are a booking agent."},
        {"role": "user", "content": "Flights JFK to SEA?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "tool_call_id": "call_1",
                    "name": "search_direct_flight",
                    "args": '{"origin":"JFK","destination":"SEA"}',
                }
            ],
        },
        {"role": "tool", "content": "[]", "tool_call_id": "call_1"},
        {"role": "assistant", "content": "No direct flights."},
    ]


def test_responses_calls_fold_into_the_preceding_assistant_message_across_reasoning():
    out = read("openai-responses", fixture("openai-responses", "rs-reasoning-parallel")).messages
    assert out[0] == {"role": "system", "content": "Use tools for live data."}
    assert out[2]["content"] == "Fetching both."
    # call_id is the join key; the item ids (fc_...) are not kept.
    assert [c["tool_call_id"] for c in out[2]["tool_calls"]] == ["call_T", "call_O"]
    assert out[3:5] == [
        {"role": "tool", "content": "4C, snow", "tool_call_id": "call_O"},
        {"role": "tool", "content": "22C, clear", "tool_call_id": "call_T"},
    ]
    assert len(out) == 6


def test_responses_calls_after_an_output_start_a_new_assistant_message():
    items = [
        {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "a", "output": "1"},
        {"type": "function_call", "call_id": "b", "name": "f", "arguments": "{}"},
        {"type": "message", "role": "assistant", "content": "text after calls"},
    ]
    out = read("openai-responses", items).messages
    assert [m["role"] for m in out] == ["assistant", "tool", "assistant", "assistant"]
    assert "tool_calls" not in out[3]


def test_responses_custom_tool_and_string_input():
    out = flat("openai-responses", fixture("openai-responses", "rs-custom-tool-image"))
    assert out[0]["content"] == "Count the cats, then print the count.\n[image]"
    assert out[1]["tool_calls"] == [{"tool_call_id": "call_py", "name": "python", "args": "print(3)"}]
    assert flat("openai-responses", fixture("openai-responses", "rs-string-input")) == [
        {"role": "system", "content": "Reply in French."},
        {"role": "user", "content": "Say hello."},
    ]


def test_responses_unknown_items_and_bad_records_are_format_errors():
    with pytest.raises(FormatError) as err:
        read("openai-responses", {"input": [{"type": "computer_call", "call_id": "c1", "status": "completed"}]})
    assert err.value.reason == "unsupported_item"
    with pytest.raises(FormatError) as err:
        read("openai-responses", {"messages": []})
    assert err.value.reason == "missing_input"
    with pytest.raises(FormatError) as err:
        read("openai-responses", {"input": 3})
    assert err.value.reason == "input_not_a_list"


# --------------------------------------------------------------------------------------------
# anthropic


def test_anthropic_minimal_example_keeps_input_as_an_object():
    assert flat("anthropic", fixture("anthropic", "an-minimal")) == [
        {"role": "system", "content": "You are a booking agent."},
        {"role": "user", "content": "Flights JFK to SEA?"},
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [
                {
                    "tool_call_id": "toolu_01",
                    "name": "search_direct_flight",
                    "args": {"origin": "JFK", "destination": "SEA"},
                }
            ],
        },
        {"role": "tool", "content": "[]", "tool_call_id": "toolu_01"},
        {"role": "assistant", "content": "No direct flights."},
    ]


def test_anthropic_results_split_error_flag_and_text_after_results():
    out = flat("anthropic", fixture("anthropic", "an-parallel-results-and-text"))
    assert out[0] == {"role": "system", "content": "You are a travel assistant.\nUse tools for live data."}
    assert out[3:6] == [
        {"role": "tool", "content": "22C, clear", "tool_call_id": "toolu_01A"},
        {"role": "tool", "content": "[error] upstream timeout", "tool_call_id": "toolu_01B"},
        {"role": "user", "content": "Also, is it a weekday there?"},
    ]


def test_anthropic_thinking_dropped_media_placeholder_document_text_kept():
    out = flat("anthropic", fixture("anthropic", "an-thinking"))
    assert out[1] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"tool_call_id": "toolu_02", "name": "get_weather", "args": {"city": "Lima"}}],
    }
    assert out[3] == {"role": "assistant", "content": "Lima: 19°C and overcast."}
    out = flat("anthropic", fixture("anthropic", "an-image-and-document"))
    assert [m["content"] for m in out if m["role"] == "user"] == [
        "[image]\nWhat does this chart show?",
        # Found: a document with a text source keeps its text (it was "[document]").
        "[document: Q3]\nmedia_type: text/plain\nQ3 report: revenue up 12%.\nDoes the report agree?",
    ]


def test_anthropic_mid_conversation_system_block_and_system_role():
    messages = [
        {"role": "user", "content": "hi"},
        {
            "role": "user",
            "content": [{"type": "mid_conv_system", "content": [{"type": "text", "text": "Now be formal."}]}],
        },
        {"role": "system", "content": [{"type": "text", "text": "Extra rule."}]},
        {"role": "assistant", "content": "Good day."},
    ]
    out = flat("anthropic", {"system": "Base.", "messages": messages})
    assert out == [
        {"role": "system", "content": "Base."},
        {"role": "system", "content": "Now be formal."},
        {"role": "system", "content": "Extra rule."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Good day."},
    ]


def test_anthropic_result_without_content_and_blank_system():
    out = flat("anthropic", {"system": "", "messages": load("anthropic")[-1]})
    assert out[2] == {"role": "tool", "content": "", "tool_call_id": "toolu_05"}
    assert out[1]["tool_calls"][0]["args"] == {}
    assert out[0]["role"] == "user"


# --------------------------------------------------------------------------------------------
# sharegpt


def test_sharegpt_glaive_single_call_system_and_tools_column():
    record = fixture("sharegpt", "sg-glaive-single")
    conversation = read("sharegpt", record)
    assert conversation.fields["tools"] == json.loads(record["tools"])
    assert "system" not in conversation.fields and "conversations" not in conversation.fields
    assert flat("sharegpt", record) == [
        {"role": "system", "content": "You are a helpful assistant with access to functions."},
        {"role": "user", "content": "I have chicken, bell peppers, and rice."},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "tool_call_id": "call_1",
                    "name": "search_recipes",
                    "args": {"ingredients": ["chicken", "bell peppers", "rice"]},
                }
            ],
        },
        {
            "role": "tool",
            "content": '{"recipes": [{"name": "Chicken and Bell Pepper Stir Fry"}, {"name": "Chicken and Rice Casserole"}]}',
            "tool_call_id": "call_1",
        },
        {
            "role": "assistant",
            "content": "I found two recipes: Chicken and Bell Pepper Stir Fry, and Chicken and Rice Casserole.",
        },
    ]


def test_sharegpt_parallel_calls_pair_one_observation_each():
    out = flat("sharegpt", fixture("sharegpt", "sg-glaive-parallel"))
    assert [c["tool_call_id"] for c in out[1]["tool_calls"]] == ["call_1_0", "call_1_1"]
    assert out[2:4] == [
        {"role": "tool", "content": '{"area": 15}', "tool_call_id": "call_1_0"},
        {"role": "tool", "content": '{"area": 50.24}', "tool_call_id": "call_1_1"},
    ]


def test_sharegpt_one_observation_for_several_calls():
    # A JSON list with one element per call is split ...
    out = flat("sharegpt", fixture("sharegpt", "sg-parallel-batched-list"))
    assert out[2:4] == [
        {"role": "tool", "content": '{"symbol":"AAPL","price":189.84}', "tool_call_id": "call_1_0"},
        {"role": "tool", "content": '{"symbol":"MSFT","price":415.5}', "tool_call_id": "call_1_1"},
    ]
    # ... anything else answers the first call only; MEM-5 heals the second.
    out = flat("sharegpt", fixture("sharegpt", "sg-parallel-batched-text"))
    assert out[2] == {"role": "tool", "content": INTERRUPTED_RESULT, "tool_call_id": "call_1_1"}
    assert out[3] == {"role": "tool", "content": "AAPL: 189.84; MSFT: 415.50", "tool_call_id": "call_1_0"}


def test_sharegpt_v1_blocks_reasoning_dropped_batched_results_split():
    record = fixture("sharegpt", "sg-v1-reason-tool-use")
    conversation = read("sharegpt", record)
    assert list(conversation.fields) == ["id", "messages", "tools"]  # the message key stays in place
    out = flat("sharegpt", record)
    assert out[0]["content"] == "You are a methodical and expert assistant. Reason before responding."
    assert out[2] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"tool_call_id": "call_2_0", "name": "circle_area", "args": {"radius": 1.5}},
            {"tool_call_id": "call_2_1", "name": "circle_area", "args": {"radius": 3}},
        ],
    }
    assert [m["content"] for m in out[3:5]] == [
        "{'area': 7.0686, 'radius': 1.5, 'unit':'square meters'}",
        "{'area': 28.2743, 'radius': 3, 'unit':'square meters'}",
    ]
    assert out[5] == {
        "role": "assistant",
        "content": "Radius 1.5 m gives about 7.07 m²; radius 3 m gives about 28.27 m².",
    }


def test_sharegpt_orphan_observation_and_trailing_call():
    record = fixture("sharegpt", "sg-defects")
    conversation = read("sharegpt", record)
    assert conversation.messages[2] == {"role": "tool", "content": '{"price": 880.1}', "tool_call_id": None}
    assert conversation.fields["tools"] == ""  # a blank tools column is carried as it is
    assert flat("sharegpt", record)[-1] == {"role": "tool", "content": INTERRUPTED_RESULT, "tool_call_id": "call_4"}


def test_sharegpt_openai_style_tags():
    out = flat("sharegpt", fixture("sharegpt", "sg-openai-tags"))
    assert out[1]["tool_calls"] == [
        {"tool_call_id": "call_1", "name": "convert_currency", "args": {"amount": 100, "from": "USD", "to": "EUR"}}
    ]
    assert out[2]["tool_call_id"] == "call_1"


def test_sharegpt_bad_function_call_and_unparseable_tools():
    record = {"conversations": [{"from": "human", "value": "hi"}, {"from": "function_call", "value": "search(q='x')"}]}
    with pytest.raises(FormatError) as err:
        read("sharegpt", record)
    assert err.value.reason == "bad_function_call"
    record = {"conversations": [{"from": "human", "value": "hi"}], "tools": "not json"}
    assert read("sharegpt", record).fields == {"tools": "not json"}
    with pytest.raises(FormatError) as err:
        read("sharegpt", {"id": "x"})
    assert err.value.reason == "missing_conversations"


def test_sharegpt_extra_observations_are_orphans_and_unknown_roles_kept():
    turns = [
        {"from": "function_call", "value": '{"name": "f", "arguments": {}}'},
        {"from": "observation", "value": "one"},
        {"from": "observation", "value": "two"},
        {"from": "moderator", "value": "ok"},
    ]
    out = read("sharegpt", turns).messages
    assert [m.get("tool_call_id") for m in out[1:3]] == ["call_0", None]
    assert out[3] == {"role": "moderator", "content": "ok"}


# --------------------------------------------------------------------------------------------
# ToolBench: real legacy OpenAI logs


def _chains():
    for path in TOOLBENCH:
        generation = json.loads(path.read_text(encoding="utf-8"))["answer_generation"]
        yield path, generation


def test_toolbench_copies_are_all_there():
    assert len(TOOLBENCH) == 6
    invalid = [p.name for p, g in _chains() if not g.get("valid_data")]
    assert invalid == ["69_ChatGPT_DFS_woFilter_w2.json"]


@pytest.mark.parametrize("path", TOOLBENCH, ids=[p.stem for p in TOOLBENCH])
def test_toolbench_every_prefix_reads_as_openai(path):
    from transforms.formats import detect_reader

    generation = json.loads(path.read_text(encoding="utf-8"))["answer_generation"]
    for prefix in generation.get("train_messages") or ():
        record = {"id": path.stem, "messages": prefix}
        assert detect_reader(record).name == "openai"
        messages = read("openai", record).messages
        result = normalize_conversation(messages)
        # Every function message answers the call right before it; only a trailing call
        # (the training target, usually Finish) is unanswered and healed.
        assert result.dropped == 0
        assert result.healed == (1 if prefix[-1].get("function_call") else 0)
        calls = [m for m in messages if m.get("tool_calls")]
        assert [c["tool_calls"][0]["tool_call_id"] for c in calls] == [
            f"call_{i}" for i, m in enumerate(prefix) if m.get("function_call")
        ]
        for i, m in enumerate(prefix):
            if m.get("function_call"):
                assert messages[i]["tool_calls"][0]["args"] == m["function_call"]["arguments"]
                assert messages[i]["tool_calls"][0]["name"] == m["function_call"]["name"]
