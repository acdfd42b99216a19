"""Responses calls chained by response id across groups (transforms/calllogs/response_links.py,
pipeline/graph/shard_assembly.py): a call that names ``previous_response_id`` and sends only its
new items, in a trace of its own, joins the group of the response it continues, so the
conversation comes out whole, not in fragments.

``chained/openinference-responses-no-parent.jsonl`` is the export of tests/client_exports.py's
scenario without a parent span (tests/data/calllogs/SOURCES.md): six Responses calls, each a
trace of its own, making the two conversations ``client_exports.CONVERSATIONS``.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from client_exports import CONVERSATIONS, expected_messages

from pipeline.cli.main import main
from transforms.calllogs.assemble import GroupState
from transforms.calllogs.calls import Call
from transforms.calllogs.chains import assemble_chained
from transforms.calllogs.response_links import (
    Holds,
    Lacks,
    links_at,
    links_of,
    merged_by_response,
    response_keys,
    roots,
)

RESPONSES = Path(__file__).parent / "data" / "calllogs" / "chained" / "openinference-responses-no-parent.jsonl"
SYSTEM = {"role": "system", "content": "You are brief."}


def _m(role: str, content: str) -> dict:
    return {"role": role, "content": content}


def _call(n: int, group: str, history: list, output: list, response: str, previous: str = "") -> Call:
    return Call("helicone", group, n, f"c{n}", history, output, None, None, None, False, response, previous)


CHAIN = [
    _call(1, "t1", [SYSTEM, _m("user", "Capital of France?")], [_m("assistant", "Paris.")], "resp_1"),
    _call(2, "t2", [SYSTEM, _m("user", "And of Italy?")], [_m("assistant", "Rome.")], "resp_2", "resp_1"),
    _call(3, "t3", [SYSTEM, _m("user", "Which is bigger?")], [_m("assistant", "Rome.")], "resp_3", "resp_2"),
]
DRIVEN = [
    SYSTEM,
    _m("user", "Capital of France?"),
    _m("assistant", "Paris."),
    _m("user", "And of Italy?"),
    _m("assistant", "Rome."),
    _m("user", "Which is bigger?"),
    _m("assistant", "Rome."),
]


def _states(calls: list[Call]) -> dict[tuple[str, str], GroupState]:
    states: dict[tuple[str, str], GroupState] = {}
    for n, call in enumerate(calls):
        states.setdefault((call.format, call.group), GroupState()).add("f", n, call)
    return states


# --------------------------------------------------------------------------------------------
# The rule, on keys


def test_a_group_publishes_the_responses_it_holds_and_those_it_continues_and_lacks():
    states = _states(CHAIN)
    assert list(response_keys(("helicone", "t1"), states[("helicone", "t1")])) == [
        (("helicone", "resp_1"), Holds(("helicone", "t1")))
    ]
    assert list(response_keys(("helicone", "t2"), states[("helicone", "t2")])) == [
        (("helicone", "resp_2"), Holds(("helicone", "t2"))),
        (("helicone", "resp_1"), Lacks(("helicone", "t2"))),
    ]
    # A group holding the response it continues lacks nothing.
    both = _states([CHAIN[0], CHAIN[1]._replace(group="t1")])[("helicone", "t1")]
    assert [type(v) for _, v in response_keys(("helicone", "t1"), both)] == [Holds, Holds]


def test_a_response_links_each_group_lacking_it_to_one_holding_it():
    a, b, c = ("f", "a"), ("f", "b"), ("f", "c")
    assert links_at([Lacks(c), Holds(b), Holds(a), Lacks(b)]) == [(c, a)]  # the smallest holder
    assert links_at([Lacks(c)]) == []  # not logged: nothing to link
    assert links_at([Holds(a)]) == []


def test_the_links_of_many_response_ids_are_those_at_each():
    a, b, c = ("f", "a"), ("f", "b"), ("f", "c")
    keys = [(("f", "r2"), Lacks(c)), (("f", "r1"), Holds(a)), (("f", "r2"), Holds(b)), (("f", "r1"), Lacks(b))]
    assert links_of(keys) == [(b, a), (c, b)]
    assert links_of(reversed(keys)) == [(b, a), (c, b)]


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
def test_linked_groups_join_the_group_their_chain_starts_in_whatever_the_order(order):
    a, b, c, d, e = (("f", x) for x in "zbcde")  # the chain starts in the largest key
    links = [(b, a), (c, b), (e, d)]
    found = roots(links[n] for n in order)
    assert found == {a: a, b: a, c: a, d: d, e: d}


def test_groups_that_continue_each_other_in_a_loop_are_one_under_the_smallest():
    """Hostile input (no chain starts anywhere): one group all the same, its calls left as the
    assembly leaves a loop."""
    a, b, c = ("f", "a"), ("f", "b"), ("f", "c")
    assert roots([(b, c), (c, b), (a, b)]) == {a: a, b: a, c: a}  # each lacks: the smallest
    loop = [
        _call(1, "t1", [_m("user", "One?")], [_m("assistant", "1.")], "resp_1", "resp_2"),
        _call(2, "t2", [_m("user", "Two?")], [_m("assistant", "2.")], "resp_2", "resp_1"),
    ]
    merged = merged_by_response(_states(loop))
    assert sorted(merged) == [("helicone", "t1")]
    assert assemble_chained("helicone", "t1", merged[("helicone", "t1")])


def test_a_chain_of_calls_each_in_a_group_of_its_own_is_one_conversation():
    states = _states(list(reversed(CHAIN)))
    states[("helicone", "other")] = GroupState().add("g", 0, _call(9, "other", [_m("user", "Hi")], [], "resp_9"))
    merged = merged_by_response(states)
    assert sorted(merged) == [("helicone", "other"), ("helicone", "t1")]
    (conversation,) = assemble_chained("helicone", "t1", merged[("helicone", "t1")])
    assert conversation.record["messages"] == DRIVEN
    assert conversation.assembly["responses_chained"] == 2 and "responses_unchained" not in conversation.assembly
    # The states given are left as they were.
    assert len(states[("helicone", "t1")].calls) == 1 and len(states[("helicone", "t3")].chained) == 1


def test_a_response_no_group_holds_leaves_its_call_as_it_is():
    states = _states(CHAIN[1:])
    merged = merged_by_response(states)
    assert sorted(merged) == [("helicone", "t2")]  # t3 joined t2: t2 lacks resp_1, logged nowhere
    (conversation,) = assemble_chained("helicone", "t2", merged[("helicone", "t2")])
    assert conversation.assembly["responses_chained"] == 1 and conversation.assembly["responses_unchained"] == 1
    alone = _states(CHAIN[2:])
    assert merged_by_response(alone) is alone


# --------------------------------------------------------------------------------------------
# The job


def _lines(directory: Path) -> list[dict]:
    return [json.loads(line) for part in sorted(directory.glob("part-*")) for line in part.read_bytes().splitlines()]


def _run(inputs: list[Path], out: Path, *extra: str) -> tuple[dict, list[dict]]:
    arguments = [arg for path in inputs for arg in ("--input", str(path))]
    assert main([*arguments, "--output", str(out), "--quiet", "--no-report", *extra]) == 0
    return json.loads((out / "summary.json").read_text()), _lines(out / "normalized")


def _driven() -> list[list[dict]]:
    return sorted((expected_messages(c, True) for c in CONVERSATIONS), key=json.dumps)


@pytest.mark.slow
def test_calls_each_in_a_trace_of_their_own_give_the_conversations_driven(tmp_path):
    summary, records = _run([RESPONSES], tmp_path / "out")
    assert summary["accounted"] and summary["dead_letters"] == 0
    assert sorted((r["messages"] for r in records), key=json.dumps) == _driven()
    calls = summary["call_logs"]
    assert calls["responses_chained"] == 4 and "responses_unchained" not in calls
    assert calls["conversations"] == len(records) == 2


@pytest.mark.slow
def test_explain_makes_a_conversation_of_groups_joined_by_response_id_again(tmp_path, capsys):
    """``convnorm explain`` assembles the records its calls were read from as the run did: the
    groups joined, not the root's call alone."""
    out = tmp_path / "out"
    _, records = _run([RESPONSES], out)
    (record,) = [r for r in records if any(m.get("content") == "Thanks!" for m in r["messages"])]
    capsys.readouterr()
    assert main(["explain", str(out), "--id", record["id"]]) == 0
    before = [line.split("|")[0] for line in capsys.readouterr().out.splitlines() if "|" in line]
    assert any("'Thanks!'" in line for line in before) and any("You're welcome." in line for line in before)


