"""``--drop-role`` and ``--map-role``: roles a sink cannot take, dealt with before MEM-5 (no Beam import).

An agent log may end on a role no provider has (an ``exit`` or ``observer`` message): every
provider writer refuses such a record (``unsupported_role``), and the dead letter names the two
options that fix it. They run on the flat messages a reader made, before normalization, so
MEM-5 repairs whatever pairing a dropped message leaves behind:

- ``--drop-role ROLE`` drops every message of that role; each is counted in the conversation's
  drops under its own reason, ``drop_role`` (after MEM-5's reasons);
- ``--map-role FROM=TO`` gives every message of role ``FROM`` the role ``TO`` (``user``,
  ``assistant``, ``system`` or ``developer``), counted as the opt-in repair ``map_role``.

Pure: the input list and its messages are never changed.
"""

from __future__ import annotations

from typing import Any

#: The drop reason of a message dropped by ``--drop-role``.
DROPPED_ROLE = "drop_role"
#: The repair of a message given another role by ``--map-role``.
MAPPED_ROLE = "map_role"
#: The roles ``--map-role`` may give: those every provider writer takes (a ``tool`` message
#: would need a call to answer).
MAP_TARGETS = ("user", "assistant", "system", "developer")


def apply_role_options(
    messages: list[Any], drop_roles: tuple[str, ...], map_roles: tuple[tuple[str, str], ...]
) -> tuple[list[Any], int, int]:
    """``(messages, dropped, mapped)``: the list with ``drop_roles`` dropped and ``map_roles``
    applied, and how many messages each touched. Entries that are not messages pass as they are."""
    if not drop_roles and not map_roles:
        return messages, 0, 0
    mapping = dict(map_roles)
    out: list[Any] = []
    dropped = mapped = 0
    for message in messages:
        fate = role_fate(message, drop_roles, mapping)
        if fate is None:
            out.append(message)
        elif fate == DROPPED_ROLE:
            dropped += 1
        else:
            out.append({**message, "role": fate})
            mapped += 1
    return out, dropped, mapped


def role_fate(message: Any, drop_roles: tuple[str, ...], mapping: dict[str, str]) -> str | None:
    """What the options do to one entry: ``DROPPED_ROLE``, the role it is given, or ``None``
    (kept as it is; entries that are not messages always are)."""
    role = message.get("role") if isinstance(message, dict) else None
    if not isinstance(role, str):
        return None
    if role in drop_roles:
        return DROPPED_ROLE
    return mapping.get(role)


def drops_with_roles(drops: dict[str, int], role_drops: int) -> dict[str, int]:
    """A conversation's drops by reason: MEM-5's, then ``drop_role``'s when any."""
    return {**drops, DROPPED_ROLE: role_drops} if role_drops else drops


def repairs_with_roles(repairs: dict[str, int], role_maps: int) -> dict[str, int]:
    """A conversation's repairs: the profile's, then ``map_role``'s when any."""
    return {**repairs, MAPPED_ROLE: role_maps} if role_maps else repairs


def parse_map_role(value: str) -> tuple[str, str] | None:
    """``"FROM=TO"`` as ``(FROM, TO)``, or ``None`` when it is not of that form."""
    source, sep, target = value.partition("=")
    if not sep or not source.strip() or not target.strip():
        return None
    return source.strip(), target.strip()
