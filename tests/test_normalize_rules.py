"""One group of cases per clause of NORMALIZATION.md, beyond the spec vectors.

Every case goes through the public function ``normalize_conversation`` (and, for the two
helpers the module exports, ``content_text`` and ``usable_id`` directly). ``run`` checks the
contract that holds for every call: the input is never mutated, ``dropped`` equals the sum of
``drops``, and ``drops`` lists only reasons that occurred, in the canonical order.
"""

from __future__ import annotations

import copy
import json
import random
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # CI installs the project editable; a bare venv may not have it
    sys.path.insert(0, str(ROOT))

from transforms.core.normalize import (  # noqa: E402
    INTERRUPTED_RESULT,
    REASONS,
    NormalizeResult,
    coerce_messages,
    content_text,
    normalize_conversation,
    usable_id,
)

SYNTH = "Tool call was interrupted; no result."


# --------------------------------------------------------------------------------------------
# Helpers


def run(messages):
    """Normalize, and check the invariants every call must satisfy."""
    before = copy.deepcopy(messages)
    result = normalize_conversation(messages)
    assert messages == before, "the input was mutated"
    assert isinstance(result, NormalizeResult)
    assert result.dropped == sum(result.drops.values())
    assert all(count > 0 for count in result.drops.values())
    assert list(result.drops) == [r for r in REASONS if r in result.drops]
    return result


def U(content="q"):
    return {"role": "user", "content": content}


def S(content="s"):
    return {"role": "system", "content": content}


def A(content="", *ids, name="f"):
    """An assistant turn; with ids, a flat call per id."""
    message = {"role": "assistant", "content": content}
    if ids:
        message["tool_calls"] = [{"tool_call_id": i, "name": name} for i in ids]
    return message


def T(call_id, content="r"):
    return {"role": "tool", "content": content, "tool_call_id": call_id}


def synth(call_id):
    return {"role": "tool", "content": SYNTH, "tool_call_id": call_id}


def content_of(value):
    """The text a user message's content becomes."""
    return run([{"role": "user", "content": value}]).messages[0]["content"]


def nested_list(depth, leaf):
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def nested_dict(depth, leaf):
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


def int_from_digits(digits: str) -> int:
    """An int from its decimal digits without tripping CPython's 4,300-digit str limit."""
    value = 0
    for i in range(0, len(digits), 1000):
        chunk = digits[i : i + 1000]
        value = value * 10 ** len(chunk) + int(chunk)
    return value


_rng = random.Random(5)
BIG_DIGITS = "9" + "".join(_rng.choice("0123456789") for _ in range(4999))  # 5,000 digits
BIG = int_from_digits(BIG_DIGITS)
# Long zero runs straddle the chunk boundaries of any chunked conversion (zero padding).
SPARSE_DIGITS = "7" + "0" * 4500 + "42" + "0" * 3999 + "1"
SPARSE = int_from_digits(SPARSE_DIGITS)


# --------------------------------------------------------------------------------------------
# Contract


@pytest.mark.parametrize(
    "value",
    [
        None,
        {},
        {"role": "user", "content": "hi"},
        "messages",
        5,
        1.5,
        True,
        b"[]",
        ({"role": "user", "content": "hi"},),
    ],
    ids=["none", "empty-dict", "message-dict", "str", "int", "float", "bool", "bytes", "tuple"],
)
def test_non_list_input_is_empty_and_nothing_dropped(value):
    result = normalize_conversation(value)
    assert result == NormalizeResult([], 0, {}, 0)
    assert result.messages == [] and result.dropped == 0 and result.drops == {} and result.healed == 0


def test_result_is_a_named_tuple_with_the_four_fields():
    result = normalize_conversation([U("hi")])
    assert NormalizeResult._fields == ("messages", "dropped", "drops", "healed")
    assert result.messages == [U("hi")]
    assert (result.dropped, result.drops, result.healed) == (0, {}, 0)


def test_dropped_is_counted_not_a_length_difference():
    # Three drops from a list of two (the narrative's first example, with another spelling).
    result = run([A("", " 0 "), T(0)])
    assert result.messages == []
    assert result.dropped == 3
    assert result.dropped != 2 - len(result.messages)


def test_healed_is_not_subtracted_from_dropped():
    result = run([U(), "junk", A("", "c1")])
    assert result.messages == [U(), A("", "c1"), synth("c1")]
    assert (result.dropped, result.drops, result.healed) == (1, {"not_an_object": 1}, 1)


# --------------------------------------------------------------------------------------------
# The flat shape


def test_plain_message_keeps_only_role_and_content_in_order():
    entry = {"timestamp": 3, "content": "hi", "name": "bob", "role": "user", "metadata": {"a": 1}, "id": "m"}
    result = run([entry])
    assert result.messages == [{"role": "user", "content": "hi"}]
    assert list(result.messages[0]) == ["role", "content"]
    assert result.dropped == 0


def test_assistant_key_order_role_content_tool_calls():
    entry = {"tool_calls": [{"name": "f", "tool_call_id": "c1"}], "name": "x", "content": "c", "role": "assistant"}
    result = run([entry, T("c1")])
    assert list(result.messages[0]) == ["role", "content", "tool_calls"]
    assert result.messages[0] == A("c", "c1")


def test_tool_key_order_role_content_tool_call_id():
    entry = {"tool_call_id": "c1", "name": "search", "content": "r", "role": "tool", "timestamp": 1}
    result = run([A("", "c1"), entry])
    assert list(result.messages[1]) == ["role", "content", "tool_call_id"]
    assert result.messages[1] == T("c1")


def test_call_key_order_tool_call_id_name_args():
    call = {"args": {"q": 1}, "type": "function", "name": "f", "extra": 1, "id": "c1"}
    result = run([{"role": "assistant", "content": "", "tool_calls": [call]}, T("c1")])
    (out_call,) = result.messages[0]["tool_calls"]
    assert list(out_call) == ["tool_call_id", "name", "args"]
    assert out_call == {"tool_call_id": "c1", "name": "f", "args": {"q": 1}}


