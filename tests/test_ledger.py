"""The ledger of what coercion discards: counted apart from MEM-5's drops.

Rule 1 keeps only the flat keys; the normalized output is unchanged by the ledger. What goes
(non-empty fields by key, reasoning blocks and items by type) is counted per conversation in
``drops/`` and per run in ``summary.json`` and the printed table, with the characters of text
it held.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.cli.main import main
from transforms.core.ledger import coercion_discards, report, text_chars
from transforms.core.normalize import coerce_messages
from transforms.formats import READERS, reasoning
from transforms.record.inputs import RawRecord
from transforms.record.record_settings import Settings
from transforms.record.records import process_record
from transforms.totals.summary import MAX_LEDGER_NAMES, OTHER_NAMES, finalize, format_table, merge, partial


def ledger(messages) -> dict:
    return report(coercion_discards(messages))


def test_keys_rule_1_does_not_keep_are_counted_with_their_text():
    messages = [
        {"role": "user", "content": "hi", "name": "bob", "weight": 0, "timestamp": 1755000000},
        {"role": "assistant", "content": "4", "reasoning_content": "2+2 is 4", "reasoning": "think"},
        {"role": "user", "parts": [{"text": "hello"}, {"text": "again"}], "content": ""},
        {"role": "user", "content": "x", "tool_calls": [{"id": "c"}], "tool_call_id": "c9"},
    ]
    assert ledger(messages) == {
        "name": {"fields": 1, "chars": 3},
        "parts": {"fields": 1, "chars": 10},
        "reasoning": {"fields": 1, "chars": 5},
        "reasoning_content": {"fields": 1, "chars": 8},
        "timestamp": {"fields": 1, "chars": 0},
        "tool_call_id": {"fields": 1, "chars": 2},
        "tool_calls": {"fields": 1, "chars": 0},  # the call's id is not text
        "weight": {"fields": 1, "chars": 0},
    }


def test_what_rule_1_keeps_or_drops_whole_is_not_in_the_ledger():
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c", "name": "f"}]},
        {"role": "assistant", "content": "", "tool_calls": []},
        {"role": "tool", "content": "ok", "tool_call_id": "c"},
        {"role": "user", "content": "", "name": "", "weight": None, "extra": [], "more": {}},  # empty values
        {"content": "no role", "name": "bob"},  # dropped whole: a message drop (no_role)
        "junk",  # dropped whole: not_an_object
    ]
    assert ledger(messages) == {}


def test_stored_buffer_metadata_counts_only_what_the_core_does_not_read():
    rows = [
        {"role": "assistant", "content": "", "metadata": {"tool_calls": [{"tool_call_id": "c", "name": "f"}]}},
        {"role": "tool", "content": "ok", "metadata": {"tool_call_id": "c"}},
    ]
    assert ledger(rows) == {}
    rows[1]["metadata"]["source"] = "buffer-7"
    assert ledger(rows) == {"metadata": {"fields": 1, "chars": 8}}
    # A user message reads nothing from metadata: all of it goes.
    assert ledger([{"role": "user", "content": "", "metadata": {"tool_call_id": "c"}}]) == {
        "metadata": {"fields": 1, "chars": 1}
    }


def test_text_chars_counts_strings_but_not_keys_tags_ids_or_opaque_payloads():
    block = {"type": "thinking", "thinking": "abc", "signature": "x" * 100}
    assert text_chars(block) == 3
    item = {"id": "rs_1", "summary": [{"type": "summary_text", "text": "ab"}], "encrypted_content": "zz"}
    assert text_chars([item]) == 2
    assert text_chars(12) == 0


def test_an_opaque_payload_is_no_text_also_when_it_is_the_discarded_field_itself():
    # Found: a message's own encrypted_content / signature was counted as text.
    messages = [
        {"role": "assistant", "content": "4", "encrypted_content": "gAAAAB" * 20, "signature": "c2ln" * 10},
        {"role": "user", "content": "ok", "thoughtSignature": "abc", "reasoning_content": "why"},
    ]
    assert ledger(messages) == {
        "encrypted_content": {"fields": 1, "chars": 0},
        "reasoning_content": {"fields": 1, "chars": 3},
        "signature": {"fields": 1, "chars": 0},
        "thoughtSignature": {"fields": 1, "chars": 0},
    }


KEYS = st.sampled_from(["role", "content", "tool_calls", "tool_call_id", "name", "text", "parts", "weight", "x"])
VALUES = st.one_of(
    st.none(), st.just(""), st.just([]), st.text(max_size=5), st.integers(), st.lists(st.text(max_size=3), max_size=2)
)
ENTRY = st.one_of(
    st.dictionaries(KEYS, VALUES, max_size=5).map(lambda d: d),
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "tool", "system", "moderator", ""])},
        optional={k: VALUES for k in ("content", "tool_calls", "tool_call_id", "name", "parts")},
    ),
    st.sampled_from([None, 1, "text"]),
)


def _empty(value) -> bool:
    return value is None or (isinstance(value, (str, list, dict)) and not value)


@given(st.lists(ENTRY, max_size=6))
def test_the_ledger_names_exactly_the_non_empty_keys_coercion_removed(messages):
    # The oracle: rule 1 itself. Every entry it keeps maps to one coerced message, in order;
    # the ledger holds the non-empty keys of the entry its message lacks.
    coerced, _ = coerce_messages(messages)
    kept = [m for m in messages if isinstance(m, dict) and isinstance(m.get("role"), str) and m["role"].strip()]
    assert len(kept) == len(coerced)
    expected: dict = {}
    for entry, message in zip(kept, coerced):
        for key, value in entry.items():
            if key not in message and not _empty(value):
                expected[key] = expected.get(key, 0) + 1
    assert {k: v["fields"] for k, v in ledger(messages).items()} == expected


# --------------------------------------------------------------------------------------------
# Readers: reasoning blocks and items they leave out


def _discarded(reader: str, record) -> dict:
    """The ledger as the job keeps it for a sink that takes no reasoning: what coercion
    discards, and the reasoning the reader carried (left out, counted under its own names)."""
    conversation = READERS[reader].read(record, "messages")
    messages, carried = reasoning.lift(conversation.messages)
    ledger = coercion_discards(messages, conversation.discarded)
    reasoning.note_all(carried, ledger)
    return report(ledger)


def test_anthropic_thinking_blocks_are_in_the_ledger():
    record = {
        "messages": [
            {"role": "user", "content": "2+2?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "two and two", "signature": "sig"},
                    {"type": "redacted_thinking", "data": "opaque"},
                    {"type": "text", "text": "4"},
                ],
            },
        ]
    }
    assert _discarded("anthropic", record) == {
        "redacted_thinking": {"fields": 1, "chars": 0},
        "thinking": {"fields": 1, "chars": 11},
    }


def test_responses_reasoning_items_are_in_the_ledger():
    record = {
        "input": [
            {"role": "user", "content": "hi"},
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [{"type": "summary_text", "text": "greet back"}],
                "encrypted_content": "gAAA",
            },
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hello"}]},
        ]
    }
    assert _discarded("openai-responses", record) == {"reasoning": {"fields": 1, "chars": 10}}


def test_sharegpt_v1_reasoning_blocks_are_in_the_ledger():
    record = {
        "messages": [
            {"role": "user", "content": [{"type": "text", "value": "hi"}]},
            {
                "role": "assistant",
                "content": [{"type": "reasoning", "value": "be nice"}, {"type": "text", "value": "yo"}],
            },
        ]
    }
    assert _discarded("sharegpt", record) == {"reasoning": {"fields": 1, "chars": 7}}


def test_gemini_thought_parts_are_in_the_ledger():
    # A part flagged thought: true is the model's reasoning: the reader leaves it out, so the
    # ledger must count it (its text, not the opaque thoughtSignature), in turns and in the
    # systemInstruction alike.
    record = {
        "systemInstruction": {"parts": [{"text": "be brief"}, {"text": "sys thought", "thought": True}]},
        "contents": [
            {"role": "user", "parts": [{"text": "2+2?"}]},
            {
                "role": "model",
                "parts": [
                    {"text": "two and two", "thought": True, "thoughtSignature": "c2lnbmF0dXJl"},
                    {"text": "4"},
                ],
            },
        ],
    }
    assert _discarded("gemini", record) == {"thought": {"fields": 2, "chars": 22}}


@pytest.mark.parametrize(
    "reader, record",
    [
        (
            "sharegpt",
            {
                "conversations": [
                    {"from": "human", "value": "hi", "weight": 0},
                    {"from": "gpt", "value": "yo", "reasoning_content": "RRRR"},
                    {"from": "function_call", "value": '{"name": "f", "arguments": {}}'},
                    {"from": "observation", "value": "ok", "reasoning": "RRRR"},
                ]
            },
        ),
        (
            "gemini",
            {
                "contents": [
                    {"role": "user", "parts": [{"text": "hi"}], "weight": 0},
                    {"role": "model", "parts": [{"text": "yo"}], "reasoning_content": "RRRR"},
                ]
            },
        ),
        (
            "openai-responses",
            {
                "input": [
                    {"role": "user", "content": "hi", "weight": 0, "id": "msg_1", "status": "completed"},
                    {
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": "yo"}],
                        "reasoning_content": "RRRR",
                    },
                    {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}", "status": "completed"},
                    {"type": "function_call_output", "call_id": "c1", "output": "ok", "reasoning": "RRRR"},
                ]
            },
        ),
    ],
)
def test_keys_of_provider_messages_a_reader_does_not_read_are_in_the_ledger(reader, record):
    # These readers build new flat messages: a key they do not read never reached rule 1, so
    # it went uncounted, while the same key on an OpenAI or Anthropic message is counted.
    got = _discarded(reader, record)
    assert got.get("weight") == {"fields": 1, "chars": 0}
    assert got.get("reasoning_content") == {"fields": 1, "chars": 4}
    if reader != "gemini":
        assert got.get("reasoning") == {"fields": 1, "chars": 4}
    assert not {"id", "status", "type"} & set(got)  # item metadata, not content


def test_keys_of_an_anthropic_message_holding_only_tool_results_are_in_the_ledger():
    # Such a message becomes tool messages only: its other keys never reached rule 1.
    record = {
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
                "reasoning_content": "RRRR",
            },
        ]
    }
    assert _discarded("anthropic", record) == {"reasoning_content": {"fields": 1, "chars": 4}}


def test_openai_reasoning_keys_and_a_refusal_beside_content_are_in_the_ledger():
    record = {
        "messages": [
            {"role": "developer", "content": "be safe"},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "partial answer", "refusal": "I can't", "reasoning_content": "why"},
            {"role": "assistant", "content": None, "refusal": "no"},  # the refusal IS the content: kept
        ]
    }
    assert _discarded("openai", record) == {
        "reasoning_content": {"fields": 1, "chars": 3},
        "refusal": {"fields": 1, "chars": 7},
    }


# --------------------------------------------------------------------------------------------
# The job: drops/, summary.json and the table


def test_drops_record_and_summary_carry_the_ledger_apart_from_dropped(tmp_path, capsys):
    records = [
        {
            "id": "a",
            "messages": [
                {"role": "user", "content": "2+2?"},
                {"role": "assistant", "content": "4", "reasoning_content": "two and two"},
            ],
        },
        {"id": "b", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]},
        {
            "id": "c",
            "system": "Be brief.",
            "messages": [
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "hmm", "signature": "s"},
                        {"type": "text", "text": "yo"},
                    ],
                },
            ],
        },
    ]
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "out"
    assert main(["--input", str(source), "--output", str(out)]) == 0
    drops = {m["id"]: m for p in sorted((out / "drops").glob("part-*.jsonl")) for m in map(json.loads, p.open())}
    assert drops["a"]["discarded"] == {"reasoning_content": {"fields": 1, "chars": 11}}
    assert "discarded" not in drops["b"]
    assert drops["c"]["discarded"] == {"thinking": {"fields": 1, "chars": 3}}
    assert all(m["dropped"] == 0 for m in drops.values())  # not message drops
    summary = json.loads((out / "summary.json").read_text())
    assert summary["dropped"] == 0
    assert summary["discarded_fields"] == 2 and summary["discarded_chars"] == 14
    assert summary["discarded_by_name"] == {
        "reasoning_content": {"fields": 1, "chars": 11},
        "thinking": {"fields": 1, "chars": 3},
    }
    assert summary["conversations_with_discards"] == 2
    printed = capsys.readouterr().out
    assert "fields discarded by coercion" in printed and "reasoning_content" in printed


def test_the_normalized_output_does_not_change_with_the_ledger():
    record = {"id": "a", "messages": [{"role": "user", "content": "hi", "reasoning": "r", "parts": ["x"]}]}
    outcome = process_record(RawRecord("t", 0, json.dumps(record).encode()), Settings())
    assert outcome.record == {"id": "a", "messages": [{"role": "user", "content": "hi"}]}
    assert outcome.metrics["dropped"] == 0 and outcome.metrics["drops"] == {}


def test_a_run_lists_the_most_frequent_names_and_sums_the_rest_whatever_the_merge_order():
    metrics = [
        {
            "messages_in": 1,
            "messages_out": 1,
            "dropped": 0,
            "drops": {},
            "healed": 0,
            "discarded": {f"k{i:03d}": {"fields": 1 + (i < 3), "chars": i}},
        }
        for i in range(MAX_LEDGER_NAMES + 5)
    ]
    forward = finalize(merge(partial(0, metrics[:20]), partial(0, metrics[20:])))
    backward = finalize(merge(partial(0, metrics[20:]), partial(0, metrics[:20])))
    assert forward == backward
    names = forward["discarded_by_name"]
    assert len(names) == MAX_LEDGER_NAMES + 1 and OTHER_NAMES in names
    assert {"k000", "k001", "k002"} <= set(names)
    assert forward["discarded_fields"] == sum(v["fields"] for v in names.values())
    assert "fields discarded by coercion" in format_table(forward)
