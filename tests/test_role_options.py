"""--drop-role ROLE and --map-role FROM=TO: roles a sink cannot take.

An agent's final ``exit`` message (and the like) made every provider sink refuse the record
(``unsupported_role``). The two options fix it before normalization: ``--drop-role`` drops the
role's messages, counted in the drops under their own reason (``drop_role``), and
``--map-role`` gives them another role, counted as an opt-in repair (``map_role``). The dead
letter of a refused role says which flag fixes it.
"""

from __future__ import annotations

import json

import pytest

from pipeline.cli.main import main
from pipeline.config.options import ConfigError, load_job
from transforms.core.jsontext import dumps_line
from transforms.record.inputs import RawRecord
from transforms.record.record_settings import Settings
from transforms.record.records import process_record
from transforms.repairs.roles import apply_role_options

RECORD = {
    "id": "agent-1",
    "messages": [
        {"role": "user", "content": "Fix the bug."},
        {"role": "assistant", "content": "Done: the test passes."},
        {"role": "exit", "content": "submitted"},
    ],
}


def run(**settings):
    # --trailing keep: the exit message is the record's last, which the training default trims.
    settings = {"trailing": "keep", **settings}
    return process_record(RawRecord("in.jsonl", 0, dumps_line(RECORD)), Settings(sink="openai-finetune", **settings))


def test_a_role_the_sink_cannot_take_is_refused_with_the_flags_that_fix_it():
    letter = run().dead_letter
    assert letter["reason"] == "unwritable"
    assert "unsupported_role" in letter["detail"]
    assert "--map-role exit=" in letter["detail"] and "--drop-role exit" in letter["detail"]


def test_drop_role_drops_its_messages_counted_under_their_own_reason():
    outcome = run(drop_roles=("exit",))
    assert [m["role"] for m in outcome.record["messages"]] == ["user", "assistant"]
    assert outcome.metrics["dropped"] == 1
    assert outcome.metrics["drops"] == {"drop_role": 1}
    assert outcome.metrics["messages_out"] == 2


def test_map_role_gives_the_messages_another_role_counted_as_a_repair():
    outcome = run(map_roles=(("exit", "assistant"),))
    assert outcome.record["messages"][-1] == {"role": "assistant", "content": "submitted"}
    assert outcome.metrics["dropped"] == 0
    assert outcome.metrics["repairs"] == {"map_role": 1}


def test_the_pure_function_changes_nothing_it_is_not_asked_to():
    messages = [{"role": "user", "content": "a"}, "junk", {"role": "exit", "content": "b"}]
    assert apply_role_options(messages, (), ()) == (messages, 0, 0)
    out, dropped, mapped = apply_role_options(messages, ("exit",), ())
    assert (out, dropped, mapped) == ([{"role": "user", "content": "a"}, "junk"], 1, 0)
    out, dropped, mapped = apply_role_options(messages, (), (("exit", "user"),))
    assert out[2] == {"role": "user", "content": "b"} and (dropped, mapped) == (0, 1)
    assert messages[2] == {"role": "exit", "content": "b"}  # the input is never changed


def test_the_options_on_the_command_line(tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps(RECORD) + "\n")
    out = tmp_path / "out"
    argv = ["--input", str(source), "--output", str(out), "--sink", "anthropic", "--max-tokens", "5"]
    assert main([*argv, "--drop-role", "exit"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["records_out"] == 1 and summary["dropped_by_reason"]["drop_role"] == 1
    out2 = tmp_path / "out2"
    assert main([*argv[:3], str(out2), *argv[4:], "--map-role", "exit=assistant"]) == 0
    summary = json.loads((out2 / "summary.json").read_text())
    assert summary["repairs"]["map_role"] == 1


@pytest.mark.parametrize(
    "flags,problem",
    [
        (["--map-role", "exit"], "FROM=TO"),
        (["--map-role", "exit=tool"], "--map-role"),
        (["--drop-role", "exit", "--map-role", "exit=user"], "both"),
        (["--drop-role", " "], "--drop-role"),
    ],
)
def test_bad_role_options_are_refused_before_the_run(flags, problem, tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_text("{}\n")
    with pytest.raises(ConfigError) as err:
        load_job(["--input", str(source), "--output", str(tmp_path / "out"), *flags])
    assert problem in str(err.value)


def test_sink_refusals_are_counted_by_the_writers_reason_in_the_summary():
    # The person helper's end-of-run warning builds on these counts.
    from transforms.totals.summary import finalize, partial

    letters = [run().dead_letter, run().dead_letter]
    letters.append({**letters[0], "detail": "sharegpt: turn_order: 3 turns: ..."})
    doc = finalize(partial(3, [], letters))
    assert doc["dead_letters_by_reason"]["unwritable"] == 3
    assert doc["sink_refusals_by_reason"] == {"turn_order": 1, "unsupported_role": 2}
    assert "sink_refusals_by_reason" not in finalize(partial(1, [run(drop_roles=("exit",)).metrics], []))
