"""The sharegpt writer (LLaMA-Factory / Axolotl training records): every fixture of every
reader written and checked against LLaMA-Factory's rules, clean ShareGPT records round-trip
exactly, and each documented choice."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import provider_shapes as shapes  # noqa: E402

from transforms.core.normalize import normalize_conversation  # noqa: E402
from transforms.formats import READERS, WRITERS, FormatError, WriteContext  # noqa: E402

DATA = Path(__file__).parent / "data" / "formats"
FORMATS = ("openai", "openai-responses", "anthropic", "sharegpt", "gemini")
# Records LLaMA-Factory would drop (turn order), or whose tools it cannot hold.
# A trailing healed result is left out and user text after results joins their
# observation: the defect fixtures that were refused for those are written.
REFUSED = {
    "oa-custom-tool": "unconvertible_tool",
    "rs-string-input": "turn_order",  # a single human turn
}
# Clean ShareGPT records (LLaMA-Factory's own layout, nothing to repair): written back equal.
ROUND_TRIP = ("sg-fastchat", "sg-glaive-single", "sg-parallel-batched-list")


def load(fmt: str) -> list:
    with (DATA / f"{fmt}.jsonl").open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def normalized(fmt: str, record) -> dict:
    conversation = READERS[fmt].read(record, "messages")
    out = dict(conversation.fields)
    out["messages"] = normalize_conversation(conversation.messages).messages
    out.setdefault("id", "bare")
    return out


def write(record: dict):
    ctx = WriteContext(record["id"])
    return WRITERS["sharegpt"].write(record, ctx), ctx.report


ALL = [(fmt, r) for fmt in FORMATS for r in load(fmt)]


@pytest.mark.parametrize(
    "fmt,record", ALL, ids=[f"{f}-{r.get('id', n) if isinstance(r, dict) else n}" for n, (f, r) in enumerate(ALL)]
)
def test_every_fixture_is_written_valid_or_refused_with_its_reason(fmt, record):
    flat = normalized(fmt, record)
    if flat["id"] in REFUSED:
        with pytest.raises(FormatError) as err:
            write(flat)
        assert err.value.reason == REFUSED[flat["id"]]
        return
    out, report = write(flat)
    assert shapes.sharegpt_training_errors(out) == []
    # Read back: the same conversation, but for the ids (ShareGPT has none) and what the
    # writer reports it changed (calls whose synthetic result it left out are healed again).
    back = normalize_conversation(READERS["sharegpt"].read(out, "messages").messages)
    assert (back.dropped, back.healed) == (0, report.get("interrupted_results_left_out", 0))
    assert len([m for m in back.messages if m["role"] == "tool"]) == len(
        [m for m in flat["messages"] if m["role"] == "tool"]
    )


@pytest.mark.parametrize("rid", ROUND_TRIP)
def test_clean_sharegpt_records_round_trip_exactly(rid):
    record = next(r for r in load("sharegpt") if r.get("id") == rid)
    out, report = write(normalized("sharegpt", record))
    assert out == record
    assert report == {}


def test_results_are_written_in_call_order_so_positions_pair_them_back():
    record = next(r for r in load("gemini") if r.get("id") == "gm-parallel-disco")
    out, _ = write(normalized("gemini", record))
    tags = [t["from"] for t in out["conversations"]]
    assert tags == ["human", "function_call", "observation", "gpt"]
    calls = json.loads(out["conversations"][1]["value"])
    results = json.loads(out["conversations"][2]["value"])
    assert [c["name"] for c in calls] == ["power_disco_ball", "start_music", "dim_lights"]
    assert results == [
        {"result": {"status": "Disco ball powered on"}},
        {"result": {"music_type": "energetic", "volume": "loud"}},
        {"result": {"brightness": 0.5}},
    ]
    # The Gemini declarations become LLaMA-Factory's tools string.
    assert [t["name"] for t in json.loads(out["tools"])] == ["power_disco_ball", "start_music", "dim_lights"]


def test_text_beside_calls_merged_turns_and_string_arguments_are_counted():
    flat = {
        "id": "r",
        "messages": normalize_conversation(
            [
                {"role": "user", "content": "a"},
                {"role": "user", "content": "b"},
                {
                    "role": "assistant",
                    "content": "Let me look.",
                    "tool_calls": [
                        {"tool_call_id": "c1", "name": "f", "args": '{"x": 1}'},
                        {"tool_call_id": "c2", "name": "g", "args": "free text"},
                    ],
                },
                {"role": "tool", "content": "1", "tool_call_id": "c1"},
                {"role": "tool", "content": "two", "tool_call_id": "c2"},
                {"role": "assistant", "content": "done"},
            ]
        ).messages,
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {}, "strict": None}}],
    }
    out, report = write(flat)
    assert out["conversations"] == [
        {"from": "human", "value": "a\nb"},
        {
            "from": "function_call",
            "value": '[{"name": "f", "arguments": {"x": 1}}, {"name": "g", "arguments": "free text"}]',
        },
        {"from": "observation", "value": '["1", "two"]'},
        {"from": "gpt", "value": "done"},
    ]
    assert json.loads(out["tools"]) == [{"name": "f", "parameters": {}}]
    assert report == {
        "merged_turns": 1,
        "text_beside_calls_dropped": 1,
        "arguments_kept_as_text": 1,
        "discarded_tool_fields": {"strict": 1},
    }


# --------------------------------------------------------------------------------------------
# A record is refused only when no lossless rendering exists

CALL = {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c1", "name": "f", "args": {}}]}


def flat_record(messages: list) -> dict:
    return {"id": "r", "messages": normalize_conversation(messages).messages}


def test_user_text_right_after_results_joins_their_observation_turn():
    out, report = write(
        flat_record(
            [
                {"role": "user", "content": "Run it."},
                CALL,
                {"role": "tool", "content": "ran", "tool_call_id": "c1"},
                {"role": "user", "content": "And now?"},
                {"role": "assistant", "content": "Done."},
            ]
        )
    )
    assert out["conversations"] == [
        {"from": "human", "value": "Run it."},
        {"from": "function_call", "value": '{"name": "f", "arguments": {}}'},
        {"from": "observation", "value": "ran\nAnd now?"},
        {"from": "gpt", "value": "Done."},
    ]
    assert report == {"user_text_merged_into_observation": 1}
    assert shapes.sharegpt_training_errors(out) == []


def test_a_trailing_call_is_written_without_mem5s_synthetic_result():
    # SFT data whose target is the call: MEM-5 heals the trailing call with an "interrupted"
    # result, which no input held; leaving it out loses nothing, and reading back heals it again.
    flat = flat_record([{"role": "user", "content": "Run it."}, CALL])
    out, report = write(flat)
    assert [t["from"] for t in out["conversations"]] == ["human", "function_call"]
    assert report == {"interrupted_results_left_out": 1}
    back = normalize_conversation(READERS["sharegpt"].read(out, "messages").messages)
    assert [m["role"] for m in back.messages] == ["user", "assistant", "tool"] and back.healed == 1


@pytest.mark.parametrize(
    "messages",
    [
        # A conversation that ends on a real result: LLaMA-Factory needs an even turn count,
        # and the result is data.
        [{"role": "user", "content": "Run it."}, CALL, {"role": "tool", "content": "ran", "tool_call_id": "c1"}],
    ],
    ids=["ends-on-a-real-result"],
)
def test_what_has_no_lossless_rendering_is_still_refused(messages):
    with pytest.raises(FormatError) as err:
        write(flat_record(messages))
    assert err.value.reason == "turn_order"


def test_assistant_text_right_before_a_message_of_calls_is_text_beside_calls_dropped_and_counted():
    # It was refused (turn_order): a gpt turn before a function_call turn. It is the text beside
    # calls of one assistant turn, split over two messages: dropped, counted, as in one message.
    messages = [
        {"role": "user", "content": "Run it."},
        {"role": "assistant", "content": "Sure."},
        CALL,
        {"role": "tool", "content": "ran", "tool_call_id": "c1"},
        {"role": "assistant", "content": "ok"},
    ]
    ctx = WriteContext("r1")
    out = WRITERS["sharegpt"].write(flat_record(messages), ctx)
    assert [t["from"] for t in out["conversations"]] == ["human", "function_call", "observation", "gpt"]
    assert ctx.report == {"text_beside_calls_dropped": 1}


def test_a_training_example_may_end_on_its_calls_unanswered():
    # --trailing trim leaves out the results after the last assistant message.
    out, _ = write({"id": "r", "messages": [{"role": "user", "content": "Run it."}, CALL]})
    assert [t["from"] for t in out["conversations"]] == ["human", "function_call"]
    with pytest.raises(FormatError) as err:  # anywhere but last, a call needs its result
        write({"id": "r", "messages": [{"role": "user", "content": "Run it."}, CALL, {"role": "user", "content": "?"}]})
    assert err.value.reason == "unanswered_call"


def test_user_text_after_several_results_joins_the_last_one_and_they_still_pair():
    calls = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"tool_call_id": "c1", "name": "f", "args": {}},
            {"tool_call_id": "c2", "name": "g", "args": {}},
        ],
    }
    flat = flat_record(
        [
            {"role": "user", "content": "Both."},
            calls,
            {"role": "tool", "content": "one", "tool_call_id": "c1"},
            {"role": "tool", "content": "two", "tool_call_id": "c2"},
            {"role": "user", "content": "Thanks."},
            {"role": "assistant", "content": "Welcome."},
        ]
    )
    out, report = write(flat)
    assert out["conversations"][2] == {"from": "observation", "value": '["one", "two\\nThanks."]'}
    assert report == {"user_text_merged_into_observation": 1}
    back = normalize_conversation(READERS["sharegpt"].read(out, "messages").messages)
    assert [m["content"] for m in back.messages if m["role"] == "tool"] == ["one", "two\nThanks."]
    assert (back.dropped, back.healed) == (0, 0)
