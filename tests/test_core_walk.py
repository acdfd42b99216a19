"""The core's one walk (``normalize_walk.walk``) gives what NORMALIZATION.md's steps give, one pass each.

``normalize_conversation`` coerces, partitions and runs steps A and B of the first repair pass
in one walk of the input, and falls back to the step-by-step path (``_by_the_letter``) when a
result comes before a later declaration of its id. The two must agree on everything: the
messages (key order included), ``dropped``, ``drops`` and ``healed``. The generator here makes
the walk's own edge cases likely: results before, between and after their declarations,
system messages after other messages, orphans, duplicates, ids needing a trim, emptied turns;
``tests/test_normalize_properties.py``'s generator (junk of every kind) is run too.
"""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
for path in (str(ROOT), str(ROOT / "bench")):
    if path not in sys.path:
        sys.path.insert(0, path)

from test_normalize_properties import conversations  # noqa: E402

from transforms.core import normalize, normalize_coerce, normalize_log, normalize_walk  # noqa: E402
from transforms.core.normalize import normalize_conversation  # noqa: E402

IDS = st.sampled_from(["c1", "c2", "c3", " c1", "c2 ", "0", "", 7, None])
CALL = st.one_of(
    st.fixed_dictionaries({"tool_call_id": IDS, "name": st.just("f")}, optional={"args": st.just({"a": 1})}),
    st.fixed_dictionaries(
        {"id": IDS, "type": st.just("function"), "function": st.just({"name": "f", "arguments": "{}"})}
    ),
    st.sampled_from(["junk", 5]),
)
TEXT = st.sampled_from(["", " ", "hi"])
MESSAGE = st.one_of(
    st.fixed_dictionaries({"role": st.sampled_from(["system", "user", "developer"]), "content": TEXT}),
    st.fixed_dictionaries(
        {"role": st.just("assistant"), "content": st.one_of(st.none(), TEXT)},
        optional={"tool_calls": st.one_of(st.lists(CALL, max_size=3), st.just([]))},
    ),
    st.fixed_dictionaries({"role": st.just("tool"), "content": TEXT, "tool_call_id": IDS}),
    st.fixed_dictionaries({"role": st.just("tool"), "content": TEXT, "metadata": st.just({"tool_call_id": "c2"})}),
    st.sampled_from([None, {"content": "no role"}]),
)
WALK_EDGES = st.lists(MESSAGE, max_size=14)


def _same(messages) -> None:
    walked = normalize_conversation(messages)
    letter = normalize._by_the_letter(messages)
    assert walked.messages == letter.messages
    assert [list(m) for m in walked.messages] == [list(m) for m in letter.messages]  # key order
    assert [[list(c) for c in m.get("tool_calls", ())] for m in walked.messages] == [
        [list(c) for c in m.get("tool_calls", ())] for m in letter.messages
    ]
    assert (walked.dropped, walked.drops, walked.healed) == (letter.dropped, letter.drops, letter.healed)
    assert list(walked.drops) == list(letter.drops)


@given(WALK_EDGES)
def test_the_walk_gives_the_letters_result_on_pairing_edge_cases(messages):
    _same(messages)


@pytest.mark.slow  # the property tests' generator: deep and huge content, cast twice
@given(conversations)
def test_the_walk_gives_the_letters_result_on_any_buffer(messages):
    _same(messages)


def test_the_walk_serves_the_usual_conversation_and_falls_back_on_a_forward_reference():
    # Not vacuous: the walk decides the bench corpus's conversations but for those with a
    # result placed before its call, which it hands to the letter.
    import corpus

    walked = fallback = 0
    for line in corpus.jsonl_lines(300, seed=5):
        messages = orjson.loads(line)["messages"]
        _same(messages)
        if normalize_walk.walk(messages, normalize_log.DropLog())[0] is None:
            fallback += 1
        else:
            walked += 1
    assert walked > 250 and fallback > 0


def test_a_result_before_its_declaration_is_decided_by_step_b():
    # The first result answers c1 (declared later, so not an orphan); the second is a duplicate.
    # A walk that answered results as it met declarations would keep the second instead.
    messages = [
        {"role": "user", "content": "u"},
        {"role": "tool", "content": "early", "tool_call_id": "c1"},
        {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c1", "name": "f"}]},
        {"role": "tool", "content": "late", "tool_call_id": "c1"},
    ]
    result = normalize_conversation(messages)
    assert [m["content"] for m in result.messages] == ["u", "early", ""]
    assert result.drops == {"duplicate_result": 1}
    _same(messages)


# The call reading's one-step spellings ({id, type, function} and the flat call) against the
# lenient reading of any spelling: the same call, key order and whole-reading flag. Values of
# every kind, keys of both spellings mixed, so that the fast path's conditions are each tried.
VALUE = st.one_of(st.none(), st.just("f"), st.just(""), st.just(" c1"), st.integers(-1, 2), st.just({"a": 1}))
FUNCTION = st.one_of(
    st.dictionaries(st.sampled_from(["name", "arguments", "x"]), VALUE, max_size=3),
    VALUE,
)
CALL_KEYS = st.sampled_from(["id", "type", "function", "tool_call_id", "name", "args", "arguments"])
ANY_CALL = st.one_of(
    st.fixed_dictionaries({"id": VALUE, "type": VALUE, "function": FUNCTION}),
    st.fixed_dictionaries({"tool_call_id": VALUE, "name": VALUE, "args": VALUE}),
    st.dictionaries(CALL_KEYS, st.one_of(VALUE, FUNCTION), max_size=4),
    VALUE,
)


@given(ANY_CALL)
def test_the_usual_call_spellings_read_in_one_step_as_the_lenient_reading_reads_them(call):
    fast, fast_whole = normalize_coerce.read_call(call)
    lenient, lenient_whole = normalize_coerce.read_call_leniently(call)
    assert fast == lenient and fast_whole == lenient_whole
    if isinstance(fast, dict):
        assert list(fast) == list(lenient)  # key order: it is the output's


def test_the_usual_call_spellings_take_the_one_step_reading(monkeypatch):
    # Not vacuous: both usual spellings are read by the one step, not the lenient reading, and
    # a call with a null name is not.
    lenient = []
    original = normalize_coerce.read_call_leniently

    def counted(call):
        lenient.append(call)
        return original(call)

    monkeypatch.setattr(normalize_coerce, "read_call_leniently", counted)
    openai = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    flat = {"tool_call_id": "c1", "name": "f", "args": "{}"}
    assert normalize_coerce.read_call(openai) == ({"tool_call_id": "c1", "name": "f", "args": "{}"}, True)
    assert normalize_coerce.read_call(flat) == ({"tool_call_id": "c1", "name": "f", "args": "{}"}, True)
    assert lenient == []
    normalize_coerce.read_call({"tool_call_id": "c1", "name": None, "args": "{}"})
    assert len(lenient) == 1
