"""Normalization profiles: ``spec`` (exactly MEM-5) and opt-in profiles built around it.

A profile maps one logged message list to a ``ProfileResult``: the normalized list, the drops
(``dropped`` and ``drops`` by reason, with the core's closed list of reasons), the number of
synthetic "interrupted" results inserted (``healed``) and the opt-in repairs it made
(``repairs``, reported apart from drops, in the canonical order of ``REPAIRS``).

``spec``
    Exactly ``normalize_conversation`` (NORMALIZATION.md); ``repairs`` is always ``{}``.

``lossless``
    Two opt-in passes run on the flat list *before* the unchanged MEM-5 core, so that data the
    strict rule would throw away survives and the output is sendable to a provider:

    1. ``rekey_reused_ids`` (repair ``rekeyed_call``): a call id declared again by a later
       turn that has its own result after it gets a fresh deterministic id, ``<id>~2``,
       ``<id>~3``... (never colliding with an id present in the conversation), and so do its
       results, so both pairs survive instead of the later call, its result and often its
       whole turn being dropped.
    2. ``reattach_results`` (repair ``moved_result``): a real result separated from its
       declaring turn (by other messages, or placed before it anywhere, the front included)
       moves into the block of ``tool`` messages directly after that turn, instead of being
       left where providers reject it or stripped and replaced by a synthetic result.

    The core then runs unchanged on the result, so every guarantee of MEM-5 still holds (and
    its drops are still counted by the operations that drop). On top of them, the output
    passes ``transforms.core.validate.check_sendable`` with no violation: every kept result sits
    in the block right after the turn that declares its call.

How the passes work, in order:

* rule 1 alone (``coerce_messages``): its drops are kept and merged with the core's;
* rule 2 (system messages first, a stable partition): done before the passes so that they see
  the order the core's repair pass will see (a result separated from its call only by a
  system message is not displaced: rule 2 reunites them by itself);
* the two passes, which never drop anything and never mutate their input; ids are compared
  with ``usable_id`` semantics (trimmed, integers as text, ``""`` / ``"0"`` / booleans /
  null unusable), and calls or results with unusable ids are left for the core to drop;
* ``normalize_conversation`` on the result (its rules 1 and 2 are then no-ops).

``dropped`` is the coercion drops plus the core's drops, each counted where it happened; it is
never derived from list lengths.

Pure: no Beam, no I/O, no global state, module-level functions only (picklable, callable from
a DoFn). Work is linear in the size of the conversation.

Usage::

    >>> from transforms.repairs.profiles import normalize_with_profile
    >>> log = [
    ...     {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "ls"}]},
    ...     {"role": "tool", "content": "a.txt", "tool_call_id": "c1"},
    ...     {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "cat"}]},
    ...     {"role": "tool", "content": "hello", "tool_call_id": "c1"},
    ... ]
    >>> normalize_with_profile(log, "spec").dropped
    3
    >>> result = normalize_with_profile(log, "lossless")
    >>> [m.get("tool_call_id") for m in result.messages], result.dropped, result.repairs
    ([None, 'c1', None, 'c1~2'], 0, {'rekeyed_call': 1})
"""

from __future__ import annotations

from typing import Any, NamedTuple

from transforms.core.normalize import (
    REASONS,
    Event,
    NormalizeResult,
    Trace,
    coerce_messages,
    moved_by_system_first,
    normalize_conversation,
    system_first,
    usable_id,
)
from transforms.core.tool_blocks import first_free, tool_blocks

__all__ = [
    "PROFILES",
    "REPAIRS",
    "ProfileResult",
    "normalize_with_profile",
    "reattach_results",
    "rekey_reused_ids",
]

#: Names of the opt-in repairs, reported apart from drops, in canonical order.
REPAIRS = ("rekeyed_call", "moved_result")

#: What ``rekey_reused_ids`` reports of each new id: (index in the list, call position in the
#: turn or ``None`` for a result, the id it had, the id it gets).
Rename = tuple[int, "int | None", "str | None", str]

#: Separator between an id and the counter of its fresh re-keyed spelling (``c1~2``).
REKEY_SEPARATOR = "~"


class ProfileResult(NamedTuple):
    messages: list[Any]
    dropped: int
    drops: dict[str, int]
    healed: int
    #: ``{repair: count}`` for the opt-in repairs that occurred (empty under ``spec``).
    repairs: dict[str, int]


# --------------------------------------------------------------------------------------------
# Helpers on the flat shape (the shape ``coerce_messages`` emits)


def _is_turn(message: dict[str, Any]) -> bool:
    # After rule 1 only assistant turns carry a ``tool_calls`` key, and only a non-empty list.
    return "tool_calls" in message


