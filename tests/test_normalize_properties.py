"""Property tests: the invariants of NORMALIZATION.md over arbitrary JSON-like message lists.

The generator mixes everything a logged buffer can hold: junk entries (non-objects, role-less
or blank-role objects), flat and provider-shaped calls, stored-buffer rows (pairing keys under
``metadata``), ids drawn from a small pool so that collisions, redeclarations, duplicates and
unusable ids ("0", " ", "", 0, True, None, 1.5) happen in most examples, integers past 64 bits
and past CPython's 4,300-digit str limit, and content nested past orjson's 255 levels and past
Python's recursion limit.

Determinism: every test runs under the suite's one Hypothesis profile (tests/conftest.py):
derandomized and no example database, so CI runs the same examples on every machine and a red
build always reproduces locally. Set ``CONVNORM_HYPOTHESIS_EXAMPLES=5000`` and/or
``CONVNORM_HYPOTHESIS_PROFILE=explore`` to explore further by hand (random seeds; hypothesis
prints a reproduction blob on failure).
"""

from __future__ import annotations

import copy
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # CI installs the project editable; a bare venv may not have it
    sys.path.insert(0, str(ROOT))

from transforms.core.normalize import CALL_REASONS as CORE_CALL_REASONS  # noqa: E402
from transforms.core.normalize import INTERRUPTED_RESULT, REASONS, Trace, normalize_conversation  # noqa: E402

#: Reasons that remove a call from a turn; every other reason removes a whole message.
CALL_REASONS = ("unusable_call", "redeclared_call")


# --------------------------------------------------------------------------------------------
# Strategies


def _nest(depth: int, leaf):
    value = leaf
    for _ in range(depth):
        value = [value] if depth % 2 else {"k": value}
    return value


#: One shared, far-too-deep value (past Python's recursion limit): its content must become "".
#: It is shared so that deep-copying the input can skip it (see ``_snapshot``).
TOO_DEEP = _nest(5_000, 1)

USABLE_IDS = (" c1", "c1", "c2", "c2 ", 2**70, 7, "7", "00")
#: What the usable ids become (trimmed text); no other id can come out.
USABLE_TEXTS = {"c1", "c2", "1180591620717411303424", "7", "00"}
UNUSABLE_IDS = ("0", " ", "", 0, True, None, 1.5)
# Three usable draws for one unusable: pairs, redeclarations and duplicates stay frequent.
ids = st.one_of(*[st.sampled_from(USABLE_IDS)] * 3, st.sampled_from(UNUSABLE_IDS))

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=2**63, max_value=2**200) | st.integers(min_value=-(2**200), max_value=-(2**63)),
    # Past CPython's int str limit. Built, not sampled: hypothesis reprs sampled values, and
    # repr() refuses these (a falsifying example holding one may print with a ValueError).
    st.builds(lambda digits, sign: sign * (10**digits + 7), st.sampled_from([4301, 4400]), st.sampled_from([1, -1])),
    st.floats(),  # NaN and infinities included
    st.text(max_size=12),
)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=12,
)
content_values = st.one_of(
    scalars,
    json_values,
    st.builds(_nest, st.sampled_from([20, 256, 300]), scalars),  # past orjson's depth limit
    st.builds(lambda: TOO_DEEP),  # not st.just: hypothesis would repr it
)
names = st.one_of(st.sampled_from(["search", "f", ""]), st.integers(), st.none(), json_values)
args = st.one_of(st.text(max_size=10), json_values)

flat_calls = st.one_of(
    st.fixed_dictionaries({"tool_call_id": ids}, optional={"name": names, "args": args}),
    st.fixed_dictionaries({"id": ids}, optional={"name": names, "arguments": args}),
)
provider_calls = st.builds(
    lambda call_id, name, arguments: {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    },
    ids,
    names,
    st.text(max_size=10),
)
junk_calls = st.sampled_from(["c1", 5, None, [], True, {}])
call_lists = st.one_of(
    st.lists(st.one_of(flat_calls, flat_calls, provider_calls, junk_calls), min_size=1, max_size=3),
    st.sampled_from([None, [], {}, "c1", 5]),  # no calls at all
)

extras = st.fixed_dictionaries({}, optional={"timestamp": st.integers(), "name": st.text(max_size=4), "id": ids})


def _message(role_strategy, **fields):
    """A message dict with optional content, the given pairing fields and some extra keys."""
    return st.builds(
        lambda role, content, extra, pairing: {**extra, "role": role, **content, **pairing},
        role_strategy,
        st.fixed_dictionaries({}, optional={"content": content_values}),
        extras,
        st.fixed_dictionaries(fields),
    )


