"""Start times of call-log records as integer nanoseconds since the Unix epoch (UTC).

Exports spell time in several ways: ISO-8601 (``2025-09-30T09:04:01.001Z``, with an offset, or
naive), Langfuse's and LiteLLM's space-separated ``YYYY-MM-DD HH:MM:SS.ffffff`` (UTC, no zone),
OTLP's decimal string of nanoseconds (``startTimeUnixNano``), and epoch numbers (LangSmith's JS
client writes milliseconds). Every function here is pure and deterministic: a naive time is
UTC, never the machine's local time, and fractions are kept to the nanosecond (``datetime``
stops at microseconds, so the arithmetic is done on integers).

One range for every spelling: a time must be a signed 64-bit count of nanoseconds (1677-09-21
to 2262-04-11 UTC), what OTLP and Parquet hold. A number, a digit string or an ISO date outside
it is ``bad_timestamp`` alike (a ``startTime`` of ``1e300`` was taken while a year-99999 string
was refused).
"""

from __future__ import annotations

import math
import re
from datetime import date
from typing import Any

from transforms.formats.base import FormatError

_NS = 1_000_000_000
_EPOCH_DAY = date(1970, 1, 1).toordinal()
_ISO = re.compile(
    r"^\s*(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9})\d*)?)?)?"
    r"\s*(?:([Zz])|([+-])(\d{2}):?(\d{2})|\s*UTC)?\s*$"
)


#: The times convnorm reads, in nanoseconds since the epoch: a signed 64-bit integer.
MIN_NANOS, MAX_NANOS = -(1 << 63), (1 << 63) - 1
#: Digits of the longest decimal in that range.
_MAX_DIGITS = len(str(MAX_NANOS))


def bad_time(value: Any, where: str) -> FormatError:
    return FormatError("bad_timestamp", f"{where} is {value!r:.80}, not a time convnorm reads")


def out_of_range(value: Any, where: str) -> FormatError:
    return FormatError(
        "bad_timestamp",
        f"{where} is {value!r:.80}, out of range: convnorm reads times from 1677-09-21 to 2262-04-11 UTC "
        "(nanoseconds since 1970 in 64 bits)",
    )


def _in_range(nanos: int, value: Any, where: str) -> int:
    if not MIN_NANOS <= nanos <= MAX_NANOS:
        raise out_of_range(value, where)
    return nanos


def iso_nanos(text: str, where: str = "the start time") -> int:
    """An ISO-8601 time (``T`` or a space between date and time, ``Z``, ``±HH:MM`` or no zone:
    UTC) as nanoseconds since the epoch; anything else is a ``FormatError`` (``bad_timestamp``)."""
    match = _ISO.match(text)
    if match is None:
        if re.match(r"^\s*[+-]?\d{5,}-\d{2}-\d{2}", text):  # a year past 9999 (or signed): out of range
            raise out_of_range(text, where)
        raise bad_time(text, where)
    year, month, day, hour, minute, second, fraction, _zulu, sign, off_h, off_m = match.groups()
    try:
        days = date(int(year), int(month), int(day)).toordinal() - _EPOCH_DAY
    except ValueError:
        raise bad_time(text, where) from None
    h, m, s = int(hour or 0), int(minute or 0), int(second or 0)
    if h > 23 or m > 59 or s > 60:
        raise bad_time(text, where)
    seconds = days * 86400 + h * 3600 + m * 60 + s
    if sign is not None:
        offset = int(off_h) * 3600 + int(off_m) * 60
        seconds -= offset if sign == "+" else -offset
    nanos = int((fraction or "").ljust(9, "0")) if fraction else 0
    return _in_range(seconds * _NS + nanos, text, where)


def epoch_nanos(number: int | float) -> int:
    """An epoch number in seconds, milliseconds, microseconds or nanoseconds (told apart by its
    size: a time after 1973 in seconds is above 1e8, in milliseconds above 1e11 ...)."""
    magnitude = abs(number)
    if magnitude < 1e11:
        scale = _NS
    elif magnitude < 1e14:
        scale = 1_000_000
    elif magnitude < 1e17:
        scale = 1_000
    else:
        scale = 1
    if isinstance(number, int):
        return number * scale
    return round(number * scale)


def time_nanos(value: Any, where: str = "the start time") -> int:
    """Any time spelling above as nanoseconds; ``None`` or ``""`` (no time recorded) is 0.

    A string of digits is an epoch number (OTLP writes nanoseconds as a decimal string); a
    string with a date is ISO-8601; a number is an epoch number by its size.
    """
    if value is None or value == "":
        return 0
    if isinstance(value, bool):
        raise bad_time(value, where)
    if isinstance(value, float) and not math.isfinite(value):
        raise out_of_range(value, where)
    if isinstance(value, (int, float)):
        return _in_range(epoch_nanos(value), value, where)
    if isinstance(value, str):
        stripped = value.strip()
        if stripped.isascii() and stripped.isdigit():  # not "²": int() refuses what isdigit() takes
            if len(stripped.lstrip("0")) > _MAX_DIGITS:  # and past 4,300 digits int() raises
                raise out_of_range(value, where)
            return _in_range(epoch_nanos(int(stripped)), value, where)
        return iso_nanos(stripped, where)
    raise bad_time(value, where)
