"""Conversations chained across groups (transforms/calllogs/chained.py, pipeline/graph/chain_groups.py):
a client that gives each call or each turn a group of its own (LiteLLM without a session id,
openai-v2 without a parent span, turns as separate traces) gives each conversation once, whole;
conversations that only share a start stay apart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.cli.main import main
from pipeline.graph.chain_groups import chained_conversations, chained_in_memory
from transforms.calllogs.assemble import GroupState, chain_of
from transforms.calllogs.calls import Call
from transforms.calllogs.chained import Absorbed, Claim, fingerprints_of, merge_absorbed, resolve
from transforms.record.assembled_calls import conversations_of
from transforms.record.record_settings import Settings

CHAINED = Path(__file__).parent / "data" / "calllogs" / "chained"
LITELLM = CHAINED / "litellm-no-session.jsonl"
OPENAI_V2 = CHAINED / "openai-v2-no-parent.jsonl"
TURNS = CHAINED / "turns-as-traces.jsonl"
SEPARATE = CHAINED / "litellm-separate.jsonl"


def _m(role: str, content: str, **more) -> dict:
    return {"role": role, "content": content, **more}


# --------------------------------------------------------------------------------------------
# The rule, on keys


def test_fingerprints_are_the_answers_before_the_end_and_the_end_when_it_is_an_answer():
    messages = [_m("system", "s"), _m("user", "u"), _m("assistant", "a"), _m("user", "v"), _m("assistant", "b")]
    chain = chain_of(messages)
    prints = fingerprints_of(messages, chain)
    assert prints == (5, (chain[2],), chain[4], (), b"", ())
    # Ending at a question (a call that got no answer): no full key, every answer covers.
    prints = fingerprints_of(messages[:4], chain[:4])
    assert prints == (4, (chain[2],), b"", (), b"", ())


def test_the_longest_that_goes_on_takes_what_ends_there_and_a_groups_own_never_does():
    absorbed = Absorbed(b"a", "A", {"calls": []})
    short = Claim(b"a", "ga", 3, absorbed)
    longer, longest, also_longest = Claim(b"b", "gb", 5), Claim(b"d", "gd", 7), Claim(b"c", "gc", 7)
    verdicts = resolve([short, longer, longest, also_longest])
    assert [(group, type(v).__name__, v.conversation) for group, v in verdicts] == [
        ("ga", "Subsumed", b"a"),
        ("gc", "Absorb", b"c"),  # of two as long, the smallest key
    ]
    assert resolve([short]) == [] and resolve([short, Claim(b"e", "ga", 9)]) == []


def test_merging_an_account_adds_its_calls_tool_results_and_truncated_answers():
    mine = {"format": "litellm", "group": "g2", "calls": [{"call": "c2", "start": 20}], "collapsed": 0}
    theirs = {
        "format": "litellm",
        "group": "g1",
        "calls": [{"call": "c1", "start": 10}],
        "collapsed": 0,
        "tool_results_filled": [{"call": "t1", "start": 11}],
        "truncated_stream": 1,
    }
    record = {"id": "g2", "messages": []}
    same, merged, counts = merge_absorbed(record, mine, [Absorbed(b"k1", "g1", theirs)])
    assert same == {"id": "g2", "messages": []}
    assert [c["call"] for c in merged["calls"]] == ["c1", "c2"]
    assert merged["collapsed"] == 1 and merged["chained"] == ["g1"]
    assert merged["tool_results_unused"] == [{"call": "t1", "start": 11}]
    assert merged["truncated_stream"] == 1
    assert counts == {"prefixes_collapsed": 1, "chained_across_groups": 1}
    assert mine["collapsed"] == 0  # the survivor's own entry is not changed in place


def _call(group: str, start: int, history: list[dict], output: list[dict]) -> Call:
    return Call("litellm", group, start, f"{group}-{start}", history, output)


def _conversations(calls: list[Call]) -> list:
    states: dict[str, GroupState] = {}
    for n, call in enumerate(calls):
        states.setdefault(call.group, GroupState()).add("in.jsonl", n, call)
    return [
        made
        for group in sorted(states)
        for _, made in conversations_of((("litellm", group), states[group]), Settings(), 1)
    ]


def _written(made: list) -> dict[str, tuple[list, dict]]:
    return {m.raw.payload.value["id"]: (m.raw.payload.value["messages"], m.raw.payload.assembly) for m in made}


def test_a_branch_subsumed_elsewhere_leaves_its_group_renumbered():
    u, a = [_m("user", "x")], [_m("assistant", "1")]
    calls = [
        _call("g", 2, u, a),  # the latest: g's conversation
        _call("g", 1, [_m("user", "y")], [_m("assistant", "2")]),  # g#branch1
        _call("h", 3, [*u, *a, _m("user", "more")], [_m("assistant", "3")]),
    ]
    made = _conversations(calls)
    assert sorted(_written(made)) == ["g", "g#branch1", "h"]
    chained = _written(chained_in_memory(made, "id"))
    assert sorted(chained) == ["g", "h"]
    messages, assembly = chained["g"]
    assert messages == [_m("user", "y"), _m("assistant", "2")] and "branch" not in assembly
    assert chained["h"][1]["chained"] == ["g"] and [c["call"] for c in chained["h"][1]["calls"]] == ["g-2", "h-3"]


def test_a_chained_conversations_context_merges_into_the_survivors():
    # A chat whose turns are separate traces: its first turn, chained into the second, hands
    # on its trace, its first call's time and its tags; the survivor keeps its own user.
    u, a = [_m("user", "x")], [_m("assistant", "1")]
    calls = [
        _call("t1", 1_000_000_000, u, a)._replace(context={"user_id": "u-old", "trace_id": "t1", "tags": ["a"]}),
        _call("t2", 2_000_000_000, [*u, *a, _m("user", "more")], [_m("assistant", "2")])._replace(
            context={"user_id": "u", "trace_id": "t2", "tags": ["b"]}
        ),
    ]
    (survivor,) = chained_in_memory(_conversations(calls), "id")
    record = survivor.raw.payload.value
    assert record["id"] == "t2"
    assert record["metadata"] == {
        "user_id": "u",
        "trace_ids": ["t1", "t2"],
        "tags": ["a", "b"],
        "first_call_at": "1970-01-01T00:00:01Z",
        "last_call_at": "1970-01-01T00:00:02Z",
    }
    record, _, _ = merge_absorbed({"id": "s"}, {"calls": []}, [Absorbed(b"k", "g", {"calls": []}, {"tags": ["x"]})])
    assert record == {"id": "s", "metadata": {"tags": ["x"]}}  # a survivor that knew nothing learns


def test_separate_conversations_that_share_a_start_stay_apart():
    start = [_m("system", "s"), _m("user", "hi")]
    calls = [
        _call("a", 1, start, [_m("assistant", "Hello")]),
        _call("b", 2, [*start, _m("assistant", "Hey"), _m("user", "go on")], [_m("assistant", "ok")]),
        _call("c", 3, start, []),  # no answer: a question only, never subsumed
        _call("d", 4, start, [_m("assistant", "Hello")]),  # equal to a's: not a strict prefix
    ]
    made = _conversations(calls)
    assert chained_in_memory(made, "id") == made
    assert chained_conversations(iter(made), "id") == made


def test_arguments_as_text_or_object_and_invented_ids_chain_as_the_assembly_compares():
    call = {"tool_call_id": "call_0", "name": "f", "args": '{"a": 1}'}
    copy = {"tool_call_id": "call_1", "name": "f", "args": {"a": 1}}
    calls = [
        _call("a", 1, [_m("user", "q")], [{"role": "assistant", "content": "", "tool_calls": [call]}]),
        _call(
            "b",
            2,
            [
                _m("user", "q"),
                {"role": "assistant", "content": "", "tool_calls": [copy]},
                {"role": "tool", "content": "r", "tool_call_id": "call_1"},
            ],
            [_m("assistant", "done")],
        ),
    ]
    assert sorted(_written(chained_in_memory(_conversations(calls), "id"))) == ["b"]


def test_a_chat_logged_after_a_longer_one_that_begins_alike_stays_apart():
    # "Hi" -> "Hello!" at 11:00 in one trace; at 10:00 another trace's chat began the same way
    # and went on. The later one is no start of the earlier (it was found chaining real
    # fixtures together: a one-turn chat taken into an unrelated one).
    longer = [
        _call("a", 10, [_m("user", "Hi")], [_m("assistant", "Hello!")]),
        _call(
            "a", 11, [_m("user", "Hi"), _m("assistant", "Hello!"), _m("user", "Weather?")], [_m("assistant", "Sunny")]
        ),
    ]
    later = [_call("b", 20, [_m("user", "Hi")], [_m("assistant", "Hello!")])]
    assert sorted(_written(chained_in_memory(_conversations(longer + later), "id"))) == ["a", "b"]
    earlier = [_call("c", 5, [_m("user", "Hi")], [_m("assistant", "Hello!")])]
    assert sorted(_written(chained_in_memory(_conversations(longer + earlier), "id"))) == ["a"]


def test_of_those_that_go_on_one_logged_no_earlier_takes_what_ends():
    absorbed = Absorbed(b"a", "A", {"calls": []})
    short = Claim(b"a", "ga", 3, absorbed, 50)
    longest_but_earlier, later = Claim(b"d", "gd", 9, None, 40), Claim(b"b", "gb", 5, None, 60)
    verdicts = resolve([short, longest_but_earlier, later])
    assert [(group, type(v).__name__, v.conversation) for group, v in verdicts] == [
        ("ga", "Subsumed", b"a"),
        ("gb", "Absorb", b"b"),
    ]
    assert resolve([short, longest_but_earlier]) == []


# --------------------------------------------------------------------------------------------
# convnorm run (FnApiRunner)


def _lines(directory: Path) -> list[dict]:
    return [json.loads(line) for part in sorted(directory.glob("part-*")) for line in part.read_bytes().splitlines()]


def _run(inputs: list[Path], out: Path, *extra: str) -> tuple[dict, list[dict], dict[str, dict]]:
    args = [a for path in inputs for a in ("--input", str(path))]
    assert main([*args, "--output", str(out), "--quiet", "--no-report", *extra]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["accounted"]
    drops = {d["id"]: d for d in _lines(out / "drops")}
    return summary, _lines(out / "normalized"), drops


WEATHER = [
    _m("system", "You are a helpful assistant."),
    _m("user", "Weather in Paris?"),
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"tool_call_id": "call_Wx1", "name": "get_weather", "args": '{"city": "Paris"}'}],
    },
    {"role": "tool", "content": "rainy, 12 C", "tool_call_id": "call_Wx1"},
    _m("assistant", "It is rainy in Paris, 12 C."),
    _m("user", "And should I take an umbrella?"),
    _m("assistant", "Yes, take one."),
]
JOKES = [
    _m("user", "Tell me a joke."),
    _m("assistant", "Why did the chicken cross the road?"),
    _m("user", "Why?"),
    _m("assistant", "To get to the other side."),
    _m("user", "Another one."),
    _m("assistant", "I am out of jokes."),
]


def _flat(messages: list[dict]) -> list[dict]:
    """The written messages as compared here: role, content, calls (id, name, arguments), result ids."""
    out = []
    for m in messages:
        one = {"role": m["role"], "content": m.get("content") or ""}
        if m.get("tool_calls"):
            one["tool_calls"] = [
                {"tool_call_id": c["tool_call_id"], "name": c["name"], "args": c["args"]} for c in m["tool_calls"]
            ]
        if m["role"] == "tool":
            one["tool_call_id"] = m["tool_call_id"]
        out.append(one)
    return out


@pytest.fixture(scope="module")
def chained_out(tmp_path_factory) -> Path:
    """Every fixture of tests/data/calllogs/chained in one run: their contents differ, so each
    file's conversations are those it gives alone."""
    out = tmp_path_factory.mktemp("chained") / "out"
    _run([LITELLM, OPENAI_V2, TURNS, SEPARATE], out)
    return out


