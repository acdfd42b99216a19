"""Message keys carried around the MEM-5 core (no Beam import).

Rule 1 keeps only the flat keys of a message; that is the law, and the core
(``transforms.core.normalize``) follows it. An opt-in feature that needs another key of a message
to survive (a training ``weight``; another feature's reasoning text) must not change the
core. It goes around it instead:

1. ``lift``: before the core, the wanted keys of each input entry, by the entry's index;
2. the core runs unchanged, with its trace on (``normalize.Trace``): for each output message
   the input entry it came from (``origins``; the traced pass gives the same result);
3. ``reattach``: after the core, each surviving message gets its entry's keys back (a copy:
   the core's output is not changed in place). A message the core dropped takes its keys
   with it; one the core made (a synthetic result) has none.

Only a conversation that holds a wanted key pays for the traced pass; for the others
``carry_around_core`` is one look per message. Each feature names its own keys and decides
what to do with them once they are back (``transforms.dataset.training`` for weights).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from transforms.core.normalize import Trace
from transforms.repairs.profiles import ProfileResult, normalize_with_profile

#: Input entry index -> the wanted keys it held, in the entry's own key order.
Lifted = dict[int, dict[str, Any]]


class Carried(NamedTuple):
    """The core's result with the lifted keys re-attached, and what became of them."""

    result: ProfileResult
    #: Entries whose keys came back on an output message.
    reattached: int
    #: Entries whose keys went with a message the core dropped.
    lost_with_message: int


def lift(messages: Any, keys: tuple[str, ...]) -> Lifted:
    """The ``keys`` each entry of ``messages`` holds (entries holding none are left out)."""
    found: Lifted = {}
    if not isinstance(messages, list):
        return found
    for index, message in enumerate(messages):
        if message.__class__ is not dict:
            continue
        for key in keys:  # a few keys: a lookup each, not a walk over the message's keys
            if key in message:
                found[index] = {k: message[k] for k in message if k in keys}
                break
    return found


def reattach(messages: list[Any], origins: list[int | None], lifted: Lifted) -> tuple[list[Any], int]:
    """``messages`` with each one's lifted keys back (by ``origins``, the core's trace); and how
    many entries' keys came back. Keys already in the output message are not overwritten."""
    out = []
    back = 0
    for message, origin in zip(messages, origins):
        extra = lifted.get(origin) if origin is not None else None
        if extra:
            message = {**message, **{k: v for k, v in extra.items() if k not in message}}
            back += 1
        out.append(message)
    return out, back


def carry_around_core(messages: Any, profile: str, keys: tuple[str, ...], result: ProfileResult) -> Carried | None:
    """The core's ``result`` for ``messages`` (under ``profile``) with the entries' ``keys``
    re-attached; ``None`` when no entry holds one (``result`` stands as it is)."""
    lifted = lift(messages, keys)
    if not lifted:
        return None
    trace = Trace()
    traced = normalize_with_profile(messages, profile, trace)
    kept, back = reattach(traced.messages, trace.origins, lifted)
    return Carried(traced._replace(messages=kept), back, len(lifted) - back)
