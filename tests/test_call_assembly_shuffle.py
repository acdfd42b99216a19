"""What the batch graph's assembly sends across its shuffles: a few packed values per input
shard, not an element per group, per call or per conversation; and a shard's result whose
size Beam estimates without pickling its groups' states."""

from __future__ import annotations

from pipeline.graph.per_shard import ShardResultCoder
from pipeline.graph.shard_assembly import SLOTS_PER_OUTPUT_SHARD, _unpacked_states, keyed_results
from pipeline.graph.shard_step import ShardResult
from transforms.calllogs import assemble
from transforms.calllogs.assemble import GroupState
from transforms.calllogs.calls import Call, Label
from transforms.record.assembled_calls import ShardGroups
from transforms.record.record_steps import CallLogged


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


def test_a_shards_groups_past_the_live_ones_are_packed_and_read_again_when_a_call_comes():
    groups = ShardGroups(live=2)

    def call(g: int, n: int) -> CallLogged:
        history = [{"role": "user", "content": f"ask {i}"} for i in range(n + 1)]
        piece = Call("langfuse", f"trace-{g}", n + 1, f"obs-{g}-{n}", history, [{"role": "assistant", "content": "ok"}])
        return CallLogged("calls.jsonl", g * 10 + n, [piece], None)

    label = Label("langfuse", "trace-0", 5, "obs-0-0", "langfuse", "l1", "score", 1, "trace-0")
    for g in range(4):
        groups.add(call(g, 0))
    groups.add(CallLogged("calls.jsonl", 99, [label], None))
    groups.settle()
    kinds = {key[1]: type(state).__name__ for key, state in groups.items()}
    assert kinds == {
        "trace-1": "PackedGroup",
        "trace-2": "PackedGroup",
        "trace-3": "GroupState",
        "trace-0": "GroupState",
    }
    groups.add(call(1, 1))  # a packed group gets a call after all: read again, whole
    groups.settle()
    groups.add(call(2, 1))
    groups.settle()  # the live ones: the two touched last
    states = dict(groups.items())
    kinds = {key[1]: type(state).__name__ for key, state in states.items()}
    assert kinds == {
        "trace-0": "PackedGroup",
        "trace-3": "PackedGroup",
        "trace-1": "GroupState",
        "trace-2": "GroupState",
    }
    assert len(states[("langfuse", "trace-1")].calls) == 2 and len(states[("langfuse", "trace-2")].calls) == 2
    packed = states[("langfuse", "trace-0")]  # packed now, its label kept beside it
    assert type(packed).__name__ == "PackedGroup" and packed.labels == [label] and packed.holds
    assert packed.unpacked().labels == [label] and len(packed.unpacked().calls) == 1
    # The shuffle takes packed and live groups alike.
    keyed = list(keyed_results(ShardResult(0, {}, {}, groups.items()), 1))
    unpacked = _unpacked_states(value for key, value in keyed if key[0] == "groups")
    assert sorted(k[1] for k in unpacked) == ["trace-0", "trace-1", "trace-2", "trace-3"]
    assert [k for k, v in keyed if k[0] == "joins"] and all(not s.labels for s in unpacked.values())