def _is_result(message: dict[str, Any]) -> bool:
    # After rule 1 only ``tool`` messages carry a ``tool_call_id`` key.
    return "tool_call_id" in message


def _call_key(call: Any) -> str | None:
    """The id a call declares as the core reads it, or ``None`` (junk call, unusable id)."""
    if not isinstance(call, dict):
        return None
    return usable_id(call.get("tool_call_id"))


# --------------------------------------------------------------------------------------------
# Pass 1 — re-key reused ids


class _Group:
    """One turn's declarations of one id, and the results that belong to them."""

    __slots__ = ("turn", "positions", "results")

    def __init__(self, turn: int) -> None:
        self.turn = turn  # index of the declaring turn in the list
        self.positions: list[int] = []  # positions in that turn's ``tool_calls``, in order
        self.results: list[int] = []  # indices of the results that belong here, in order


def rekey_reused_ids(messages: list[Any], renames: list[Rename] | None = None) -> tuple[list[Any], int]:
    """Give a fresh id to each later declaration of a reused id that has its own result.

    Takes a flat list (``coerce_messages`` output, ideally after rule 2) and returns the new
    list and the number of calls re-keyed. Never drops, never mutates its input; idempotent.

    Which result belongs to which declaration (the decisions, in the order they apply):

    * **Nearest preceding declaration.** A result belongs to the closest turn *before* it that
      declares its id. In real agent logs ids are per-turn counters (``call_0``,
      ``functions.search:0``), so the turn just before a result is the one it answers. So in
      ``[A c1, B c1, tool c1]`` the result answers ``B`` (re-keyed ``c1~2``) and ``A`` is left
      unanswered (the core heals it with a synthetic result); MEM-5 alone would instead give
      the result to ``A`` and drop ``B``'s call.
    * **Results before the first declaration** belong to the first declaration (they are
      displaced results; ``reattach_results`` moves them). Results *between* two declarations
      of an id belong to the earlier one, wherever they sit, with one exception below.
    * **Within a group, list order.** The results of one turn are matched in list order: the
      first answers the turn's first declaration of the id. This keeps MEM-5's "first result
      wins", so every real result the core would keep is still kept.
    * **A surplus result stored just before the next declaration goes to it.** When a turn
      already has its results and one more result of the id sits *outside its block* and in
      the run of ``tool`` messages *directly before* the next turn declaring the id, it is that
      turn's result stored before its call (``[A c1, r1, user, r2, B c1]``: ``r2`` answers
      ``B``), if that turn has a declaration left without a result of its own after it. A
      surplus result inside the earlier turn's block (``[A c1, r1, r2, B c1]``) stays with
      ``A``: a result right after a call is that call's, and a second one is a duplicate.
    * **Same-turn reuse** (``[c1, c1]`` in one turn) is matched positionally: the k-th
      declaration of the id in the turn takes the turn's k-th result. A repeat is re-keyed
      only when there is a result for it; with a single result, the repeat is
      indistinguishable from a call logged twice, so it is left for the core to drop as
      ``redeclared_call``.
    * **A later declaration with no result of its own** (nothing after it before the next
      declaration of the id, and none offered by the rule above) is not re-keyed: it looks like
      a turn logged twice or a stored prefix repeated, and giving it a synthetic result would
      invent a call. The core drops it as ``redeclared_call``, exactly as MEM-5 says.
    * **Remaining surplus results** take the id of their turn's first declaration, so the
      core drops them as ``duplicate_result`` against that pair, never against a pair of
      another turn.
    * **Unusable ids** (``"0"``, blank, booleans, null, junk calls) are not touched: the core
      drops such calls and their results, as MEM-5 says.

    Fresh ids are ``<id>~<n>`` with the smallest ``n >= 2`` not yet used, skipping every id
    present in the conversation (after trimming) and every id already handed out, so they are
    deterministic and collision-free. Ids are compared trimmed (``" c1"`` reuses ``"c1"``);
    a fresh id is built from the trimmed id.

    ``renames``, when given, receives ``(index, call position or None, old id, new id)`` for
    each call and result given a new id (``convnorm explain`` shows them).
    """
    walk = _declarations(messages)
    call_ids: dict[int, dict[int, str]] = {}  # {turn index: {call position: new id}}
    result_ids: dict[int, str] = {}  # {result index: id}
    counters: dict[str, int] = {}
    rekeyed = 0
    for key, chain in walk.groups.items():
        if len(chain) == 1 and len(chain[0].positions) == 1:
            continue  # the common case: declared once
        rekeyed += _rekey_chain(key, chain, walk, counters, call_ids, result_ids)
    if not rekeyed:
        return messages, 0
    return _with_ids(messages, call_ids, result_ids, renames), rekeyed


