"""The assembly of call logs into conversations (transforms.calllogs.assemble), as plain code."""

from __future__ import annotations

import itertools
import tracemalloc

import pytest

from transforms.calllogs.assemble import GroupState, NoCalls, assemble, fill_tool_results
from transforms.calllogs.calls import Call, ToolResult

SYSTEM = {"role": "system", "content": "Be brief."}
USER = {"role": "user", "content": "Weather in Paris?"}
CALL = {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c1", "name": "weather", "args": "{}"}]}
RESULT = {"role": "tool", "content": "rainy", "tool_call_id": "c1"}
ANSWER = {"role": "assistant", "content": "Rainy."}


def call(start: int, history: list, output: list, call_id: str = "", group: str = "g", **more) -> Call:
    return Call("test", group, start, call_id or f"span{start}", history, output, **more)


def state_of(*pieces, source: str = "f.jsonl") -> GroupState:
    state = GroupState()
    for position, piece in enumerate(pieces):
        state.add(source, position, piece)
    return state


def test_a_growing_history_collapses_into_the_last_call_with_its_output():
    first = call(1, [SYSTEM, USER], [CALL])
    second = call(2, [SYSTEM, USER, CALL, RESULT], [ANSWER])
    made = assemble("test", "g", state_of(first, second))
    assert len(made) == 1
    (conversation,) = made
    assert conversation.record == {"id": "g", "messages": [SYSTEM, USER, CALL, RESULT, ANSWER]}
    assert conversation.assembly["collapsed"] == 1
    assert [c["call"] for c in conversation.assembly["calls"]] == ["span1", "span2"]
    # The conversation stands where its latest call was read.
    assert (conversation.source, conversation.position) == ("f.jsonl", 1)
    assert "branch" not in conversation.assembly


def test_the_order_pieces_arrive_in_and_how_states_merge_change_nothing():
    pieces = [
        call(1, [USER], [CALL]),
        call(2, [USER, CALL, RESULT], [ANSWER]),
        call(3, [USER, CALL, RESULT], [{"role": "assistant", "content": "Retry."}]),
        call(4, [{"role": "user", "content": "Other."}], [ANSWER]),
    ]
    expected = None
    for order in itertools.permutations(range(len(pieces))):
        for split in range(len(pieces) + 1):
            left, right = GroupState(), GroupState()
            for n, index in enumerate(order):
                (left if n < split else right).add("f", index, pieces[index])
            made = assemble("test", "g", left.merge(right))
            got = [(c.record, c.assembly, c.source, c.position) for c in made]
            if expected is None:
                expected = got
            assert got == expected


def test_a_history_that_is_not_a_prefix_becomes_a_branch_counted_never_merged():
    base = call(1, [USER], [CALL])
    ok = call(2, [USER, CALL, RESULT], [ANSWER])
    retry = call(5, [USER, CALL, RESULT], [{"role": "assistant", "content": "Rainy, 57F."}])
    made = assemble("test", "g", state_of(base, ok, retry))
    assert [c.record["id"] for c in made] == ["g", "g#branch1"]
    # The conversation is the one holding the latest call; the shared prefix goes with it.
    assert made[0].record["messages"][-1]["content"] == "Rainy, 57F."
    assert [c["call"] for c in made[0].assembly["calls"]] == ["span1", "span5"]
    assert made[1].assembly["calls"][0]["call"] == "span2"
    assert (made[0].assembly["branch"], made[1].assembly["branch"], made[1].assembly["branches"]) == (0, 1, 1)
    # Every call is in exactly one conversation's account.
    calls = [c["call"] for m in made for c in m.assembly["calls"]]
    assert sorted(calls) == ["span1", "span2", "span5"]


def test_identical_calls_collapse_and_ties_are_broken_by_call_id():
    a = call(1, [USER], [ANSWER], call_id="b")
    b = call(1, [USER], [ANSWER], call_id="a")
    made = assemble("test", "g", state_of(a, b))
    assert len(made) == 1 and made[0].assembly["collapsed"] == 1
    assert [c["call"] for c in made[0].assembly["calls"]] == ["a", "b"]


def test_tool_results_recorded_apart_fill_in_where_the_history_lacks_them():
    only = call(1, [USER], [CALL])
    result = ToolResult("test", "g", 2, "tool-span", "c1", "weather", "rainy")
    (made,) = assemble("test", "g", state_of(only, result))
    assert made.record["messages"] == [USER, CALL, RESULT]
    assert made.assembly["tool_results_filled"][0]["call"] == "tool-span"
    assert "tool_results_unused" not in made.assembly


def test_a_tool_result_the_history_already_has_is_listed_not_added():
    full = call(2, [USER, CALL, RESULT], [ANSWER])
    result = ToolResult("test", "g", 1, "tool-span", "c1", "weather", "rainy")
    (made,) = assemble("test", "g", state_of(full, result))
    assert made.record["messages"] == [USER, CALL, RESULT, ANSWER]
    assert [u["call"] for u in made.assembly["tool_results_unused"]] == ["tool-span"]


def test_filled_results_go_after_those_present_in_call_order():
    two = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"tool_call_id": "a", "name": "f"}, {"tool_call_id": "b", "name": "f"}],
    }
    present = {"role": "tool", "content": "A", "tool_call_id": "a"}
    results = {"b": (None, ToolResult("t", "g", 0, "s", "b", "f", "B"))}
    messages, filled = fill_tool_results([USER, two, present, ANSWER], results)  # type: ignore[arg-type]
    assert messages == [USER, two, present, {"role": "tool", "content": "B", "tool_call_id": "b"}, ANSWER]
    assert [call_id for _, call_id in filled] == ["b"]