def test_synthetic_result_key_order():
    result = run([A("", "c1")])
    assert list(result.messages[1]) == ["role", "content", "tool_call_id"]


@pytest.mark.parametrize("role", ["user", "system", "tool", "developer"])
def test_tool_calls_on_a_non_assistant_is_removed_not_dropped(role):
    entry = {"role": role, "content": "x", "tool_calls": [{"tool_call_id": "c1", "name": "f"}]}
    if role == "tool":
        entry["tool_call_id"] = "c1"
        result = run([A("", "c1"), entry])
        assert result.messages == [A("", "c1"), T("c1", "x")]
    else:
        result = run([U("first"), entry])
        assert {"role": role, "content": "x"} in result.messages
        assert all("tool_calls" not in m for m in result.messages)
    assert result.dropped == 0 and result.healed == 0


@pytest.mark.parametrize("role", ["user", "system", "assistant", "moderator"])
def test_tool_call_id_on_a_non_tool_is_removed_not_dropped(role):
    result = run([U("first"), {"role": role, "content": "x", "tool_call_id": "c1"}])
    assert {"role": role, "content": "x"} in result.messages
    assert all("tool_call_id" not in m for m in result.messages)
    assert result.dropped == 0 and result.healed == 0


# --------------------------------------------------------------------------------------------
# Rule 1.1 — not an object


@pytest.mark.parametrize(
    "entry",
    ["junk", "", 0, 42, 1.5, True, None, ["user", "hi"], [], ("user", "hi")],
    ids=["str", "empty-str", "zero", "int", "float", "bool", "null", "list", "empty-list", "tuple"],
)
def test_non_object_entry_is_dropped(entry):
    result = run([U("a"), entry, U("b")])
    assert result.messages == [U("a"), U("b")]
    assert (result.dropped, result.drops) == (1, {"not_an_object": 1})


# --------------------------------------------------------------------------------------------
# Rule 1.2 — no role; every other role verbatim


@pytest.mark.parametrize(
    "entry",
    [
        {"content": "missing"},
        {"role": None, "content": "null"},
        {"role": 5, "content": "int"},
        {"role": 0, "content": "zero"},
        {"role": True, "content": "bool"},
        {"role": 1.5, "content": "float"},
        {"role": ["user"], "content": "list"},
        {"role": {"name": "user"}, "content": "object"},
        {"role": "", "content": "empty"},
        {"role": "  ", "content": "blank"},
        {"role": "\t\n ", "content": "whitespace"},
    ],
    ids=["missing", "null", "int", "zero", "bool", "float", "list", "object", "empty", "blank", "whitespace"],
)
def test_entry_without_a_usable_role_is_dropped(entry):
    result = run([entry, U()])
    assert result.messages == [U()]
    assert (result.dropped, result.drops) == (1, {"no_role": 1})


def test_no_role_and_not_an_object_are_counted_separately():
    result = run([{"content": "x"}, "junk", {"role": " "}, 7, U()])
    assert result.messages == [U()]
    assert (result.dropped, result.drops) == (4, {"not_an_object": 2, "no_role": 2})


def test_roles_are_kept_verbatim_and_only_system_moves():
    entries = [
        {"role": "developer", "content": "d"},
        {"role": "System", "content": "S"},
        {"role": "moderator", "content": "m"},
        {"role": "SYSTEM", "content": "SS"},
        {"role": " user ", "content": "u"},
        S("real"),
    ]
    result = run(entries)
    assert result.messages == [
        S("real"),
        {"role": "developer", "content": "d"},
        {"role": "System", "content": "S"},
        {"role": "moderator", "content": "m"},
        {"role": "SYSTEM", "content": "SS"},
        {"role": " user ", "content": "u"},
    ]
    assert result.dropped == 0


def test_role_matching_is_case_sensitive_for_pairing():
    # "Assistant" and "Tool" are ordinary roles: no calls read, no id kept, no pairing.
    entries = [
        {"role": "Assistant", "content": "", "tool_calls": [{"tool_call_id": "c1", "name": "f"}]},
        {"role": "Tool", "content": "r", "tool_call_id": "c1"},
    ]
    result = run(entries)
    assert result.messages == [{"role": "Assistant", "content": ""}, {"role": "Tool", "content": "r"}]
    assert (result.dropped, result.healed) == (0, 0)


# --------------------------------------------------------------------------------------------
# Rule 1.3 — pairing keys at the top level, else under metadata


@pytest.mark.parametrize("top", ["absent", "null"])
def test_pairing_keys_read_from_metadata_when_absent_or_null(top):
    assistant = {"role": "assistant", "content": "", "metadata": {"tool_calls": [{"tool_call_id": "c1", "name": "f"}]}}
    tool = {"role": "tool", "content": "r", "metadata": {"tool_call_id": "c1"}}
    if top == "null":
        assistant["tool_calls"] = None
        tool["tool_call_id"] = None
    result = run([assistant, tool])
    assert result.messages == [A("", "c1"), T("c1")]
    assert (result.dropped, result.healed) == (0, 0)


def test_top_level_pairing_keys_win_over_metadata():
    assistant = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"tool_call_id": "top", "name": "f"}],
        "metadata": {"tool_calls": [{"tool_call_id": "meta", "name": "g"}]},
    }
    answer = {"role": "tool", "content": "r", "tool_call_id": "top", "metadata": {"tool_call_id": "meta"}}
    stray = {"role": "tool", "content": "x", "metadata": {"tool_call_id": "meta"}}
    result = run([assistant, answer, stray])
    assert result.messages == [A("", "top"), T("top")]
    assert result.drops == {"orphan_result": 1}  # "meta" was never declared


def test_present_non_null_top_level_values_are_not_replaced_by_metadata():
    # Only an absent or null top-level key defers to metadata: a present empty list means
    # no calls, a present blank id is an unusable id.
    assistant = {
        "role": "assistant",
        "content": "t",
        "tool_calls": [],
        "metadata": {"tool_calls": [{"tool_call_id": "c1", "name": "f"}]},
    }
    tool = {"role": "tool", "content": "r", "tool_call_id": "", "metadata": {"tool_call_id": "c1"}}
    result = run([assistant, tool])
    assert result.messages == [A("t")]
    assert result.drops == {"orphan_result": 1}