class _Declarations(NamedTuple):
    """What ``rekey_reused_ids`` learns in its walk over the list."""

    present: set[str]  # every usable id in the list (fresh ids are added as handed out)
    groups: dict[str, list[_Group]]  # id -> its declaring turns' groups, in list order
    in_block: set[int]  # results in the block of a turn declaring their id
    before_turn: dict[int, int]  # result -> the turn right after its run of tool messages


def _declarations(messages: list[Any]) -> _Declarations:
    walk = _Declarations(set(), {}, set(), {})
    present, groups = walk.present, walk.groups
    pending: dict[str, list[int]] = {}  # results seen before any declaration of their id
    blocks = tool_blocks(messages)
    declared: dict[int, set[str]] = {}  # turn -> the usable ids it declares
    run: list[int] = []  # the current run of tool messages
    for index, message in enumerate(messages):
        if _is_result(message):
            run.append(index)
            key = usable_id(message["tool_call_id"])
            if key is None:
                continue
            present.add(key)
            if key in declared.get(blocks[index], ()):
                walk.in_block.add(index)
            chain = groups.get(key)
            if chain is None:
                pending.setdefault(key, []).append(index)
            else:
                chain[-1].results.append(index)
            continue
        if not _is_turn(message):
            run.clear()
            continue
        for result in run:
            walk.before_turn[result] = index
        run.clear()
        keys = declared[index] = set()
        turn_groups: dict[str, _Group] = {}
        for position, call in enumerate(message["tool_calls"]):
            key = _call_key(call)
            if key is None:
                continue
            present.add(key)
            keys.add(key)
            group = turn_groups.get(key)
            if group is None:
                group = turn_groups[key] = _Group(index)
                chain = groups.get(key)
                if chain is None:
                    chain = groups[key] = []
                    group.results.extend(pending.pop(key, ()))
                chain.append(group)
            group.positions.append(position)
    return walk


def _rekey_chain(
    key: str,
    chain: list[_Group],
    walk: _Declarations,
    counters: dict[str, int],
    call_ids: dict[int, dict[int, str]],
    result_ids: dict[int, str],
) -> int:
    """Decide the ids of one reused id's declarations and results; the number re-keyed."""
    rekeyed = 0
    offered: list[int] = []  # surplus of the previous turn stored just before this one
    previous_default = key
    for rank, group in enumerate(chain):
        own = group.results
        candidates = own + offered if offered else own
        ids: list[str] = []  # the id of each declaration that has (or keeps) a pairing
        for k, position in enumerate(group.positions):
            if k == 0 and rank == 0:
                ids.append(key)  # the first declaration of an id owns it
                continue
            if k >= len(candidates):
                break  # no result of its own: left for the core to drop
            fresh = _fresh_id(key, walk.present, counters)
            call_ids.setdefault(group.turn, {})[position] = fresh
            ids.append(fresh)
            rekeyed += 1
        for k, result in enumerate(candidates[: len(ids)]):
            result_ids[result] = ids[k]
        # Offered results not taken stay the previous turn's surplus.
        for result in offered[max(0, len(ids) - len(own)) :]:
            result_ids[result] = previous_default
        surplus = own[len(ids) :]
        default = ids[0] if ids else key  # no ids means no results at all
        following = chain[rank + 1].turn if rank + 1 < len(chain) else -1
        offered = []
        for result in surplus:
            if result > group.turn and result not in walk.in_block and walk.before_turn.get(result) == following:
                offered.append(result)  # decided by the next turn
            else:
                result_ids[result] = default
        previous_default = default
    for result in offered:
        result_ids[result] = previous_default  # defensive: the last turn offers nothing
    return rekeyed


def _with_ids(
    messages: list[Any],
    call_ids: dict[int, dict[int, str]],
    result_ids: dict[int, str],
    renames: list[Rename] | None = None,
) -> list[Any]:
    """A new list with the decided ids; messages that keep theirs are shared, not copied."""
    out = []
    for index, message in enumerate(messages):
        renamed = call_ids.get(index)
        if renamed is not None:
            calls = [
                {**call, "tool_call_id": renamed[p]} if p in renamed else call
                for p, call in enumerate(message["tool_calls"])
            ]
            if renames is not None:
                old = message["tool_calls"]
                renames += [(index, p, usable_id(old[p].get("tool_call_id")), new) for p, new in renamed.items()]
            message = {"role": message["role"], "content": message["content"], "tool_calls": calls}
        else:
            new = result_ids.get(index)
            if new is not None and new != usable_id(message["tool_call_id"]):
                if renames is not None:
                    renames.append((index, None, usable_id(message["tool_call_id"]), new))
                message = {"role": message["role"], "content": message["content"], "tool_call_id": new}
        out.append(message)
    return out


