"""The JSON text module's written policy: integers exact at any size, two named spellings."""

from __future__ import annotations

import json
import math

import pytest

from transforms.core.jsontext import (
    MAX_NUMBER_DIGITS,
    NumberTooLarge,
    canonical_json,
    compact_json,
    document_bytes,
    dumps_line,
    int_text,
    loads_as_json,
    parse_json,
)

BIG = 10**30 + 7  # past 64 bits: orjson refuses it
HUGE_DIGITS = "9" * 5000  # past CPython's 4,300-digit str() limit


def test_integers_are_exact_at_any_size_in_and_out():
    value = parse_json('{"n": ' + HUGE_DIGITS + ', "m": -' + str(BIG) + "}")
    assert int_text(value["n"]) == HUGE_DIGITS and value["m"] == -BIG
    line = dumps_line(value)
    assert line == b'{"n":' + HUGE_DIGITS.encode() + b',"m":-' + str(BIG).encode() + b"}"
    assert compact_json(value).encode() == line
    assert canonical_json(value) == b'{"m":-' + str(BIG).encode() + b',"n":' + HUGE_DIGITS.encode() + b"}"


@pytest.mark.parametrize(
    "text",
    ["NaN", "Infinity", "-Infinity", "1e400", '"\\ud800"', "[" + str(BIG) + ", NaN]", "[" + str(BIG) + ', "\\udc00"]'],
)
def test_parsing_refuses_what_is_not_json_text(text):
    with pytest.raises(ValueError):
        parse_json(text)


def test_a_number_longer_than_the_limit_is_refused_before_conversion():
    with pytest.raises(NumberTooLarge):
        parse_json("[" + "1" * (MAX_NUMBER_DIGITS + 1) + "]")


def test_the_orjson_spelling_writes_non_finite_numbers_as_null():
    value = {"a": math.nan, "b": math.inf, "c": 1e-5}
    assert dumps_line(value) == b'{"a":null,"b":null,"c":0.00001}'
    assert canonical_json(value) == b'{"a":null,"b":null,"c":0.00001}'


def test_the_standard_spelling_is_pythons_encoder():
    value = {"a": math.nan, "b": -math.inf, "c": 1e16, "d": 1e-05, "é": "日本"}
    assert compact_json(value) == json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    assert compact_json(value) == '{"a":NaN,"b":-Infinity,"c":1e+16,"d":1e-05,"é":"日本"}'


def test_an_output_line_orjson_refuses_takes_the_standard_spelling():
    # Named in the module's policy: a line holding an integer past 64 bits is written by the
    # standard encoder, floats included (byte-identical to what convnorm always wrote).
    assert dumps_line({"n": BIG, "f": 1e-5}) == b'{"n":' + str(BIG).encode() + b',"f":1e-05}'


def test_what_json_cannot_hold_raises():
    with pytest.raises((TypeError, ValueError)):
        dumps_line({"s": "\ud800"})
    with pytest.raises(TypeError):
        dumps_line({"d": object()})


def test_side_documents_keep_their_spellings():
    doc = {"b": "é", "a": [1]}
    assert document_bytes(doc) == json.dumps(doc, indent=2, ensure_ascii=False).encode() + b"\n"
    assert document_bytes(doc, indent=1, ascii_only=True) == json.dumps(doc, indent=1).encode() + b"\n"
    assert document_bytes(doc, indent=1, ascii_only=True, sort_keys=True) == (
        json.dumps(doc, indent=1, sort_keys=True).encode() + b"\n"
    )


