"""Property tests: the lossless profile and the strict check over arbitrary message lists.

Inputs are JSON-like lists mixing junk entries, role-less objects, provider-shaped calls
(``{"id", "function": {"name", "arguments"}}``), flat calls, calls under ``metadata``, and ids
from a small pool (``"0"``, ``" "``, ``0``, ``True``, ``" c1"``, ``"c1"``, ``"c2"``, ``"c1~2"``,
``7``, ``"7"``...) so that reuse, unusable ids and collisions with fresh ids are frequent;
results land anywhere. Every ``tool`` entry gets a unique content, so a result can be followed
from input to output.

Settings: the suite's one Hypothesis profile (tests/conftest.py): the same examples every
run, so a failure in CI reproduces locally and never shows up at random in an unrelated change;
``CONVNORM_HYPOTHESIS_PROFILE=explore`` draws fresh random examples when working on the profiles.
"""

from __future__ import annotations

import copy
import sys
from collections import Counter
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # CI installs the project editable; a bare venv may not have it
    sys.path.insert(0, str(ROOT))

from transforms.core.normalize import (  # noqa: E402
    INTERRUPTED_RESULT,
    REASONS,
    Trace,
    coerce_messages,
    normalize_conversation,
    system_first,
)
from transforms.core.validate import VIOLATION_KINDS, check_sendable  # noqa: E402
from transforms.repairs.profiles import (  # noqa: E402
    REPAIRS,
    normalize_with_profile,
    reattach_results,
    rekey_reused_ids,
)

# --------------------------------------------------------------------------------------------
# Strategies

# Weighted towards a few usable ids so that reuse, displacement and duplicates are the norm.
IDS = st.one_of(
    st.sampled_from(["c1", "c1", "c1", " c1", "c2", "c2"]),
    st.sampled_from(["0", " ", "", 0, True, None, "c1 ", "c3", "c1~2", 7, "7"]),
)
NAMES = st.one_of(st.sampled_from(["search", "ls", ""]), st.integers(0, 3), st.none())
ARGS = st.one_of(st.none(), st.just('{"q": 1}'), st.dictionaries(st.sampled_from("ab"), st.integers(0, 2), max_size=2))
TEXT = st.sampled_from(["", " ", "hi", "done", "ok"])
CONTENT = st.one_of(
    TEXT,
    st.none(),
    st.integers(-2, 2),
    st.booleans(),
    st.lists(st.integers(0, 3), max_size=2),
    st.dictionaries(st.sampled_from("xy"), TEXT, max_size=2),
)
JUNK = st.one_of(st.none(), st.integers(), st.text(max_size=3), st.lists(st.integers(), max_size=2))

PROVIDER_CALL = st.builds(
    lambda i, n, a: {"id": i, "type": "function", "function": {"name": n, "arguments": a}}, IDS, NAMES, ARGS
)
FLAT_CALL = st.builds(lambda i, n, a: {"tool_call_id": i, "name": n, "args": a}, IDS, NAMES, ARGS)
CALL = st.one_of(PROVIDER_CALL, PROVIDER_CALL, FLAT_CALL, FLAT_CALL, JUNK)
CALLS = st.one_of(st.lists(CALL, min_size=1, max_size=3), st.lists(CALL, min_size=1, max_size=3), st.just([]), JUNK)

ASSISTANT = st.one_of(
    st.builds(lambda c, t: {"role": "assistant", "content": c, "tool_calls": t}, CONTENT, CALLS),
    st.builds(lambda c, t: {"role": "assistant", "content": c, "metadata": {"tool_calls": t}}, CONTENT, CALLS),
)
TOOL = st.one_of(
    st.builds(lambda i: {"role": "tool", "content": "", "tool_call_id": i}, IDS),
    st.builds(lambda i: {"role": "tool", "content": "", "metadata": {"tool_call_id": i}}, IDS),
    st.just({"role": "tool", "content": ""}),
)
OTHER = st.builds(
    lambda r, c: {"role": r, "content": c},
    st.sampled_from(["system", "user", "user", "assistant", "developer", " tool", "", None, 3]),
    CONTENT,
)
ENTRY = st.one_of(ASSISTANT, ASSISTANT, TOOL, TOOL, TOOL, OTHER, OTHER, JUNK)


def _tag_results(messages: list) -> list:
    """Give every ``tool`` entry a unique content ``R<i>``, to follow results through."""
    out = []
    for index, entry in enumerate(messages):
        if isinstance(entry, dict) and entry.get("role") == "tool":
            entry = {**entry, "content": f"R{index}"}
        out.append(entry)
    return out


CONVERSATIONS = st.lists(ENTRY, max_size=14).map(_tag_results)


def _real_results(messages: list) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "tool" and m["content"] != INTERRUPTED_RESULT]


# --------------------------------------------------------------------------------------------
# The lossless profile over arbitrary input


