"""Second reading of the call-log assembly: each test pins a fault found in review."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from transforms.calllogs.assemble import GroupState, assemble
from transforms.calllogs.calls import Call, ToolResult

USER = {"role": "user", "content": "Weather in Paris?"}
CALL = {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c1", "name": "weather", "args": "{}"}]}
ANSWER = {"role": "assistant", "content": "Rainy."}


def _call(start: int, history: list, output: list, **more) -> Call:
    return Call("test", "g", start, f"span{start}", history, output, **more)


def _state(pieces: list, order: tuple[int, ...]) -> GroupState:
    state = GroupState()
    for index in order:
        state.add("f", index, pieces[index])
    return state


def test_a_tool_message_whose_id_is_not_a_string_does_not_crash_the_assembly():
    """A history's tool message with a list ``tool_call_id`` (an embedded chat body passes it
    through) beside a tool result recorded apart: the assembly must not raise (it killed the job)."""
    odd = {"role": "tool", "content": "rainy", "tool_call_id": ["c1"]}
    state = _state(
        [_call(1, [USER, CALL, odd], [ANSWER]), ToolResult("test", "g", 2, "t1", "c1", "weather", "r")], (0, 1)
    )
    (made,) = assemble("test", "g", state)
    assert made.record["messages"][:3] == [USER, CALL, odd]


def test_equal_sequences_give_the_same_conversation_whatever_order_they_arrive_in():
    """Two calls whose sequences hash alike (key order aside) but differ in what the bytes say
    (an object's key order, which arguments keep verbatim) or in their ledgers: which one the
    conversation is made of must not depend on the order the pieces arrive in (a runner's)."""
    ordered = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"tool_call_id": "c1", "name": "w", "args": {"a": 1, "b": 2}}],
    }
    reordered = {
        "content": "",
        "role": "assistant",
        "tool_calls": [{"args": {"b": 2, "a": 1}, "name": "w", "tool_call_id": "c1"}],
    }
    tools_ab = [{"type": "function", "function": {"name": "w", "parameters": {"a": 1, "b": 2}}}]
    tools_ba = [{"type": "function", "function": {"parameters": {"b": 2, "a": 1}, "name": "w"}}]
    pieces = [
        _call(1, [USER], [ordered], discarded={"reasoning": [1, 40]}, tools=tools_ab),
        _call(1, [USER], [reordered], tools=tools_ba),
    ]
    seen = set()
    for order in itertools.permutations(range(len(pieces))):
        (made,) = assemble("test", "g", _state(pieces, order))
        seen.add(json.dumps([made.record, made.discarded]))  # bytes, key order included
    assert len(seen) == 1, seen


class _CountedList(list):
    """A list that counts the elements its iterations visit."""

    visited = 0

    def __iter__(self):
        for item in super().__iter__():
            _CountedList.visited += 1
            yield item


def test_a_huge_group_of_unrelated_calls_is_not_compared_call_by_call():
    """One trace of many calls of unrelated histories (a batch job under one trace id): each
    call is compared with a few kept sequences, not with every one (3,000 calls made 13.5
    million prefix tests: minutes at 10,000 calls, hours at 100,000). Counted: the kept
    sequences visited, by adding calls and by assembling them."""
    n = 3000
    state = GroupState()
    state.sequences = _CountedList()
    _CountedList.visited = 0
    for i in range(n):
        state.add("f", i, _call(i + 1, [{"role": "user", "content": f"q{i}"}], [ANSWER]))
    made = assemble("test", "g", state)
    assert len(made) == n
    assert _CountedList.visited < 50 * n, f"{_CountedList.visited:,} kept sequences visited for {n:,} calls"


# --------------------------------------------------------------------------------------------
# Runs


def _row(obs: str, session: str, second: int, history: list, output: dict) -> str:
    return json.dumps(
        {
            "id": obs,
            "trace_id": f"tr-{session}",
            "session_id": session,
            "type": "GENERATION",
            "parent_observation_id": "",
            "start_time": f"2026-11-30 10:00:{second:02d}.000000",
            "input": json.dumps(history),
            "output": json.dumps(output),
        }
    )


