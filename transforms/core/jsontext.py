"""JSON text in and out, for the whole job (no Beam import): one home, one written policy.

Every place convnorm turns bytes into values or values into JSON text calls this module:

- ``parse_json``      one input text (a JSONL line, a ``.json`` document) into values;
- ``dumps_line``      one output record as a JSON Lines line (the file writers write these bytes);
- ``canonical_json``  key-sorted compact JSON, the basis of content-derived ids;
- ``compact_json``    the casting table's compact JSON of an object or list (MEM-5 rule 1);
- ``int_text``        the decimal digits of an integer of any size;
- ``document_bytes``  a pretty-printed side file (summary, file lists, manifest).

The policy
==========

Big integers. Integers are exact at any size, in and out: never read as floats, never cut.
``parse_json`` reads integers of up to ``MAX_NUMBER_DIGITS`` digits exactly (orjson is the
fast path; a text holding an integer past 64 bits goes to the standard parser) and refuses a
longer number with ``NumberTooLarge`` before converting it, because conversion costs the
square of the length. Every encoder writes an integer of any size as its digits, also past
CPython's 4,300-digit ``str()`` limit (converted in chunks; the interpreter limit is not lifted).

Numbers a double cannot hold. A number with a point or an exponent is read as a double only
when the double holds it to the digits written; past the double range (``1e400``), an
underflow (``1e-400``), more significant digits than a double keeps (a 30-digit fraction):
``NumberTooLarge``, and the record is a ``number_too_large`` dead letter, never a silently
changed value (docs/json-text.md).

Non-finite numbers. NaN and Infinity are not JSON: ``parse_json`` refuses them, and the
Parquet reader writes NaN and infinities as null and counts them, so no value read from input
holds one. When a caller hands an encoder one anyway, the encoder
uses its *spelling*, and there are exactly two, on purpose:

- ``ORJSON`` spelling — ``dumps_line`` and ``canonical_json``: orjson's text. NaN and the
  infinities become ``null``; small floats in orjson's form (``0.00001``, ``1e-7``).
- ``STANDARD`` spelling — ``compact_json``: Python's ``json.dumps`` text with separators
  ``,``/``:`` and non-ASCII kept, as NORMALIZATION.md's casting table asks (``1e-05``,
  ``1e-07``; NaN / Infinity spelled ``NaN`` / ``Infinity``, which is fine there: the text
  becomes a message's content string, not a JSON document).

The ORJSON encoders fall back to the STANDARD spelling for what orjson refuses (integers past
64 bits, nesting past 255 levels, non-string keys): such a line takes Python's float spelling
(and ``NaN`` for a non-finite float, which no input can produce — see above). Output files are
byte-identical to what convnorm always wrote; a change of spelling would change them.

Values JSON cannot hold at all (a lone UTF-16 surrogate in output, an object of an unknown
type) raise ``TypeError`` / ``ValueError`` / ``RecursionError`` from ``dumps_line`` and
``compact_json``; the per-record guard turns that into a dead letter.
"""

from __future__ import annotations

import json
import math
import re
import threading
from decimal import Decimal, InvalidOperation
from itertools import repeat
from typing import Any, Callable

import orjson

__all__ = [
    "MAX_NUMBER_DIGITS",
    "NumberTooLarge",
    "canonical_json",
    "compact_json",
    "document_bytes",
    "dumps_line",
    "int_text",
    "loads_as_json",
    "parse_json",
]

#: Longest number read from JSON input, in characters (sign not counted): integers of up to
#: this many digits are exact ids, content and fields; a longer number makes its record a
#: ``number_too_large`` dead letter. Converting digits to an integer and back costs time
#: that grows with the square of their count (0.4 s at this limit), so the limit bounds it.
MAX_NUMBER_DIGITS = 100_000


class NumberTooLarge(ValueError):
    """A JSON number convnorm cannot carry: longer than ``MAX_NUMBER_DIGITS``, or one a double
    cannot hold to the digits written (``1e400``, ``1e-400``, a 30-digit fraction)."""


# --------------------------------------------------------------------------------------------
# Integers of any size


