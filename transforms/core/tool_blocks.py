"""Tool blocks and fresh ids: the rules several modules share, defined once (no Beam import).

*A call's results directly follow its turn.* A **turn** is an assistant message with a
non-empty ``tool_calls`` list; its **block** is the run of ``tool`` messages directly after it
(their order inside the block is free). ``validate.check_sendable``, the writers'
``check_results_adjacent`` and the lossless profile's passes all read blocks through
``tool_blocks``, so the checker, the writers and the repairs agree by construction.

A **fresh id** is an id (or a record's unique field) with a counter added, the smallest one
not yet taken: ``call_3_1``, ``c1~2``. ``first_free`` is the one allocator of such suffixes.
"""

from __future__ import annotations

from typing import Any, Container

__all__ = ["first_free", "is_result", "is_turn", "tool_blocks"]


def is_turn(message: Any) -> bool:
    """An assistant message declaring calls: a non-empty ``tool_calls`` list."""
    if not isinstance(message, dict) or message.get("role") != "assistant":
        return False
    calls = message.get("tool_calls")
    return isinstance(calls, list) and bool(calls)


def is_result(message: Any) -> bool:
    """A ``tool`` message (the answer to a call, whatever its id)."""
    return isinstance(message, dict) and message.get("role") == "tool"


def _is_message(message: Any) -> bool:
    if not isinstance(message, dict):
        return False
    role = message.get("role")
    return isinstance(role, str) and bool(role.strip())


def tool_blocks(messages: list[Any]) -> list[int]:
    """For each message, the index of the turn whose block holds it, else ``-1``.

    Only ``tool`` messages are ever in a block; a turn itself and every other message get
    ``-1``. Entries that are not messages at all (not an object, no usable role) neither end
    nor join a block: the checker reports them on their own, and a flat list has none.
    """
    owners = [-1] * len(messages)
    block_turn = -1  # the turn whose block the walk is in, or -1
    for index, message in enumerate(messages):
        if not _is_message(message):
            continue
        if message["role"] == "tool":
            owners[index] = block_turn
        else:
            block_turn = index if is_turn(message) else -1
    return owners


def first_free(base: str, separator: str, start: int, taken: Container[str]) -> tuple[str, int]:
    """``<base><separator><n>`` with the smallest ``n >= start`` not in ``taken``, and that ``n``.

    Deterministic: the same ``taken`` gives the same answer. The caller records the new id in
    ``taken`` (and may remember ``n`` so that many fresh ids of one base stay linear).
    """
    n = start
    while f"{base}{separator}{n}" in taken:
        n += 1
    return f"{base}{separator}{n}", n
