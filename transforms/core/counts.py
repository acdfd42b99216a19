"""Counts as nested dicts (a partial summary, a step's counts by reason): two added key by key.
Every stage that counts adds its parts with it (``transforms.totals.summary.merge``, the labels'
counts of an output shard)."""

from __future__ import annotations

from typing import Any


def add_counts(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """``a`` and ``b`` added into a new dict: numbers summed, nested dicts added alike."""
    out = dict(a)
    for key, value in b.items():
        if isinstance(value, dict):
            out[key] = add_counts(out.get(key, {}), value)
        else:
            out[key] = out.get(key, 0) + value
    return out
