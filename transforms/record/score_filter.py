"""``--min-score NAME=VALUE`` and ``--max-score NAME=VALUE``: keep the conversations whose
labels say they are good enough (no Beam import).

A conversation's scores are its ``metadata.scores`` (name -> one value: joined labels, or a
whole record's own). A bound is a number, or ``true`` / ``false`` (a BOOLEAN score: ``true``
counts 1, ``false`` 0). A conversation is kept when every bound holds: ``score >= min`` and
``score <= max``, exactly (no rounding). One is refused, a dead letter counted by its reason:

- ``score_missing``: no score of that name, or one that is not a number or a bool (a
  CATEGORICAL or TEXT label has no order);
- ``score_below_min`` / ``score_above_max``: the score is out of bounds.

The bounds are checked in the order given, ``--min-score`` first; the first that fails names the
reason.
"""

from __future__ import annotations

import math
from typing import Any

#: The dead-letter reasons of the score filter.
SCORE_MISSING = "score_missing"
SCORE_BELOW_MIN = "score_below_min"
SCORE_ABOVE_MAX = "score_above_max"

Bound = tuple[str, Any]


def parse_bound(text: str) -> Bound | None:
    """``NAME=VALUE`` -> ``(name, value)``: VALUE a finite number (an int when it is one) or
    ``true`` / ``false``; ``None`` when it is not that."""
    name, sep, value = text.partition("=")
    name, value = name.strip(), value.strip()
    if not sep or not name or not value:
        return None
    if value.lower() in ("true", "false"):
        return name, value.lower() == "true"
    try:
        number = float(value)
    except ValueError:
        return None
    if not math.isfinite(number):
        return None
    try:
        return name, int(value)
    except ValueError:
        return name, number


def _number(value: Any) -> int | float | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value)):
        return value
    return None


def scores_of(record: Any) -> dict[str, Any]:
    metadata = record.get("metadata") if isinstance(record, dict) else None
    scores = metadata.get("scores") if isinstance(metadata, dict) else None
    return scores if isinstance(scores, dict) else {}


def score_refusal(record: Any, minimums: tuple[Bound, ...], maximums: tuple[Bound, ...]) -> tuple[str, str] | None:
    """Why the score filter refuses ``record`` (``(reason, detail)``), or ``None`` to keep it."""
    scores = scores_of(record)
    for bounds, flag in ((minimums, "--min-score"), (maximums, "--max-score")):
        for name, bound in bounds:
            if name not in scores:
                return SCORE_MISSING, f"{flag} {name}={_text(bound)}: the conversation has no score {name!r}"
            value = _number(scores[name])
            if value is None:
                return (
                    SCORE_MISSING,
                    f"{flag} {name}={_text(bound)}: its score {name!r} is {scores[name]!r:.60}, no number",
                )
            if flag == "--min-score" and value < bound:
                return SCORE_BELOW_MIN, f"{flag} {name}={_text(bound)}: its score is {_text(scores[name])}"
            if flag == "--max-score" and value > bound:
                return SCORE_ABOVE_MAX, f"{flag} {name}={_text(bound)}: its score is {_text(scores[name])}"
    return None


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


__all__ = ["SCORE_ABOVE_MAX", "SCORE_BELOW_MIN", "SCORE_MISSING", "parse_bound", "score_refusal"]
