"""Calls that send only the new items and name the response they continue (Responses API
``previous_response_id``): chained by that id within their group (``transforms.calllogs.chains``).

``langsmith/sdk-py-responses-previous-id.jsonl`` is what the LangSmith Python SDK's
``wrap_openai`` sent a fake LangSmith while the OpenAI SDK's ``responses.create`` talked to a
fake OpenAI (tests/data/calllogs/SOURCES.md): three turns of one thread, each sending only its
question and the previous response's id. Before the chaining, it gave the last turn as the
conversation and the others as branches (the first without its answer: its patch came later).
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pipeline.cli.main import main  # noqa: E402
from transforms.calllogs.assemble import GroupState  # noqa: E402
from transforms.calllogs.calls import Call, detect_call_log  # noqa: E402
from transforms.calllogs.chains import assemble_chained as assemble  # noqa: E402
from transforms.calllogs.joins import joined_alone  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "calllogs"
RESPONSES = DATA / "langsmith" / "sdk-py-responses-previous-id.jsonl"
SYSTEM = {"role": "system", "content": "You are brief."}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


DRIVEN = [
    SYSTEM,
    user("What is the capital of France?"),
    assistant("Paris."),
    user("And of Italy?"),
    assistant("Rome."),
    user("Which is bigger?"),
    assistant("Rome, by area."),
]


def _lines(directory: Path) -> list[dict]:
    return [json.loads(line) for part in sorted(directory.glob("part-*")) for line in part.read_bytes().splitlines()]


@pytest.mark.slow
def test_the_wrapped_sdks_responses_chain_into_one_conversation(tmp_path):
    out = tmp_path / "out"
    assert main(["--input", str(RESPONSES), "--output", str(out), "--quiet", "--no-report"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["accounted"] and summary["dead_letters"] == 0
    records = _lines(out / "normalized")
    assert [r["id"] for r in records] == ["capitals"], "no branch"
    assert records[0]["messages"] == DRIVEN
    assert summary["call_logs"]["responses_chained"] == 2 and summary["call_logs"]["conversations"] == 1
    (drops,) = [d for d in _lines(out / "drops") if "assembly" in d]
    assert drops["assembly"]["responses_chained"] == 2 and drops["assembly"]["collapsed"] == 2


def _call(n: int, history: list, output: list, response: str, previous: str = "") -> Call:
    return Call("helicone", "g", n, f"c{n}", history, output, None, None, None, False, response, previous)


CHAIN = [
    _call(1, [SYSTEM, user("What is the capital of France?")], [assistant("Paris.")], "resp_1"),
    _call(2, [SYSTEM, user("And of Italy?")], [assistant("Rome.")], "resp_2", "resp_1"),
    _call(3, [SYSTEM, user("Which is bigger?")], [assistant("Rome, by area.")], "resp_3", "resp_2"),
]


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
def test_a_chain_gives_one_conversation_whatever_order_its_calls_arrive_in(order):
    state = GroupState()
    for n in order:
        state.add("f", n, CHAIN[n])
    (conversation,) = assemble("helicone", "g", state)
    assert conversation.record["messages"] == DRIVEN
    assert conversation.assembly["responses_chained"] == 2


def test_states_merged_in_any_split_chain_alike():
    one, two = GroupState(), GroupState()
    one.add("f", 0, CHAIN[2])
    two.add("f", 1, CHAIN[0]).add("f", 2, CHAIN[1])
    merged = one.merge(two)
    (conversation,) = assemble("helicone", "g", merged)
    assert conversation.record["messages"] == DRIVEN
    # The state assembled is left as it was (a combiner's accumulator): its chained calls held.
    assert len(merged.chained) == 2 and len(merged.calls) == 1


def test_a_call_naming_a_response_the_group_lacks_stays_as_it_is_counted():
    state = GroupState().add("f", 0, CHAIN[2])
    (conversation,) = assemble("helicone", "g", state)
    assert conversation.record["messages"] == [SYSTEM, user("Which is bigger?"), assistant("Rome, by area.")]
    assert conversation.assembly["responses_unchained"] == 1 and "responses_chained" not in conversation.assembly


def test_a_request_that_repeats_the_whole_history_is_not_doubled():
    whole = _call(2, DRIVEN[:4], [assistant("Rome.")], "resp_2", "resp_1")
    state = GroupState().add("f", 0, CHAIN[0]).add("f", 1, whole)
    (conversation,) = assemble("helicone", "g", state)
    assert conversation.record["messages"] == DRIVEN[:5]


def _helicone(n: int, question: str, answer: str, previous: str | None) -> dict:
    request: dict[str, Any] = {"model": "gpt-4o-mini", "instructions": "You are brief.", "input": question}
    if previous:
        request["previous_response_id"] = previous
    response = {
        "id": f"resp_{n}",
        "object": "response",
        "model": "gpt-4o-mini",
        "previous_response_id": previous,
        "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": answer}]}],
    }
    return {
        "request_id": f"req-{n}",
        "request_created_at": f"2026-12-01T10:00:0{n}Z",
        "request_body": request,
        "response_body": response,
        "request_properties": {"Helicone-Session-Id": "s-1"},
    }


def test_helicone_rows_of_responses_carry_the_ids_the_chain_needs():
    rows = [
        _helicone(1, "What is the capital of France?", "Paris.", None),
        _helicone(2, "And of Italy?", "Rome.", "resp_1"),
    ]
    calls = []
    for row in rows:
        reader = detect_call_log(row)
        assert reader is not None and reader.name == "helicone"
        calls.extend(joined_alone(reader.read(row)))
    assert [(c.response_id, c.previous_response_id) for c in calls] == [("resp_1", ""), ("resp_2", "resp_1")]
    state = GroupState()
    for n, call in enumerate(reversed(calls)):
        state.add("f", n, call)
    (conversation,) = assemble("helicone", "s-1", state)
    assert conversation.record["messages"] == DRIVEN[:5]


AGENTS = DATA / "otlp" / "openai-agents-previous-response.jsonl"


def _agents_run(tmp_path: Path, document: dict, *extra: str) -> tuple[dict, list[dict]]:
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps(document) + "\n")
    out = tmp_path / "out"
    assert main(["--input", str(source), "--output", str(out), "--quiet", "--no-report", *extra]) == 0
    return json.loads((out / "summary.json").read_text()), _lines(out / "normalized")


@pytest.mark.slow
def test_the_agents_sdks_second_run_continues_the_first_by_its_response_id(tmp_path):
    """Two ``Runner.run`` of the OpenAI Agents SDK (OpenInference's instrumentation), the second
    given the first's ``last_response_id``: two traces of one session; the second LLM span
    records only its question, and its ``output.value`` (the Responses object) names the first
    response. One conversation."""
    summary, records = _agents_run(tmp_path, json.loads(AGENTS.read_text()))
    assert [r["id"] for r in records] == ["capitals-session"]
    assert records[0]["messages"] == DRIVEN[:5]
    assert summary["call_logs"]["responses_chained"] == 1


@pytest.mark.slow
def test_without_a_session_each_run_is_its_trace_and_the_traces_are_chained_by_response_id(tmp_path):
    """No session id: each run is a group of its own (its trace); the second continues a
    response the first's trace holds, so the two traces are one group (``response_links``)."""
    text = AGENTS.read_text().replace('"session.id"', '"app.session"')
    summary, records = _agents_run(tmp_path, json.loads(text))
    assert len(records) == 1 and records[0]["messages"] == DRIVEN[:5]
    assert summary["call_logs"]["responses_chained"] == 1 and "responses_unchained" not in summary["call_logs"]


@pytest.mark.slow
def test_without_a_session_or_chaining_across_groups_the_chain_is_counted_unresolved(tmp_path):
    """--no-chain-groups: each trace is assembled alone; the second lacks the response it
    continues: it stays as it is, counted."""
    text = AGENTS.read_text().replace('"session.id"', '"app.session"')
    summary, records = _agents_run(tmp_path, json.loads(text), "--no-chain-groups")
    assert len(records) == 2 and summary["call_logs"]["responses_unchained"] == 1
    assert sorted(len(r["messages"]) for r in records) == [3, 3]