@pytest.mark.slow
def test_without_chaining_across_groups_each_call_is_its_new_items_counted(tmp_path):
    summary, records = _run([RESPONSES], tmp_path / "out", "--no-chain-groups")
    assert summary["accounted"] and len(records) == 6
    assert summary["call_logs"]["responses_unchained"] == 4 and "responses_chained" not in summary["call_logs"]


def _one_file_per_line(directory: Path, path: Path) -> list[Path]:
    directory.mkdir()
    files = []
    for n, line in enumerate(path.read_bytes().splitlines(True)):
        files.append(directory / f"span-{n}.jsonl")
        files[-1].write_bytes(line)
    return files


@pytest.mark.slow
def test_calls_in_many_shards_chain_as_in_one_in_one_process_and_two(tmp_path, monkeypatch):
    from engine_outputs import assert_same_outputs

    from pipeline.graph import build

    whole = tmp_path / "whole"
    _run([RESPONSES], whole)
    monkeypatch.setattr(build, "CALL_SHARD_INPUT_BYTES", 4000)
    files = _one_file_per_line(tmp_path / "spans", RESPONSES)
    one, two = tmp_path / "one", tmp_path / "two"
    summary, records = _run(files, one)
    assert sorted((r["messages"] for r in records), key=json.dumps) == _driven()
    assert len(list((one / "normalized").glob("part-*"))) > 2, "the conversations in several output shards"
    _run(files, two, "--direct_num_workers=2", "--direct_running_mode=multi_processing")
    assert_same_outputs(two, one, "two processes, responses chained across groups")
    assert sorted(r["id"] for r in records) == sorted(r["id"] for r in _lines(whole / "normalized"))


