"""Calls chained by response id across groups (no Beam import).

A Responses API call that names ``previous_response_id`` holds only its new items; within its
group ``chains.resolved`` puts the earlier response's sequence before them. Where each call is a
group of its own (a trace per call: OpenInference or openai-v2 without a parent span, LiteLLM
without a session id), the earlier response is in another group, so the groups themselves are
joined first: the group holding response ``X`` and every group holding a call that continues
``X`` are one group, under the key of the group the chain starts in, and the assembly resolves
the chain there as it does within one group.

Only keys travel to decide it:

- each group (or each input shard's part of it) publishes, by format and response id, the
  responses it holds (``Holds``) and those its chained calls continue that it lacks
  (``Lacks``): ``response_keys``;
- at one response id, each group lacking it is linked to the group holding it (the smallest,
  should two hold it): ``links_at`` (``links_of`` at many);
- the links' connected groups are one group; its key is the smallest of its groups that lacks
  no response another of them holds (where the chain starts), else the smallest: ``roots``.

Then only the groups linked move: each takes its root's key (``Joins``: a batch of such
verdicts), and their states merge there. ``merged_by_response`` does all of it in memory (the streaming driver).
"""

from __future__ import annotations

from typing import Iterable, Iterator, NamedTuple

from transforms.calllogs.assemble import GroupState

GroupKey = tuple[str, str]


class Holds(NamedTuple):
    """A group holds a response: a call of it got that id."""

    group: GroupKey


class Lacks(NamedTuple):
    """A group holds a call that continues a response it does not hold (as far as its state shows)."""

    group: GroupKey


class Joins(NamedTuple):
    """Groups' verdicts: each group's calls belong under the group it maps to (its own key when
    it is the root); a batch of them (``roots``' of the groups of one place)."""

    roots: dict[GroupKey, GroupKey]


def response_keys(group: GroupKey, state: GroupState) -> Iterator[tuple[tuple[str, str], Holds | Lacks]]:
    """A group state's keys, by ``(format, response id)``: each response it holds, each one its
    chained calls continue and it lacks. A part of a group (one input shard's) may claim to lack
    what another part holds: the group is then linked to itself, which is no link."""
    held = set(state.responses)
    held.update(call.response_id for _, call in state.chained if call.response_id)
    lacked = {call.previous_response_id for _, call in state.chained} - held
    fmt = group[0]
    for response_id in sorted(held):
        yield (fmt, response_id), Holds(group)
    for response_id in sorted(lacked):
        yield (fmt, response_id), Lacks(group)


def links_at(values: Iterable[Holds | Lacks]) -> list[tuple[GroupKey, GroupKey]]:
    """The links at one response id, ``(group lacking it, group holding it)``: none when no group
    holds it (not logged: its calls stay unchained, counted) or a group holds what it lacks."""
    holders: set[GroupKey] = set()
    lacking: set[GroupKey] = set()
    for value in values:
        (holders if isinstance(value, Holds) else lacking).add(value.group)
    if not holders:
        return []
    holder = min(holders)
    return [(group, holder) for group in sorted(lacking - holders)]


def links_of(keys: Iterable[tuple[tuple[str, str], Holds | Lacks]]) -> list[tuple[GroupKey, GroupKey]]:
    """The links of many response ids' keys (``response_keys``' of many groups): ``links_at``
    at each id, in the order of the ids."""
    by_response: dict[tuple[str, str], list[Holds | Lacks]] = {}
    for key, value in keys:
        by_response.setdefault(key, []).append(value)
    return [link for key in sorted(by_response) for link in links_at(by_response[key])]


def roots(links: Iterable[tuple[GroupKey, GroupKey]]) -> dict[GroupKey, GroupKey]:
    """Each linked group -> the key of the group it joins (the root itself included): groups
    linked directly or through others are one. The root is the smallest group of them that
    lacks nothing from the others (where the chain starts), else the smallest; the same
    whatever order the links come in."""
    parent: dict[GroupKey, GroupKey] = {}
    lacking: set[GroupKey] = set()

    def find(group: GroupKey) -> GroupKey:
        top = group
        while parent[top] != top:
            top = parent[top]
        while parent[group] != top:  # path compression: each group points at the top
            parent[group], group = top, parent[group]
        return top

    for lacker, holder in links:
        lacking.add(lacker)
        for group in (lacker, holder):
            parent.setdefault(group, group)
        a, b = find(lacker), find(holder)
        if a != b:
            parent[max(a, b)] = min(a, b)
    members: dict[GroupKey, list[GroupKey]] = {}
    for group in parent:
        members.setdefault(find(group), []).append(group)
    out: dict[GroupKey, GroupKey] = {}
    for groups in members.values():
        starts = [group for group in groups if group not in lacking]
        root = min(starts) if starts else min(groups)
        for group in groups:
            out[group] = root
    return out


def merged_by_response(states: dict[GroupKey, GroupState]) -> dict[GroupKey, GroupState]:
    """``states`` (every group of one place, in one process) with the groups linked by response
    id merged under their root's key, in new states (those given are left as they are)."""
    found = roots(links_of(pair for group in sorted(states) for pair in response_keys(group, states[group])))
    if not found:
        return states
    out = {group: state for group, state in states.items() if group not in found}
    for group in sorted(found):
        root = found[group]
        if root not in out:
            out[root] = GroupState()
        out[root].merge(states[group])
    return out


__all__ = ["Holds", "Joins", "Lacks", "links_at", "links_of", "merged_by_response", "response_keys", "roots"]