def test_a_document_of_rows_puts_each_listed_object_on_one_line():
    files = [{"path": f"normalized/part-{i:05d}.jsonl", "records": i, "sha256": "é"} for i in range(3)]
    doc = {"format": "x", "files": files, "missing": [], "options": {"input": ["a", "b"], "empty": {}}}
    text = document_bytes(doc, indent=1, ascii_only=True, rows=True)
    assert json.loads(text) == doc
    lines = text.decode().splitlines()
    assert lines[3:6] == [
        '  {"path": "normalized/part-0000%d.jsonl", "records": %d, "sha256": "\\u00e9"},' % (i, i) for i in range(2)
    ] + ['  {"path": "normalized/part-00002.jsonl", "records": 2, "sha256": "\\u00e9"}']
    # Everything but the rows is spelled as Python's indented encoder spells it.
    without = {k: v for k, v in doc.items() if k != "files"}
    assert (
        document_bytes(without, indent=1, ascii_only=True, rows=True) == json.dumps(without, indent=1).encode() + b"\n"
    )
    assert document_bytes(doc, rows=True, sort_keys=True).decode().index('"files"') < document_bytes(
        doc, rows=True, sort_keys=True
    ).decode().index('"format"')


# --------------------------------------------------------------------------------------------
# Numbers JSON carries but a double cannot hold: one rule, a refusal


@pytest.mark.parametrize(
    "text",
    [
        "1e-400",  # Found: read as 0.0, silently
        "0.123456789012345678901234567890",  # Found: rounded to 0.12345678901234568, silently
        "1e400",  # a dead letter already; the same rule now
        "-1e400",
        "0.12345678901234567",  # 17 digits a double does not hold: 0.12345678901234566
        "1.2345e-320",  # a subnormal: fewer digits than written
        "9007199254740993.0",  # 2**53 + 1 as a float
        "1" * 400 + ".5",
        "0.1e-99999999999999999999",  # Found: an exponent past Decimal's raised InvalidOperation, an internal_error
        "-1.5E-99999999999999999999",
    ],
)
def test_a_number_a_double_cannot_hold_is_refused_in_every_position(text):
    for document in (text, f"[{text}]", f'{{"a": {{"b": {text}}}}}', f"[{BIG}, {text}]"):
        with pytest.raises(NumberTooLarge, match="double"):
            parse_json(document)


@pytest.mark.parametrize(
    "text, value",
    [
        ("0.1", 0.1),
        ("0.10000000000000001", 0.1),  # 17 digits of the same double (C's %.17g)
        ("0.30000000000000004", 0.30000000000000004),
        ("1e-300", 1e-300),
        ("5e-324", 5e-324),  # the smallest subnormal, to the one digit written
        ("1.5E+3", 1500.0),
        ("-0.0", -0.0),
        ("0.000", 0.0),
        ("123.456e-5", 0.00123456),
        ("0.1000000000000000055511151231257827021181583404541015625", 0.1),  # 0.1's exact value
        ("1700000000.1234567", 1700000000.1234567),
        ("0e99999999999999999999", 0.0),  # zero, to any exponent
    ],
)
def test_a_number_a_double_holds_to_the_digits_written_is_read(text, value):
    for document in (text, f"[{text}]", f"[{BIG}, {text}]"):
        parsed = parse_json(document)
        parsed = parsed[-1] if isinstance(parsed, list) else parsed
        assert parsed == value and math.copysign(1, parsed) == math.copysign(1, value)


@pytest.mark.parametrize(
    "text",
    [
        "[123456789012345678901234567890]",  # orjson would make it a float
        "[-9223372036854775809]",
        "[18446744073709551615]",
        "[1e400]",
        "[NaN]",
        '["\\ud800"]',
        '"\ud800"',
        '{"a": 1, "b": 2, "a": 3}',
        "[-0, -0.0, 1E5, 0.1e-400, 2.2250738585072011e-308, 1.0000000000000002]",
        " [1] ",
        "[1]x",
        "\ufeff[1]",
        "[1,]",
        "[" * 3000 + "]" * 3000,
    ],
)
def test_loads_as_json_gives_what_json_loads_gives(text):
    """Values (and their types, and key order) or the error: the call-log readers read payloads
    with it where they read them with ``json.loads``."""

    def outcome(load):
        try:
            value = load(text)
        except (ValueError, RecursionError) as error:
            return type(error).__name__
        return repr(value), json.dumps(value, allow_nan=True)

    assert outcome(loads_as_json) == outcome(json.loads)