@pytest.mark.slow
def test_a_streaming_window_chains_its_responses_as_the_batch_run_does(tmp_path):
    from test_calllogs_chained import W1, _land_and_close, _stream_plan

    landing = tmp_path / "landing"
    files = _one_file_per_line(landing, RESPONSES)
    out = tmp_path / "out"
    made = _land_and_close(out, _stream_plan(out), {W1: files})
    _, records = _run(files, tmp_path / "batch", "--part-bytes=0")
    assert sorted(json.dumps(r, sort_keys=True) for r in made[W1]) == sorted(
        json.dumps(r, sort_keys=True) for r in records
    )
    assert sorted((r["messages"] for r in made[W1]), key=json.dumps) == _driven()


@pytest.mark.slow
def test_redacted_response_ids_still_chain_and_are_written_nowhere(tmp_path):
    key = "AKIA07QWERTYUIOPASDF"
    source = tmp_path / "in.jsonl"
    source.write_text(RESPONSES.read_text().replace("resp_", f"resp-{key}-"))
    summary, records = _run([source], tmp_path / "out", "--redact", "secrets")
    assert summary["call_logs"]["responses_chained"] == 4 and len(records) == 2
    assert not [p for p in (tmp_path / "out").rglob("*") if p.is_file() and key.encode() in p.read_bytes()]


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("runner", ["DaskRunner", "PrismRunner"])
def test_another_runner_chains_responses_across_groups_as_fnapirunner_does(tmp_path, runner):
    import subprocess
    import sys

    from engine_outputs import assert_same_outputs

    flags = ["--runner", runner]
    if runner == "DaskRunner":
        pytest.importorskip("dask.distributed", reason="the dask extra is not installed (pip install -e '.[dask]')")
    else:
        from prism_build import prism_binary

        flags.append(f"--prism_location={prism_binary()}")
    files = _one_file_per_line(tmp_path / "spans", RESPONSES)
    _run(files, tmp_path / "one")
    argv = [arg for path in files for arg in ("--input", str(path))]
    other = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipeline",
            *argv,
            "--output",
            str(tmp_path / "other"),
            "--quiet",
            "--no-report",
            *flags,
        ],
        capture_output=True,
        timeout=600,
    )
    assert other.returncode == 0, other.stderr.decode(errors="replace")[-4000:]
    assert_same_outputs(tmp_path / "other", tmp_path / "one", f"{runner}, responses chained across groups")
    assert sorted((r["messages"] for r in _lines(tmp_path / "other" / "normalized")), key=json.dumps) == _driven()
