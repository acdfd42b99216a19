"""Unit tests for the normalization profiles: ``spec`` is the core, ``lossless`` adds two passes.

Each pass is tested alone on flat lists (exact output, exact count, idempotence) and through
the profile (exact output, drops, heals and repairs, next to what ``spec`` does with the same
input). The spec's worked vectors are run under both profiles.
"""

from __future__ import annotations

import copy
import json
import pickle
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # CI installs the project editable; a bare venv may not have it
    sys.path.insert(0, str(ROOT))

from transforms.core.normalize import INTERRUPTED_RESULT, normalize_conversation  # noqa: E402
from transforms.core.validate import check_sendable  # noqa: E402
from transforms.repairs.profiles import (  # noqa: E402
    PROFILES,
    REPAIRS,
    ProfileResult,
    normalize_with_profile,
    reattach_results,
    rekey_reused_ids,
)

VECTORS = [
    json.loads(line)
    for line in (Path(__file__).parent / "data" / "spec" / "vectors.jsonl").read_text(encoding="utf-8").splitlines()
    if line.strip()
]


# --------------------------------------------------------------------------------------------
# Builders for flat messages (the shape both passes read)


def user(text="q"):
    return {"role": "user", "content": text}


def turn(*ids, text=""):
    return {"role": "assistant", "content": text, "tool_calls": [{"tool_call_id": i, "name": "f"} for i in ids]}


def result(call_id, text):
    return {"role": "tool", "content": text, "tool_call_id": call_id}


def synthetic(call_id):
    return result(call_id, INTERRUPTED_RESULT)


def run_pass(pass_fn, messages):
    """Run a pass, check it is pure and idempotent, return (output, count)."""
    before = copy.deepcopy(messages)
    out, count = pass_fn(messages)
    assert messages == before, "a pass must not mutate its input"
    assert pass_fn(out) == (out, 0), "a pass must be idempotent"
    return out, count


# --------------------------------------------------------------------------------------------
# The API


def test_profiles_and_repairs_are_the_documented_ones():
    assert set(PROFILES) == {"spec", "lossless"}
    assert REPAIRS == ("rekeyed_call", "moved_result")
    assert ProfileResult._fields == ("messages", "dropped", "drops", "healed", "repairs")
    with pytest.raises(KeyError):
        normalize_with_profile([], "strict")


def test_profile_functions_pickle_for_beam():
    for name in PROFILES:
        fn = pickle.loads(pickle.dumps(PROFILES[name]))
        assert fn([user()]) == normalize_with_profile([user()], name)
    assert pickle.loads(pickle.dumps(normalize_with_profile)) is normalize_with_profile
    out = normalize_with_profile([turn("c1"), result("c1", "r")], "lossless")
    assert pickle.loads(pickle.dumps(out)) == out


@pytest.mark.parametrize("value", [None, "text", 3, {"role": "user"}, (user(),)])
@pytest.mark.parametrize("name", ["spec", "lossless"])
def test_non_list_input_normalizes_to_nothing(name, value):
    assert normalize_with_profile(value, name) == ProfileResult([], 0, {}, 0, {})


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_spec_profile_is_exactly_the_core(vector):
    got = normalize_with_profile(copy.deepcopy(vector["input"]))  # "spec" is the default
    core = normalize_conversation(copy.deepcopy(vector["input"]))
    assert got == ProfileResult(core.messages, core.dropped, core.drops, core.healed, {})
    assert (got.messages, got.dropped, got.drops, got.healed) == (
        vector["expected"],
        vector["dropped"],
        vector["drops"],
        vector["healed"],
    )