def _run(rows: list[str], tmp_path: Path, *extra: str) -> Path:
    from pipeline.cli.main import main

    source = tmp_path / "calls.jsonl"
    source.write_text("".join(row + "\n" for row in rows))
    out = tmp_path / "out"
    assert main(["--input", str(source), "--output", str(out), "--quiet", "--no-report", *extra]) in (0, 1)
    return out


def _lines(directory: Path) -> list[dict]:
    return [json.loads(line) for part in sorted(directory.glob("part-*")) for line in part.read_text().splitlines()]


OTHER = {"role": "user", "content": "And in Rome?"}


@pytest.mark.slow
def test_explain_shows_a_branch_whose_records_hold_no_call_of_the_conversation(tmp_path, capsys):
    """A branch's calls are in records of their own (one Langfuse row per call): explain made
    the group again from the branch's records alone, where it is no branch, and refused."""
    from pipeline.cli.main import main

    out = _run([_row("o1", "s", 1, [USER], ANSWER), _row("o2", "s", 2, [OTHER], ANSWER)], tmp_path)
    ids = sorted(d["id"] for d in _lines(out / "drops"))
    assert ids == ["s", "s#branch1"]
    assert main(["explain", str(out), "--id", "s#branch1"]) == 0
    assert "branch 1 of 1" in capsys.readouterr().out


@pytest.mark.slow
def test_explain_shows_an_assembled_conversation_the_sink_refused(tmp_path, capsys):
    """An assembled conversation the sink refuses is an ``unwritable`` dead letter at its latest
    call's record: explain read that call-log record as a conversation, and failed."""
    from pipeline.cli.main import main

    out = _run([_row("o1", "s", 1, [ANSWER, USER], ANSWER)], tmp_path, "--sink", "bedrock-converse", "--model", "m")
    (letter,) = _lines(out / "dead_letter")
    assert letter["reason"] == "unwritable"
    assert main(["explain", str(out), "--id", "s"]) == 0, capsys.readouterr().err
    assert "dead-lettered (unwritable)" in capsys.readouterr().out


@pytest.mark.slow
def test_a_group_named_like_a_branch_does_not_share_its_id(tmp_path):
    """Group ``x`` with a branch (``x#branch1``) beside a group named ``x#branch1``: two
    conversations written under one id (explain shows one of them; ids are a run's keys)."""
    out = _run(
        [
            _row("o1", "x", 1, [USER], ANSWER),
            _row("o2", "x", 2, [OTHER], ANSWER),
            # Not a continuation of x's first conversation (that would be chained into it).
            _row("o3", "x#branch1", 3, [USER, OTHER], ANSWER),
        ],
        tmp_path,
    )
    ids = [record["id"] for record in _lines(out / "normalized")]
    assert len(ids) == 3
    assert len(set(ids)) == len(ids), ids


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["whole", "calls"])
def test_two_processes_write_the_files_one_process_writes(tmp_path, kind):
    """The flatten that joins a step's direct outputs and the assembled conversations' breaks
    fusion: on the multi-process runner a shard's batches spread over the workers and each
    worker writes its own part file (whole conversations too, which assemble nothing)."""
    from engine_outputs import SAMPLE, assert_same_outputs

    from pipeline.cli.main import main

    source = tmp_path / f"{kind}.jsonl"
    if kind == "whole":
        source.write_bytes(b"".join(SAMPLE.read_bytes().splitlines(True)[:40]))
    else:
        user = [{"role": "user", "content": "q"}]
        source.write_text("".join(_row(f"o{n}", f"s{n:02d}", n, user, ANSWER) + "\n" for n in range(30)))
    runs = {}
    for label, extra in (("one", ()), ("two", ("--direct_num_workers=2", "--direct_running_mode=multi_processing"))):
        runs[label] = tmp_path / label
        args = ["--input", str(source), "--output", str(runs[label]), "--batch-size", "4", "--quiet", "--no-report"]
        assert main([*args, *extra]) in (0, 1)
    assert_same_outputs(runs["two"], runs["one"], "two processes")