@pytest.fixture(scope="module")
def chained_run(chained_out) -> tuple[dict, list[dict], dict[str, dict]]:
    summary = json.loads((chained_out / "summary.json").read_text())
    return summary, _lines(chained_out / "normalized"), {d["id"]: d for d in _lines(chained_out / "drops")}


def _formats(drops: dict[str, dict], fmt: str) -> set[str]:
    return {i for i, d in drops.items() if d["assembly"]["format"] == fmt}


@pytest.mark.parametrize("fmt", ["litellm", "otlp"], ids=["litellm-no-session", "openai-v2-no-parent"])
def test_two_conversations_of_a_group_per_call_are_two_records_with_every_message(chained_run, fmt):
    summary, records, drops = chained_run
    first_users = {"Weather in Paris?", "Tell me a joke."}
    ours = [
        r
        for r in records
        if r["id"] in _formats(drops, fmt)
        and r["messages"][1 if r["messages"][0]["role"] == "system" else 0]["content"] in first_users
    ]
    assert len(ours) == 2
    by_first_user = {r["messages"][1 if r["messages"][0]["role"] == "system" else 0]["content"]: r for r in ours}
    weather, jokes = by_first_user["Weather in Paris?"], by_first_user["Tell me a joke."]
    got = _flat(weather["messages"])
    got[2]["tool_calls"][0]["args"] = json.loads(got[2]["tool_calls"][0]["args"])
    expected = _flat(WEATHER)
    expected[2]["tool_calls"][0]["args"] = {"city": "Paris"}
    assert got == expected
    assert _flat(jokes["messages"]) == JOKES
    for record in ours:
        assembly = drops[record["id"]]["assembly"]
        assert len(assembly["calls"]) == 3 and len(assembly["chained"]) == 2 and assembly["collapsed"] == 2


