"""Start times of call-log records as integer nanoseconds since the Unix epoch (UTC).

Exports spell time in several ways: ISO-8601 (``2025-09-30T09:04:01.001Z``, with an offset, or
naive), Langfuse's and LiteLLM's space-separated ``YYYY-MM-DD HH:MM:SS.ffffff`` (UTC, no zone),
OTLP's decimal string of nanoseconds (``startTimeUnixNano``), and epoch numbers (LangSmith's JS
client writes milliseconds). Every function here is pure and deterministic: a naive time is
UTC, never the machine's local time, and fractions are kept to the nanosecond (``datetime``
stops at microseconds, so the arithmetic is done on integers).
"""

from __future__ import annotations

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


def bad_time(value: Any, where: str) -> FormatError:
    return FormatError("bad_timestamp", f"{where} is {value!r:.80}, not a time convnorm reads")


def iso_nanos(text: str, where: str = "the start time") -> int:
    """An ISO-8601 time (``T`` or a space between date and time, ``Z``, ``±HH:MM`` or no zone:
    UTC) as nanoseconds since the epoch; anything else is a ``FormatError`` (``bad_timestamp``)."""
    match = _ISO.match(text)
    if match is None:
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
    return seconds * _NS + nanos


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
    if isinstance(value, (int, float)):
        return epoch_nanos(value)
    if isinstance(value, str):
        stripped = value.strip()
        if stripped.isdigit():
            return epoch_nanos(int(stripped))
        return iso_nanos(stripped, where)
    raise bad_time(value, where)
