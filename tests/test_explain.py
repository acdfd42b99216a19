"""convnorm explain: a conversation before and after, side by side, each repair with its reason,
read back from the input by the source and position its drops/ line names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.cli.main import main
from transforms.repairs.before_after import Mark, Row, explain

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "conversations.jsonl"


def _drops(out: Path) -> list[dict]:
    return [
        json.loads(line) for p in sorted((out / "drops").glob("part-*.jsonl")) for line in p.read_text().splitlines()
    ]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("explain")
    spec, lossless = base / "spec", base / "lossless"
    assert main(["--input", str(SAMPLE), "--output", str(spec), "--no-report", "--quiet"]) == 0
    argv = ["--input", str(SAMPLE), "--output", str(lossless), "--profile", "lossless", "--no-report", "--quiet"]
    assert main(argv) == 0
    return spec, lossless


def test_the_spec_example_of_an_unusable_id_costs_three_marked_drops():
    """MEM-5's own example: a call id "0" and its result; three drops from a list of two."""
    messages = [
        {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "0", "name": "search"}]},
        {"role": "tool", "content": "result", "tool_call_id": "0"},
    ]
    ex = explain(messages)
    assert ex.result.dropped == 3 and ex.result.messages == []
    assert ex.rows == [
        Row(0, None, None, (Mark("dropped", "emptied_turn"),)),
        Row(0, 0, None, (Mark("dropped", "unusable_call", "0"),)),
        Row(1, None, None, (Mark("dropped", "orphan_result", "0"),)),
    ]