def test_a_group_of_tool_results_without_a_call_is_a_dead_letter_not_a_conversation():
    result = ToolResult("test", "g", 3, "tool-span", "c1", "weather", "rainy")
    made = assemble("test", "g", state_of(result))
    assert isinstance(made, NoCalls)
    assert "no LLM call" in made.detail and made.position == 0


def test_tools_and_model_come_from_the_latest_call_that_names_them():
    tools = [{"type": "function", "function": {"name": "weather"}}]
    first = call(1, [USER], [CALL], tools=tools, model="m-1")
    second = call(2, [USER, CALL, RESULT], [ANSWER], model="m-2")
    (made,) = assemble("test", "g", state_of(first, second), tools_field="tools")
    assert made.record["tools"] == tools and made.record["model"] == "m-2"


def test_a_long_trace_holds_one_history_not_one_per_call():
    # 400 calls, each history one turn longer: the state keeps the last history only.
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " + "x" * 200} for i in range(800)]
    tracemalloc.start()
    state = GroupState()
    for n in range(400):
        history = [dict(m) for m in turns[: 2 * n + 1]]  # a fresh copy, as each record's parse gives
        state.add("f", n, call(n, history, [dict(turns[2 * n + 1])]))
        del history
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    one_history = sum(len(m["content"]) + 200 for m in turns)  # the messages and their dicts, roughly
    assert held < 4 * one_history  # 400 histories would be ~200 times one
    (made,) = assemble("test", "g", state)
    assert len(made.record["messages"]) == 800 and made.assembly["collapsed"] == 399


def _langfuse_row(trace: str, n: int, history: list, output: dict) -> bytes:
    import json

    row = {
        "id": f"obs-{trace}-{n}",
        "trace_id": trace,
        "type": "GENERATION",
        "parent_observation_id": "",
        "start_time": f"2026-11-30 10:00:{n:02d}.000000",
        "input": json.dumps(history),
        "output": json.dumps(output),
    }
    return json.dumps(row).encode()


#: 2026-11-30 10:00:00 UTC, when ``_langfuse_row``'s calls start.
CALLS_START = 1_796_032_800


@pytest.mark.slow
def test_on_a_stream_a_conversation_closes_after_a_gap_and_a_later_call_reopens_it():
    """The assembling composite on an unbounded input: each group's conversation is emitted once
    the watermark is past its latest call by the gap, and again, whole, when a call comes after."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.testing.test_pipeline import TestPipeline
    from apache_beam.testing.test_stream import TestStream
    from apache_beam.testing.util import assert_that, equal_to

    from pipeline.graph.conversation_batches import NormalizeConversationBatches
    from transforms.conversations import BatchRawRecords, Unbatch
    from transforms.record.inputs import RawRecord
    from transforms.record.record_settings import Settings

    first = _langfuse_row("t", 1, [USER], CALL)
    second = _langfuse_row("t", 2, [USER, CALL, RESULT], ANSWER)
    late = _langfuse_row("t", 3, [USER, CALL, RESULT, ANSWER, {"role": "user", "content": "And Rome?"}], ANSWER)
    stream = (
        TestStream()
        .add_elements([RawRecord("q", 0, first), RawRecord("q", 1, second)])
        .advance_watermark_to(CALLS_START + 60)  # past the gap after the latest call: it closes
        .add_elements([RawRecord("q", 2, late)])
        .advance_watermark_to_infinity()
    )
    options = PipelineOptions(["--runner=BundleBasedDirectRunner", "--streaming"])
    with TestPipeline(options=options) as p:
        out = (
            p
            | stream
            | BatchRawRecords(max_batch_size=8)
            | NormalizeConversationBatches(Settings(), session_gap_s=30, reopen_s=300)
        )
        emitted = (
            out.drops
            | Unbatch()
            | beam.Map(lambda m: (m["id"], m["messages_out"], len(m["assembly"]["calls"]), m["assembly"]["pane"]))
        )
        assert_that(emitted, equal_to([("t", 4, 2, 0), ("t", 6, 3, 1)]))


def test_what_reading_left_out_is_the_conversations_ledger_through_the_record_path():
    """A call's ``discarded`` (its reader's ledger) reaches the assembled conversation's drops
    line, as a conversation reader's would: nothing left out goes uncounted."""
    from transforms.record.assembled_calls import conversations_of
    from transforms.record.record_settings import Settings
    from transforms.record.records import normalize_batch

    ledger = {"refusal": [1, 12]}
    state = state_of(call(1, [USER], [ANSWER], discarded=ledger))
    ((_, made),) = list(conversations_of((("test", "g"), state), Settings(), 1))
    result = normalize_batch([made.raw], Settings())
    (metrics,) = result.metrics
    assert metrics["discarded"]["refusal"] == {"fields": 1, "chars": 12}
    assert metrics["assembly"]["group"] == "g"