@pytest.mark.parametrize("metadata", ["c1", ["c1"], 5, None])
def test_metadata_that_is_not_an_object_is_ignored(metadata):
    result = run([A("", "c1"), {"role": "tool", "content": "r", "metadata": metadata}])
    assert result.messages == [A("", "c1"), synth("c1")]
    assert (result.drops, result.healed) == ({"orphan_result": 1}, 1)


def test_metadata_pairing_keys_on_other_roles_are_ignored():
    entries = [
        {"role": "user", "content": "u", "metadata": {"tool_calls": [{"tool_call_id": "c1", "name": "f"}]}},
        {"role": "assistant", "content": "a", "metadata": {"tool_call_id": "c1"}},
    ]
    result = run(entries)
    assert result.messages == [U("u"), A("a")]
    assert (result.dropped, result.healed) == (0, 0)


# --------------------------------------------------------------------------------------------
# Rule 1.4 — the content casting table

CASTS = [
    # missing or null
    (None, ""),
    # string: unchanged (not trimmed)
    ("x", "x"),
    ("", ""),
    ("  padded  ", "  padded  "),
    ("é 日本 \n", "é 日本 \n"),
    # boolean
    (True, "true"),
    (False, "false"),
    # integer: decimal digits, any size
    (0, "0"),
    (42, "42"),
    (-5, "-5"),
    (2**64 + 1, "18446744073709551617"),
    (-(2**70), "-1180591620717411303424"),
    (BIG, BIG_DIGITS),
    (-BIG, "-" + BIG_DIGITS),
    (SPARSE, SPARSE_DIGITS),
    # float: Python's shortest repr
    (1.5, "1.5"),
    (2.0, "2.0"),
    (0.1, "0.1"),
    (-0.0, "-0.0"),
    (1e16, "1e+16"),
    (1e-7, "1e-07"),
    (123456789.125, "123456789.125"),
    (float("inf"), "inf"),
    (float("nan"), "nan"),
    # object or list: compact JSON, key order kept, non-ASCII kept
    ({}, "{}"),
    ([], "[]"),
    ({"b": 1, "a": [1, 2, {"c": None}]}, '{"b":1,"a":[1,2,{"c":null}]}'),
    ([1, "x", True, False, None, 1.5], '[1,"x",true,false,null,1.5]'),
    ({"k": "é"}, '{"k":"é"}'),
    (["日本"], '["日本"]'),
    ({"日本": {"é": ["ü"]}}, '{"日本":{"é":["ü"]}}'),
    ({"q": 'say "hi"\n\\'}, '{"q":"say \\"hi\\"\\n\\\\"}'),
    ([{"type": "text", "text": "hello"}], '[{"type":"text","text":"hello"}]'),
    # integers past 64 bits inside objects stay exact (the fast encoder refuses them)
    ({"n": 2**64 + 1}, '{"n":18446744073709551617}'),
    ([2**70, -(2**200)], "[1180591620717411303424,-" + str(2**200) + "]"),
    ({"a": {"b": [BIG]}}, '{"a":{"b":[' + BIG_DIGITS + "]}}"),
    ({"z": 1, "n": SPARSE, "é": "ü"}, '{"z":1,"n":' + SPARSE_DIGITS + ',"é":"ü"}'),
]
CAST_IDS = [
    "null",
    "str",
    "empty-str",
    "padded-str",
    "non-ascii-str",
    "true",
    "false",
    "zero",
    "int",
    "negative-int",
    "2**64+1",
    "-2**70",
    "5000-digits",
    "negative-5000-digits",
    "sparse-8500-digits",
    "1.5",
    "2.0",
    "0.1",
    "-0.0",
    "1e16",
    "1e-7",
    "float",
    "inf",
    "nan",
    "empty-object",
    "empty-list",
    "object-key-order",
    "list-scalars",
    "non-ascii-value",
    "non-ascii-list",
    "non-ascii-keys",
    "escapes",
    "content-parts",
    "nested-2**64+1",
    "nested-big-list",
    "nested-5000-digits",
    "nested-sparse-with-non-ascii",
]


@pytest.mark.parametrize(("value", "text"), CASTS, ids=CAST_IDS)
def test_content_casting_table(value, text):
    assert content_of(value) == text
    assert content_text(value) == text


def test_missing_content_is_empty_text():
    result = run([{"role": "user"}, {"role": "assistant"}, {"role": "system"}])
    assert result.messages == [S(""), U(""), A("")]


def test_compact_json_round_trips():
    value = {"b": [1, 2.5, None, True, {"é": "日本"}], "a": {"n": 2**65}, "s": "\u2028\x01"}
    text = content_of(value)
    assert json.loads(text) == value
    assert text == json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    assert ", " not in text and ": " not in text


def test_content_text_big_int_is_exact_past_the_interpreter_limit():
    # CPython's str() refuses integers past 4,300 digits; the digits must still be exact.
    with pytest.raises(ValueError):
        str(BIG)
    assert content_text(BIG) == BIG_DIGITS
    assert content_text(10**4300) == "1" + "0" * 4300
    assert content_text(10**4299) == "1" + "0" * 4299


@pytest.mark.parametrize("depth", [256, 400, 600])
@pytest.mark.parametrize("shape", ["list", "object"])
def test_nesting_past_the_fast_encoders_limit_is_still_serialized(depth, shape):
    if shape == "list":
        value, expected = nested_list(depth, 1), "[" * depth + "1" + "]" * depth
    else:
        value, expected = nested_dict(depth, 1), '{"a":' * depth + "1" + "}" * depth
    result = normalize_conversation([{"role": "user", "content": value}])
    assert result.messages == [{"role": "user", "content": expected}]


