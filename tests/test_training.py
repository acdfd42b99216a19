"""A training set (transforms.dataset.training, transforms.repairs.message_extras): weights carried around the
MEM-5 core and written by the sinks that have them; turns after the last assistant message
trimmed, kept or refused; all of it counted."""

from __future__ import annotations

import json

import pytest

from transforms.core.jsontext import dumps_line
from transforms.core.normalize import Trace, normalize_conversation
from transforms.dataset.training import keeps_weights, trailing_policy, trailing_turns
from transforms.record.inputs import RawRecord
from transforms.record.record_settings import Settings, problems
from transforms.record.records import process_record
from transforms.repairs.message_extras import carry_around_core, lift, reattach
from transforms.repairs.profiles import PROFILES, normalize_with_profile
from transforms.totals.summary import finalize_run, partial

CALL = {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c1", "name": "f", "args": {}}]}


def run(messages, **settings):
    record = {"id": "r1", "messages": messages}
    return process_record(RawRecord("in.jsonl", 0, dumps_line(record)), Settings(**settings))


WEIGHTED = [
    {"role": "system", "content": "s"},
    {"role": "user", "content": "q1", "weight": 1},
    {"role": "assistant", "content": "bad answer", "weight": 0},
    {"role": "user", "content": "q2"},
    {"role": "assistant", "content": "good answer", "weight": 1},
]


def test_openai_finetune_keeps_weight_on_assistant_messages_and_counts_the_rest():
    outcome = run(WEIGHTED, sink="openai-finetune")
    messages = outcome.record["messages"]
    assert [m.get("weight") for m in messages] == [None, None, 0, None, 1]
    assert outcome.metrics["training"] == {"weights_kept": 3}
    # OpenAI weighs assistant messages only: the user's weight is left out, counted.
    assert outcome.metrics["writer_report"] == {"weight_not_on_assistant_left_out": 1}
    # Kept, so not in the ledger of what coercion discarded.
    assert "discarded" not in outcome.metrics


def test_a_flat_train_flag_is_a_weight():
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "train": False}]
    assert run(messages, sink="openai-finetune").record["messages"][1]["weight"] == 0
    both = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "weight": 1, "train": False}]
    assert run(both, sink="openai-finetune").record["messages"][1]["weight"] == 1  # weight wins


def test_a_value_that_is_not_a_weight_is_counted_and_left_out():
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "weight": 0.5}]
    outcome = run(messages, sink="openai-finetune")
    assert "weight" not in outcome.record["messages"][1]
    assert outcome.metrics["training"] == {"weights_invalid": 1}


def test_the_flat_sink_is_mem5_exactly_unless_weights_are_kept():
    plain = run(WEIGHTED)
    assert all("weight" not in m for m in plain.record["messages"])
    assert plain.metrics["discarded"]["weight"]["fields"] == 3  # the ledger, as before
    kept = run(WEIGHTED, weights="keep")
    assert [m.get("weight") for m in kept.record["messages"]] == [None, 1, 0, None, 1]
    # Beside the weights, the very messages MEM-5 gives.
    core = normalize_conversation(WEIGHTED).messages
    assert [{k: v for k, v in m.items() if k != "weight"} for m in kept.record["messages"]] == core


def test_sharegpt_has_no_weight_counts_them_not_written():
    outcome = run(WEIGHTED, sink="sharegpt")
    assert outcome.metrics["training"] == {"weights_not_written": 3}
    assert "weight" not in json.dumps(outcome.record)


def test_weights_drop_leaves_them_to_the_ledger():
    outcome = run(WEIGHTED, sink="openai-finetune", weights="drop")
    assert all("weight" not in m for m in outcome.record["messages"])
    assert "training" not in outcome.metrics or "weights_kept" not in outcome.metrics["training"]
    assert outcome.metrics["discarded"]["weight"]["fields"] == 3


