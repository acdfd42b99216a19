"""The shared tool-block rule and fresh-id allocator (transforms.core.tool_blocks)."""

from __future__ import annotations

from transforms.core.tool_blocks import first_free, tool_blocks
from transforms.core.validate import check_sendable
from transforms.formats import FormatError
from transforms.formats._common import check_results_adjacent
from transforms.repairs.profiles import reattach_results


def turn(*ids):
    return {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": i, "name": "f"} for i in ids]}


def result(call_id):
    return {"role": "tool", "content": "r", "tool_call_id": call_id}


USER = {"role": "user", "content": "q"}


def test_a_block_is_the_run_of_tool_messages_right_after_a_turn():
    messages = [USER, turn("a", "b"), result("a"), result("b"), USER, result("a"), turn("c"), result("c")]
    assert tool_blocks(messages) == [-1, -1, 1, 1, -1, -1, -1, 6]


def test_leading_results_and_a_turn_without_calls_own_no_block():
    empty = {"role": "assistant", "content": "", "tool_calls": []}
    messages = [result("a"), empty, result("a"), turn("a"), turn("b"), result("b")]
    # A turn directly after a turn starts its own block: the first turn's block is empty.
    assert tool_blocks(messages) == [-1, -1, -1, -1, -1, 4]


def test_entries_that_are_not_messages_neither_end_nor_join_a_block():
    messages = [turn("a"), "junk", {"content": "no role"}, {"role": "  "}, result("a")]
    assert tool_blocks(messages) == [-1, -1, -1, -1, 0]
    assert tool_blocks([]) == []


def test_checker_writers_and_repair_agree_on_a_displaced_result():
    messages = [USER, turn("a"), USER, result("a")]
    assert [v.kind for v in check_sendable(messages)] == ["result_not_adjacent"]
    try:
        check_results_adjacent(messages)
        raise AssertionError("the writer check accepted a displaced result")
    except FormatError as error:
        assert error.reason == "result_not_adjacent"
    repaired, moved = reattach_results(messages)
    assert moved == 1 and tool_blocks(repaired) == [-1, -1, 1, -1]
    assert check_sendable(repaired) == []
    check_results_adjacent(repaired)


def test_first_free_takes_the_smallest_free_counter_from_start():
    assert first_free("c1", "~", 2, set()) == ("c1~2", 2)
    assert first_free("c1", "~", 2, {"c1~2", "c1~3", "c1~5"}) == ("c1~4", 4)
    assert first_free("call_3", "_", 1, {"call_3", "call_3_1"}) == ("call_3_2", 2)
    assert first_free("x", "~", 7, {"x~2"}) == ("x~7", 7)
