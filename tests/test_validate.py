"""Unit tests for the strict sendability check: each violation kind with a worked example.

Every example states the exact violations expected (kind, index, id), so that a check that
reports too much fails as surely as one that reports too little.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # CI installs the project editable; a bare venv may not have it
    sys.path.insert(0, str(ROOT))

from transforms.core.normalize import normalize_conversation  # noqa: E402
from transforms.core.validate import (  # noqa: E402
    VIOLATION_KINDS,
    Violation,
    check_sendable,
    count_by_kind,
    is_sendable,
)
from transforms.repairs.profiles import normalize_with_profile  # noqa: E402

VECTORS = [
    json.loads(line)
    for line in (Path(__file__).parent / "data" / "spec" / "vectors.jsonl").read_text(encoding="utf-8").splitlines()
    if line.strip()
]


def system(text="s"):
    return {"role": "system", "content": text}


def user(text="q"):
    return {"role": "user", "content": text}


def turn(*ids, text=""):
    return {"role": "assistant", "content": text, "tool_calls": [{"tool_call_id": i, "name": "f"} for i in ids]}


def result(call_id, text="r"):
    return {"role": "tool", "content": text, "tool_call_id": call_id}


def found(messages):
    """(kind, index, tool_call_id) of every violation, after checking the check is pure."""
    before = copy.deepcopy(messages)
    violations = check_sendable(messages)
    assert messages == before, "the check must never change data"
    for v in violations:
        assert isinstance(v, Violation) and v.kind in VIOLATION_KINDS and isinstance(v.detail, str) and v.detail
    return [(v.kind, v.index, v.tool_call_id) for v in violations]


# --------------------------------------------------------------------------------------------
# The API


def test_kinds_are_closed_and_in_canonical_order():
    assert VIOLATION_KINDS == (
        "not_flat",
        "content_not_string",
        "system_not_first",
        "leading_tool",
        "unusable_call_id",
        "invalid_tool_name",
        "redeclared_id",
        "unanswered_call",
        "result_not_adjacent",
        "orphan_result",
        "duplicate_result",
        "leading_assistant",
    )
    assert tuple(f.name for f in dataclasses.fields(Violation)) == ("kind", "index", "tool_call_id", "detail")


def test_a_healthy_conversation_has_no_violation():
    messages = [
        system(),
        user(),
        turn("c1", "c2"),
        result("c1"),
        result("c2"),
        {"role": "assistant", "content": "done"},
        {"role": "developer", "content": "roles are not validated"},
    ]
    assert found(messages) == []
    assert is_sendable(messages)
    assert found([]) == []


def test_results_of_one_block_may_come_in_any_order():
    assert found([user(), turn("c1", "c2"), result("c2"), result("c1")]) == []


def test_count_by_kind_follows_the_canonical_order():
    messages = [result("x"), system(), user(), turn("c1"), turn("c1")]
    violations = check_sendable(messages)
    counts = count_by_kind(violations)
    assert counts == {
        "system_not_first": 1,
        "leading_tool": 1,
        "redeclared_id": 1,
        "unanswered_call": 1,
        "orphan_result": 1,
    }
    assert list(counts) == [k for k in VIOLATION_KINDS if k in counts]
    assert count_by_kind([]) == {}
    assert not is_sendable(messages)


def test_check_is_picklable_for_beam():
    assert pickle.loads(pickle.dumps(check_sendable)) is check_sendable
    violations = check_sendable([result("x")])
    assert pickle.loads(pickle.dumps(violations)) == violations


# --------------------------------------------------------------------------------------------
# One kind at a time


@pytest.mark.parametrize("value", [None, "text", 3, {"role": "user"}, (user(),)])
def test_not_a_list_is_one_not_flat_violation_for_the_list(value):
    assert found(value) == [("not_flat", None, None)]


def test_not_flat_entries_are_reported_and_otherwise_transparent():
    messages = [user(), turn("c1"), "junk", None, {"content": "no role"}, {"role": "  ", "content": ""}, result("c1")]
    # The junk between the call and its result is reported; the pairing is still judged as if
    # it were gone (removing it is the whole fix).
    assert found(messages) == [
        ("not_flat", 2, None),
        ("not_flat", 3, None),
        ("not_flat", 4, None),
        ("not_flat", 5, None),
    ]


def test_not_flat_pairing_keys():
    messages = [
        user(),
        {"role": "user", "content": "", "tool_calls": [{"tool_call_id": "u1", "name": "f"}]},
        {"role": "assistant", "content": "", "tool_call_id": "c9"},
        {"role": "assistant", "content": "x", "tool_calls": []},
        {"role": "assistant", "content": "x", "tool_calls": "c1"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": ["junk", {"tool_call_id": "c1", "name": 5}, {"tool_call_id": "c2"}],
        },
        result("c1"),
        result("c2"),
    ]
    assert found(messages) == [
        ("not_flat", 1, None),
        ("not_flat", 2, None),
        ("not_flat", 3, None),
        ("not_flat", 4, None),
        ("not_flat", 5, None),  # call 0 is not an object
        ("not_flat", 5, "c1"),  # call 1 has a non-string name
        ("not_flat", 5, "c2"),  # call 2 has no name
    ]


def test_content_not_string():
    messages = [
        {"role": "user"},
        {"role": "user", "content": None},
        {"role": "user", "content": ["part"]},
        {"role": "assistant", "content": None, "tool_calls": [{"tool_call_id": "c1", "name": "f"}]},
        result("c1"),
    ]
    assert found(messages) == [("content_not_string", i, None) for i in range(4)]


def test_system_not_first():
    assert found(
        [system("a"), system("b"), user(), system("c"), {"role": "assistant", "content": "x"}, system("d")]
    ) == [
        ("system_not_first", 3, None),
        ("system_not_first", 5, None),
    ]
    # "developer" and "System" are other roles (MEM-5 does not move them either).
    assert found([user(), {"role": "developer", "content": "d"}, {"role": "System", "content": "S"}]) == []


def test_leading_tool():
    # A tool message first after the system group, answering a call that comes later.
    messages = [system(), result("c1", "early"), turn("c1")]
    assert found(messages) == [("leading_tool", 1, "c1"), ("result_not_adjacent", 1, "c1")]
    # Every tool message of the leading run is leading; junk before it does not protect it.
    messages = [None, result("a"), result("b"), user()]
    assert found(messages) == [
        ("not_flat", 0, None),
        ("leading_tool", 1, "a"),
        ("orphan_result", 1, "a"),
        ("leading_tool", 2, "b"),
        ("orphan_result", 2, "b"),
    ]


@pytest.mark.parametrize(
    "call_id, shown",
    [
        ("0", "0"),
        ("", ""),
        ("  ", "  "),
        (" c1", " c1"),
        ("c1 ", "c1 "),
        (0, None),
        (7, None),
        (True, None),
        (None, None),
        ({"id": 1}, None),
    ],
)
def test_unusable_call_id(call_id, shown):
    messages = [user(), turn(call_id), result(call_id)]
    got = found(messages)
    assert got[0] == ("unusable_call_id", 1, shown)
    if isinstance(call_id, str):
        # A string id still pairs exactly: one problem, one violation.
        assert got == [("unusable_call_id", 1, shown)]
    else:
        # Nothing can pair with a non-string id, so its result is an orphan too.
        assert got == [("unusable_call_id", 1, None), ("orphan_result", 2, None)]


def test_ids_are_compared_exactly_as_providers_compare_them():
    # MEM-16 trims ids; a provider does not. The check is strict: " c1" is unusable and is
    # not the id "c1".
    assert found([user(), turn("c1"), result(" c1")]) == [("unanswered_call", 1, "c1"), ("orphan_result", 2, " c1")]


def test_redeclared_id_across_turns_and_in_one_turn():
    messages = [user(), turn("c1"), result("c1", "a"), turn("c1"), result("c1", "b")]
    # As in MEM-5, the first declaration owns the id: the second result is its duplicate.
    assert found(messages) == [("redeclared_id", 3, "c1"), ("duplicate_result", 4, "c1")]
    assert found([user(), turn("c1", "c1"), result("c1")]) == [("redeclared_id", 1, "c1")]


def test_unanswered_call():
    assert found([user(), turn("c1", "c2"), result("c2")]) == [("unanswered_call", 1, "c1")]
    assert found([user(), turn("c1")]) == [("unanswered_call", 1, "c1")]  # a trailing call too


def test_result_not_adjacent_after_other_messages():
    messages = [user(), turn("c1"), user("later"), result("c1")]
    assert found(messages) == [("result_not_adjacent", 3, "c1")]
    # Inside another turn's block is not adjacent either.
    assert found([user(), turn("c1"), turn("c2"), result("c1"), result("c2")]) == [("result_not_adjacent", 3, "c1")]
    # A system message in between breaks the block too (and is itself out of place).
    assert found([user(), turn("c1"), system(), result("c1")]) == [
        ("system_not_first", 2, None),
        ("result_not_adjacent", 3, "c1"),
    ]


def test_result_not_adjacent_before_its_call():
    v = check_sendable([user(), result("c1"), turn("c1")])
    assert [(x.kind, x.index, x.tool_call_id) for x in v] == [("result_not_adjacent", 1, "c1")]
    assert "before message 2" in v[0].detail


def test_orphan_result():
    messages = [
        user(),
        turn("c1"),
        result("c1"),
        result("nobody"),
        result(None),
        {"role": "tool", "content": "no id"},
        result(3),
    ]
    assert found(messages) == [
        ("orphan_result", 3, "nobody"),
        ("orphan_result", 4, None),
        ("orphan_result", 5, None),
        ("orphan_result", 6, None),
    ]


def test_duplicate_result():
    assert found([user(), turn("c1"), result("c1", "a"), result("c1", "b")]) == [("duplicate_result", 3, "c1")]
    # An answer in the block wins over an earlier stray one, which is then the duplicate.
    assert found([user(), result("c1", "x"), turn("c1"), result("c1", "a")]) == [("duplicate_result", 1, "c1")]
    # Two stray results and no answer in the block: the first is not adjacent, the second extra.
    assert found([user(), turn("c1"), user(), result("c1", "x"), result("c1", "y")]) == [
        ("result_not_adjacent", 3, "c1"),
        ("duplicate_result", 4, "c1"),
    ]


def test_violations_are_sorted_by_index_then_kind():
    messages = [result(5), system(), {"role": "user", "content": 1}, turn("c1"), turn("c1")]
    kinds = [(v.index, v.kind) for v in check_sendable(messages)]
    assert kinds == [
        (0, "leading_tool"),
        (0, "orphan_result"),
        (1, "system_not_first"),
        (2, "content_not_string"),
        (3, "unanswered_call"),
        (4, "redeclared_id"),
    ]


# --------------------------------------------------------------------------------------------
# Against the profiles


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_spec_vectors_break_only_what_mem5_permits(vector):
    kinds = count_by_kind(check_sendable(vector["expected"]))
    if vector["name"] == "misordered-result-mid-list-left-as-is":
        # MEM-5's own output is not sendable here: the rule leaves the result before its call.
        assert kinds == {"result_not_adjacent": 1}
    else:
        assert kinds == {}
    assert check_sendable(normalize_with_profile(vector["input"], "lossless").messages) == []


def test_mem5_output_can_keep_a_result_after_other_messages():
    # The minimal case of MEM-5 output that a provider rejects, besides the vector above:
    # "A call is answered by a kept result anywhere in the list, adjacent or not".
    out = normalize_conversation([turn("c1"), user("meanwhile"), result("c1")])
    assert (out.messages, out.dropped, out.healed) == ([turn("c1"), user("meanwhile"), result("c1")], 0, 0)
    assert found(out.messages) == [("result_not_adjacent", 2, "c1")]
    fixed = normalize_with_profile([turn("c1"), user("meanwhile"), result("c1")], "lossless")
    assert fixed.messages == [turn("c1"), result("c1"), user("meanwhile")]
    assert found(fixed.messages) == []


def test_long_list_is_checked_in_linear_time():
    import time

    n = 100_000
    messages = [m for k in range(n // 2) for m in (turn(f"c{k}"), result(f"c{k}"))]
    messages += [result("c0")] * 1000  # duplicates far away
    started = time.process_time()  # CPU time: other work on the machine hardly stretches it
    counts = count_by_kind(check_sendable(messages))
    assert counts == {"duplicate_result": 1000}
    assert time.process_time() - started < 10