def int_text(value: int) -> str:
    """Decimal digits of an integer of any size.

    CPython refuses ``str()`` on integers past 4,300 digits (a guard against quadratic
    conversion); the spec wants the digits anyway, so such integers are converted in chunks
    rather than by lifting the interpreter-wide limit.
    """
    try:
        return str(value)
    except ValueError:
        pass
    sign = "-" if value < 0 else ""
    value = abs(value)
    chunk_digits = 4000
    base = 10**chunk_digits
    chunks = []
    while value:
        value, low = divmod(value, base)
        chunks.append(low)
    head = str(chunks[-1])
    rest = "".join(str(c).zfill(chunk_digits) for c in reversed(chunks[:-1]))
    return sign + head + rest


# --------------------------------------------------------------------------------------------
# Parsing


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


#: A number orjson may not read exactly (it would read it silently changed): an integer past
#: its 64-bit range (read as a float), of 20+ digits or a negative 19-digit one; a number with
#: more significant digits than a double is sure to hold (16 or more: 15 always fit); a number
#: so small it would lose digits or read as zero (a negative three-digit exponent; a long run
#: of zeros is a long mantissa). Past the double range orjson refuses (``1e400``): that error
#: sends the line to the exact reading too. Found by mapping digits (and, for the first look,
#: points) to one byte and searching: a regular expression over a line cost more than parsing
#: it. Most lines take one translation and two searches, as the 64-bit check alone did; a line
#: with a 16-digit run takes a second look, and a false alarm only costs the exact parser.
_DIGIT = b"\x1b"  # bytes that seldom occur in text, so the searches skip fast
_EXPONENT = b"\x1c"
_FIRST_LOOK = bytes.maketrans(b"0123456789.eE", _DIGIT * 11 + _EXPONENT * 2)
_SECOND_LOOK = bytes.maketrans(b"0123456789eE", _DIGIT * 10 + _EXPONENT * 2)
_LONG_RUN = _DIGIT * 16
_TWO_DIGITS = _DIGIT * 2
_EXPONENT_BYTES = frozenset(b"eE" + _EXPONENT)
_MINUS_THREE_DIGITS = b"-" + _DIGIT * 3  # searched first: "-" is rare, so this is fast
# A number's exponent follows a digit: "trace-123" (an id) is no tiny exponent.
_TINY_EXPONENT = _DIGIT + _EXPONENT + _MINUS_THREE_DIGITS
_DIGIT_BYTES = frozenset(b"0123456789")
_INTEGER_PAST_64_BITS = (_DIGIT * 20, b"-" + _DIGIT * 19)


def _needs_exact_reading(data: bytes) -> bool:
    # A glance first, at an eighth of the line: a run of 16 digits or points holds two
    # consecutive multiples of 8, so every 8th byte, mapped, shows two digits wherever one is;
    # a tiny exponent needs a "-" after an "e" or "E" (or after the byte they map to). Most
    # lines have neither and are done here.
    if not _exponent_before_minus(data) and _TWO_DIGITS not in data[::8].translate(_FIRST_LOOK):
        return False
    return _needs_exact_reading_looked(data)


def _exponent_before_minus(data: bytes) -> bool:
    # Each "-" found by a one-byte search (many times faster than a two-byte one), the byte
    # before it looked at: lines hold few.
    at = data.find(b"-")
    while at != -1:
        if at > 1 and data[at - 1] in _EXPONENT_BYTES and data[at - 2] in _DIGIT_BYTES:
            return True
        at = data.find(b"-", at + 1)
    return False


def _needs_exact_reading_looked(data: bytes) -> bool:
    """``_needs_exact_reading`` by the whole line's looks, without the glance."""
    first = data.translate(_FIRST_LOOK)
    if _MINUS_THREE_DIGITS in first and _TINY_EXPONENT in first:
        return True
    if _LONG_RUN not in first:
        return False
    second = data.translate(_SECOND_LOOK)
    if any(run in second for run in _INTEGER_PAST_64_BITS) or _LONG_RUN + _EXPONENT in second:
        return True
    if _LONG_RUN + _DIGIT not in first:
        return False  # 16 characters with a point are 15 digits: a double holds them
    # A run of 17+ digits and points: a long mantissa if a point is in it, else a 17-19 digit
    # integer (a nanosecond timestamp: orjson reads it exactly).
    return _long_mantissa(second)


_DIGIT_BYTE = _DIGIT[0]