def test_deep_nesting_with_an_integer_past_the_interpreter_limit_is_exact():
    # Both escapes at once: orjson refuses the depth, json refuses the digits; the text is
    # still serializable at a depth the standard encoder handles.
    depth = 400
    value = nested_list(depth, BIG)
    assert content_text(value) == "[" * depth + BIG_DIGITS + "]" * depth
    value = nested_dict(depth, [2**70, BIG])
    assert content_text(value) == '{"a":' * depth + "[1180591620717411303424," + BIG_DIGITS + "]" + "}" * depth


@pytest.mark.parametrize("shape", ["list", "object", "list-with-big-int"])
def test_nesting_far_too_deep_is_empty_text_and_no_exception(shape):
    depth = 100_000
    if shape == "list":
        value = nested_list(depth, 1)
    elif shape == "object":
        value = nested_dict(depth, "x")
    else:
        value = [BIG, nested_list(depth, 1)]
    entries = [U("before"), {"role": "user", "content": value}, U("after")]
    result = normalize_conversation(entries)
    assert result.messages == [U("before"), U(""), U("after")]
    assert (result.dropped, result.healed) == (0, 0)
    assert entries[1]["content"] is value  # input untouched


class _Opaque:
    pass


@pytest.mark.parametrize(
    "value",
    [
        {1, 2},
        frozenset({"a"}),
        b"bytes",
        bytearray(b"x"),
        object(),
        _Opaque(),
        1 + 2j,
        {"a": {1, 2}},
        [b"x"],
        [2**70, {3}],
        [BIG, object()],
    ],
    ids=[
        "set",
        "frozenset",
        "bytes",
        "bytearray",
        "object",
        "instance",
        "complex",
        "set-in-object",
        "bytes-in-list",
        "set-after-big-int",
        "object-after-5000-digits",
    ],
)
def test_content_that_cannot_be_serialized_is_empty_text(value):
    result = normalize_conversation([U("a"), {"role": "user", "content": value}])
    assert result.messages == [U("a"), U("")]
    assert (result.dropped, result.healed) == (0, 0)


def test_circular_content_is_empty_text_and_no_exception():
    value = []
    value.append(value)
    result = normalize_conversation([{"role": "user", "content": value}])
    assert result.messages == [U("")]


def test_content_is_cast_for_every_role():
    value = {"x": [1]}
    entries = [
        {"role": "system", "content": value},
        {"role": "assistant", "content": 7, "tool_calls": [{"tool_call_id": "c1", "name": "f"}]},
        {"role": "tool", "content": False, "tool_call_id": "c1"},
        {"role": "moderator", "content": 2.0},
    ]
    result = run(entries)
    assert result.messages == [S('{"x":[1]}'), A("7", "c1"), T("c1", "false"), {"role": "moderator", "content": "2.0"}]


# --------------------------------------------------------------------------------------------
# Rule 1 — reading calls leniently


def call_out(call):
    """The single call an assistant turn with ``call`` (answered) normalizes to."""
    result = run([{"role": "assistant", "content": "t", "tool_calls": [call]}, T("c1")])
    assert result.messages[1:] == [T("c1")]
    return result.messages[0]["tool_calls"][0]


def test_provider_shaped_call_is_read():
    call = {"id": "c1", "type": "function", "function": {"name": "search", "arguments": '{"q": "x"}'}}
    out = call_out(call)
    assert out == {"tool_call_id": "c1", "name": "search", "args": '{"q": "x"}'}
    assert list(out) == ["tool_call_id", "name", "args"]


@pytest.mark.parametrize(
    ("call", "expected_id"),
    [
        ({"tool_call_id": "c1"}, "c1"),
        ({"id": "c1"}, "c1"),
        ({"tool_call_id": "c1", "id": "other"}, "c1"),
        ({"tool_call_id": None, "id": "c1"}, "c1"),
    ],
    ids=["tool_call_id", "id", "tool_call_id-wins", "null-tool_call_id-falls-back"],
)
def test_call_id_from_tool_call_id_else_id(call, expected_id):
    assert call_out({**call, "name": "f"})["tool_call_id"] == expected_id


@pytest.mark.parametrize(
    ("call", "name"),
    [
        ({"name": "flat"}, "flat"),
        ({"function": {"name": "nested"}}, "nested"),
        ({"name": "flat", "function": {"name": "nested"}}, "flat"),
        ({"name": None, "function": {"name": "nested"}}, "nested"),
        ({}, ""),
        ({"function": {}}, ""),
        ({"function": "search"}, ""),
        ({"name": ""}, ""),
        ({"name": 5}, "5"),
        ({"name": True}, "true"),
        ({"name": 1.5}, "1.5"),
        ({"name": 2**70}, "1180591620717411303424"),
        ({"name": {"b": 1, "a": "é"}}, '{"b":1,"a":"é"}'),
        ({"name": ["x"]}, '["x"]'),
        ({"function": {"name": 7}}, "7"),
        ({"name": {1, 2}}, ""),
    ],
    ids=[
        "name",
        "function.name",
        "name-wins",
        "null-name-falls-back",
        "missing",
        "empty-function",
        "function-not-object",
        "empty-name",
        "int",
        "bool",
        "float",
        "big-int",
        "object",
        "list",
        "nested-int",
        "unserializable",
    ],
)
def test_call_name_from_name_else_function_name_cast_like_content(call, name):
    out = call_out({"tool_call_id": "c1", **call})
    assert out["name"] == name
    assert isinstance(out["name"], str)