def test_every_call_is_in_one_conversations_account_and_each_chained_one_counted(chained_run):
    summary, records, drops = chained_run
    calls = summary["call_logs"]
    # 4 + 4 (a group per call), 1 (turns as traces), 2 (the first calls of the separate chats).
    assert calls["chained_across_groups"] == 11 and calls["conversations"] == len(records) == 9
    # The openai-v2 calls are read in parts (a span and its events) and joined: calls_joined.
    assert sum(len(d["assembly"]["calls"]) for d in drops.values()) == calls["calls"] + calls["calls_joined"] == 21
    assert sum(d["assembly"]["collapsed"] for d in drops.values()) == calls["prefixes_collapsed"]


@pytest.mark.slow
def test_without_chaining_each_call_is_a_conversation(tmp_path):
    summary, records, _ = _run([LITELLM], tmp_path / "out", "--no-chain-groups")
    assert len(records) == 6 and "chained_across_groups" not in summary["call_logs"]


def test_a_chat_whose_turns_are_separate_traces_gives_its_first_turn_once(chained_run):
    summary, records, drops = chained_run
    records = [r for r in records if any(m["content"] == "Weather in Rome?" for m in r["messages"])]
    assert len(records) == 1
    assert [m["role"] for m in records[0]["messages"]] == [m["role"] for m in WEATHER]
    assert records[0]["messages"][1]["content"] == "Weather in Rome?"
    assembly = drops[records[0]["id"]]["assembly"]
    assert len(assembly["calls"]) == 3 and len(assembly["chained"]) == 1