def _long_mantissa(second: bytes) -> bool:
    """A point between two digits whose runs of digits, with it, are 17 characters or more
    (``second``: the line mapped by ``_SECOND_LOOK``). Each point found by a one-byte search and
    its neighbours looked at, not a regular expression over the line (a line holding a
    nanosecond timestamp, as every call-log piece does, comes here: the expression cost more
    than parsing it). A point between two runs (``1.2.3``) counts each run with it: a false
    alarm at worst, which costs only the exact parser."""
    end = len(second)
    at = second.find(b".")
    while at != -1:
        if 0 < at < end - 1 and second[at - 1] == _DIGIT_BYTE and second[at + 1] == _DIGIT_BYTE:
            left = at - 1
            while left > 0 and second[left - 1] == _DIGIT_BYTE:
                left -= 1
            right = at + 2
            while right < end and second[right] == _DIGIT_BYTE:
                right += 1
            if right - left > 16:
                return True
        at = second.find(b".", at + 1)
    return False


#: An escaped UTF-16 surrogate: fine in a pair, but the standard parser also accepts one
#: alone, which is not text (orjson refuses it; an output line could not encode it).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _check_length(text: str) -> None:
    if len(text) - text.startswith("-") > MAX_NUMBER_DIGITS:
        raise NumberTooLarge(
            f"a number of {len(text):,} characters is longer than the {MAX_NUMBER_DIGITS:,} convnorm reads"
        )


def _exact_int(text: str) -> int:
    _check_length(text)  # before converting: the conversion costs the square of the length
    try:
        return int(text)
    except ValueError:
        # Past CPython's 4,300-digit conversion limit: build it from chunks of digits.
        digits = text.lstrip("-")
        value = 0
        for i in range(0, len(digits), 4000):
            chunk = digits[i : i + 4000]
            value = value * 10 ** len(chunk) + int(chunk)
        return -value if text.startswith("-") else value


def _held_float(text: str) -> float:
    """The double of a JSON number with a point or an exponent, if it holds the number to the
    digits written; ``NumberTooLarge`` otherwise (past the double range, an underflow to zero or
    to a subnormal that lost digits, more significant digits than the double keeps)."""
    value = float(text)
    if repr(value) == text:  # the common case, and the fast one: a double's own shortest spelling
        return value
    _check_length(text)
    shown = text if len(text) <= 40 else text[:37] + "..."
    if not math.isfinite(value):
        raise NumberTooLarge(f"number {shown} is past the largest a double holds (it would read as infinity)")
    digits = text.lower().lstrip("-").partition("e")[0].replace(".", "").strip("0")
    if digits and not _same_decimal(format(value, f".{len(digits) - 1}e"), text):
        raise NumberTooLarge(
            f"number {shown} has more digits, or a smaller exponent, than a double holds (it would read as {value!r})"
        )
    return value


def _same_decimal(held: str, text: str) -> bool:
    try:
        return Decimal(held) == Decimal(text)
    except InvalidOperation:  # an exponent past Decimal's own limit (10**18): far past a double's
        return False


def _has_lone_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def loads_as_json(text: str) -> Any:
    """``json.loads(text)``: the same value, or the same error, faster. orjson reads the text
    unless it holds a run of 16 digits and points (where orjson may read a number otherwise:
    an integer past 64 bits becomes a float) or refuses it (NaN, a number past the double
    range, a lone surrogate, nesting past its limit): the standard parser reads those as it
    always did. (Both read a shorter number to the nearest double, a tiny one as 0.0.)"""
    try:
        data = text.encode()
    except UnicodeEncodeError:  # a lone surrogate
        return json.loads(text)
    if _LONG_RUN not in data.translate(_FIRST_LOOK):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    return json.loads(text)


