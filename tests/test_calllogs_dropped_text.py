"""An answer's text that python-contrib's legacy events drop from the next history's copy of it
(transforms.calllogs.dropped_text, restored_text): put back where the rule says, nowhere else."""

from __future__ import annotations

import itertools
import json

import pytest

from pipeline.cli.main import main
from pipeline.graph.chain_groups import chained_in_memory
from transforms.calllogs.assemble import GroupState
from transforms.calllogs.calls import Call
from transforms.calllogs.dropped_text import same_answer
from transforms.calllogs.spans import read_otlp
from transforms.record.assembled_calls import conversations_of
from transforms.record.record_settings import Settings

SYSTEM = {"role": "system", "content": "Weather."}
USER = {"role": "user", "content": "Paris and Rome?"}
PARIS = {"tool_call_id": "call_1", "name": "get_weather", "args": '{"city": "Paris"}'}
ROME = {"tool_call_id": "call_2", "name": "get_weather", "args": '{"city": "Rome"}'}
FIRST = {"role": "assistant", "content": "", "tool_calls": [PARIS]}
RAINY = {"role": "tool", "content": "rainy", "tool_call_id": "call_1"}
SECOND = {"role": "assistant", "content": "Checking Rome too.", "tool_calls": [ROME]}
# What the legacy writer logs of SECOND in the next request: its calls, no text.
SECOND_COPY = {"role": "assistant", "content": "", "tool_calls": [ROME]}
SUNNY = {"role": "tool", "content": "sunny", "tool_call_id": "call_2"}
DONE = {"role": "assistant", "content": "Rainy, then sunny."}
WHOLE = [SYSTEM, USER, FIRST, RAINY, SECOND, SUNNY, DONE]


def _calls(group_per_call: bool = False, marked: bool = True) -> list[Call]:
    """The agent loop's three calls as the legacy events give them: the second's answer has a
    text, the third's history has that answer's copy without it (at place 4)."""

    def call(n: int, history: list, output: list, dropped: tuple[int, ...]) -> Call:
        group = f"trace{n}" if group_per_call else "g"
        return Call("otlp", group, n, f"span{n}", history, output, text_dropped=dropped if marked else ())

    return [
        call(1, [SYSTEM, USER], [FIRST], ()),
        call(2, [SYSTEM, USER, FIRST, RAINY], [SECOND], (2,)),
        call(3, [SYSTEM, USER, FIRST, RAINY, SECOND_COPY, SUNNY], [DONE], (2, 4)),
    ]


def _made(calls: list[Call]) -> list:
    states: dict[str, GroupState] = {}
    for n, one in enumerate(calls):
        states.setdefault(one.group, GroupState()).add("in.jsonl", n, one)
    return [
        made
        for group in sorted(states)
        for _, made in conversations_of((("otlp", group), states[group]), Settings(), 1)
    ]


def _records(made: list) -> dict[str, list]:
    return {m.raw.payload.value["id"]: m.raw.payload.value["messages"] for m in made}


def _count(made: list, name: str = "answer_texts_restored") -> int:
    return sum(m.counts.get(name, 0) for m in made)


# --------------------------------------------------------------------------------------------
# The reader marks the copies the legacy writer makes


def _log(name: str, body: dict) -> dict:
    def value(v):
        if isinstance(v, str):
            return {"stringValue": v}
        if isinstance(v, list):
            return {"arrayValue": {"values": [value(x) for x in v]}}
        return {"kvlistValue": {"values": [{"key": k, "value": value(x)} for k, x in v.items()]}}

    return {"timeUnixNano": "1", "eventName": name, "body": value(body)}