def test_conversations_that_share_only_a_start_or_are_equal_stay_separate(chained_run):
    summary, records, drops = chained_run
    starts = {"Hi", "Ping"}
    ours = [r for r in records if r["id"] in _formats(drops, "litellm") and r["messages"][1]["content"] in starts]
    answers = sorted(r["messages"][2]["content"] for r in ours)
    # Two chats that got another first answer, and two equal ones: four conversations, the
    # first calls of the two longer ones chained into them.
    assert answers == ["Hello! How can I help?", "Hi there, what do you need?", "Pong", "Pong"]
    assert sorted(len(drops[r["id"]]["assembly"].get("chained", ())) for r in ours) == [0, 0, 1, 1]


@pytest.mark.slow
def test_the_training_sink_gets_each_conversation_once_whole(tmp_path):
    out = tmp_path / "ft"
    assert (
        main(["--input", str(LITELLM), "--output", str(out), "--quiet", "--no-report", "--sink", "openai-finetune"])
        == 0
    )
    lines = [
        json.loads(line)
        for part in sorted((out / "normalized").rglob("*.jsonl"))
        for line in part.read_text().splitlines()
    ]
    assert sorted(len(line["messages"]) for line in lines) == [6, 7]


@pytest.mark.slow
def test_redact_hides_the_ids_of_the_conversations_chained(tmp_path):
    key = "AKIA07QWERTYUIOPASDF"
    text = LITELLM.read_text().replace("005ca1ab-1e00-0040-0080-000000000001", f"trace-{key}")
    source = tmp_path / "in.jsonl"
    source.write_text(text)
    out = tmp_path / "out"
    assert main(["--input", str(source), "--output", str(out), "--quiet", "--no-report", "--redact", "secrets"]) == 0
    chained = [c for d in _lines(out / "drops") for c in d["assembly"].get("chained", ())]
    assert len(chained) == 4 and any("REDACTED" in c for c in chained)
    assert not [p for p in out.rglob("*") if p.is_file() and key.encode() in p.read_bytes()]