def _fresh_id(key: str, taken: set[str], counters: dict[str, int]) -> str:
    """``key~n`` with the smallest unused ``n >= 2``; records it in ``taken``.

    The counter per id only moves forward, so handing out many fresh ids stays linear.
    """
    candidate, n = first_free(key, REKEY_SEPARATOR, counters.get(key, 2), taken)
    counters[key] = n + 1
    taken.add(candidate)
    return candidate


# --------------------------------------------------------------------------------------------
# Pass 2 — re-attach displaced results


def reattach_results(messages: list[Any], moves: list[int] | None = None) -> tuple[list[Any], int]:
    """Move displaced results into the block directly after the turn that declares them.

    Takes a flat list (``coerce_messages`` output, ideally after rule 2 and
    ``rekey_reused_ids``) and returns the new list and the number of results moved. Never
    drops, never mutates its input; idempotent.

    The *owner* of an id is the first turn declaring it with a usable id: the declaration the
    core keeps. The *block* of a turn is the maximal run of ``tool`` messages directly after
    it. For each owned id:

    * **every result placed before its owner** (at the front, or anywhere earlier in the list)
      moves to the *start* of the owner's block: it can never be valid where it is, and the
      core would either strip it (``leading_tool``) and heal the call with a synthetic result,
      or keep it before its call, where providers reject it;
    * otherwise, when the block holds no result for the id, **the first result after the
      block** (separated from its turn by other messages) moves to the *end* of the block;
    * any other result of the id stays where it is: it comes after the one the core keeps, so
      the core drops it as ``duplicate_result``, exactly as MEM-5 alone would.

    Moved results keep their relative list order, so for every id the result that comes first
    in the list (the one MEM-5's "first result wins" keeps) is still the first: this pass
    changes where results sit, never which one the core keeps.

    Results whose id is unusable or declared nowhere are orphans: left for the core to drop.
    A result whose declaration the core will drop as ``redeclared_call`` belongs to the
    owner (MEM-5's first declaration); ``rekey_reused_ids``, run first, gives a result after a
    later declaration its own pair instead.

    ``moves``, when given, receives the index of each result moved, in list order.
    """
    owner = _first_declarations(messages)
    if not owner:
        return messages, 0
    front, back, moved = _moves(messages, owner)
    if not moved:
        return messages, 0
    if moves is not None:
        moves += sorted(moved)
    return _with_moves(messages, front, back, moved), len(moved)


def _first_declarations(messages: list[Any]) -> dict[str, int]:
    """``{id: index of the first turn declaring it}`` (the owner the core keeps)."""
    owner: dict[str, int] = {}
    for index, message in enumerate(messages):
        if _is_turn(message):
            for call in message["tool_calls"]:
                key = _call_key(call)
                if key is not None and key not in owner:
                    owner[key] = index
    return owner


def _moves(messages: list[Any], owner: dict[str, int]) -> tuple[dict[int, list[int]], dict[int, list[int]], set[int]]:
    """Which results move where: ``front`` (owner turn -> results to put right after it),
    ``back`` (last index of a turn's block -> results to put there), and all moved indices."""
    front: dict[int, list[int]] = {}
    back: dict[int, list[int]] = {}
    moved: set[int] = set()
    # The first result after the block, per id: a candidate until the id is settled.
    candidate: dict[str, int] = {}
    settled: set[str] = set()  # ids with a pre-owner result or an in-block result
    blocks = tool_blocks(messages)
    block_last: dict[int, int] = {}  # owner turn -> last index of its block (or itself)
    for index, message in enumerate(messages):
        if _is_turn(message):
            block_last[index] = index
            continue
        if not _is_result(message):
            continue
        block_turn = blocks[index]
        if block_turn >= 0:
            block_last[block_turn] = index
        key = usable_id(message["tool_call_id"])
        turn = owner.get(key) if key is not None else None
        if key is None or turn is None:
            continue  # unusable id or orphan: the core drops it
        if index < turn:
            front.setdefault(turn, []).append(index)
            moved.add(index)
            settled.add(key)
        elif block_turn == turn:
            settled.add(key)
        elif key not in settled and key not in candidate:
            candidate[key] = index
    for key, index in candidate.items():
        if key not in settled:
            back.setdefault(block_last[owner[key]], []).append(index)
            moved.add(index)
    for results in back.values():
        results.sort()  # list order among results moved to the same block
    return front, back, moved


