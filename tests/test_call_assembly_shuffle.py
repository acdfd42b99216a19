"""What the batch graph's assembly sends across its shuffles: a few packed values per input
shard, not an element per group, per call or per conversation; and a shard's result whose
size Beam estimates without pickling its groups' states."""

from __future__ import annotations

from pipeline.graph.per_shard import ShardResultCoder
from pipeline.graph.shard_assembly import SLOTS_PER_OUTPUT_SHARD, _unpacked_states, keyed_results
from pipeline.graph.shard_step import ShardResult
from transforms.calllogs import assemble
from transforms.calllogs.assemble import GroupState
from transforms.calllogs.calls import Call


def _states(groups: int, calls: int) -> list[tuple[tuple[str, str], GroupState]]:
    out = []
    for g in range(groups):
        state = GroupState()
        history: list = [{"role": "system", "content": f"group {g}"}]
        for n in range(calls):
            history = [*history, {"role": "user", "content": f"ask {n}"}]
            answer = {"role": "assistant", "content": f"answer {n}"}
            call = Call("langfuse", f"trace-{g}", n + 1, f"obs-{g}-{n}", history, [answer])
            state.add("calls.jsonl", g * calls + n, call._replace(context={"trace_id": f"trace-{g}"}))
            history = [*history, answer]
        out.append((("langfuse", f"trace-{g}"), state))
    return out


def test_a_shards_groups_and_label_targets_cross_in_a_few_packed_values():
    buckets = 2
    states = _states(groups=300, calls=4)
    keyed = list(keyed_results(ShardResult(0, {}, {}, states), buckets))
    tags = [key[0] for key, _ in keyed]
    slots = buckets * SLOTS_PER_OUTPUT_SHARD
    # One result, one "any", and at most a value per slot for the states and for the targets
    # (an element per group and per call before: 300 + 1,500).
    assert tags.count("result") == 1 and tags.count("any") == 1
    assert 0 < tags.count("groups") <= slots and 0 < tags.count("joins") <= slots
    assert all(isinstance(value, bytes) for key, value in keyed if key[0] in ("groups", "joins"))
    # Every group's state comes back once, whole.
    unpacked = _unpacked_states(value for key, value in keyed if key[0] == "groups")
    assert sorted(unpacked) == sorted(key for key, _ in states)
    assert all(len(state.calls) == 4 for state in unpacked.values())


def test_states_of_one_group_from_two_shards_are_merged():
    [(key, first)] = _states(groups=1, calls=2)
    [(_, second)] = _states(groups=1, calls=3)
    packed = [
        value
        for shard, state in ((0, first), (1, second))
        for k, value in keyed_results(ShardResult(shard, {}, {}, [(key, state)]), 1)
        if k[0] == "groups"
    ]
    assert len(packed) == 2
    [(merged_key, merged)] = _unpacked_states(packed).items()
    assert merged_key == key and len(merged.calls) == 5 and len(merged.sequences) == 1


def test_a_shard_results_size_is_estimated_without_pickling_its_states(monkeypatch):
    coder = ShardResultCoder()
    result = ShardResult(3, {}, {"records_in": 8}, _states(groups=5, calls=2))
    decoded = coder.decode(coder.encode(result))
    assert decoded.shard == 3 and [k for k, _ in decoded.calls] == [k for k, _ in result.calls]
    pickled = []
    original = assemble.GroupState.__getstate__
    monkeypatch.setattr(assemble.GroupState, "__getstate__", lambda self: pickled.append(1) or original(self))
    assert coder.estimate_size(result) == len(coder.encode(result._replace(calls=())))
    assert coder.estimate_size(result) < len(coder.encode(result))
    assert len(pickled) == 5  # the whole encoding above, not the estimates
