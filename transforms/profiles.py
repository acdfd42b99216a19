"""Normalization profiles: ``spec`` (exactly MEM-5) and opt-in profiles built around it.

STUB: the ``lossless`` profile is being written (issue 5). The API below is the contract the
job relies on.
"""

from __future__ import annotations

from typing import NamedTuple

from transforms.normalize import normalize_conversation

#: Names of the opt-in repairs, reported apart from drops.
REPAIRS = ("rekeyed_call", "moved_result")


class ProfileResult(NamedTuple):
    messages: list
    dropped: int
    drops: dict
    healed: int
    #: ``{repair: count}`` for the opt-in repairs that occurred (empty under ``spec``).
    repairs: dict


def _spec(messages) -> ProfileResult:
    result = normalize_conversation(messages)
    return ProfileResult(result.messages, result.dropped, result.drops, result.healed, {})


PROFILES = {"spec": _spec}


def normalize_with_profile(messages, profile: str = "spec") -> ProfileResult:
    return PROFILES[profile](messages)
