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


def _routes_into_shuffles(chain: bool) -> dict[str, int]:
    """Each shuffle of the assembly's graph (built, not run) -> how many routes from the shard
    results reach it. DaskRunner's Flatten adds its inputs' partitions and its GroupByKey keeps
    its input's, so a shuffle holds that many times the input's partitions, in tasks too."""
    import dataclasses

    import apache_beam as beam
    from apache_beam.pipeline import PipelineVisitor

    from pipeline.graph.chain_groups import ChainAcrossGroups
    from pipeline.graph.shard_assembly import OUTPUT_TAG, AssembleShardCalls
    from pipeline.graph.shard_step import ShardWork
    from transforms.conversations import NORMALIZE
    from transforms.record.record_settings import Settings

    work = ShardWork(NORMALIZE, dataclasses.replace(Settings(), calls=True))
    steps = ChainAcrossGroups("id", 2, OUTPUT_TAG) if chain else None
    pipeline = beam.Pipeline()
    results = pipeline | beam.Create([ShardResult(0, {}, {}, [])])
    _ = results | "Assemble" >> AssembleShardCalls(work, "unused", 2, 1, steps)
    routes: dict[object, int] = {results: 1}
    shuffles: dict[str, int] = {}

    class Routes(PipelineVisitor):
        def visit_transform(self, node) -> None:
            found = [routes[pcoll] for pcoll in node.inputs if pcoll in routes]
            n = sum(found) if isinstance(node.transform, beam.Flatten) else max(found, default=0)
            for out in node.outputs.values():
                routes.setdefault(out, n)  # the shard results: one route
            if isinstance(node.transform, beam.GroupByKey):  # a CombinePerKey's is "<name>/GroupByKey"
                name = node.full_label.removeprefix("Assemble/").removesuffix("/GroupByKey")
                shuffles[name.removeprefix("ChainAcrossGroups/")] = n

    pipeline.visit(Routes())
    return shuffles


def test_the_assemblys_shuffles_hold_few_routes_of_the_shard_results():
    # Keys ride the shuffle before their own (response ids the fragments' join, claims the
    # linked groups'): each later shuffle is reached by few routes, so DaskRunner's partitions
    # (and tasks) do not double at each (1, 2, 2, 4, 4, 8 and 16 before).
    assert _routes_into_shuffles(chain=True) == {
        "JoinFragments": 1,
        "ByResponse": 1,
        "AllLinks": 1,
        "AssembleGroups": 3,
        "JoinLinkedGroups": 3,
        "ByHash": 3,
        "Gather": 9,
    }
    assert _routes_into_shuffles(chain=False) == {"JoinFragments": 1, "AssembleGroups": 2, "Gather": 2}


def test_a_run_that_does_not_chain_across_groups_sends_no_response_ids():
    states = _states(groups=20, calls=2)
    for key, state in states:
        state.responses[f"resp-{key[1]}"] = (0, b"")
    chained = {key[0] for key, _ in keyed_results(ShardResult(0, {}, {}, states), 2)}
    kept_apart = {key[0] for key, _ in keyed_results(ShardResult(0, {}, {}, states), 2, responses=False)}
    assert "response" in chained and kept_apart == chained - {"response"}
