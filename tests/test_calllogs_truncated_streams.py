"""A response kept as a raw event stream that was cut off (no finish_reason, no [DONE]) is a
partial answer: marked and counted (truncated_stream), refused by the training sinks unless
--keep-truncated-streams, never taken silently for a whole answer."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from transforms.calllogs import streams
from transforms.calllogs.assemble import GroupState, assemble
from transforms.calllogs.calls import Call
from transforms.calllogs.proxies import read_helicone
from transforms.record.assembled_calls import conversations_of
from transforms.record.record_settings import Settings
from transforms.record.records import normalize_batch
from transforms.totals.summary import finalize_run, partial
from transforms.totals.summary_table import format_table

DATA = Path(__file__).resolve().parent / "data" / "calllogs" / "helicone"
USER = {"role": "user", "content": "hi"}


def _cut(stream: str) -> str:
    """A stream cut off after its text: the events that say it ended taken away."""
    kept = [
        event
        for event in stream.split("\n\n")
        if "[DONE]" not in event
        and '"finish_reason":"stop"' not in event
        and "message_stop" not in event
        and "message_delta" not in event
    ]
    return "\n\n".join(kept)


def _row(request_id: str, body: str, history: list | None = None) -> dict:
    return {
        "request_id": request_id,
        "request_body": {"model": "m", "messages": history or [USER]},
        "response_body": body,
        "request_properties": {"Helicone-Session-Id": "s"},
        "request_created_at": "2025-01-01T00:00:00Z",
    }


@pytest.mark.parametrize("snapshot", ["gpt4o-stream-response", "anthropic-stream-response"])
def test_a_stream_cut_off_before_its_end_is_read_as_truncated(snapshot):
    whole = (DATA / f"{snapshot}.snapshot").read_text(encoding="utf-8")
    cut = _cut(whole)
    assert streams.complete(whole) and not streams.complete(cut)
    (complete,) = read_helicone(_row("r", whole))
    (truncated,) = read_helicone(_row("r", cut))
    assert not complete.truncated and truncated.truncated
    assert truncated.output == complete.output  # the text that arrived, kept: only the end is missing


def _conversations(*calls: Call, settings: Settings):
    state = GroupState()
    for position, piece in enumerate(calls):
        state.add("f.jsonl", position, piece)
    made = [m for _, m in conversations_of((("helicone", "s"), state), settings, 1)]
    return normalize_batch([m.raw for m in made], settings)


def test_a_truncated_answer_is_refused_by_the_training_sinks_and_counted():
    cut = _cut((DATA / "gpt4o-stream-response.snapshot").read_text(encoding="utf-8"))
    (piece,) = read_helicone(_row("r", cut))
    # The TRL sinks too: a cut answer would be a whole completion, chosen or rejected side.
    for sink in ("openai-finetune", "hf", "sharegpt", "trl-dpo", "trl-kto", "trl-prompts"):
        result = _conversations(piece, settings=Settings(sink=sink))
        (letter,) = result.dead_letters
        assert letter["reason"] == "unwritable"
        assert letter["detail"].startswith(f"{sink}: truncated_stream: 1 answer(s) arrived as an event stream cut off")
        doc = finalize_run(partial(1, result.metrics, result.dead_letters), Settings(sink=sink))
        assert doc["sink_refusals_by_reason"] == {"truncated_stream": 1}
    # Asked for, or a sink that is not for training: written, marked and counted.
    for settings in (Settings(sink="hf", keep_truncated_streams=True), Settings(sink="flat")):
        result = _conversations(piece, settings=settings)
        (metrics,) = result.metrics
        assert not result.dead_letters and metrics["truncated_stream"] == 1
        assert metrics["assembly"]["truncated_stream"] == 1
        doc = finalize_run(partial(1, result.metrics, []), settings)
        assert doc["truncated_streams"] == 1
        assert "conversations with a stream cut off" in format_table(doc)


def test_a_complete_stream_is_neither_marked_nor_refused():
    whole = (DATA / "gpt4o-stream-response.snapshot").read_text(encoding="utf-8")
    (piece,) = read_helicone(_row("r", whole))
    result = _conversations(piece, settings=Settings(sink="hf"))
    (metrics,) = result.metrics
    assert not result.dead_letters and "truncated_stream" not in metrics
    assert "truncated_streams" not in finalize_run(partial(1, result.metrics, []), Settings(sink="hf"))


def test_the_mark_follows_the_cut_answer_into_longer_conversations_in_any_order():
    """A later call whose history holds the cut answer makes a conversation that holds it too;
    a branch that does not hold it is not marked, whatever order the calls arrive in."""
    answer = {"role": "assistant", "content": "Hel"}
    cut = Call("t", "g", 1, "a", [USER], [answer], truncated=True)
    later = Call("t", "g", 2, "b", [USER, answer, {"role": "user", "content": "more"}], [answer])
    other = Call("t", "g", 3, "c", [{"role": "user", "content": "other"}], [answer])
    for order in itertools.permutations([cut, later, other]):
        state = GroupState()
        for position, piece in enumerate(order):
            state.add("f", position, piece)
        marks = {c.record["id"]: c.assembly.get("truncated_stream") for c in assemble("t", "g", state)}
        assert marks == {"g": None, "g#branch1": 1}