def _one_file_per_row(directory: Path, paths: list[Path]) -> list[Path]:
    directory.mkdir()
    files = []
    for path in paths:
        for n, line in enumerate(path.read_bytes().splitlines(True)):
            files.append(directory / f"{path.stem}-{n}.jsonl")
            files[-1].write_bytes(line)
    return files


def _sorted_lines(out: Path, name: str) -> list[bytes]:
    return sorted(line for part in (out / name).glob("part-*") for line in part.read_bytes().splitlines())


@pytest.mark.slow
def test_calls_in_many_shards_and_conversations_in_many_output_shards_chain_as_in_one(tmp_path, monkeypatch):
    """Each call a file of its own (a shard each), the assembled conversations spread over several
    output shards (the verdicts cross them), one process and two: the records of one file each."""
    from engine_outputs import assert_same_outputs

    from pipeline.graph import build

    inputs = [LITELLM, OPENAI_V2, TURNS, SEPARATE]
    whole = tmp_path / "whole"
    _run(inputs, whole)
    monkeypatch.setattr(build, "CALL_SHARD_INPUT_BYTES", 4000)
    files = _one_file_per_row(tmp_path / "rows", inputs)
    one, two = tmp_path / "one", tmp_path / "two"
    summary, records, _ = _run(files, one)
    assert len(records) == 2 + 2 + 1 + 4 and len(list((one / "normalized").glob("part-*"))) > 2
    _run(files, two, "--direct_num_workers=2", "--direct_running_mode=multi_processing")
    assert_same_outputs(two, one, "two processes, chained call logs")
    assert _sorted_lines(one, "normalized") == _sorted_lines(whole, "normalized")
    assert summary["call_logs"]["chained_across_groups"] == 4 + 4 + 1 + 2


# --------------------------------------------------------------------------------------------
# The streaming driver: a window's close chains the groups it assembles


W1 = "20261201T000000Z-20261201T000100Z"
W2 = "20261201T000100Z-20261201T000200Z"


def _stream_plan(out: Path):
    import dataclasses

    from pipeline.graph.shard_step import ShardWork
    from pipeline.streaming.clean import CleanPlan
    from transforms.conversations import NORMALIZE

    temp = out / "_convnorm_temp-run-1"
    temp.mkdir(parents=True)
    work = ShardWork(NORMALIZE, dataclasses.replace(Settings(), calls=True), batch_size=50)
    return CleanPlan(output=str(out), run_id="run-1", run_temp=str(temp), work=work)


def _land_and_close(out: Path, plan, windows: dict[str, list[Path]]) -> dict[str, list[dict]]:
    from pipeline.io import processed_files as processed
    from pipeline.streaming import assembled
    from pipeline.streaming.clean import clean_landed_file
    from pipeline.streaming.watch import Landed

    made = {}
    for window, paths in windows.items():
        for path in paths:
            info = path.stat()
            clean_landed_file(Landed(str(path), info.st_size, info.st_mtime_ns, info.st_ctime_ns), window, plan)
        assert (
            assembled.assemble_window(str(out), window, plan.work, plan.run_temp, assembled.move_committing) == "done"
        )
        assert processed.write_window_summary(str(out), window, plan.settings, None)["accounted"]
        text = (out / window / processed.ASSEMBLED_DIR / "normalized.jsonl").read_text()
        made[window] = [json.loads(line) for line in text.splitlines()]
    return made