def test_the_per_shard_step_holds_a_growing_history_once_not_once_per_call(tmp_path):
    """The per-shard graph (DaskRunner's) kept every call-log record of a shard as its pieces,
    each with its whole history, until the shard ended: a trace of N calls of a growing history
    held N copies (800 calls of 39 MiB peaked at 472 MiB against 149 MiB on the tagged graph)."""
    import pickle

    from pipeline.graph.shard_step import ShardWork, process_shard
    from pipeline.io.shard import Shard
    from transforms.conversations import NORMALIZE
    from transforms.record.record_settings import Settings

    history: list = [{"role": "system", "content": "Be brief."}]
    rows = []
    for n in range(60):
        history.append({"role": "user", "content": f"step {n}: what next? " + "x" * 200})
        answer = {"role": "assistant", "content": f"Doing step {n}."}
        rows.append(_row(f"o{n}", "s", n % 60, list(history), answer))
        history.append(answer)
    source = tmp_path / "calls.jsonl"
    source.write_text("".join(row + "\n" for row in rows))

    def place(name: str) -> str:
        (tmp_path / name).mkdir(parents=True, exist_ok=True)
        return str(tmp_path / name / "part")

    work = ShardWork(NORMALIZE, Settings(calls=True))
    result = process_shard(Shard(0, str(source), ".jsonl", 0, None), work, place)
    held = len(pickle.dumps(result.calls))
    conversation = len(pickle.dumps(history))
    assert held < 3 * conversation, f"{held:,} bytes held for a {conversation:,}-byte conversation"


@pytest.mark.slow
def test_every_record_of_a_group_with_no_call_is_in_the_dead_letters(tmp_path):
    """A group of tool results and no LLM call is one ``no_llm_calls`` dead letter, at its first
    result's record: the group's other records end in no output (nothing names them)."""

    def tool(obs: str, second: int) -> str:
        return json.dumps(
            {
                "id": obs,
                "trace_id": "tr-t",
                "session_id": "t",
                "type": "TOOL",
                "parent_observation_id": "",
                "start_time": f"2026-11-30 10:00:{second:02d}.000000",
                "name": "weather",
                "input": "{}",
                "output": "rainy",
                "metadata": {"attributes": {"gen_ai.tool.call.id": f"call-{obs}"}},
            }
        )

    rows = [tool("t1", 1), tool("t2", 2)]
    out = _run(rows, tmp_path)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["call_logs"]["tool_results"] == 2
    placed = {letter["position"] for letter in _lines(out / "dead_letter")}
    placed |= {c["position"] for d in _lines(out / "drops") for c in d.get("assembly", {}).get("calls", ())}
    assert placed == {0, len(rows[0]) + 1}, placed


def test_a_bug_in_one_groups_assembly_is_a_dead_letter_not_the_end_of_the_job(monkeypatch):
    """Every record is guarded (``guarded``: a bug surfaces as data), but the assembly of a group
    was not: one group that made it raise failed the whole run (as a list tool_call_id did)."""
    from transforms.record import assembled_calls
    from transforms.record.inputs import Unreadable
    from transforms.record.record_settings import Settings

    def broken(*args, **kwargs):
        raise TypeError("a bug")

    monkeypatch.setattr(assembled_calls, "assemble_chained", broken)
    state = _state([_call(1, [USER], [ANSWER]), _call(2, [OTHER], [ANSWER])], (0, 1))
    made = [conversation for _, conversation in assembled_calls.conversations_of((("test", "g"), state), Settings(), 1)]
    assert [(c.raw.source, c.raw.position) for c in made] == [("f", 0), ("f", 1)]
    assert all(isinstance(c.raw.payload, Unreadable) and c.raw.payload.reason == "internal_error" for c in made)
    assert sum(c.counts["conversations"] for c in made) == 2