@pytest.mark.parametrize(
    ("call", "args"),
    [
        ({"args": {"q": 1}}, {"q": 1}),
        ({"args": '{"q":1}'}, '{"q":1}'),
        ({"arguments": '{"q": 2}'}, '{"q": 2}'),
        ({"arguments": {"q": 2}}, {"q": 2}),
        ({"function": {"arguments": '{"q": 3}'}}, '{"q": 3}'),
        ({"function": {"arguments": {"q": 3}}}, {"q": 3}),
        ({"args": "a", "arguments": "b", "function": {"arguments": "c"}}, "a"),
        ({"arguments": "b", "function": {"arguments": "c"}}, "b"),
        ({"args": None, "arguments": "b"}, "b"),
        ({"args": [1, 2]}, [1, 2]),
        ({"args": ""}, ""),
        ({"args": "not json {"}, "not json {"),
        ({"args": {"n": 2**70}}, {"n": 2**70}),
    ],
    ids=[
        "args-object",
        "args-string",
        "arguments-string",
        "arguments-object",
        "function-string",
        "function-object",
        "args-first",
        "arguments-second",
        "null-args-falls-back",
        "list",
        "empty-string",
        "invalid-json-string",
        "big-int",
    ],
)
def test_call_args_carried_verbatim(call, args):
    out = call_out({"tool_call_id": "c1", "name": "f", **call})
    assert out["args"] == args
    assert type(out["args"]) is type(args)


@pytest.mark.parametrize(
    "call",
    [{}, {"args": None}, {"arguments": None}, {"function": {"name": "g"}}, {"function": {"arguments": None}}],
    ids=["none", "null-args", "null-arguments", "function-without-arguments", "null-function-arguments"],
)
def test_call_without_arguments_has_no_args_key(call):
    out = call_out({"tool_call_id": "c1", "name": "f", **call})
    assert "args" not in out
    assert list(out) == ["tool_call_id", "name"]


@pytest.mark.parametrize(
    "tool_calls",
    [None, [], {}, {"tool_call_id": "c1", "name": "f"}, "c1", 5, True],
    ids=["null", "empty-list", "empty-object", "object", "str", "int", "bool"],
)
@pytest.mark.parametrize("content", ["", "text"])
def test_tool_calls_not_a_list_or_empty_means_no_calls(tool_calls, content):
    entry = {"role": "assistant", "content": content, "tool_calls": tool_calls}
    result = run([U(), entry])
    assert result.messages == [U(), A(content)]
    assert "tool_calls" not in result.messages[1]
    assert (result.dropped, result.drops, result.healed) == (0, {}, 0)


def test_tool_calls_not_a_list_under_metadata_means_no_calls():
    entry = {"role": "assistant", "content": "", "metadata": {"tool_calls": {"tool_call_id": "c1"}}}
    result = run([entry])
    assert result.messages == [A("")]
    assert (result.dropped, result.healed) == (0, 0)