def test_a_result_ahead_of_its_call_is_stripped_and_the_call_healed():
    messages = [
        {"role": "tool", "content": "out of order", "tool_call_id": "c1"},
        {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c1", "name": "search"}]},
        {"role": "system", "content": "late"},
    ]
    ex = explain(messages)
    assert ex.rows == [
        Row(0, None, None, (Mark("dropped", "leading_tool", "c1"),)),
        Row(1, None, 1, ()),
        Row(None, None, 2, (Mark("healed", "unanswered_call", "c1"),)),
        Row(2, None, 0, (Mark("moved", "system_first", "now #0"),)),
    ]


@pytest.mark.slow
def test_explain_prints_before_and_after_with_every_repair_marked(runs, capsys):
    spec, _ = runs
    metrics = next(m for m in _drops(spec) if m["drops"].get("leading_tool") and m["healed"])
    assert main(["explain", str(spec), "--id", metrics["id"], "--width", "200"]) == 0
    text = capsys.readouterr().out
    lines = SAMPLE.read_bytes()[: metrics["position"]].count(b"\n") + 1
    assert f"conversation {metrics['id']}: {SAMPLE.relative_to(ROOT)}" in text or f"{metrics['id']}: " in text
    assert f"line {lines:,} (byte {metrics['position']:,})" in text
    assert "before (as read from the input)" in text and "after (as written)" in text
    for reason, n in metrics["drops"].items():
        assert text.count(f"DROPPED {reason}:") == n, reason
    assert text.count("HEALED unanswered_call:") == metrics["healed"]
    assert (
        f"{metrics['messages_in']} messages in - " in text
        and f"+ {metrics['healed']} healed = {metrics['messages_out']} out"
    ) in text or f"= {metrics['messages_out']} out" in text
    assert "NOTE:" not in text  # the source gives what the run recorded


@pytest.mark.slow
def test_explain_shows_the_lossless_repairs_and_html(runs, capsys):
    _, lossless = runs
    metrics = next(m for m in _drops(lossless) if m.get("repairs", {}).get("rekeyed_call"))
    assert main(["explain", str(lossless), "--id", metrics["id"]]) == 0
    text = capsys.readouterr().out
    assert "profile lossless" in text
    assert text.count("RE-KEYED rekeyed_call:") >= metrics["repairs"]["rekeyed_call"]
    assert main(["explain", str(lossless), "--id", metrics["id"], "--html"]) == 0
    page = capsys.readouterr().out
    assert page.startswith("<!DOCTYPE html>") and '<table class="explain">' in page and "mark rekeyed" in page


@pytest.mark.slow
def test_explain_says_what_it_cannot_find(runs, tmp_path, capsys):
    spec, _ = runs
    some_id = _drops(spec)[0]["id"]
    assert main(["explain", str(spec), "--id", some_id + "x"]) == 1
    err = capsys.readouterr().err
    assert f"no conversation with id '{some_id}x'" in err and some_id in err.split("close ones:")[1]
    assert main(["explain", str(tmp_path), "--id", "a"]) == 1
    assert "holds no drops/ lines" in capsys.readouterr().err


@pytest.mark.slow
def test_explain_notes_a_source_that_changed_since_the_run(tmp_path, capsys):
    source = tmp_path / "log.jsonl"
    record = {
        "id": "r1",
        "messages": [{"role": "tool", "content": "x", "tool_call_id": "c9"}, {"role": "user", "content": "q"}],
    }
    source.write_text(json.dumps(record) + "\n")
    out = tmp_path / "out"
    assert main(["--input", str(source), "--output", str(out), "--no-report", "--quiet"]) == 0
    # Same length, no drop now: the run's drops/ line and the source disagree.
    record["messages"][0] = {"role": "user", "content": "x", "tool_call_id": "c9"}
    source.write_text(json.dumps(record) + "\n")
    assert main(["explain", str(out), "--id", "r1"]) == 0
    assert "NOTE: the run recorded {'orphan_result': 1}" in capsys.readouterr().out
    source.write_text("")
    assert main(["explain", str(out), "--id", "r1"]) == 1
    assert "has no record at position 0 any more" in capsys.readouterr().err


def test_a_record_is_read_again_where_the_run_found_it(tmp_path):
    import gzip

    from pipeline.io.reread import line_numbers, record_at

    lines = [b'{"id": "a", "messages": []}', b"", b'{"id": "b", "messages": []}']
    plain = tmp_path / "p.jsonl"
    plain.write_bytes(b"\xef\xbb\xbf" + b"\n".join(lines) + b"\n")  # a byte-order mark first
    packed = tmp_path / "p.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    second = 3 + len(lines[0]) + 2  # past the mark, the first line and the blank one
    for path in (plain, packed):
        assert json.loads(record_at(str(path), 3).payload)["id"] == "a"
        assert json.loads(record_at(str(path), second).payload)["id"] == "b"
        assert record_at(str(path), second + 1) is None
        assert line_numbers(str(path), [3, second]) == {3: 1, second: 3}
    array = tmp_path / "a.json"
    array.write_text(json.dumps([{"id": "x"}, {"id": "y"}]))
    assert record_at(str(array), 1).payload.value == {"id": "y"} and line_numbers(str(array), [1]) == {}


AGENT_RUN = [
    {"role": "user", "content": "Fix the bug."},
    {"role": "assistant", "content": "Done: the test passes."},
    {"role": "exit", "content": "submitted"},
]


def test_drop_role_and_map_role_are_marked_like_the_run_counts_them():
    """Found: explain normalized without --drop-role / --map-role, so the exit message stayed."""
    dropped = explain(AGENT_RUN, "spec", drop_roles=("exit",))
    assert dropped.result.drops == {"drop_role": 1} and dropped.result.dropped == 1
    assert [m["role"] for m in dropped.result.messages] == ["user", "assistant"]
    assert dropped.rows == [
        Row(0, None, 0, ()),
        Row(1, None, 1, ()),
        Row(2, None, None, (Mark("dropped", "drop_role", "exit"),)),
    ]
    mapped = explain(AGENT_RUN, "spec", map_roles=(("exit", "assistant"),))
    assert mapped.result.repairs == {"map_role": 1} and mapped.result.dropped == 0
    assert mapped.rows[2] == Row(2, None, 2, (Mark("mapped", "map_role", "exit → assistant"),))
    assert "MAPPED map_role" in mapped.rows[2].marks[0].text()


def test_a_dropped_role_before_a_repair_keeps_the_rows_in_input_order():
    messages = [
        {"role": "observer", "content": "watching"},
        {"role": "tool", "content": "early", "tool_call_id": "c1"},
        {"role": "user", "content": "q"},
        {"role": "observer", "content": "still watching"},
        {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c2", "name": "search"}]},
    ]
    ex = explain(messages, "spec", drop_roles=("observer",))
    assert ex.rows == [
        Row(0, None, None, (Mark("dropped", "drop_role", "observer"),)),
        Row(1, None, None, (Mark("dropped", "orphan_result", "c1"),)),
        Row(2, None, 0, ()),
        Row(3, None, None, (Mark("dropped", "drop_role", "observer"),)),
        Row(4, None, 1, ()),
        Row(None, None, 2, (Mark("healed", "unanswered_call", "c2"),)),
    ]
    assert ex.result.drops == {"orphan_result": 1, "drop_role": 2}


@pytest.mark.slow
def test_explain_of_a_run_with_role_options_shows_what_the_run_did(tmp_path, capsys):
    source = tmp_path / "agent.jsonl"
    source.write_text(json.dumps({"id": "agent-1", "messages": AGENT_RUN}) + "\n")
    for flags, shown in (
        (["--drop-role", "exit"], "DROPPED drop_role:"),
        (["--map-role", "exit=assistant"], "MAPPED map_role:"),
    ):
        out = tmp_path / flags[0].strip("-")
        argv = ["--input", str(source), "--output", str(out), "--sink", "openai-finetune", *flags]
        assert main([*argv, "--quiet", "--no-report"]) == 0
        assert main(["explain", str(out), "--id", "agent-1", "--width", "200"]) == 0
        text = capsys.readouterr().out
        assert shown in text and "NOTE:" not in text, text


def test_the_text_wraps_each_reason_instead_of_cutting_it():
    """Found: at a terminal's width a mark was cut at its column ("a result before any turn, at
    the fro"), losing the words that say why; the wrapped lines keep every word, in the column."""
    from pipeline.finished.explain import Located, explanation_text
    from transforms.record.record_settings import Settings

    messages = [
        {"role": "tool", "content": "early", "tool_call_id": "c1"},
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c1", "name": "search"}]},
        {"role": "exit", "content": "submitted"},
    ]
    ex = explain(messages, "spec", map_roles=(("exit", "assistant"),))
    metrics = {"id": "r1", "source": "log.jsonl", "position": 0}
    for width in (80, 120):
        text = explanation_text(Located(metrics, ex, Settings(), 1, ""), width)
        table = [line for line in text.splitlines() if " | " in line]
        assert max(map(len, table)) <= width
        right = " ".join(line.split(" | ", 1)[1].strip() for line in table)
        for row in ex.rows:
            for mark in row.marks:
                assert mark.text() in right, (width, mark.text())


@pytest.mark.slow
def test_a_conversation_the_sink_refused_is_explained_with_the_refusal(tmp_path, capsys):
    """Found: explain of a conversation that was read and normalized, then refused by the sink
    (or dropped for its length), said "no conversation with id ... a record that could not be
    read has no id": it was read. Its dead letter is found by the id in its raw text, and the
    explanation says what became of it."""
    source = tmp_path / "log.jsonl"
    refused = {
        "id": "no-answer",
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "tool", "content": "stray", "tool_call_id": "c9"},
        ],
    }
    garbled = '{"id": "garbled", "messages": [\n'
    source.write_text(json.dumps(refused) + "\n" + garbled)
    out = tmp_path / "out"
    argv = ["--input", str(source), "--output", str(out), "--sink", "openai-finetune", "--no-report", "--quiet"]
    assert main(argv) == 1  # every record is a dead letter
    assert main(["explain", str(out), "--id", "no-answer", "--width", "200"]) == 0
    text = capsys.readouterr().out
    assert "dead-lettered (unwritable): openai-finetune: no_assistant_message" in text
    assert "DROPPED orphan_result:" in text and "NOTE:" not in text
    # A record that could not be read has no conversation to show: the dead letter says why.
    assert main(["explain", str(out), "--id", "garbled"]) == 1
    assert "dead-lettered (invalid_json)" in capsys.readouterr().err