junk_entries = st.one_of(
    st.none(), st.booleans(), st.integers(), st.text(max_size=5), st.lists(st.integers(), max_size=2)
)
roleless = st.builds(
    lambda role, content: {**role, "content": content},
    st.fixed_dictionaries({}, optional={"role": st.sampled_from([None, "", "  ", 5, True, 1.5, ["user"]])}),
    content_values,
)
plain = _message(st.sampled_from(["user", "user", "developer", "System", " user ", "Tool", "moderator"]))
system = _message(st.just("system"))
assistant_plain = _message(st.just("assistant"))
assistant_calls = _message(st.just("assistant"), tool_calls=call_lists)
tool = _message(st.just("tool"), tool_call_id=ids)
tool_without_id = _message(st.just("tool"))
buffer_assistant = _message(st.just("assistant"), metadata=st.fixed_dictionaries({"tool_calls": call_lists}))
buffer_tool = _message(st.just("tool"), metadata=st.fixed_dictionaries({"tool_call_id": ids}))
pairing_elsewhere = st.sampled_from(
    [
        {"role": "user", "content": "u", "tool_calls": [{"tool_call_id": "c1", "name": "f"}], "tool_call_id": "c2"},
        {"role": "system", "content": "s", "tool_call_id": "c1", "tool_calls": [{"id": "c2"}]},
        {"role": "assistant", "content": "a", "tool_call_id": "c1"},
    ]
)

# Weighted mix (a kind per draw, then its strategy): mostly calls and results, where the
# repairs happen; a nested one_of would instead be flattened and weighted by branch count.
KINDS = {
    "assistant_calls": (assistant_calls, 6),
    "tool": (tool, 6),
    "buffer_assistant": (buffer_assistant, 1),
    "buffer_tool": (buffer_tool, 1),
    "plain": (plain, 2),
    "assistant_plain": (assistant_plain, 1),
    "system": (system, 1),
    "tool_without_id": (tool_without_id, 1),
    "pairing_elsewhere": (pairing_elsewhere, 1),
    "roleless": (roleless, 1),
    "junk": (junk_entries, 1),
}
entries = st.sampled_from([kind for kind, (_, weight) in KINDS.items() for _ in range(weight)]).flatmap(
    lambda kind: KINDS[kind][0]
)
bodies = st.lists(entries, max_size=30) | st.lists(entries, min_size=8, max_size=30)
# Some lists open with results (the leading-tool guard), possibly behind system messages.
leads = st.lists(st.one_of(tool, buffer_tool, system), min_size=1, max_size=3)
conversations = st.one_of(bodies, bodies, st.builds(lambda lead, body: lead + body, leads, bodies))


# --------------------------------------------------------------------------------------------
# Helpers


def _snapshot(messages):
    # TOO_DEEP is too deep to deep-copy; it is shared, never copied, and compared by identity
    # (list and dict equality short-circuit on identical items).
    return copy.deepcopy(messages, memo={id(TOO_DEEP): TOO_DEEP})


def _system_count(messages) -> int:
    return sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "system")


def _assert_flat_shape(message) -> None:
    role = message["role"]
    assert isinstance(role, str) and role.strip()
    assert isinstance(message["content"], str)
    keys = list(message)
    if role == "assistant" and "tool_calls" in message:
        assert keys == ["role", "content", "tool_calls"]
        calls = message["tool_calls"]
        assert isinstance(calls, list) and calls
        for call in calls:
            assert list(call) in (["tool_call_id", "name"], ["tool_call_id", "name", "args"])
            assert isinstance(call["name"], str)
            assert "args" not in call or call["args"] is not None
    elif role == "tool":
        assert keys == ["role", "content", "tool_call_id"]
    else:
        assert keys == ["role", "content"]


def _assert_usable(call_id) -> None:
    assert isinstance(call_id, str)
    assert call_id == call_id.strip() and call_id not in ("", "0")


# --------------------------------------------------------------------------------------------
# Properties


@given(st.one_of(conversations, junk_entries, st.dictionaries(st.text(max_size=4), scalars, max_size=3)))
def test_never_raises_and_non_lists_normalize_to_empty(value):
    result = normalize_conversation(value)
    if not isinstance(value, list):
        assert (result.messages, result.dropped, result.drops, result.healed) == ([], 0, {}, 0)


@given(conversations)
def test_idempotent(messages):
    first = normalize_conversation(messages)
    second = normalize_conversation(first.messages)
    assert second.messages == first.messages
    assert [list(m) for m in second.messages] == [list(m) for m in first.messages]
    assert (second.dropped, second.drops, second.healed) == (0, {}, 0)