@given(CONVERSATIONS)
def test_lossless_output_passes_the_strict_check(messages):
    # (a) for any input the lossless output has no violation at all, but a tool name the
    # input already had (MEM-5 keeps names as they are); (e) and never raises.
    result = normalize_with_profile(messages, "lossless")
    assert [v for v in check_sendable(result.messages) if v.kind != "invalid_tool_name"] == []


@given(CONVERSATIONS)
def test_lossless_keeps_everything_spec_keeps_and_drops_no_more(messages):
    before = copy.deepcopy(messages)
    spec = normalize_with_profile(messages, "spec")
    lossless = normalize_with_profile(messages, "lossless")
    assert messages == before  # neither profile mutates its input
    # (b) never more drops than MEM-5 alone.
    assert lossless.dropped <= spec.dropped
    # (c) every real result spec keeps, lossless keeps too (each content is unique per input).
    spec_kept = _real_results(spec.messages)
    lossless_kept = _real_results(lossless.messages)
    assert len(set(lossless_kept)) == len(lossless_kept)
    assert set(spec_kept) <= set(lossless_kept)

    # Every non-tool message spec keeps is kept too (rekeying only ever saves turns).
    def others(ms):
        return sorted((m["role"], m["content"]) for m in ms if m["role"] != "tool")

    spec_others, lossless_others = others(spec.messages), others(lossless.messages)
    for item in set(spec_others):
        assert lossless_others.count(item) >= spec_others.count(item)


@given(CONVERSATIONS)
def test_profile_reports_are_consistent(messages):
    for name in ("spec", "lossless"):
        result = normalize_with_profile(messages, name)
        assert result.dropped == sum(result.drops.values())
        assert list(result.drops) == [r for r in REASONS if r in result.drops]
        assert all(count > 0 for count in result.drops.values())
        assert list(result.repairs) == [r for r in REPAIRS if r in result.repairs]
        assert all(count > 0 for count in result.repairs.values())
        # Input results all carry "R<i>", so every interrupted result in the output is a heal.
        assert result.healed == sum(m["role"] == "tool" and m["content"] == INTERRUPTED_RESULT for m in result.messages)
    assert normalize_with_profile(messages, "spec").repairs == {}


@given(CONVERSATIONS)
def test_spec_profile_is_the_core(messages):
    spec = normalize_with_profile(messages, "spec")
    core = normalize_conversation(messages)
    assert (spec.messages, spec.dropped, spec.drops, spec.healed) == tuple(core)
    assert [list(m) for m in spec.messages] == [list(m) for m in core.messages]


@given(CONVERSATIONS)
def test_lossless_is_idempotent(messages):
    once = normalize_with_profile(messages, "lossless")
    twice = normalize_with_profile(once.messages, "lossless")
    assert twice.messages == once.messages
    assert (twice.dropped, twice.healed, twice.repairs, twice.drops) == (0, 0, {}, {})
    # Its output is also a fixed point of MEM-5 itself: the core's contract is unchanged.
    core = normalize_conversation(once.messages)
    assert (core.messages, core.dropped, core.healed) == (once.messages, 0, 0)


@given(CONVERSATIONS)
def test_each_pass_is_idempotent_and_pure(messages):
    flat, _ = coerce_messages(messages)
    flat = system_first(flat)
    for run in (rekey_reused_ids, reattach_results):
        before = copy.deepcopy(flat)
        once, count = run(flat)
        assert flat == before
        assert count >= 0
        again, count_again = run(once)
        assert (again, count_again) == (once, 0)
        # A pass never drops: same number of messages, same tool contents.
        assert len(once) == len(flat)
        assert sorted(m["content"] for m in once) == sorted(m["content"] for m in flat)
    # And the composition as the profile runs it.
    first, _ = rekey_reused_ids(flat)
    first, _ = reattach_results(first)
    second, rekeyed = rekey_reused_ids(first)
    second, moved = reattach_results(second)
    assert (second, rekeyed, moved) == (first, 0, 0)


# --------------------------------------------------------------------------------------------
# The strict check


@given(CONVERSATIONS)
def test_spec_output_breaks_only_what_mem5_permits(messages):
    # (d) MEM-5 leaves a result before its call mid-list, or after other messages, where it is:
    # that is the only rule its output may break, with a tool name the input already had.
    kinds = {v.kind for v in check_sendable(normalize_conversation(messages).messages)}
    assert kinds <= {"result_not_adjacent", "invalid_tool_name"}


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["role", "content", "tool_calls", "tool_call_id", "name", "id"]), inner, max_size=4
        )
    ),
    max_leaves=12,
)


@given(st.one_of(CONVERSATIONS, JSON, st.lists(JSON, max_size=6)))
def test_check_never_raises_and_reports_known_kinds_in_order(value):
    violations = check_sendable(value)
    assert all(v.kind in VIOLATION_KINDS for v in violations)
    keys = [(-1 if v.index is None else v.index, VIOLATION_KINDS.index(v.kind)) for v in violations]
    assert keys == sorted(keys)
    if isinstance(value, list):
        assert all(isinstance(v.index, int) and 0 <= v.index < len(value) for v in violations)
    else:
        assert [v.kind for v in violations] == ["not_flat"]