@pytest.mark.slow
def test_a_streaming_window_chains_its_groups_as_the_batch_run_does(tmp_path):
    landing = tmp_path / "landing"
    landing.mkdir()
    files = []
    for source in (LITELLM, OPENAI_V2):
        files.append(landing / source.name)
        files[-1].write_bytes(source.read_bytes())
    out = tmp_path / "out"
    made = _land_and_close(out, _stream_plan(out), {W1: files})
    _, records, _ = _run(files, tmp_path / "batch", "--part-bytes=0")
    assert len(made[W1]) == 4
    assert sorted(json.dumps(r, sort_keys=True) for r in made[W1]) == sorted(
        json.dumps(r, sort_keys=True) for r in records
    )


def test_a_streaming_window_does_not_withdraw_what_an_earlier_one_emitted(tmp_path):
    """A conversation's calls in two windows, each call a group of its own: the later window
    emits the whole conversation; the earlier window's first turns stay as they were emitted
    (docs/call-logs.md says so)."""
    landing = tmp_path / "landing"
    landing.mkdir()
    rows = LITELLM.read_bytes().splitlines(True)
    early, late = landing / "early.jsonl", landing / "late.jsonl"
    early.write_bytes(b"".join(rows[:2]))
    late.write_bytes(b"".join(rows[2:]))
    out = tmp_path / "out"
    made = _land_and_close(out, _stream_plan(out), {W1: [early], W2: [late]})
    # The first call's tool call has no result yet: the core's placeholder answers it.
    assert sorted(len(r["messages"]) for r in made[W1]) == [2, 4]
    assert sorted(len(r["messages"]) for r in made[W2]) == [6, 7]


def test_explain_names_the_calls_and_conversations_chained_into_one(chained_out, chained_run, capsys):
    _, records, drops = chained_run
    record = next(r for r in records if r["messages"][1]["content"] == "Weather in Rome?")
    assembly = drops[record["id"]]["assembly"]
    assert main(["explain", str(chained_out), "--id", record["id"]]) == 0
    shown = capsys.readouterr().out
    assert f"1 conversation(s) of other groups chained into it: {assembly['chained'][0]!r}" in shown
    assert all(call["call"] in shown for call in assembly["calls"])


@pytest.mark.slow
def test_a_chained_conversations_trace_joins_the_survivors_metadata_and_its_labels_are_unmatched(tmp_path):
    # Two Langfuse traces without a session: the second turn's trace holds the first turn again.
    def observation(name: str, start: str, history: list[dict], answer: str) -> dict:
        return {
            "id": f"gen-{name}",
            "trace_id": f"trace-{name}",
            "project_id": "p",
            "type": "GENERATION",
            "parent_observation_id": "",
            "start_time": start,
            "end_time": start,
            "provided_model_name": "m",
            "input": json.dumps(history),
            "output": json.dumps({"role": "assistant", "content": answer}),
            "user_id": "u",
        }

    first = [_m("user", "Hi")]
    rows = [
        observation("a", "2026-12-01 09:00:00.000000", first, "Hello"),
        observation("b", "2026-12-01 09:01:00.000000", [*first, _m("assistant", "Hello"), _m("user", "More")], "Ok"),
    ]
    score = {
        "id": "sc-1",
        "trace_id": "trace-a",
        "observation_id": "gen-a",
        "name": "thumbs",
        "value": 1,
        "data_type": "BOOLEAN",
        "string_value": "True",
        "updated_at": "2026-12-01 10:00:00.000000",
    }
    (tmp_path / "observations.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    (tmp_path / "scores.jsonl").write_text(json.dumps(score) + "\n")
    out = tmp_path / "out"
    assert main(["--input", str(tmp_path / "observations.jsonl"), "--input", str(tmp_path / "scores.jsonl"),
                 "--output", str(out), "--quiet", "--no-report"]) == 0  # fmt: skip
    (record,) = [json.loads(line) for path in sorted((out / "normalized").glob("*.jsonl")) for line in path.open()]
    assert record["id"] == "trace-b"
    assert record["metadata"]["trace_ids"] == ["trace-a", "trace-b"]
    assert record["metadata"]["first_call_at"] == "2026-12-01T09:00:00Z"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["call_logs"]["chained_across_groups"] == 1
    # docs/call-logs.md, "Labels of a conversation chained away": counted, not joined.
    assert summary["labels"] == {"read": 1, "joined": 0, "superseded": 0, "label_unmatched": {"langfuse": 1}}