def _with_moves(
    messages: list[Any], front: dict[int, list[int]], back: dict[int, list[int]], moved: set[int]
) -> list[Any]:
    out: list[Any] = []
    append = out.append
    for index, message in enumerate(messages):
        # A block's last message may itself move away: what goes after it still goes here.
        if index not in moved:
            append(message)
        for source in front.get(index, ()):
            append(messages[source])
        for source in back.get(index, ()):
            append(messages[source])
    return out


# --------------------------------------------------------------------------------------------
# Profiles


def _merge_drops(*tallies: dict[str, int]) -> dict[str, int]:
    merged: dict[str, int] = {}
    for tally in tallies:
        for reason, count in tally.items():
            merged[reason] = merged.get(reason, 0) + count
    return {r: merged[r] for r in REASONS if r in merged}


def _spec(messages: Any, trace: Trace | None = None) -> ProfileResult:
    """MEM-5 exactly: ``normalize_conversation``, no opt-in repair."""
    result = normalize_conversation(messages, trace)
    return ProfileResult(result.messages, result.dropped, result.drops, result.healed, {})


def _lossless(messages: Any, trace: Trace | None = None) -> ProfileResult:
    """Re-key reused ids and re-attach displaced results, then run the MEM-5 core unchanged."""
    if not isinstance(messages, list):
        return ProfileResult([], 0, {}, 0, {})
    if trace is not None:
        return _traced_lossless(messages, trace)
    flat, coerce_drops = coerce_messages(messages)
    flat = system_first(flat)  # rule 2, as the core applies it (a no-op there)
    flat, rekeyed = rekey_reused_ids(flat)
    flat, moved = reattach_results(flat)
    core = normalize_conversation(flat)
    return _lossless_result(core, coerce_drops, rekeyed, moved)


def _lossless_result(core: NormalizeResult, coerce_drops: dict[str, int], rekeyed: int, moved: int) -> ProfileResult:
    # The core re-coerces flat messages without dropping anything, so each drop below is
    # counted once, by the operation that made it.
    dropped = sum(coerce_drops.values()) + core.dropped
    counts = {"rekeyed_call": rekeyed, "moved_result": moved}
    repairs = {name: counts[name] for name in REPAIRS if counts[name]}
    return ProfileResult(core.messages, dropped, _merge_drops(coerce_drops, core.drops), core.healed, repairs)


def _traced_lossless(messages: list[Any], trace: Trace) -> ProfileResult:
    """``_lossless`` with ``trace``: the same steps, each recording what it did, and every
    event named by the input entry it concerns (``origins`` follows the list through them)."""
    coerced, coerce_drops = coerce_messages(messages, trace)
    origins = list(trace.origins)  # coerced position -> input index
    for position in moved_by_system_first(coerced):
        trace.events.append(Event("moved", "system_first", origins[position]))
    flat = system_first(coerced)
    origins = _follow(coerced, flat, origins)
    renames: list[Rename] = []
    flat, rekeyed = rekey_reused_ids(flat, renames)  # same positions: origins unchanged
    for index, call, old, new in renames:
        trace.events.append(Event("rekeyed", "rekeyed_call", origins[index], call, f"{old} -> {new}"))
    moves: list[int] = []
    before_moves = flat
    flat, moved = reattach_results(flat, moves)
    for index in moves:
        trace.events.append(
            Event("moved", "moved_result", origins[index], None, str(before_moves[index]["tool_call_id"]))
        )
    origins = _follow(before_moves, flat, origins)
    core_trace = Trace()
    core = normalize_conversation(flat, core_trace)
    trace.events += [e._replace(entry=None if e.entry is None else origins[e.entry]) for e in core_trace.events]
    trace.origins = [None if o is None else origins[o] for o in core_trace.origins]
    return _lossless_result(core, coerce_drops, rekeyed, moved)


def _follow(before: list[Any], after: list[Any], origins: list[int | None]) -> list[int | None]:
    """The origins of ``after``, a reordering of ``before`` (the same message objects)."""
    where = {id(message): origin for message, origin in zip(before, origins)}
    return [where[id(message)] for message in after]


#: Profile name -> function from a message list (and an optional ``Trace``) to a ``ProfileResult``.
PROFILES = {"spec": _spec, "lossless": _lossless}


def normalize_with_profile(messages: Any, profile: str = "spec", trace: Trace | None = None) -> ProfileResult:
    """Normalize one conversation under a named profile (``KeyError`` for an unknown name).

    With ``trace``, every step records what it did to each input entry (``normalize.Trace``).
    """
    return PROFILES[profile](messages, trace)