@pytest.mark.slow
@given(conversations)
def test_rule_4_as_written_gives_the_same_result(messages):
    # NORMALIZATION.md runs the repair pass again after rule 4, always; the core skips that
    # second pass when rule 4 stripped nothing (it is then the identity). The letter of the
    # spec, spelled out with the core's own steps, must give the very same result.
    from transforms.core.normalize_coerce import coerce_entries
    from transforms.core.normalize_log import DropLog
    from transforms.core.normalize_repair import repair, strip_leading_tools, system_first

    log = DropLog()
    flat, healed = repair(system_first(coerce_entries(messages, log)), log)  # the core never mutates its input
    flat, healed_again = repair(strip_leading_tools(flat, log), log)
    result = normalize_conversation(messages)
    assert result.messages == flat and [list(m) for m in result.messages] == [list(m) for m in flat]
    assert (result.dropped, result.drops, result.healed) == (log.dropped, log.report(), healed + healed_again)


@given(conversations)
def test_input_never_mutated(messages):
    before = _snapshot(messages)
    normalize_conversation(messages)
    assert messages == before


@given(conversations)
def test_system_messages_never_dropped_and_all_first_then_no_leading_result(messages):
    out = normalize_conversation(messages).messages
    assert _system_count(out) == _system_count(messages)
    roles = [m["role"] == "system" for m in out]
    assert roles == sorted(roles, reverse=True)  # a prefix of system messages, then none
    rest = out[roles.count(True) :]
    assert not rest or rest[0]["role"] != "tool"  # the leading-tool guard held


@given(conversations)
def test_every_call_declared_once_and_answered_by_exactly_one_result(messages):
    out = normalize_conversation(messages).messages
    declared = [c["tool_call_id"] for m in out if m["role"] == "assistant" for c in m.get("tool_calls", ())]
    results = [m["tool_call_id"] for m in out if m["role"] == "tool"]
    for call_id in declared + results:
        _assert_usable(call_id)
        assert call_id in USABLE_TEXTS
    assert len(declared) == len(set(declared))
    # Exactly one result per declared id, and no result without a declaration.
    assert Counter(results) == Counter(declared)
    # Synthetic results (the generator never writes their text) sit in the run of results
    # directly after the turn that declared them, and nowhere else. (Order inside the run is
    # declaration order per pass; a call healed by the second pass goes before the first
    # pass's synthetics, so the run as a whole need not be in declaration order.)
    placed = 0
    for i, message in enumerate(out):
        if message["role"] == "assistant" and "tool_calls" in message:
            own = {c["tool_call_id"] for c in message["tool_calls"]}
            j = i + 1
            while j < len(out) and out[j]["role"] == "tool" and out[j]["content"] == INTERRUPTED_RESULT:
                assert out[j]["tool_call_id"] in own
                j += 1
            placed += j - i - 1
    assert placed == sum(1 for m in out if m["role"] == "tool" and m["content"] == INTERRUPTED_RESULT)


@given(conversations)
def test_drop_accounting(messages):
    result = normalize_conversation(messages)
    assert set(result.drops) <= set(REASONS)
    assert list(result.drops) == [r for r in REASONS if r in result.drops]
    assert all(isinstance(n, int) and n > 0 for n in result.drops.values())
    assert sum(result.drops.values()) == result.dropped
    assert result.healed >= 0
    # Ledger: every message-level drop removed one entry, every heal added one.
    message_drops = result.dropped - sum(result.drops.get(r, 0) for r in CALL_REASONS)
    assert len(result.messages) == len(messages) - message_drops + result.healed
    synthetic = sum(1 for m in result.messages if m["role"] == "tool" and m["content"] == INTERRUPTED_RESULT)
    assert synthetic >= result.healed


@given(conversations)
def test_flat_shape_and_string_content(messages):
    for message in normalize_conversation(messages).messages:
        _assert_flat_shape(message)


@given(conversations)
def test_the_trace_changes_nothing_and_its_events_are_the_counts(messages):
    """The opt-in trace is recorded by the same pass: the result is unchanged, there is one drop
    event per counted drop (by reason) and one healed event per heal, and every output
    message comes from one input entry that no event dropped (or is a synthetic result)."""
    trace = Trace()
    result = normalize_conversation(messages, trace)
    assert result == normalize_conversation(messages)
    dropped = [e for e in trace.events if e.kind == "dropped"]
    assert Counter(e.reason for e in dropped) == Counter(result.drops)
    assert sum(1 for e in trace.events if e.kind == "healed") == result.healed
    assert set(CORE_CALL_REASONS) == set(CALL_REASONS)
    assert all((e.call is not None) == (e.reason in CALL_REASONS) for e in dropped)
    assert len(trace.origins) == len(result.messages)
    kept = [o for o in trace.origins if o is not None]
    assert len(kept) == len(set(kept)) == len(result.messages) - result.healed
    gone = {e.entry for e in dropped if e.call is None}
    assert all(0 <= o < len(messages) for o in kept) and not gone & set(kept)
    assert len(gone) == len(dropped) - sum(1 for e in dropped if e.call is not None)
    for origin, message in zip(trace.origins, result.messages):
        if origin is None:
            assert message["role"] == "tool" and message["content"] == INTERRUPTED_RESULT
        else:
            assert message["role"] == messages[origin]["role"]