# Where lossless differs from spec on the spec's own vectors: (messages, dropped, drops, healed,
# repairs). Every other vector is left exactly as spec leaves it.
LOSSLESS_VECTORS = {
    "narrative-leading-tool-before-declaring-call": (
        [
            {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c1", "name": "search"}]},
            {"role": "tool", "content": "out of order", "tool_call_id": "c1"},
        ],
        0,
        {},
        0,
        {"moved_result": 1},
    ),
    "multiple-leading-tool-results-stripped": (
        [
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"tool_call_id": "c1", "name": "a"}, {"tool_call_id": "c2", "name": "b"}],
            },
            {"role": "tool", "content": "r1", "tool_call_id": "c1"},
            {"role": "tool", "content": "r2", "tool_call_id": "c2"},
        ],
        0,
        {},
        0,
        {"moved_result": 2},
    ),
    "leading-tool-after-system-group": (
        [
            {"role": "system", "content": "s"},
            {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c1", "name": "search"}]},
            {"role": "tool", "content": "out of order", "tool_call_id": "c1"},
        ],
        0,
        {},
        0,
        {"moved_result": 1},
    ),
    "misordered-result-mid-list-left-as-is": (
        [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c1", "name": "search"}]},
            {"role": "tool", "content": "early", "tool_call_id": "c1"},
        ],
        0,
        {},
        0,
        {"moved_result": 1},
    ),
    "duplicate-declaration-later-turn-emptied": (
        [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c1", "name": "search"}]},
            {"role": "tool", "content": "r1", "tool_call_id": "c1"},
            {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c1~2", "name": "search"}]},
            {"role": "tool", "content": "r2", "tool_call_id": "c1~2"},
        ],
        0,
        {},
        0,
        {"rekeyed_call": 1},
    ),
}


def test_lossless_vector_table_names_real_vectors():
    assert set(LOSSLESS_VECTORS) <= {v["name"] for v in VECTORS}


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_lossless_on_the_spec_vectors(vector):
    got = normalize_with_profile(copy.deepcopy(vector["input"]), "lossless")
    if vector["name"] in LOSSLESS_VECTORS:
        assert tuple(got) == LOSSLESS_VECTORS[vector["name"]]
        # Better than spec: fewer drops or heals, or a sendable list where spec's is not.
        improved = got.dropped < vector["dropped"] or got.healed < vector["healed"]
        assert improved or check_sendable(vector["expected"]) != []
    else:
        assert tuple(got) == (vector["expected"], vector["dropped"], vector["drops"], vector["healed"], {})
    assert check_sendable(got.messages) == []
    again = normalize_with_profile(got.messages, "lossless")
    assert tuple(again) == (got.messages, 0, {}, 0, {})


# --------------------------------------------------------------------------------------------
# Pass 1 — re-key reused ids


def test_rekey_gives_a_later_pair_a_fresh_id():
    messages = [user(), turn("c1"), result("c1", "r1"), turn("c1"), result("c1", "r2")]
    out, count = run_pass(rekey_reused_ids, messages)
    assert count == 1
    assert out == [user(), turn("c1"), result("c1", "r1"), turn("c1~2"), result("c1~2", "r2")]
    assert out[1] is messages[1] and out[2] is messages[2]  # untouched messages are shared


def test_rekey_counts_every_later_pair_and_numbers_them_in_order():
    messages = [turn("c1"), result("c1", "a"), turn("c1"), result("c1", "b"), turn("c1"), result("c1", "c")]
    out, count = run_pass(rekey_reused_ids, messages)
    assert count == 2
    assert [m.get("tool_call_id") for m in out] == [None, "c1", None, "c1~2", None, "c1~3"]
    assert [c["tool_call_id"] for m in out if "tool_calls" in m for c in m["tool_calls"]] == ["c1", "c1~2", "c1~3"]


def test_rekey_never_collides_with_an_id_in_the_conversation():
    messages = [
        turn("c1"),
        result("c1", "a"),
        turn("c1~2"),
        result("c1~2", "z"),
        turn("c1"),
        result("c1", "b"),
    ]
    out, count = run_pass(rekey_reused_ids, messages)
    assert count == 1
    assert out[4] == turn("c1~3") and out[5] == result("c1~3", "b")
    # Even when the colliding id only appears in a result (an orphan: it still exists).
    messages = [result("c1~2", "orphan"), turn("c1"), result("c1", "a"), turn("c1"), result("c1", "b")]
    out, _ = run_pass(rekey_reused_ids, messages)
    assert out[3:] == [turn("c1~3"), result("c1~3", "b")]


def test_rekey_compares_ids_as_the_core_does():
    # " c1" is "c1" once trimmed, and 7 is "7": both are reuses. Fresh ids come from the trimmed text.
    messages = [
        turn("c1"),
        result("c1", "a"),
        turn(" c1 "),
        result("c1", "b"),
        turn(7),
        result("7", "x"),
        turn("7"),
        result(7, "y"),
    ]
    out, count = run_pass(rekey_reused_ids, messages)
    assert count == 2
    assert out[2] == turn("c1~2") and out[3] == result("c1~2", "b")
    assert out[6] == turn("7~2") and out[7] == result("7~2", "y")


def test_rekey_keeps_provider_call_fields():
    flat = [
        {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c1", "name": "f", "args": "{}"}]},
        result("c1", "a"),
        {"role": "assistant", "content": "x", "tool_calls": [{"tool_call_id": "c1", "name": "g", "args": {"k": 1}}]},
        result("c1", "b"),
    ]
    out, _ = run_pass(rekey_reused_ids, flat)
    assert out[2] == {
        "role": "assistant",
        "content": "x",
        "tool_calls": [{"tool_call_id": "c1~2", "name": "g", "args": {"k": 1}}],
    }
    assert list(out[2]["tool_calls"][0]) == ["tool_call_id", "name", "args"]


def test_ambiguous_result_after_two_declarations_answers_the_nearest():
    # Which turn does "r" answer? The nearest declaration before it: B. A is left unanswered,
    # and the core heals it. (MEM-5 alone gives "r" to A and drops B's call and turn.)
    messages = [user(), turn("c1", text="A"), turn("c1", text="B"), result("c1", "r")]
    out, count = run_pass(rekey_reused_ids, messages)
    assert count == 1
    assert out == [user(), turn("c1", text="A"), turn("c1~2", text="B"), result("c1~2", "r")]
    lossless = normalize_with_profile(messages, "lossless")
    assert lossless == ProfileResult(
        [user(), turn("c1", text="A"), synthetic("c1"), turn("c1~2", text="B"), result("c1~2", "r")],
        0,
        {},
        1,
        {"rekeyed_call": 1},
    )
    spec = normalize_with_profile(messages, "spec")
    assert spec.messages == [user(), turn("c1", text="A"), {"role": "assistant", "content": "B"}, result("c1", "r")]
    assert spec.drops == {"redeclared_call": 1}


def test_later_declaration_without_its_own_result_is_not_rekeyed():
    # The result sits before B: it belongs to A. B has nothing of its own: it looks like a
    # turn logged twice, so it stays a redeclaration and the core drops it, as MEM-5 says.
    messages = [user(), turn("c1"), result("c1", "a"), turn("c1"), user("next")]
    out, count = run_pass(rekey_reused_ids, messages)
    assert (out, count) == (messages, 0)
    lossless = normalize_with_profile(messages, "lossless")
    assert lossless == ProfileResult(
        [user(), turn("c1"), result("c1", "a"), user("next")], 2, {"redeclared_call": 1, "emptied_turn": 1}, 0, {}
    )
    assert lossless[:4] == tuple(normalize_with_profile(messages, "spec"))[:4]


def test_results_between_two_declarations_belong_to_the_earlier_one():
    # "b" is separated from A but comes before B: it is A's (a duplicate of "a"), not B's.
    messages = [user(), turn("c1"), result("c1", "a"), user("u"), result("c1", "b"), turn("c1"), result("c1", "c")]
    out, count = run_pass(rekey_reused_ids, messages)
    assert count == 1
    assert [m.get("tool_call_id") for m in out] == [None, None, "c1", None, "c1", None, "c1~2"]
    assert out[5] == turn("c1~2")
    lossless = normalize_with_profile(messages, "lossless")
    assert lossless.messages == [user(), turn("c1"), result("c1", "a"), user("u"), turn("c1~2"), result("c1~2", "c")]
    assert (lossless.dropped, lossless.drops, lossless.repairs) == (1, {"duplicate_result": 1}, {"rekeyed_call": 1})
    spec = normalize_with_profile(messages, "spec")
    assert spec.drops == {"redeclared_call": 1, "emptied_turn": 1, "duplicate_result": 2}


def test_surplus_result_stored_just_before_the_next_declaration_answers_it():
    # A is answered in its block; "r2" sits outside it, directly before B: B's result stored
    # before its call. It goes to B (and the second pass moves it after B).
    messages = [
        user(),
        turn("c1", text="A"),
        result("c1", "r1"),
        user("u"),
        result("c1", "r2"),
        turn("c1", text="B"),
        user("v"),
    ]
    out, count = run_pass(rekey_reused_ids, messages)
    assert count == 1
    assert out[4:6] == [result("c1~2", "r2"), turn("c1~2", text="B")]
    lossless = normalize_with_profile(messages, "lossless")
    assert lossless == ProfileResult(
        [
            user(),
            turn("c1", text="A"),
            result("c1", "r1"),
            user("u"),
            turn("c1~2", text="B"),
            result("c1~2", "r2"),
            user("v"),
        ],
        0,
        {},
        0,
        {"rekeyed_call": 1, "moved_result": 1},
    )
    spec = normalize_with_profile(messages, "spec")
    assert spec.drops == {"duplicate_result": 1, "redeclared_call": 1}


def test_surplus_result_in_the_earlier_block_stays_a_duplicate():
    # "r2" is in A's block: a second result right after A's call is A's duplicate, even though
    # B follows immediately.
    messages = [user(), turn("c1", text="A"), result("c1", "r1"), result("c1", "r2"), turn("c1", text="B")]
    assert run_pass(rekey_reused_ids, messages) == (messages, 0)
    lossless = normalize_with_profile(messages, "lossless")
    assert tuple(lossless)[:4] == tuple(normalize_with_profile(messages, "spec"))[:4]
    assert lossless.drops == {"redeclared_call": 1, "duplicate_result": 1}


def test_surplus_result_is_offered_only_to_a_declaration_left_without_result():
    # B has its own result after it: "r2" (before B) stays A's duplicate.
    messages = [turn("c1"), result("c1", "r1"), user("u"), result("c1", "r2"), turn("c1"), result("c1", "r3")]
    out, count = run_pass(rekey_reused_ids, messages)
    assert count == 1
    assert [m.get("tool_call_id") for m in out] == [None, "c1", None, "c1", None, "c1~2"]
    # Not directly before B (a user message in between): not offered either.
    messages = [turn("c1"), result("c1", "r1"), user("u"), result("c1", "r2"), user("v"), turn("c1")]
    assert run_pass(rekey_reused_ids, messages) == (messages, 0)


def test_results_before_the_first_declaration_belong_to_it():
    messages = [user(), result("c1", "early"), turn("c1"), turn("c1"), result("c1", "late")]
    out, count = run_pass(rekey_reused_ids, messages)
    assert count == 1
    assert out == [user(), result("c1", "early"), turn("c1"), turn("c1~2"), result("c1~2", "late")]


def test_surplus_results_stay_duplicates_of_their_own_group():
    # A has no result; B has two. The second is B's duplicate: it must not become A's answer.
    messages = [user(), turn("c1", text="A"), turn("c1", text="B"), result("c1", "b1"), result("c1", "b2")]
    out, count = run_pass(rekey_reused_ids, messages)
    assert count == 1
    assert [m.get("tool_call_id") for m in out] == [None, None, None, "c1~2", "c1~2"]
    lossless = normalize_with_profile(messages, "lossless")
    assert lossless.messages == [
        user(),
        turn("c1", text="A"),
        synthetic("c1"),
        turn("c1~2", text="B"),
        result("c1~2", "b1"),
    ]
    assert (lossless.drops, lossless.healed) == ({"duplicate_result": 1}, 1)


def test_same_turn_reuse_is_matched_positionally_when_each_call_has_a_result():
    messages = [user(), turn("c1", "c1"), result("c1", "a"), result("c1", "b")]
    out, count = run_pass(rekey_reused_ids, messages)
    assert count == 1
    assert out == [user(), turn("c1", "c1~2"), result("c1", "a"), result("c1~2", "b")]
    lossless = normalize_with_profile(messages, "lossless")
    assert lossless == ProfileResult(out, 0, {}, 0, {"rekeyed_call": 1})
    assert normalize_with_profile(messages, "spec").drops == {"redeclared_call": 1, "duplicate_result": 1}


def test_same_turn_reuse_with_one_result_is_left_to_the_core():
    # One result for [c1, c1]: the repeat is indistinguishable from a call logged twice.
    messages = [user(), turn("c1", "c1"), result("c1", "result")]
    assert run_pass(rekey_reused_ids, messages) == (messages, 0)
    assert (
        tuple(normalize_with_profile(messages, "lossless"))[:4] == tuple(normalize_with_profile(messages, "spec"))[:4]
    )
    # Three declarations, two results: the third stays a redeclaration.
    messages = [turn("c1", "c1", "c1"), result("c1", "a"), result("c1", "b")]
    out, count = run_pass(rekey_reused_ids, messages)
    assert count == 1
    assert out[0] == turn("c1", "c1~2", "c1")
    lossless = normalize_with_profile(messages, "lossless")
    assert lossless.messages == [turn("c1", "c1~2"), result("c1", "a"), result("c1~2", "b")]
    assert lossless.drops == {"redeclared_call": 1}


def test_rekey_leaves_unusable_ids_to_the_core():
    messages = [
        turn("0"),
        result("0", "a"),
        turn("0"),
        result("0", "b"),
        turn(" "),
        result(" ", "c"),
        turn(True),
        result(True, "d"),
    ]
    assert run_pass(rekey_reused_ids, messages) == (messages, 0)
    lossless = normalize_with_profile(messages, "lossless")
    assert tuple(lossless) == tuple(normalize_with_profile(messages, "spec"))
    assert lossless.messages == []


def test_rekey_ignores_junk_calls_but_keeps_them_for_the_core():
    messages = [
        {"role": "assistant", "content": "", "tool_calls": ["junk", {"tool_call_id": "c1", "name": "f"}]},
        result("c1", "a"),
        {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c1", "name": "f"}, 5]},
        result("c1", "b"),
    ]
    out, count = run_pass(rekey_reused_ids, messages)
    assert count == 1
    assert out[0] is messages[0]
    assert out[2]["tool_calls"] == [{"tool_call_id": "c1~2", "name": "f"}, 5]
    lossless = normalize_with_profile(messages, "lossless")
    assert lossless.drops == {"unusable_call": 2}
    assert check_sendable(lossless.messages) == []


# --------------------------------------------------------------------------------------------
# Pass 2 — re-attach displaced results


def test_result_separated_by_other_messages_moves_to_the_end_of_the_block():
    messages = [user(), turn("c1", "c2"), result("c2", "r2"), user("later"), result("c1", "r1")]
    out, count = run_pass(reattach_results, messages)
    assert count == 1
    assert out == [user(), turn("c1", "c2"), result("c2", "r2"), result("c1", "r1"), user("later")]


def test_result_before_its_call_mid_list_moves_to_the_start_of_the_block():
    messages = [user(), result("c1", "early"), user("u"), turn("c1", "c2"), result("c2", "r2")]
    out, count = run_pass(reattach_results, messages)
    assert count == 1
    assert out == [user(), user("u"), turn("c1", "c2"), result("c1", "early"), result("c2", "r2")]


def test_result_at_the_front_moves_instead_of_being_stripped():
    messages = [result("c1", "out of order"), turn("c1")]
    out, count = run_pass(reattach_results, messages)
    assert (out, count) == ([turn("c1"), result("c1", "out of order")], 1)
    assert normalize_with_profile(messages, "lossless") == ProfileResult(out, 0, {}, 0, {"moved_result": 1})
    assert normalize_with_profile(messages, "spec") == ProfileResult(
        [turn("c1"), synthetic("c1")], 1, {"leading_tool": 1}, 1, {}
    )


def test_result_in_another_turns_block_moves_home():
    messages = [turn("c1"), turn("c2"), result("c1", "r1"), result("c2", "r2")]
    out, count = run_pass(reattach_results, messages)
    assert (out, count) == ([turn("c1"), result("c1", "r1"), turn("c2"), result("c2", "r2")], 1)


def test_moved_results_keep_list_order_so_the_first_result_still_wins():
    # MEM-5 keeps "x" (the first result of c1, before its call mid-list) and drops "a". Moving
    # "x" to the start of the block keeps that choice: lossless keeps the same result.
    messages = [user(), result("c1", "x"), turn("c1"), result("c1", "a")]
    out, count = run_pass(reattach_results, messages)
    assert (out, count) == ([user(), turn("c1"), result("c1", "x"), result("c1", "a")], 1)
    assert normalize_with_profile(messages, "spec").messages == [user(), result("c1", "x"), turn("c1")]
    lossless = normalize_with_profile(messages, "lossless")
    assert lossless == ProfileResult(
        [user(), turn("c1"), result("c1", "x")], 1, {"duplicate_result": 1}, 0, {"moved_result": 1}
    )


def test_every_result_before_its_call_moves_duplicates_included():
    # Both precede the call; "y" must move too or it would become the first result of c1.
    messages = [user(), result("c1", "x"), result("c1", "y"), turn("c1")]
    out, count = run_pass(reattach_results, messages)
    assert (out, count) == ([user(), turn("c1"), result("c1", "x"), result("c1", "y")], 2)
    lossless = normalize_with_profile(messages, "lossless")
    assert (lossless.messages, lossless.drops) == ([user(), turn("c1"), result("c1", "x")], {"duplicate_result": 1})


def test_later_duplicates_after_the_block_stay_where_they_are():
    # The block already answers c1: later results are duplicates the core drops in place.
    messages = [turn("c1"), result("c1", "a"), user("u"), result("c1", "b"), user("v"), result("c1", "c")]
    assert run_pass(reattach_results, messages) == (messages, 0)
    # Only the first result after the block moves when the block has none.
    messages = [turn("c1"), user("u"), result("c1", "b"), user("v"), result("c1", "c")]
    out, count = run_pass(reattach_results, messages)
    assert (out, count) == ([turn("c1"), result("c1", "b"), user("u"), user("v"), result("c1", "c")], 1)


def test_reattach_leaves_orphans_and_unusable_ids_to_the_core():
    messages = [user(), result("zz", "orphan"), result("0", "zero"), turn("c1"), user("u"), result(None, "none")]
    assert run_pass(reattach_results, messages) == (messages, 0)


def test_reattach_follows_the_first_declaration_the_core_keeps():
    # Without rekeying (pass alone), a result after a redeclaration belongs to the first one.
    messages = [turn("c1", text="A"), user("u"), turn("c1", text="B"), result("c1", "r")]
    out, count = run_pass(reattach_results, messages)
    assert (out, count) == ([turn("c1", text="A"), result("c1", "r"), user("u"), turn("c1", text="B")], 1)


def test_system_message_between_call_and_result_is_not_a_displacement():
    # Rule 2 moves the system message to the front, which reunites them without a repair.
    messages = [user(), turn("c1"), {"role": "system", "content": "s"}, result("c1", "r")]
    lossless = normalize_with_profile(messages, "lossless")
    assert lossless == ProfileResult(
        [{"role": "system", "content": "s"}, user(), turn("c1"), result("c1", "r")], 0, {}, 0, {}
    )
    assert tuple(lossless)[:4] == tuple(normalize_with_profile(messages, "spec"))[:4]


# --------------------------------------------------------------------------------------------
# The lossless profile


def test_lossless_merges_coercion_drops_with_core_drops():
    messages = [
        "junk",
        None,
        {"content": "no role"},
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": "{}"}}],
        },
        {"role": "tool", "content": "orphan", "tool_call_id": "nobody"},
        {"role": "tool", "content": "r", "tool_call_id": "c1"},
        {"role": "tool", "content": "dup", "tool_call_id": "c1"},
    ]
    got = normalize_with_profile(messages, "lossless")
    assert got.drops == {"not_an_object": 2, "no_role": 1, "orphan_result": 1, "duplicate_result": 1}
    assert got.dropped == 5
    assert got.messages == [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c1", "name": "f", "args": "{}"}]},
        {"role": "tool", "content": "r", "tool_call_id": "c1"},
    ]
    assert got.repairs == {}


def test_lossless_reports_both_repairs_in_canonical_order():
    messages = [
        {"role": "tool", "content": "x", "metadata": {"tool_call_id": "c2"}},  # a buffer row, at the front
        user(),
        turn("c1", "c2"),
        result("c1", "a"),
        turn("c1"),
        result("c1", "b"),
    ]
    got = normalize_with_profile(messages, "lossless")
    assert got.messages == [
        user(),
        turn("c1", "c2"),
        result("c2", "x"),
        result("c1", "a"),
        turn("c1~2"),
        result("c1~2", "b"),
    ]
    assert list(got.repairs.items()) == [("rekeyed_call", 1), ("moved_result", 1)]
    assert (got.dropped, got.healed) == (0, 0)
    assert check_sendable(got.messages) == []


def test_unusable_id_still_costs_three_drops_under_lossless():
    # The narrative's first example is not something lossless can save: the id is unusable.
    vector = VECTORS[0]
    assert vector["name"] == "narrative-zero-id-three-drops"
    got = normalize_with_profile(vector["input"], "lossless")
    assert (got.messages, got.dropped, got.drops) == ([], 3, vector["drops"])


def test_lossless_never_mutates_its_input():
    messages = [
        result("c1", "x"),
        turn("c1"),
        result("c1", "a"),
        turn(" c1"),
        result("c1", "b"),
        {"role": "system", "content": 5},
    ]
    before = copy.deepcopy(messages)
    normalize_with_profile(messages, "lossless")
    assert messages == before


def test_lossless_agent_log_worked_example():
    # A gpt-4o style log: per-turn call ids restart at call_0, one result stored late.
    log = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "Fix the bug."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "call_0", "type": "function", "function": {"name": "ls", "arguments": "{}"}}],
        },
        {"role": "tool", "content": "main.py", "tool_call_id": "call_0"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_0", "type": "function", "function": {"name": "cat", "arguments": '{"p":"main.py"}'}},
                {"id": "call_1", "type": "function", "function": {"name": "grep", "arguments": '{"q":"bug"}'}},
            ],
        },
        {"role": "tool", "content": "print(1/0)", "tool_call_id": "call_0"},
        {"role": "user", "content": "(interrupted)"},
        {"role": "tool", "content": "main.py:1", "tool_call_id": "call_1"},
        {"role": "assistant", "content": "Division by zero on line 1."},
    ]
    spec = normalize_with_profile(log, "spec")
    lossless = normalize_with_profile(log, "lossless")
    assert (spec.dropped, spec.drops, spec.healed) == (2, {"redeclared_call": 1, "duplicate_result": 1}, 0)
    assert {v.kind for v in check_sendable(spec.messages)} == {"result_not_adjacent"}
    assert (lossless.dropped, lossless.healed, lossless.repairs) == (0, 0, {"rekeyed_call": 1, "moved_result": 1})
    assert [m.get("tool_call_id") for m in lossless.messages] == [
        None,
        None,
        None,
        "call_0",
        None,
        "call_0~2",
        "call_1",
        None,
        None,
    ]
    assert [m["content"] for m in lossless.messages if m["role"] == "tool"] == ["main.py", "print(1/0)", "main.py:1"]
    assert check_sendable(lossless.messages) == []