def _legacy_document(text: str) -> dict:
    """Two calls of one trace as the legacy writer logs them (records joined by span id): the
    first's answer has ``text`` beside its tool call, the second's history its copy without it."""
    calls = [{"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}}]

    def of(span: str, when: int, records: list[dict]) -> list[dict]:
        return [
            {**r, "traceId": "ab" * 16, "spanId": span, "timeUnixNano": str(when + n)} for n, r in enumerate(records)
        ]

    first = [
        _log("gen_ai.user.message", {"content": "Rome?"}),
        _log("gen_ai.choice", {"index": "0", "message": {"role": "assistant", "content": text, "tool_calls": calls}}),
    ]
    second = [
        _log("gen_ai.user.message", {"content": "Rome?"}),
        _log("gen_ai.assistant.message", {"tool_calls": calls}),
        _log("gen_ai.tool.message", {"content": "sunny", "id": "call_2"}),
        _log("gen_ai.choice", {"index": "0", "message": {"role": "assistant", "content": "Sunny."}}),
    ]
    records = of("01" * 8, 100, first) + of("02" * 8, 200, second)
    return {"resourceLogs": [{"scopeLogs": [{"logRecords": records}]}]}


def _legacy_call(assistant_body: dict) -> Call:
    calls = [{"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}}]
    records = [
        _log("gen_ai.user.message", {"content": "Paris and Rome?"}),
        _log("gen_ai.assistant.message", {**assistant_body, "tool_calls": calls}),
        _log("gen_ai.tool.message", {"content": "sunny", "id": "call_2"}),
        _log("gen_ai.choice", {"index": "0", "message": {"role": "assistant", "content": "Sunny."}}),
    ]
    document = {"resourceLogs": [{"scopeLogs": [{"logRecords": records}]}]}
    (call,) = [piece for piece in read_otlp(document) if isinstance(piece, Call)]
    return call


def test_an_assistant_message_record_with_calls_and_no_content_is_marked():
    call = _legacy_call({})
    assert call.history[1] == {"role": "assistant", "content": "", "tool_calls": [ROME]}
    assert call.text_dropped == (1,)
    # A record that keeps its text (another writer, or an answer with none said so) is not.
    assert _legacy_call({"content": "Checking."}).text_dropped == ()


def test_the_same_answer_is_the_same_calls_ids_names_and_arguments_as_parsed_json():
    assert same_answer(SECOND_COPY, SECOND)
    spaced = {**SECOND, "tool_calls": [{**ROME, "args": '{"city":"Rome"}'}]}
    assert same_answer(SECOND_COPY, spaced)
    assert not same_answer(SECOND_COPY, {**SECOND, "tool_calls": [{**ROME, "tool_call_id": "call_9"}]})
    assert not same_answer(SECOND_COPY, {**SECOND, "tool_calls": [{**ROME, "name": "get_time"}]})
    assert not same_answer(SECOND_COPY, {**SECOND, "tool_calls": [{**ROME, "args": '{"city": "Oslo"}'}]})
    assert not same_answer(SECOND_COPY, {**SECOND, "content": ""})  # no text to put back
    assert not same_answer(SECOND_COPY, {**SECOND, "name": "bot"})  # anything else different
    assert not same_answer({**SECOND_COPY, "content": "Other."}, SECOND)  # the copy kept a text


# --------------------------------------------------------------------------------------------
# Within a group


def test_within_a_group_the_copy_is_the_answer_and_the_conversation_comes_out_whole():
    made = _made(_calls())
    assert _records(made) == {"g": WHOLE}
    assert _count(made) == 1 and _count(made, "branches") == 0
    assert made[0].raw.payload.assembly["answer_texts_restored"] == 1
    assert made[0].raw.payload.assembly["collapsed"] == 2


def test_within_a_group_any_order_and_any_merge_of_states_give_the_same():
    calls = _calls()
    expected = _records(_made(calls))
    for order in itertools.permutations(range(len(calls))):
        for split in range(len(calls) + 1):
            left, right = GroupState(), GroupState()
            for n, index in enumerate(order):
                (left if n < split else right).add("in.jsonl", index, calls[index])
            made = [m for _, m in conversations_of((("otlp", "g"), left.merge(right)), Settings(), 1)]
            assert _records(made) == expected


def test_a_copy_not_read_from_the_writer_that_drops_text_stays_as_logged():
    # Another writer's history without the answer's text says the conversation went on without
    # it (an application may strip it on purpose): the answer stays a branch of its own.
    made = _made(_calls(marked=False))
    assert sorted(_records(made)) == ["g", "g#branch1"]
    assert _records(made)["g"][4] == SECOND_COPY
    assert _count(made) == 0


def test_a_copy_whose_answer_differs_in_its_calls_is_not_that_answer():
    first, second, third = _calls()
    other = {**SECOND, "tool_calls": [{**ROME, "tool_call_id": "call_7"}]}
    made = _made([first, second._replace(output=[other]), third])
    assert sorted(_records(made)) == ["g", "g#branch1"] and _count(made) == 0


def test_two_different_answers_at_the_place_put_back_neither():
    first, second, third = _calls()
    retry = second._replace(call_id="span2b", output=[{**SECOND, "content": "Rome next."}])
    made = _made([first, second, retry, third])
    assert _records(made)["g"][4] == SECOND_COPY and _count(made) == 0


# --------------------------------------------------------------------------------------------
# Across groups (each call a trace of its own: no parent span)


def test_across_groups_the_answer_is_put_back_into_the_conversation_that_goes_on():
    made = _made(_calls(group_per_call=True))
    assert len(made) == 3
    chained = chained_in_memory(made, "id")
    assert _records(chained) == {"trace3": WHOLE}
    assert _count(chained) == 1 and _count(chained, "chained_across_groups") == 2
    assembly = chained[0].raw.payload.assembly
    assert assembly["answer_texts_restored"] == 1 and assembly["chained"] == ["trace1", "trace2"]
    assert json.dumps(chained[0].raw.payload.value).count("Checking Rome too.") == 1


def test_across_groups_an_unmarked_copy_takes_no_answer():
    chained = chained_in_memory(_made(_calls(group_per_call=True, marked=False)), "id")
    assert sorted(_records(chained)) == ["trace2", "trace3"] and _count(chained) == 0


def test_a_turn_of_its_own_group_put_back_within_it_is_taken_by_the_next_turn():
    # Each user turn a trace of its own: the first turn's group puts the answer back within
    # itself; the second turn's history has the copy again, and takes the first turn whole.
    turn = [c._replace(group="turn1") for c in _calls()]
    thanks = [*WHOLE[:4], SECOND_COPY, *WHOLE[5:], {"role": "user", "content": "Thanks!"}]
    bye = Call("otlp", "turn2", 4, "span4", thanks, [{"role": "assistant", "content": "Bye."}], text_dropped=(2, 4))
    made = _made([*turn, bye])
    assert sorted(_records(made)) == ["turn1", "turn2"] and _count(made) == 1
    chained = chained_in_memory(made, "id")
    expected = [*WHOLE, {"role": "user", "content": "Thanks!"}, {"role": "assistant", "content": "Bye."}]
    assert _records(chained) == {"turn2": expected}
    assert _count(chained) == 1 and chained[0].raw.payload.assembly["chained"] == ["turn1"]
    assert len(chained[0].raw.payload.assembly["calls"]) == 4


@pytest.mark.slow
def test_a_text_put_back_is_redacted_as_any_and_counted(tmp_path, capsys):
    logs = tmp_path / "logs.jsonl"
    logs.write_text(json.dumps(_legacy_document("Mailing jane.doe@example.com first.")) + "\n")
    out = tmp_path / "out"
    assert main(["--input", str(logs), "--output", str(out), "--quiet", "--redact", "emails"]) == 0
    (line,) = [line for part in sorted((out / "normalized").glob("part-*")) for line in part.read_text().splitlines()]
    messages = json.loads(line)["messages"]
    assert [m["content"] for m in messages] == ["Rome?", "Mailing [REDACTED:email] first.", "sunny", "Sunny."]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["accounted"] and summary["call_logs"]["answer_texts_restored"] == 1
    written = b"".join(path.read_bytes() for path in out.rglob("*") if path.is_file())
    assert b"jane.doe" not in written
    capsys.readouterr()
    assert main(["explain", str(out), "--id", json.loads(line)["id"]]) == 0
    assert "1 answer text(s) put back" in capsys.readouterr().out


def test_one_answer_logged_twice_in_two_spellings_is_one_answer_whatever_the_order():
    first, second, third = _calls()
    spelled = {**SECOND, "tool_calls": [{**ROME, "args": {"city": "Rome"}}]}
    again = second._replace(call_id="span2b", output=[spelled])
    seen = set()
    for order in itertools.permutations([first, second, again, third]):
        made = _made(list(order))
        assert sorted(_records(made)) == ["g"] and _count(made) == 1
        seen.add(json.dumps(_records(made)["g"][4], sort_keys=True))
    assert len(seen) == 1