def parse_json(payload: bytes | str) -> Any:
    """Parse one JSON text exactly; raises ``ValueError`` (or ``RecursionError``).

    orjson is the fast path. Text holding a number orjson may not read exactly (an integer
    past 64 bits, a number a double may not hold) goes to the standard parser, which reads
    integers of any size exactly and every other number through ``_held_float`` (a long digit
    run inside a string only costs the slower parser). A number a double cannot hold to the
    digits written (``1e400``, ``1e-400``, a 30-digit fraction) or longer than
    ``MAX_NUMBER_DIGITS`` raises ``NumberTooLarge``; NaN, Infinity and lone surrogates are not
    JSON text and stay refused, whichever parser reads them.
    """
    data = payload.encode("utf-8", "surrogatepass") if isinstance(payload, str) else payload
    if not _needs_exact_reading(data):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError as error:
            if "infinity" not in str(error):
                raise
            # A number past the double range: the exact reading says so (NumberTooLarge).
    try:
        # Strict UTF-8, as orjson reads: json.loads(bytes) would take a byte-order mark and
        # UTF-8-encoded surrogates, so the same line would pass here and fail there.
        value = json.loads(
            data.decode("utf-8"), parse_constant=_reject_constant, parse_int=_exact_int, parse_float=_held_float
        )
    except UnicodeDecodeError as error:
        raise ValueError(str(error)) from None
    if _SURROGATE_ESCAPE.search(data) and _has_lone_surrogate(value):
        raise ValueError("a string holds a lone UTF-16 surrogate escape, which is not text")
    return value


# --------------------------------------------------------------------------------------------
# STANDARD spelling: compact JSON as Python's encoder writes it


def _float_json(value: float) -> str:
    # What the standard encoder writes for a float (it allows NaN and infinities).
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    return float.__repr__(value)


_encode_json_string = json.encoder.encode_basestring  # non-ASCII kept as is


def _exact_json(value: Any) -> str:
    """Compact JSON like the standard encoder's, but with integers of any size.

    Used only when the standard encoder refuses an integer past the interpreter's digit
    limit. It follows the standard encoder's rules for keys and values, and is as deep as
    Python's recursion allows.
    """
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _encode_json_string(value)
    if isinstance(value, int):
        return int_text(int(value))
    if isinstance(value, float):
        return _float_json(value)
    # Plain loops, not generator expressions: one frame per nesting level, as the standard
    # encoder spends one recursion level per container, so the depths it allows fit here too.
    if isinstance(value, dict):
        parts = []
        for k, v in value.items():
            parts.append(_exact_key(k) + ":" + _exact_json(v))
        return "{" + ",".join(parts) + "}"
    if isinstance(value, (list, tuple)):
        parts = []
        for v in value:
            parts.append(_exact_json(v))
        return "[" + ",".join(parts) + "]"
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def _exact_key(key: Any) -> str:
    if isinstance(key, str):
        return _encode_json_string(key)
    if key is None or isinstance(key, (bool, int, float)):
        return _encode_json_string(_exact_json(key))
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


#: Where orjson's output may differ from Python's encoder: exponents and tiny decimals are
#: spelled differently (1e-7 vs 1e-07, 0.00001 vs 1e-05), and NaN / Infinity come out as
#: null (Python writes NaN, Infinity). Output showing one of these is re-encoded by the
#: standard encoder; a string that merely looks alike only costs time.
_ORJSON_SPELLING = re.compile(rb"[0-9][eE]|0\.0000|null")

#: Types orjson would serialize but Python's encoder refuses (dates, dataclasses) or
#: serializes its own way (subclasses of str, int, dict, list): hand them to the standard one.
_ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_SUBCLASS


def _standard_json(value: Any) -> str:
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    except ValueError:
        # An integer past CPython's 4,300-digit conversion limit: digits by chunks.
        return _exact_json(value)


def _on_fresh_stack(encode: Callable[[Any], str], value: Any) -> str:
    """Run ``encode(value)`` on a new thread, whose recursion budget starts at zero.

    Python's encoder allows as much nesting as the recursion limit leaves above the caller's
    frames, so the same content would serialize in a shallow call and blank in a deep one
    (a Beam worker). A fresh stack gives every caller the same cut-off.
    """
    outcome: list[str | Exception] = []

    def run() -> None:
        try:
            outcome.append(encode(value))
        except (TypeError, ValueError, RecursionError) as error:
            outcome.append(error)

    worker = threading.Thread(target=run, name="convnorm-json")
    worker.start()
    worker.join()
    result = outcome[0]
    if isinstance(result, Exception):
        raise result
    return result