@given(CONVERSATIONS)
def test_a_sendable_list_needs_no_repair(messages):
    # Cross-check of the two definitions: a list the strict check accepts is one MEM-5 does
    # not touch (no drop, no heal) and the lossless passes leave alone.
    flat = normalize_conversation(messages).messages
    if check_sendable(flat):
        return
    for name in ("spec", "lossless"):
        again = normalize_with_profile(flat, name)
        assert (again.messages, again.dropped, again.healed, again.repairs) == (flat, 0, 0, {})


# --------------------------------------------------------------------------------------------
# Targeted generators: the defects the lossless profile exists for, and nothing else


@st.composite
def reused_id_conversations(draw):
    """Well-formed turns whose ids come from a tiny pool, so later turns reuse them."""
    messages = [{"role": "user", "content": "go"}]
    turns = draw(st.integers(1, 6))
    for t in range(turns):
        ids = draw(st.lists(st.sampled_from(["c1", "c2", "call_0"]), min_size=1, max_size=2, unique=True))
        messages.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": i, "function": {"name": "f", "arguments": "{}"}} for i in ids],
            }
        )
        for i in ids:
            messages.append({"role": "tool", "content": f"R{t}-{i}", "tool_call_id": i})
        if draw(st.booleans()):
            messages.append({"role": "assistant", "content": f"thought {t}"})
    return messages


@given(reused_id_conversations())
def test_reused_ids_lose_nothing(messages):
    declarations = sum(len(m.get("tool_calls", ())) for m in messages)
    distinct = len({c["id"] for m in messages for c in m.get("tool_calls", ())})
    result = normalize_with_profile(messages, "lossless")
    assert (result.dropped, result.healed) == (0, 0)
    assert result.repairs.get("rekeyed_call", 0) == declarations - distinct
    assert _real_results(result.messages) == _real_results(messages)  # all kept, in order
    assert len(result.messages) == len(messages)
    assert check_sendable(result.messages) == []


@st.composite
def displaced_result_conversations(draw):
    """Well-formed turns with unique ids, then results moved anywhere in the list."""
    body = []
    for t in range(draw(st.integers(1, 5))):
        ids = [f"t{t}c{k}" for k in range(draw(st.integers(1, 2)))]
        body.append({"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": i, "name": "f"} for i in ids]})
        body.extend({"role": "tool", "content": f"R-{i}", "tool_call_id": i} for i in ids)
        body.append({"role": "user", "content": f"u{t}"})
    results = [m for m in body if m["role"] == "tool"]
    others = [m for m in body if m["role"] != "tool"]
    for result in results:
        others.insert(draw(st.integers(0, len(others))), result)
    if draw(st.booleans()):
        others.insert(draw(st.integers(0, len(others))), {"role": "system", "content": "s"})
    return others


@given(displaced_result_conversations())
def test_displaced_results_are_reattached_not_replaced(messages):
    result = normalize_with_profile(messages, "lossless")
    assert (result.dropped, result.healed) == (0, 0)
    assert sorted(_real_results(result.messages)) == sorted(_real_results(messages))
    assert check_sendable(result.messages) == []
    assert "rekeyed_call" not in result.repairs
    displaced = sum(v.kind in ("result_not_adjacent", "leading_tool") for v in check_sendable(system_first(messages)))
    assert (result.repairs.get("moved_result", 0) > 0) == (displaced > 0)


@given(CONVERSATIONS, st.sampled_from(["spec", "lossless"]))
def test_the_trace_changes_nothing_and_counts_what_the_profile_counts(messages, profile):
    """Under either profile the opt-in trace leaves the result as it is, its drop events are the
    drops, its re-key and move events the repairs, and the origins name the input entries."""
    trace = Trace()
    result = normalize_with_profile(messages, profile, trace)
    assert result == normalize_with_profile(messages, profile)
    events = trace.events
    assert Counter(e.reason for e in events if e.kind == "dropped") == Counter(result.drops)
    assert sum(1 for e in events if e.kind == "healed") == result.healed
    assert sum(1 for e in events if e.reason == "rekeyed_call" and e.call is not None) == result.repairs.get(
        "rekeyed_call", 0
    )
    assert sum(1 for e in events if e.reason == "moved_result") == result.repairs.get("moved_result", 0)
    kept = [o for o in trace.origins if o is not None]
    assert len(trace.origins) == len(result.messages) and len(kept) == len(set(kept))
    assert all(
        0 <= o < len(messages) and result.messages[i]["role"] == messages[o]["role"]
        for i, o in enumerate(trace.origins)
        if o is not None
    )
    assert sum(1 for o in trace.origins if o is None) == result.healed