# --------------------------------------------------------------------------------------------
# Work stays linear


def _long_agent_log(turns: int) -> list:
    """Per-turn ids (call_0, call_1) reused by every turn, as agent logs do. Every 7th turn's
    call_0 result is stored late (after the next thought); every 11th turn's call_1 result is
    stored just before its own turn."""
    log = [{"role": "system", "content": "s"}, {"role": "user", "content": "go"}]
    for t in range(turns):
        early = [result("call_1", f"t{t}-call_1")] if t % 11 == 5 else []
        block = [] if t % 7 == 3 else [result("call_0", f"t{t}-call_0")]
        if not early:
            block.append(result("call_1", f"t{t}-call_1"))
        late = [result("call_0", f"t{t}-call_0")] if t % 7 == 3 else []
        log += early + [turn("call_0", "call_1")] + block
        log += [{"role": "assistant", "content": f"thought {t}"}] + late + [{"role": "user", "content": "next"}]
    return log


def test_100k_message_conversation_is_fast_and_loses_nothing():
    log = _long_agent_log(20_000)  # 100,002 messages
    assert len(log) == 100_002
    started = time.process_time()  # CPU time: other work on the machine hardly stretches it
    got = normalize_with_profile(log, "lossless")
    elapsed = time.process_time() - started
    assert (got.dropped, got.healed) == (0, 0)
    assert got.repairs["rekeyed_call"] == 2 * 20_000 - 2
    early = sum(1 for t in range(20_000) if t % 11 == 5)
    late = sum(1 for t in range(20_000) if t % 7 == 3)
    assert got.repairs["moved_result"] == early + late
    assert len(got.messages) == len(log)
    assert check_sendable(got.messages) == []
    # A quadratic step would take minutes here; linear work takes about a second.
    assert elapsed < 20, f"lossless took {elapsed:.1f}s on 100k messages"


@pytest.mark.slow
def test_pathological_reuse_and_displacement_stay_linear():
    n = 30_000
    one_id_reused = [m for k in range(n) for m in (turn("c"), result("c", f"r{k}"))]
    results_first = [result(f"c{k}", f"r{k}") for k in range(n)] + [turn(*[f"c{k}" for k in range(n)])]
    taken_suffixes = [turn(f"c~{k}") for k in range(2, n)] + one_id_reused[: 2 * n]
    started = time.process_time()  # CPU time: other work on the machine hardly stretches it
    got = normalize_with_profile(one_id_reused, "lossless")
    assert (got.dropped, got.repairs) == (0, {"rekeyed_call": n - 1})
    got = normalize_with_profile(results_first, "lossless")
    assert (got.dropped, got.healed, got.repairs) == (0, 0, {"moved_result": n})
    got = normalize_with_profile(taken_suffixes, "lossless")
    assert got.repairs == {"rekeyed_call": n - 1}
    assert {c["tool_call_id"] for m in got.messages for c in m.get("tool_calls", ())} >= {
        f"c~{k}" for k in range(n, 2 * n - 1)
    }
    assert time.process_time() - started < 30