def compact_json(value: Any) -> str:
    """Compact JSON in the STANDARD spelling (Python's encoder), with integers of any size.

    Separators ``,`` and ``:``, key order kept, non-ASCII kept. orjson is the fast path where
    its output is the same text; it refuses integers past 64 bits, nesting past 255 levels
    and non-string keys, which are no reason to give up, so those fall back. Raises
    ``TypeError`` / ``ValueError`` / ``RecursionError`` when nothing can serialize the value.
    """
    try:
        text = orjson.dumps(value, option=_ORJSON_OPTIONS)
        if _ORJSON_SPELLING.search(text) is None:
            return text.decode()
    except (TypeError, ValueError):
        pass
    try:
        return _standard_json(value)
    except RecursionError:
        return _on_fresh_stack(_standard_json, value)


# --------------------------------------------------------------------------------------------
# ORJSON spelling: output lines and ids


def dumps_line(value: Any) -> bytes:
    """One output line in the ORJSON spelling: compact, non-ASCII as is, integers of any size.

    What orjson refuses (integers past 64 bits, deep nesting, non-string keys) takes
    ``compact_json``'s STANDARD spelling. Raises ``TypeError`` / ``ValueError`` for what JSON
    cannot hold; the job calls it inside the per-record guard first, so such a record is a
    dead letter, never a failed write.
    """
    try:
        return orjson.dumps(value)
    except TypeError:
        return compact_json(value).encode("utf-8")


def canonical_json(value: Any) -> bytes:
    """Key-sorted compact JSON, the basis of derived ids (stable across runs and runners).

    The ORJSON spelling; what orjson refuses takes the standard encoder's, where any other
    type is its ``str()`` (an id must always be derivable), and integers past the
    interpreter's digit limit the exact encoder's.
    """
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        pass
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode(
            "utf-8", "surrogatepass"
        )
    except ValueError:
        # An integer past CPython's 4,300-digit conversion limit: the exact encoder.
        return compact_json(_keys_sorted(value)).encode("utf-8", "surrogatepass")


_CANONICAL_LINE_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE


def canonical_lines(values: list[Any]) -> list[bytes]:
    """Each value's ``canonical_json`` and a newline (which compact JSON text never holds): one
    ``map`` over orjson while it takes them all (a Python call per value costs as much as the
    text), else value by value. orjson's arguments by position (``default``, ``option``): a
    ``partial`` with a keyword made a dict per value (a third of these texts' cost)."""
    try:
        return list(map(orjson.dumps, values, repeat(None), repeat(_CANONICAL_LINE_OPTIONS)))
    except TypeError:  # what orjson refuses: ``canonical_json``'s way (the same text otherwise)
        return [canonical_json(value) + b"\n" for value in values]


def _keys_sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _keys_sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_keys_sorted(v) for v in value]
    return value


# --------------------------------------------------------------------------------------------
# Side files


def document_bytes(
    value: Any, indent: int = 2, *, ascii_only: bool = False, sort_keys: bool = False, rows: bool = False
) -> bytes:
    """A pretty-printed JSON document and its final newline (summary, file lists, manifest).

    Python's encoder with ``indent``; ``ascii_only`` escapes non-ASCII as ``\\uXXXX`` (the
    run's file lists and manifest are written that way), otherwise it is kept as is. ``rows``:
    an object inside a list is written on one line of its own (a list of files: one line per
    file, each by the C encoder; indenting 200,000 entries took Python's encoder ~9 s).
    """
    if not rows:
        return json.dumps(value, indent=indent, ensure_ascii=ascii_only, sort_keys=sort_keys).encode() + b"\n"
    encode = json.JSONEncoder(ensure_ascii=ascii_only, sort_keys=sort_keys, separators=(", ", ": ")).encode
    return _rows_document(value, indent, 0, encode, sort_keys).encode() + b"\n"


def _rows_document(value: Any, indent: int, level: int, encode: Callable[[Any], str], sort_keys: bool) -> str:
    inner, outer = " " * (indent * (level + 1)), " " * (indent * level)
    if isinstance(value, dict) and value:
        keys = sorted(value) if sort_keys else list(value)
        items = [
            f"{inner}{encode(str(k))}: {_rows_document(value[k], indent, level + 1, encode, sort_keys)}" for k in keys
        ]
    elif isinstance(value, list) and value:
        items = [
            inner + (encode(v) if isinstance(v, dict) else _rows_document(v, indent, level + 1, encode, sort_keys))
            for v in value
        ]
    else:
        return encode(value)
    opening, closing = ("{", "}") if isinstance(value, dict) else ("[", "]")
    return opening + "\n" + ",\n".join(items) + "\n" + outer + closing