def test_coerce_messages_is_rule_1_alone():
    entries = [
        "junk",
        {"role": "tool", "content": 1, "tool_call_id": " c1 "},
        {"content": "x"},
        {"role": "assistant", "tool_calls": [{"id": 0, "function": {"name": "f"}}, 5]},
    ]
    before = copy.deepcopy(entries)
    coerced, drops = coerce_messages(entries)
    assert entries == before
    # Ids stay raw (untrimmed, unusable ones kept); calls are read but not yet judged.
    assert coerced == [
        {"role": "tool", "content": "1", "tool_call_id": " c1 "},
        {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": 0, "name": "f"}, 5]},
    ]
    assert drops == {"not_an_object": 1, "no_role": 1}


# --------------------------------------------------------------------------------------------
# Rule 2 — system messages first


def test_system_messages_move_first_in_stable_order():
    entries = [U("u1"), S("s1"), A("a1"), {"role": "developer", "content": "d"}, S("s2"), U("u2"), S("s3")]
    result = run(entries)
    assert result.messages == [
        S("s1"),
        S("s2"),
        S("s3"),
        U("u1"),
        A("a1"),
        {"role": "developer", "content": "d"},
        U("u2"),
    ]
    assert result.dropped == 0


def test_system_messages_are_never_dropped():
    # Empty content, pairing keys, stored-buffer metadata: a system message still stays.
    entries = [
        T("orphan"),
        {"role": "system", "tool_calls": [{"tool_call_id": "0"}], "tool_call_id": "x"},
        {"role": "system", "content": "  ", "metadata": {"tool_call_id": "c9"}},
        "junk",
    ]
    result = run(entries)
    assert result.messages == [S(""), S("  ")]
    assert result.drops == {"not_an_object": 1, "orphan_result": 1}


# --------------------------------------------------------------------------------------------
# Rule 3 — usable id

UNUSABLE_IDS = [True, False, None, 1.5, 1.0, 0.0, {"id": "c1"}, ["c1"], b"c1", "", "   ", "\t\n", "0", " 0 ", 0, -0]
UNUSABLE_NAMES = [
    "true",
    "false",
    "null",
    "float",
    "float-1.0",
    "float-0.0",
    "object",
    "list",
    "bytes",
    "empty",
    "blank",
    "whitespace",
    "str-0",
    "padded-str-0",
    "int-0",
    "negative-zero",
]
USABLE_IDS = [
    (7, "7"),
    (-3, "-3"),
    (2**70, "1180591620717411303424"),
    (" c1 ", "c1"),
    ("\tc1\n", "c1"),
    ("c1", "c1"),
    ("00", "00"),
    (" 00 ", "00"),
    ("0.0", "0.0"),
    ("false", "false"),
    ("a b", "a b"),
]


@pytest.mark.parametrize("value", UNUSABLE_IDS, ids=UNUSABLE_NAMES)
def test_usable_id_unusable_values(value):
    assert usable_id(value) is None


@pytest.mark.parametrize(("value", "text"), USABLE_IDS, ids=[repr(v) for v, _ in USABLE_IDS])
def test_usable_id_usable_values(value, text):
    assert usable_id(value) == text


@pytest.mark.parametrize("value", UNUSABLE_IDS, ids=UNUSABLE_NAMES)
def test_unusable_id_costs_the_call_the_empty_turn_and_the_result(value):
    result = run([U(), A("", value), T(value)])
    assert result.messages == [U()]
    assert result.drops == {"unusable_call": 1, "emptied_turn": 1, "orphan_result": 1}


@pytest.mark.parametrize(("value", "text"), USABLE_IDS, ids=[repr(v) for v, _ in USABLE_IDS])
def test_usable_id_pairs_under_its_text_and_is_output_trimmed(value, text):
    result = run([U(), A("", value), T(value)])
    assert result.messages == [U(), A("", text), T(text)]
    assert (result.dropped, result.healed) == (0, 0)


def test_ids_pair_across_spellings():
    # int 7 and "7", " c1 " and "c1" are one id each.
    result = run([A("", 7, " c1 "), T("7", "r7"), T("c1 ", "r1")])
    assert result.messages == [A("", "7", "c1"), T("7", "r7"), T("c1", "r1")]
    assert (result.dropped, result.healed) == (0, 0)


# --------------------------------------------------------------------------------------------
# Rule 3, step A — declarations


def test_same_turn_redeclaration_under_other_spellings():
    calls = [{"id": "c1", "name": "a"}, {"tool_call_id": " c1 ", "name": "b"}, {"tool_call_id": "c2", "name": "c"}]
    result = run([U(), {"role": "assistant", "content": "", "tool_calls": calls}, T("c1"), T("c2")])
    assert result.messages[1]["tool_calls"] == [
        {"tool_call_id": "c1", "name": "a"},
        {"tool_call_id": "c2", "name": "c"},
    ]
    assert result.drops == {"redeclared_call": 1}
    assert result.healed == 0


def test_later_turn_redeclaration_with_text_survives_as_plain_assistant():
    entries = [U(), A("", "c1"), T("c1", "first"), U("again"), A("thinking", "c1"), T("c1", "second")]
    result = run(entries)
    assert result.messages == [U(), A("", "c1"), T("c1", "first"), U("again"), A("thinking")]
    assert "tool_calls" not in result.messages[4]
    assert result.drops == {"redeclared_call": 1, "duplicate_result": 1}


def test_redeclaration_across_turns_in_other_spellings():
    result = run([A("", 7), T(7), A("", "7 "), T("7")])
    assert result.messages == [A("", "7"), T("7")]
    assert result.drops == {"redeclared_call": 1, "emptied_turn": 1, "duplicate_result": 1}


def test_first_declaration_owns_the_pairing_even_when_answered_after_the_later_turn():
    # The later turn is emptied; the result after it answers the first declaration.
    result = run([U(), A("", "c1"), U("more"), A(" ", "c1"), T("c1")])
    assert result.messages == [U(), A("", "c1"), U("more"), T("c1")]
    assert result.drops == {"redeclared_call": 1, "emptied_turn": 1}
    assert result.healed == 0


def test_turn_with_text_survives_as_plain_assistant_when_all_calls_are_unusable():
    entries = [
        U(),
        {"role": "assistant", "content": "let me check", "tool_calls": [{"tool_call_id": "0"}, "junk", None]},
    ]
    result = run(entries)
    assert result.messages == [U(), A("let me check")]
    assert list(result.messages[1]) == ["role", "content"]
    assert result.drops == {"unusable_call": 3}


@pytest.mark.parametrize("content", ["", "   ", "\n\t", None])
def test_turn_whose_calls_all_go_and_content_is_blank_is_dropped(content):
    entries = [U(), {"role": "assistant", "content": content, "tool_calls": [{"tool_call_id": ""}]}]
    result = run(entries)
    assert result.messages == [U()]
    assert result.drops == {"unusable_call": 1, "emptied_turn": 1}


@pytest.mark.parametrize("content", ["", "   ", None])
def test_assistant_turn_that_never_had_calls_is_never_dropped(content):
    result = run([U(), {"role": "assistant", "content": content}, A("")])
    assert result.messages == [U(), A("" if content is None else content), A("")]
    assert result.dropped == 0


@pytest.mark.parametrize("call", ["c1", 5, None, ["c1"], True], ids=["str", "int", "null", "list", "bool"])
def test_call_that_is_not_an_object_is_unusable(call):
    entries = [
        U(),
        {"role": "assistant", "content": "", "tool_calls": [call, {"tool_call_id": "c2", "name": "f"}]},
        T("c2"),
    ]
    result = run(entries)
    assert result.messages == [U(), A("", "c2"), T("c2")]
    assert result.drops == {"unusable_call": 1}


def test_call_without_any_id_is_unusable():
    entries = [{"role": "assistant", "content": "x", "tool_calls": [{"name": "f", "function": {"id": "c1"}}]}]
    result = run(entries)
    assert result.messages == [A("x")]
    assert result.drops == {"unusable_call": 1}


def test_some_calls_survive_the_turn_keeps_them_in_order():
    entries = [A("", "0", "c2", "c1", "c2", " c3"), T("c1"), T("c2"), T("c3")]
    result = run(entries)
    assert result.messages[0] == A("", "c2", "c1", "c3")
    assert result.drops == {"unusable_call": 1, "redeclared_call": 1}
    assert result.healed == 0


# --------------------------------------------------------------------------------------------
# Rule 3, step B — results


@pytest.mark.parametrize(
    "entry",
    [T("nobody"), T(None), {"role": "tool", "content": "r"}, T("0"), T(""), T(True), T(1.5), T({"id": "c1"})],
    ids=["undeclared", "null", "missing", "str-0", "empty", "bool", "float", "object"],
)
def test_orphan_results_are_dropped(entry):
    result = run([U(), A("", "c1"), T("c1"), entry, A("done")])
    assert result.messages == [U(), A("", "c1"), T("c1"), A("done")]
    assert result.drops == {"orphan_result": 1}


def test_result_for_a_call_dropped_as_unusable_is_an_orphan():
    result = run([U(), A("checking", "0"), T("0")])
    assert result.messages == [U(), A("checking")]
    assert result.drops == {"unusable_call": 1, "orphan_result": 1}


def test_result_declared_only_after_it_mid_list_is_not_an_orphan():
    entries = [U(), T("c1", "early"), U("between"), A("", "c1"), A("done")]
    result = run(entries)
    assert result.messages == [U(), T("c1", "early"), U("between"), A("", "c1"), A("done")]
    assert (result.dropped, result.healed) == (0, 0)


def test_duplicate_result_first_wins_even_before_the_call():
    entries = [U(), T("c1", "early"), A("", "c1"), T("c1", "late"), T(" c1", "later")]
    result = run(entries)
    assert result.messages == [U(), T("c1", "early"), A("", "c1")]
    assert result.drops == {"duplicate_result": 2}
    assert result.healed == 0


def test_answered_anywhere_not_only_adjacent():
    entries = [U(), A("", "c1", "c2"), U("meanwhile"), T("c2"), A("x"), T("c1")]
    result = run(entries)
    assert result.messages == [U(), A("", "c1", "c2"), U("meanwhile"), T("c2"), A("x"), T("c1")]
    assert (result.dropped, result.healed) == (0, 0)


def test_kept_result_id_is_trimmed_and_integer_ids_become_text():
    result = run([A("", "c1", 9), T("  c1\t"), T(9)])
    assert result.messages == [A("", "c1", "9"), T("c1"), T("9")]


# --------------------------------------------------------------------------------------------
# Rule 3, step C — unanswered calls


def test_synthetic_text_is_exact():
    assert INTERRUPTED_RESULT == "Tool call was interrupted; no result."
    result = run([A("", "c1")])
    assert result.messages[1] == {
        "role": "tool",
        "content": "Tool call was interrupted; no result.",
        "tool_call_id": "c1",
    }


def test_synthetics_in_declaration_order_directly_after_the_turn_before_existing_results():
    entries = [U(), A("", "c3", "c1", "c2", "c4"), T("c2"), U("next")]
    result = run(entries)
    assert result.messages == [
        U(),
        A("", "c3", "c1", "c2", "c4"),
        synth("c3"),
        synth("c1"),
        synth("c4"),
        T("c2"),
        U("next"),
    ]
    assert (result.dropped, result.healed) == (0, 3)


def test_each_turn_gets_its_own_synthetics():
    entries = [U(), A("", "a1"), U("u2"), A("", "b1", "b2"), T("b2"), U("u3"), A("", "c1")]
    result = run(entries)
    assert result.messages == [
        U(),
        A("", "a1"),
        synth("a1"),
        U("u2"),
        A("", "b1", "b2"),
        synth("b1"),
        T("b2"),
        U("u3"),
        A("", "c1"),
        synth("c1"),
    ]
    assert result.healed == 3


def test_trailing_call_is_healed_with_its_trimmed_id():
    result = run([S(), U(), A("calling", " c1 ")])
    assert result.messages == [S(), U(), A("calling", "c1"), synth("c1")]
    assert (result.dropped, result.healed) == (0, 1)


def test_call_whose_only_result_was_a_duplicate_elsewhere_is_answered():
    # The kept (first) result answers; nothing to heal.
    result = run([U(), A("", "c1"), T("c1", "a"), T("c1", "b")])
    assert result.healed == 0
    assert result.messages == [U(), A("", "c1"), T("c1", "a")]


def test_redeclared_call_is_not_healed_twice():
    result = run([U(), A("", "c1"), U("u"), A("also text", "c1")])
    assert result.messages == [U(), A("", "c1"), synth("c1"), U("u"), A("also text")]
    assert (result.drops, result.healed) == ({"redeclared_call": 1}, 1)


# --------------------------------------------------------------------------------------------
# Rule 4 — leading-tool guard, then repair again


def test_multiple_leading_tools_after_the_system_group_then_healed():
    entries = [T("c1"), S("s1"), T("c2"), S("s2"), A("", "c1", "c2"), U("after")]
    result = run(entries)
    assert result.messages == [S("s1"), S("s2"), A("", "c1", "c2"), synth("c1"), synth("c2"), U("after")]
    assert result.drops == {"leading_tool": 2}
    assert result.healed == 2


def test_leading_orphan_counts_as_orphan_not_leading_tool():
    result = run([T("nobody"), U()])
    assert result.messages == [U()]
    assert result.drops == {"orphan_result": 1}


def test_result_becomes_leading_after_earlier_drops():
    entries = ["junk", {"content": "no role"}, A("", "0"), T("orphan"), T("c1"), A("", "c1")]
    result = run(entries)
    assert result.messages == [A("", "c1"), synth("c1")]
    assert result.drops == {
        "not_an_object": 1,
        "no_role": 1,
        "unusable_call": 1,
        "emptied_turn": 1,
        "orphan_result": 1,
        "leading_tool": 1,
    }
    assert result.healed == 1


def test_leading_result_wins_duplicate_then_is_stripped():
    # The early result is the first answer, so the late one is a duplicate; the guard then
    # strips the early one and the second pass heals the call. Literal, not clever.
    entries = [T("c1", "early"), A("", "c1"), T("c1", "late")]
    result = run(entries)
    assert result.messages == [A("", "c1"), synth("c1")]
    assert result.drops == {"duplicate_result": 1, "leading_tool": 1}
    assert result.healed == 1


def test_second_pass_synthetic_goes_before_the_first_pass_synthetics():
    # Literal step C, run twice: pass 1 heals c1 (c2 is answered by the leading result); the
    # guard strips that result; pass 2 inserts c2's synthetic "directly after that turn,
    # before any results already following it", which includes c1's synthetic.
    result = run([T("c2"), A("", "c1", "c2")])
    assert result.messages == [A("", "c1", "c2"), synth("c2"), synth("c1")]
    assert (result.drops, result.healed) == ({"leading_tool": 1}, 2)


def test_leading_result_answering_an_already_answered_call_is_just_stripped():
    entries = [S(), T("c2", "early"), A("", "c1", "c2"), T("c1")]
    result = run(entries)
    assert result.messages == [S(), A("", "c1", "c2"), synth("c2"), T("c1")]
    assert result.drops == {"leading_tool": 1}
    assert result.healed == 1


def test_mid_list_misordered_result_is_left_as_is():
    entries = [S(), U(), T("c1", "early"), A("", "c1"), A("done")]
    result = run(entries)
    assert result.messages == entries
    assert (result.dropped, result.healed) == (0, 0)


def test_leading_guard_only_strips_role_tool():
    entries = [{"role": "Tool", "content": "x"}, {"role": "tool ", "content": "y"}, U()]
    result = run(entries)
    assert result.messages == entries
    assert result.dropped == 0


def test_only_system_and_tools():
    result = run([S(), T("c1"), T("c1")])
    assert result.messages == [S()]
    assert result.drops == {"orphan_result": 2}


# --------------------------------------------------------------------------------------------
# Drops bookkeeping and reasons


def test_reasons_are_the_closed_list_in_canonical_order():
    assert REASONS == (
        "not_an_object",
        "no_role",
        "unusable_call",
        "redeclared_call",
        "emptied_turn",
        "orphan_result",
        "duplicate_result",
        "leading_tool",
    )


def test_drops_are_reported_in_canonical_order_not_occurrence_order():
    entries = [
        {"content": "no role"},  # no_role occurs before not_an_object
        "junk",
        A("", "c1"),
        T("c1"),
        T("c1"),  # duplicate_result occurs before orphan_result
        T("nobody"),
        A("x", "c2", "c1", "0"),  # redeclared_call occurs before unusable_call
    ]
    result = run(entries)
    assert list(result.drops) == [
        "not_an_object",
        "no_role",
        "unusable_call",
        "redeclared_call",
        "orphan_result",
        "duplicate_result",
    ]
    assert result.dropped == 6


def test_every_reason_once():
    entries = [
        T("c9", "leading"),  # leading_tool (c9 is declared later)
        7,  # not_an_object
        {"role": None},  # no_role
        A("", "c9"),
        A("", "0"),  # unusable_call + emptied_turn
        A("kept", "c9"),  # redeclared_call
        T("ghost"),  # orphan_result
        A("", "c2"),
        T("c2"),
        T("c2"),  # duplicate_result
    ]
    result = run(entries)
    assert result.drops == {reason: 1 for reason in REASONS}
    assert result.dropped == 8
    assert result.healed == 1
    assert result.messages == [A("", "c9"), synth("c9"), A("kept"), A("", "c2"), T("c2")]


def test_no_zero_counts_when_nothing_is_dropped():
    assert run([S(), U(), A("", "c1"), T("c1")]).drops == {}


# --------------------------------------------------------------------------------------------
# The input is never mutated


def test_input_is_never_mutated_by_any_repair():
    args = {"q": [1, 2], "n": 2**70}
    entries = [
        {"role": "tool", "content": "early", "tool_call_id": " c1 ", "metadata": {"k": 1}},
        {"role": "user", "content": {"parts": ["a", {"b": 2**80}]}, "timestamp": 1},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": " c1 ", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                {"tool_call_id": 7, "name": 5, "args": args},
                {"tool_call_id": "0"},
                "junk",
            ],
        },
        {"role": "assistant", "content": "", "metadata": {"tool_calls": [{"tool_call_id": "c1", "name": "g"}]}},
        {"role": "tool", "content": 3, "metadata": {"tool_call_id": 7}},
        {"role": "system", "content": "late system", "tool_calls": []},
        "junk",
        {"role": " "},
    ]
    before = copy.deepcopy(entries)
    ids_before = [id(e) for e in entries]
    result = normalize_conversation(entries)
    assert entries == before
    assert [id(e) for e in entries] == ids_before
    assert result.dropped == sum(result.drops.values()) > 0
    # Output messages are new dicts: a later stage (a format writer) that edits them must not
    # reach back into the input element, which Beam forbids mutating. (Call ``args`` values
    # are carried verbatim, so they may be shared; they are not touched here.)
    for message in result.messages:
        message["content"] = "changed"
        message.pop("tool_calls", None)
    assert entries == before


