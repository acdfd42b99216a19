"""Record-level processing: every raw record ends as one output record or one dead letter."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import transforms.core.jsontext as jsontext
import transforms.record.records as records
from transforms.record.inputs import Parsed, RawRecord, Unreadable
from transforms.record.record_settings import Settings
from transforms.record.record_steps import DEAD_LETTER_REASONS, derived_id
from transforms.record.records import normalize_batch, process_record
from transforms.record.validate_step import check_record

FLAT = Settings()


def raw(payload, position=0):
    if isinstance(payload, (dict, list)):
        payload = json.dumps(payload).encode()
    return RawRecord("in.jsonl", position, payload)


def test_record_keeps_its_fields_and_order_and_gets_normalized_messages():
    record = {"id": "c1", "tools": [{"name": "t"}], "messages": [{"role": "user", "content": 5}], "meta": {"a": 1}}
    outcome = process_record(raw(record), FLAT)
    assert outcome.dead_letter is None
    assert list(outcome.record) == ["id", "tools", "messages", "meta"]
    assert outcome.record["messages"] == [{"role": "user", "content": "5"}]
    assert outcome.record["tools"] == [{"name": "t"}] and outcome.record["meta"] == {"a": 1}


def test_metrics_record_shape():
    record = {
        "id": "c1",
        "messages": [
            "junk",
            {"role": "assistant", "content": "", "tool_calls": [{"id": "a", "name": "s"}]},
        ],
    }
    metrics = process_record(raw(record, position=17), FLAT).metrics
    assert metrics == {
        "id": "c1",
        "source": "in.jsonl",
        "position": 17,
        "dropped": 1,
        "drops": {"not_an_object": 1},
        "healed": 1,
        "messages_in": 2,
        "messages_out": 2,
    }


def test_bare_list_record_gets_a_derived_id():
    outcome = process_record(raw([{"role": "user", "content": "hi"}]), FLAT)
    assert list(outcome.record) == ["id", "messages"]
    assert outcome.record["id"].startswith("sha256:")
    assert outcome.record["id"] == outcome.metrics["id"]


def test_derived_id_is_stable_and_ignores_key_order():
    a = {"messages": [{"role": "user", "content": "hi"}], "x": 1}
    b = {"x": 1, "messages": [{"content": "hi", "role": "user"}]}
    assert derived_id(a) == derived_id(b) == derived_id(json.loads(json.dumps(a)))
    assert derived_id(a) != derived_id({**a, "x": 2})


@pytest.mark.parametrize("value, expected", [(7, "7"), ("abc", "abc"), ({"k": 1}, '{"k":1}')])
def test_record_id_from_the_id_field_as_text(value, expected):
    outcome = process_record(raw({"id": value, "messages": []}), FLAT)
    assert outcome.metrics["id"] == expected


def test_custom_id_and_messages_fields():
    settings = Settings(messages_field="turns", id_field="uid")
    outcome = process_record(raw({"uid": "u1", "turns": [{"role": "user", "content": "x"}]}), settings)
    assert outcome.record == {"uid": "u1", "turns": [{"role": "user", "content": "x"}]}
    assert outcome.metrics["id"] == "u1"


def test_integers_past_64_bits_are_read_exactly():
    line = b'{"id": "big", "messages": [{"role": "user", "content": 123456789012345678901234567890}]}'
    outcome = process_record(raw(line), FLAT)
    assert outcome.record["messages"][0]["content"] == "123456789012345678901234567890"


@pytest.mark.parametrize(
    "payload, settings, reason",
    [
        (b'{"messages": [', FLAT, "invalid_json"),
        (b"NaN", FLAT, "invalid_json"),
        (b"\xff\xfe", FLAT, "invalid_json"),
        (b"42", FLAT, "not_a_record"),
        (b'"text"', FLAT, "not_a_record"),
        (b'{"messages": {"role": "user"}}', FLAT, "messages_not_a_list"),
        (b'{"conversation": []}', FLAT, "unknown_format"),
        (b'{"conversation": []}', Settings(input_format="flat"), "missing_messages"),
        (b"null", Settings(input_format="flat"), "not_a_record"),
    ],
)
def test_dead_letter_reasons(payload, settings, reason):
    outcome = process_record(raw(payload, position=3), settings)
    assert outcome.record is None and outcome.metrics is None
    letter = outcome.dead_letter
    assert letter["reason"] == reason
    assert letter["source"] == "in.jsonl" and letter["position"] == 3
    assert list(letter) == ["source", "position", "reason", "detail", "raw"]
    assert letter["detail"]


def test_unreadable_payload_becomes_its_dead_letter():
    outcome = process_record(RawRecord("f.jsonl.gz", 99, Unreadable("unreadable_file", "bad gzip", "xx")), FLAT)
    assert outcome.dead_letter == {
        "source": "f.jsonl.gz",
        "position": 99,
        "reason": "unreadable_file",
        "detail": "bad gzip",
        "raw": "xx",
    }


def test_parsed_payload_is_not_parsed_again():
    # A .json array element that is a string is a non-record, not JSON text to parse.
    assert process_record(RawRecord("a.json", 0, Parsed("{}")), FLAT).dead_letter["reason"] == "not_a_record"
    ok = process_record(RawRecord("a.json", 1, Parsed({"messages": []})), FLAT)
    assert ok.record["messages"] == []


def test_raw_text_is_cut_to_the_limit_and_line_end_dropped():
    line = b'{"messages": "' + b"x" * 5000 + b'"}\n'
    letter = process_record(raw(line), Settings(raw_limit=100)).dead_letter
    assert len(letter["raw"]) == 100
    short = process_record(raw(b"nope\n"), FLAT).dead_letter
    assert short["raw"] == "nope"


def test_unexpected_error_is_a_dead_letter_not_a_crash(monkeypatch):
    def explode(messages, profile):
        raise RuntimeError("boom")

    monkeypatch.setattr(records, "normalize_with_profile", explode)
    letter = process_record(raw({"messages": []}), FLAT).dead_letter
    assert letter["reason"] == "internal_error"
    assert "RuntimeError: boom" in letter["detail"]


def test_reasons_are_from_the_closed_list():
    payloads = [b"{", b"1", b'{"messages": 1}', b'{"x": 1}', b'{"messages": []}']
    for payload in payloads:
        letter = process_record(raw(payload), FLAT).dead_letter
        assert letter is None or letter["reason"] in DEAD_LETTER_REASONS


def test_batch_keeps_order_and_accounts_for_every_record():
    items = [raw(b'{"id": "a", "messages": []}'), raw(b"bad"), raw(b'{"id": "b", "messages": []}'), raw(b"2")]
    result = normalize_batch(items, FLAT)
    assert [r["id"] for r in result.records] == ["a", "b"]
    assert [m["id"] for m in result.metrics] == ["a", "b"]
    assert [d["reason"] for d in result.dead_letters] == ["invalid_json", "not_a_record"]
    assert len(result.records) + len(result.dead_letters) == len(items)


def test_check_setting_counts_violations_of_the_output():
    record = {"messages": [{"role": "user", "content": "q"}, {"role": "tool", "content": "r", "tool_call_id": "c"}]}
    metrics = process_record(raw(record), Settings(check=True)).metrics
    assert metrics["violations"] == {}  # MEM-5 output of this input is sendable
    literal = {
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "tool", "content": "early", "tool_call_id": "c1"},
            {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c1", "name": "s"}]},
        ]
    }
    metrics = process_record(raw(literal), Settings(check=True)).metrics
    assert metrics["violations"] == {"result_not_adjacent": 1}


def test_check_record_reports_without_changing_anything():
    messages = [{"role": "tool", "content": "r", "tool_call_id": "c"}, {"role": "user", "content": "q"}]
    outcome = check_record(raw({"id": "v1", "messages": messages}), FLAT)
    report = outcome.record
    assert report["id"] == "v1" and report["messages"] == 2
    assert report["violations"] == {"leading_tool": 1, "orphan_result": 1}
    assert [d["kind"] for d in report["details"]] == ["leading_tool", "orphan_result"]
    assert check_record(raw(b"{"), FLAT).dead_letter["reason"] == "invalid_json"


def test_settings_problems_name_the_bad_option():
    from pipeline.config.checks import settings_problems

    problems = settings_problems(Settings(input_format="nope", sink="nope", profile="nope"))
    assert any("--format 'nope'" in p for p in problems)
    assert any("--sink 'nope'" in p for p in problems)
    assert any("--profile 'nope'" in p for p in problems)
    assert settings_problems(Settings()) == []


def test_lone_surrogate_is_invalid_json_on_either_parser():
    fast = b'{"messages": [{"role": "user", "content": "x \\ud83d"}]}'
    slow = b'{"ts": 17329248001234567890, "messages": [{"role": "user", "content": "x \\ud83d"}]}'
    for line in (fast, slow):
        assert process_record(raw(line), FLAT).dead_letter["reason"] == "invalid_json"
    pair = b'{"ts": 17329248001234567890, "messages": [{"role": "user", "content": "\\ud83d\\ude00"}]}'
    assert process_record(raw(pair), FLAT).record["messages"][0]["content"] == "\U0001f600"


@pytest.mark.parametrize(
    "bytes_in_line",
    [
        b'{"messages": [{"role": "assistant", "content": "a", "reasoning_content": "\xed\xa0\x80"}]',  # a UTF-8-encoded surrogate
        b'\xef\xbb\xbf{"messages": [{"role": "user", "content": "a"}]',  # a byte-order mark inside a file
        b'{"messages": [{"role": "user", "content": "\xed\xa0\x80"}]',
    ],
)
def test_bytes_that_are_not_utf8_text_are_invalid_json_on_either_parser(bytes_in_line):
    # The exact parser decoded with surrogatepass / utf-8-sig: the same record was normalized
    # (or 'unwritable') beside a 20-digit integer and invalid_json without one.
    for tail in (b"}", b', "ts": 17329248001234567890}'):
        outcome = process_record(raw(bytes_in_line + tail), FLAT)
        assert outcome.dead_letter is not None and outcome.dead_letter["reason"] == "invalid_json", tail


def test_integers_past_the_interpreters_digit_limit_are_read_exactly():
    digits = "7" * 5000
    line = ('{"id": "huge", "n": ' + digits + ', "messages": [{"role": "user", "content": ' + digits + "}]}").encode()
    outcome = process_record(raw(line), FLAT)
    assert outcome.record["messages"][0]["content"] == digits
    assert jsontext.dumps_line(outcome.record).count(digits.encode()) == 2


def test_common_19_digit_timestamps_stay_on_the_fast_parser(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the standard parser was used")

    monkeypatch.setattr(jsontext.json, "loads", refuse)
    line = b'{"ts": 1732924800123456789, "neg": -922337203685477580, "messages": []}'
    assert process_record(raw(line), FLAT).record["ts"] == 1732924800123456789


@pytest.mark.parametrize("bad_id", [None, "", True, False])
def test_unusable_own_id_is_replaced_by_the_derived_one(bad_id):
    outcome = process_record(raw({"id": bad_id, "messages": []}), FLAT)
    assert outcome.record["id"].startswith("sha256:")
    assert outcome.record["id"] == outcome.metrics["id"]
    assert list(outcome.record) == ["id", "messages"]


def test_a_value_json_cannot_hold_is_a_dead_letter_not_a_crash():
    from decimal import Decimal

    outcome = process_record(RawRecord("t.parquet", 4, Parsed({"messages": [], "price": Decimal("1.5")})), FLAT)
    assert outcome.record is None
    assert outcome.dead_letter["reason"] == "unwritable"
    assert "not JSON" in outcome.dead_letter["detail"]
    assert jsontext.dumps_line(outcome.dead_letter)  # the dead letter itself is writable


def _beyond_64_bits_before(data: bytes) -> bool:
    # The check as it was before the speed work (two searches on every line).
    digits = data.translate(bytes.maketrans(b"123456789", b"000000000"))
    return b"0" * 20 in digits or b"-" + b"0" * 19 in digits


@given(st.lists(st.sampled_from([b"1", b"9", b"0", b"-", b" ", b'"', b"a", b"1" * 9, b"0" * 10]), max_size=40))
def test_the_exact_reading_check_still_sends_every_integer_past_64_bits(parts):
    from transforms.core.jsontext import _needs_exact_reading

    data = b"".join(parts)
    assert _needs_exact_reading(data) or not _beyond_64_bits_before(data)


@given(
    st.sampled_from(["", "-"]),
    st.text("0123456789", min_size=1, max_size=24),
    st.none() | st.text("0123456789", min_size=1, max_size=24),
    st.none() | st.tuples(st.sampled_from(["e", "E", "e-", "e+", "E-"]), st.integers(0, 450)),
)
def test_the_exact_reading_check_never_lets_orjson_change_a_number(sign, whole, fraction, exponent):
    # A number orjson would read silently changed (rounded, 0.0) must be sent to the exact
    # reading, which refuses it; one past the double range, orjson refuses, and that error
    # sends it there too (docs/json-text.md).
    import orjson

    from transforms.core.jsontext import NumberTooLarge, _needs_exact_reading, parse_json

    text = sign + (whole.lstrip("0") or "0") + (f".{fraction}" if fraction else "")
    text += f"{exponent[0]}{exponent[1]}" if exponent else ""
    data = b'{"a": [1, ' + text.encode() + b"]}"
    if _needs_exact_reading(data):
        return
    try:
        fast = orjson.loads(data)
    except orjson.JSONDecodeError:
        with pytest.raises(NumberTooLarge):
            parse_json(data)
        return
    try:
        exact = json.loads(data, parse_float=jsontext._held_float)
    except ValueError:
        raise AssertionError(f"{text} is not held by a double, yet orjson would read it") from None
    assert parse_json(data) == fast == exact


@given(
    st.binary(max_size=40),
    st.sampled_from([b"", b"-"]),
    st.integers(min_value=14, max_value=22),
    st.integers(min_value=0, max_value=21),
    st.sampled_from([b"", b"a", b'"', b"0", b"5" * 9, b"e-300", b"E-12", b"e5"]),
)
@example(b"\x1c", b"-", 14, 0, b"")  # the mapped exponent byte itself in the input, before a "-"
def test_the_glance_finds_every_number_the_whole_look_finds_at_any_offset(prefix, sign, length, point, suffix):
    # The glance looks at every 8th byte and for "e-": a run of 16 digits or points, or a tiny
    # exponent, must be seen wherever it starts.
    from transforms.core.jsontext import _needs_exact_reading, _needs_exact_reading_looked

    run = b"7" * length
    if point < length:
        run = run[:point] + b"." + run[point + 1 :]
    data = prefix + sign + run + suffix
    assert _needs_exact_reading(data) == _needs_exact_reading_looked(data)


@given(st.lists(st.sampled_from([b"1", b"9", b".", b"-", b" ", b"e", b"a", b"1" * 8, b"0.0"]), max_size=40))
def test_the_long_mantissa_look_finds_every_run_the_regular_expression_found(parts):
    # The point-by-point look that replaced a regular expression over the line may raise a
    # false alarm (a point between two runs), never miss a long mantissa.
    import re

    from transforms.core.jsontext import _DIGIT, _SECOND_LOOK, _long_mantissa

    second = b"".join(parts).translate(_SECOND_LOOK)
    runs = re.findall(re.escape(_DIGIT) + rb"+\." + re.escape(_DIGIT) + b"+", second)
    assert _long_mantissa(second) or not any(len(run) > 16 for run in runs)


def test_a_format_error_says_which_dead_letter_reason_it_becomes():
    from transforms.formats.base import FormatError, RecordShapeError, not_a_record

    assert FormatError("missing_messages", "x").dead_letter_reason == "format_error"
    assert RecordShapeError("missing_messages", "x").dead_letter_reason == "missing_messages"
    assert not_a_record(3).dead_letter_reason == "not_a_record"
    outcome = process_record(raw({"id": "m", "contents": 5}), Settings(input_format="openai"))
    assert outcome.dead_letter["reason"] == "missing_messages"


def test_dead_letter_reasons_are_a_closed_enum_written_as_plain_text():
    from transforms.record.record_steps import DeadLetterReason

    assert DEAD_LETTER_REASONS == tuple(DeadLetterReason) and all(type(r) is str for r in DEAD_LETTER_REASONS)
    letter = process_record(raw(b"{nope"), FLAT).dead_letter
    assert letter["reason"] == "invalid_json" and type(letter["reason"]) is str
    unknown = process_record(RawRecord("in.jsonl", 0, Unreadable("no_such_reason", "d")), FLAT).dead_letter
    assert unknown["reason"] == "internal_error"  # a reason outside the closed list is a bug


def test_an_outcome_is_either_produced_or_dead_lettered_by_type():
    from transforms.record.record_steps import DeadLettered, Produced

    ok = process_record(raw({"id": "a", "messages": []}), FLAT)
    bad = process_record(raw(b"[1,"), FLAT)
    assert isinstance(ok, Produced) and ok.dead_letter is None and ok.line is not None
    assert isinstance(bad, DeadLettered) and bad.record is None and bad.metrics is None
    assert "dead_letter" not in Produced._fields and "record" not in DeadLettered._fields
    checked = check_record(raw({"id": "a", "messages": []}), FLAT)
    assert isinstance(checked, Produced) and checked.line is None