@pytest.mark.parametrize(
    "raw_id, spelled",
    [
        ('say "hi"', None),  # quotes: escaped once in the record, twice in the dead letter's line
        ("back\\slash", None),
        ("tab\there", None),
        ("\u202eright-to-left", "\\u202eright-to-left"),  # the input spelled it as an escape
    ],
)
def test_a_dead_letter_is_found_by_an_id_the_json_spells_with_escapes(raw_id, spelled, tmp_path):
    # Found: find_dead_letter's quick pre-check compared the id as the record spells it with the
    # dead letter's line, where the raw text is escaped once more: an id with a quote, a
    # backslash, a control character or written as a \\u escape was never found.
    from pipeline.finished.explain import find_dead_letter

    id_json = json.dumps(raw_id) if spelled is None else f'"{spelled}"'
    raw = '{"id": ' + id_json + ', "messages": [\n'  # invalid JSON: a dead letter
    letter = {"source": "in.jsonl", "position": 0, "reason": "invalid_json", "detail": "x", "raw": raw}
    (tmp_path / "dead_letter").mkdir()
    (tmp_path / "dead_letter" / "part-00000.jsonl").write_text(json.dumps(letter) + "\n")
    found = find_dead_letter(str(tmp_path), raw_id)
    assert found is not None and found["raw"] == raw
    assert find_dead_letter(str(tmp_path), raw_id + "x") is None


def test_explain_takes_the_newest_emission_of_a_reopened_conversation(tmp_path):
    """A streaming output holds a re-opened conversation once per window it was emitted in
    (``assembly.pane``): the newest, in the latest window, is the one explained."""
    from pipeline.finished.explain import find_metrics

    for pane, window in enumerate(("20261202T000000Z-20261202T000004Z", "20261202T000008Z-20261202T000012Z")):
        folder = tmp_path / window / "assembled"
        folder.mkdir(parents=True)
        line = {"id": "s", "source": "f.jsonl", "position": 0, "assembly": {"calls": [], "pane": pane}}
        (folder / "drops.jsonl").write_text(json.dumps(line) + "\n")
    assert find_metrics(str(tmp_path), "s")["assembly"]["pane"] == 1