# --- Floats inside object content are spelled as Python's encoder spells them -----------------
# orjson (the fast path) writes 1e16 as "1e16" and 1e-05 as "0.00001"; the standard encoder,
# which the table names, writes "1e+16" and "1e-05". A float's text must not depend on whether
# a neighbour (a big integer) sends the object down the fallback path.


@pytest.mark.parametrize("number", [1e16, 1e-7, 0.00001, 1.5e300, -2.5e-5, 0.1, 123.0])
def test_float_in_object_spelled_like_the_standard_encoder(number):
    alone = content_text({"x": number})
    assert alone == json.dumps({"x": number}, separators=(",", ":"))
    beside_big_int = content_text({"x": number, "big": 2**70})
    assert beside_big_int == alone[:-1] + f',"big":{2**70}}}'


def test_exponent_looking_strings_are_unchanged():
    assert content_text({"s": "1e5 and 0.00001"}) == '{"s":"1e5 and 0.00001"}'


# --- Non-finite floats, and types only orjson knows, follow the standard encoder ----------


def test_nested_nan_and_infinity_as_the_standard_encoder_writes_them():
    value = {"a": float("nan"), "b": [float("inf"), float("-inf")], "c": None}
    assert content_text(value) == json.dumps(value, separators=(",", ":"))
    assert content_text(value) == '{"a":NaN,"b":[Infinity,-Infinity],"c":null}'


def test_types_the_standard_encoder_refuses_give_empty_content():
    import dataclasses
    import datetime

    @dataclasses.dataclass
    class Point:
        x: int

    assert content_text({"d": datetime.date(2020, 1, 1)}) == ""
    assert content_text([datetime.datetime(2020, 1, 1, 12, 0)]) == ""
    assert content_text({"p": Point(1)}) == ""


def test_nesting_cut_off_does_not_depend_on_the_callers_stack():
    def nested(depth):
        value = inner = []
        for _ in range(depth - 1):
            inner.append([])
            inner = inner[0]
        return value

    def deep_call(frames, value):
        return content_text(value) if frames == 0 else deep_call(frames - 1, value)

    for depth in (600, 950):
        shallow = content_text(nested(depth))
        assert shallow == "[" * depth + "]" * depth
        assert deep_call(400, nested(depth)) == shallow