def test_a_weight_goes_with_the_message_the_core_drops():
    messages = [
        {"role": "user", "content": "q"},
        {"role": "tool", "content": "orphan", "tool_call_id": "nope", "weight": 0},
        {"role": "assistant", "content": "a", "weight": 1},
    ]
    outcome = run(messages, sink="openai-finetune")
    assert outcome.metrics["drops"] == {"orphan_result": 1}
    assert outcome.metrics["training"] == {"weights_kept": 1, "weights_lost_with_message": 1}
    assert outcome.record["messages"][-1]["weight"] == 1


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_carrying_around_the_core_changes_nothing_the_core_gives(profile):
    # Moved systems, re-keyed ids, healed calls: the keys follow their message, and without
    # them the result is the core's, exactly.
    messages = [
        {"role": "user", "content": "u", "mark": "u"},
        {"role": "system", "content": "s", "mark": "s"},
        {**CALL, "mark": "call"},
        {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c1", "name": "g"}], "mark": "again"},
        {"role": "tool", "content": "r", "tool_call_id": "c1", "mark": "result"},
    ]
    core = normalize_with_profile(messages, profile)
    carried = carry_around_core(messages, profile, ("mark",), core)
    assert carried is not None
    assert [{k: v for k, v in m.items() if k != "mark"} for m in carried.result.messages] == core.messages
    assert carried.result._replace(messages=[]) == core._replace(messages=[])
    trace = Trace()
    normalize_with_profile(messages, profile, trace)
    for message, origin in zip(carried.result.messages, trace.origins):
        assert message.get("mark") == (None if origin is None else messages[origin]["mark"])
    assert carry_around_core([{"role": "user", "content": "u"}], profile, ("mark",), core) is None


def test_lift_and_reattach_copy_never_change_the_input():
    messages = [{"role": "user", "content": "u", "weight": 1}]
    lifted = lift(messages, ("weight",))
    out, back = reattach([{"role": "user", "content": "u"}], [0], lifted)
    assert out == messages and back == 1 and out[0] is not messages[0]
    assert lift("not a list", ("weight",)) == {} and lift([1, None], ("weight",)) == {}


ENDS_ON_RESULT = [
    {"role": "user", "content": "Run it."},
    CALL,
    {"role": "tool", "content": "ran", "tool_call_id": "c1"},
    {"role": "user", "content": "thanks"},
]


@pytest.mark.parametrize("sink", ["openai-finetune", "sharegpt"])
def test_training_sinks_trim_what_follows_the_last_assistant_message(sink):
    outcome = run(ENDS_ON_RESULT, sink=sink)
    assert outcome.dead_letter is None
    assert outcome.metrics["training"] == {"trailing_trimmed": 2, "conversations_trimmed": 1}
    # The core's count is the core's: the trimmed messages are counted apart.
    assert outcome.metrics["messages_out"] == 4
    if sink == "sharegpt":
        assert [t["from"] for t in outcome.record["conversations"]] == ["human", "function_call"]
    else:
        assert [m["role"] for m in outcome.record["messages"]] == ["user", "assistant"]


def test_trailing_keep_writes_them_and_refuse_dead_letters_them():
    assert run(ENDS_ON_RESULT, sink="openai-finetune", trailing="keep").record["messages"][-1]["content"] == "thanks"
    letter = run(ENDS_ON_RESULT, sink="sharegpt", trailing="refuse").dead_letter
    assert letter["reason"] == "unwritable"
    assert letter["detail"].startswith("sharegpt: trailing_turns: 2 message(s) after the last assistant message")
    # Under --trailing keep, ShareGPT refuses such a record (LLaMA-Factory's turn order).
    assert "turn_order" in run(ENDS_ON_RESULT, sink="sharegpt", trailing="keep").dead_letter["detail"]


def test_other_sinks_keep_trailing_turns_by_default_and_may_trim():
    assert len(run(ENDS_ON_RESULT).record["messages"]) == 4
    assert len(run(ENDS_ON_RESULT, trailing="trim").record["messages"]) == 2


def test_trailing_turns_and_defaults():
    assert trailing_turns([]) == 0
    assert trailing_turns([{"role": "user", "content": "q"}]) == 0  # no assistant: left as is
    assert trailing_turns(ENDS_ON_RESULT) == 2
    assert trailing_policy("sharegpt", "auto") == "trim" and trailing_policy("flat", "auto") == "keep"
    assert trailing_policy("flat", "refuse") == "refuse"
    assert keeps_weights("openai-finetune", "auto") and not keeps_weights("flat", "auto")
    assert keeps_weights("flat", "keep") and not keeps_weights("hf", "drop")


def test_bad_values_and_a_sink_without_weights_are_refused_before_the_run():
    assert any("unknown weights" in p for p in problems(Settings(weights="maybe")))
    assert any("unknown trailing" in p for p in problems(Settings(trailing="cut")))
    found = problems(Settings(sink="anthropic", weights="keep"))
    assert any("has no per-message weight" in p for p in found)


def test_the_summary_lists_the_training_counts():
    metrics = [run(ENDS_ON_RESULT, sink="openai-finetune").metrics, run(WEIGHTED, sink="openai-finetune").metrics]
    doc = finalize_run(partial(2, metrics, []), Settings(sink="openai-finetune"))
    assert doc["training"] == {
        "weights_kept": 3,
        "weights_not_written": 0,
        "weights_invalid": 0,
        "weights_lost_with_message": 0,
        "trailing_trimmed": 2,
        "conversations_trimmed": 1,
        "split_key_missing": 0,
    }
    # Not a training run: no section (the summary as it was).
    assert "training" not in finalize_run(partial(0, [], []), Settings())


def test_sharegpt_refuses_at_most_one_percent_of_the_bundled_samples_writable_records(tmp_path):
    from pathlib import Path

    from transforms.record.records import normalize_batch

    sample = Path(__file__).resolve().parent.parent / "samples" / "conversations.jsonl"
    raws, offset = [], 0
    for line in sample.read_bytes().splitlines(keepends=True):
        if line.strip():
            raws.append(RawRecord(sample.name, offset, line))
        offset += len(line)
    result = normalize_batch(raws, Settings(sink="sharegpt"), taken={})
    refused = [d for d in result.dead_letters if d["reason"] == "unwritable"]
    writable = len(result.records) + len(refused)  # read and normalized: the sink's to write
    assert len(refused) <= writable // 100
    before = normalize_batch(raws, Settings(sink="sharegpt", trailing="keep"), taken={})
    assert len([d for d in before.dead_letters if d["reason"] == "unwritable"]) > writable // 2


TWO_TURNS = [
    {"role": "system", "content": "s"},
    {"role": "user", "content": "q1"},
    {"role": "assistant", "content": "a1"},
    {"role": "user", "content": "q2"},
    {"role": "assistant", "content": "a2"},
]


def test_examples_each_is_one_example_per_assistant_message_trained_on_it_alone():
    outcome = run(TWO_TURNS, sink="openai-finetune", examples="each")
    first, (second_record, second_metrics, second_line) = outcome.record, outcome.more[0]
    assert [m.get("weight") for m in first["messages"]] == [None, None, 1]
    assert [m.get("weight") for m in second_record["messages"]] == [None, None, 0, None, 1]
    assert json.loads(second_line) == second_record
    assert outcome.metrics["example"] == {"k": 1, "n": 2, "of": "r1"}
    assert outcome.metrics["training"]["examples_written"] == 2
    # The conversation's counts stay with its first example: a run counts each conversation once.
    assert second_metrics == {
        "id": "r1#2",
        "source": "in.jsonl",
        "position": 0,
        "dropped": 0,
        "drops": {},
        "healed": 0,
        "messages_in": 0,
        "messages_out": 0,
        "example": {"k": 2, "n": 2, "of": "r1"},
    }


def test_examples_each_on_a_sink_without_weights_and_with_ids():
    outcome = run(TWO_TURNS, sink="sharegpt", examples="each")
    assert [t["from"] for t in outcome.record["conversations"]] == ["human", "gpt"]
    assert outcome.more[0][0]["id"] == "r1#2" and len(outcome.more[0][0]["conversations"]) == 4


def test_examples_last_weighs_the_earlier_turns_zero_and_an_example_marked_weight_0_is_skipped():
    last = run(TWO_TURNS, sink="hf", examples="last")
    assert [m["weight"] for m in last.record["messages"]] == [None, None, 0, None, 1] and not last.more
    marked = [*TWO_TURNS[:4], {"role": "assistant", "content": "a2", "weight": 0}]
    each = run(marked, sink="openai-finetune", examples="each")
    assert not each.more and each.metrics["training"]["examples_skipped_weight_0"] == 1
    letter = run([TWO_TURNS[1], {"role": "assistant", "content": "a", "weight": 0}], sink="hf", examples="each")
    assert "no_trainable_example" in letter.dead_letter["detail"]


def test_examples_options_are_checked():
    assert any("training examples are for" in p for p in problems(Settings(examples="each")))
    assert any("writes none" in p for p in problems(Settings(sink="sharegpt", examples="last")))
    assert any("unknown examples" in p for p in problems(Settings(sink="hf", examples="all")))
    assert problems(Settings(sink="hf", examples="last")) == []
    assert any(
        "prefixes of each other" in p for p in problems(Settings(sink="sharegpt", examples="each", dedupe="prefix"))
    )
    assert problems(Settings(sink="hf", examples="each", dedupe="prefix")) == []


def test_a_run_of_examples_is_accounted_for():
    from transforms.record.records import normalize_batch

    raws = [RawRecord("s", n, dumps_line({"id": f"c{n}", "messages": TWO_TURNS})) for n in range(3)]
    result = normalize_batch(raws, Settings(sink="openai-finetune", examples="each"))
    assert len(result.records) == len(result.metrics) == len(result.lines) == 6
    doc = finalize_run(partial(3, result.metrics, []), Settings(sink="openai-finetune", examples="each"))
    assert doc["records_out"] == 6 and doc["accounted"]
    assert doc["examples"] == {"mode": "each", "written": 6, "beyond_first": 3, "skipped_weight_0": 0}
    assert doc["messages_in"] == 15  # each conversation counted once
