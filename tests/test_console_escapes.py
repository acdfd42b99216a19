"""What reaches the terminal: a control character from the data is printed escaped, never raw.

Each test feeds names and ids holding a colour escape, a newline, a carriage return and a
right-to-left override (``HOSTILE``) to one console line of convnorm: the plan of ``--dry-run``,
a run's summary table and log lines, ``convnorm explain`` and its errors, the progress line,
streaming's lines. None of them may print a raw control character (other than the newlines
that separate its own lines), and each prints the escaped form on the value's own line.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import re
from pathlib import Path

import pytest

from pipeline.cli.main import main
from transforms.totals.console_text import console_text

#: A colour escape, a newline, a carriage return, a right-to-left override.
HOSTILE = "\x1b[31m\n\r\u202e"
ESCAPED = r"\x1b[31m\n\r\u202e"
#: Every character the console escapes, but the newline (which separates a command's lines).
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _clean(text: str) -> str:
    found = RAW.search(text)
    assert found is None, f"raw {found.group()!r} on the console: {text!r}"
    return text


def _line_with(text: str, needle: str) -> str:
    lines = [line for line in text.splitlines() if needle in line]
    assert lines, f"{needle!r} not on one line of {text!r}"
    return lines[0]


# --------------------------------------------------------------------------------------------
# The rule


@pytest.mark.parametrize(
    "raw, shown",
    [
        ("\x1b", r"\x1b"),
        ("\n", r"\n"),
        ("\r", r"\r"),
        ("\t", r"\t"),
        ("\x00", r"\x00"),
        ("\x7f", r"\x7f"),
        ("\x9b", r"\x9b"),  # C1: a one-character CSI on some terminals
        ("\u2028", r"\u2028"),
        ("\u2029", r"\u2029"),
        ("\u202a", r"\u202a"),
        ("\u202e", r"\u202e"),
        ("\u2066", r"\u2066"),
        ("\u2069", r"\u2069"),
    ],
)
def test_each_control_character_is_shown_as_its_python_escape(raw, shown):
    assert console_text(f"a{raw}b") == f"a{shown}b"


def test_text_without_controls_is_unchanged_and_newlines_can_be_kept():
    plain = "logs/été 日本 \\x1b ‏ - … \u200b"
    assert console_text(plain) == plain
    assert console_text(f"one{HOSTILE}\ntwo", keep_newlines=True) == "one\\x1b[31m\n\\r\\u202e\ntwo"
    assert console_text(console_text(HOSTILE)) == console_text(HOSTILE)  # escaped text has none left


# --------------------------------------------------------------------------------------------
# One run of hostile input, looked at from every side


def _hostile_inputs(base: Path) -> Path:
    inputs = base / "in"
    inputs.mkdir()
    records = [
        {
            "id": f"id{HOSTILE}",
            "messages": [
                {"role": "user", "content": "hi", f"field{HOSTILE}": "discarded text"},
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": f"call{HOSTILE}",
                            "type": "function",
                            "function": {"name": f"tool{HOSTILE}", "arguments": "{}"},
                        }
                    ],
                },
            ],
        },
        {"id": "plain", "messages": [{"role": "user", "content": "hello"}]},
        # No reader takes it: a dead letter whose reason names its keys.
        {"id": "letter", f"key{HOSTILE}": 1},
    ]
    (inputs / f"a{HOSTILE}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (inputs / f"notes{HOSTILE}.txt").write_text("not a log")  # not read: named in a log line
    return inputs


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("console")
    inputs = _hostile_inputs(base)
    out = base / f"out{HOSTILE}"
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        status = main(["--input", str(inputs), "--output", str(out), "--no-report", "--progress", "log"])
    assert status == 0, stderr.getvalue()
    return inputs, out, stdout.getvalue(), stderr.getvalue()


def test_the_summary_table_names_a_discarded_field_on_its_own_row(hostile_run):
    _, output, out, _ = hostile_run
    _clean(out)
    row = _line_with(out, f"field{ESCAPED}")
    assert row.split() == [f"field{ESCAPED}", "1", "(14", "ch)"]
    shown = f"{output.parent}/out{ESCAPED}"
    assert f"outputs: {shown}/{{normalized,drops,dead_letter}}/, {shown}/summary.json\n" in out


def test_the_log_lines_name_a_hostile_file_on_one_line(hostile_run):
    inputs, _, _, err = hostile_run
    _clean(err)
    note = _line_with(err, "without a known suffix not read")
    assert note.startswith("INFO convnorm: ") and note.endswith(f"notes{ESCAPED}.txt")


def test_explain_shows_ids_call_ids_and_tool_names_escaped_in_its_columns(hostile_run, capsys):
    inputs, out, _, _ = hostile_run
    assert main(["explain", str(out), "--id", f"id{HOSTILE}", "--width", "160"]) == 0
    text = _clean(capsys.readouterr().out)
    lines = text.splitlines()
    assert lines[0] == f"conversation id{ESCAPED}: {inputs}/a{ESCAPED}.jsonl line 1 (byte 0)"
    assert f"calls call{ESCAPED} tool{ESCAPED}" in text and f"tool [call{ESCAPED}]" in text
    # Every row of the side-by-side view keeps its column: the separator where the header has it.
    header = next(i for i, line in enumerate(lines) if line.startswith("before (as read"))
    column = lines[header].index(" | ")
    for line in lines[header + 2 :]:
        assert line[column : column + 2] == " |", line


def test_explain_names_close_ids_in_its_error_on_one_line(hostile_run, capsys):
    _, out, _, _ = hostile_run
    assert main(["explain", str(out), "--id", "id\x1b[31m"]) == 1
    err = _clean(capsys.readouterr().err)
    assert err.count("\n") == 1 and f"close ones: id{ESCAPED}" in err


def test_explain_names_a_dead_letters_json_keys_in_its_error_on_one_line(hostile_run, capsys):
    _, out, _, _ = hostile_run
    # Dead-lettered: its reason names the record's keys, as the data spells them.
    assert main(["explain", str(out), "--id", "letter"]) == 1
    err = _clean(capsys.readouterr().err)
    assert err.count("\n") == 1 and f"key{ESCAPED}" in err


def test_the_plan_of_a_dry_run_names_hostile_files_on_one_line_each(hostile_run, tmp_path, capsys):
    inputs, _, _, _ = hostile_run
    assert main(["--input", str(inputs), "--output", str(tmp_path / "o"), "--dry-run"]) == 0
    printed = _clean(capsys.readouterr().out)
    assert _line_with(printed, "reader: ").lstrip().startswith(f"{inputs}/a{ESCAPED}.jsonl ")
    assert _line_with(printed, "without a known suffix").endswith(f"notes{ESCAPED}.txt")


def test_an_error_quoting_a_path_prints_it_escaped_on_one_line(tmp_path, capsys):
    logs = tmp_path / f"logs{HOSTILE}"
    (logs / "sub").mkdir(parents=True)
    (logs / "sub" / "a.jsonl").write_text('{"messages": []}\n')
    assert main(["--input", str(logs), "--output", str(tmp_path / "o"), "--dry-run"]) == 2
    err = _clean(capsys.readouterr().err)
    assert err.count("\n") == 1 and f"--input '{tmp_path}/logs{ESCAPED}/*/*.jsonl'" in err


def test_an_option_value_in_an_argument_error_is_escaped(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["explain", str(tmp_path), "--id", "x", f"stray{HOSTILE}"])
    err = _clean(capsys.readouterr().err)
    assert f"unrecognized arguments: stray{ESCAPED}" in err


# --------------------------------------------------------------------------------------------
# Log lines, the progress line, streaming's lines


def test_a_log_line_is_one_line_and_a_traceback_keeps_its_lines(capsys):
    from pipeline.console import configure_console

    root = logging.getLogger()
    saved = root.handlers[:], root.level
    configure_console()
    try:
        logging.getLogger("convnorm").warning("%s cannot be read", f"logs/a{HOSTILE}.jsonl")
        try:
            raise ValueError("bad\x1b[31m")
        except ValueError:
            logging.getLogger("convnorm").exception("failed")
        logging.getLogger("apache_beam.runners").warning("first\nsecond\x1b")
    finally:
        root.handlers[:], root.level = saved
    lines = _clean(capsys.readouterr().err).splitlines()
    assert lines[0] == f"WARNING convnorm: logs/a{ESCAPED}.jsonl cannot be read"
    assert lines[1] == "ERROR convnorm: failed" and lines[2] == "Traceback (most recent call last):"
    assert lines[-3] == r"ValueError: bad\x1b[31m"
    # Another library's message keeps its own line breaks (Beam's carry tracebacks).
    assert lines[-2:] == ["WARNING apache_beam.runners: first", r"second\x1b"]


def test_the_live_progress_line_keeps_its_carriage_returns_and_escapes_its_text():
    from pipeline.console import _LiveLine

    stream = io.StringIO()
    _LiveLine().show(stream, f"1 records{HOSTILE}")
    written = stream.getvalue()
    assert written.startswith("\r1 records\\x1b[31m\\n\\r\\u202e") and written.endswith("\r")
    _clean(written.strip("\r"))


def test_streamings_window_line_is_escaped():
    from pipeline.streaming.windows import window_line

    doc = {
        "window": f"w{HOSTILE}",
        "records_in": 1,
        "records_out": 1,
        "dead_letters": 0,
        "dropped": 0,
        "progress": {"rows_per_s": 1.0, "files_done": 1, "files_pending": 0, "oldest_pending_age_s": 0.0},
    }
    line = _clean(window_line(doc, {"records_in": 1, "records_out": 1, "dead_letters": 0, "dropped": 0}))
    assert line.startswith(f"window w{ESCAPED}: ") and "\n" not in line


def test_what_a_streaming_run_left_names_hostile_files_escaped(tmp_path):
    from pipeline.streaming.driver import left_for_next_start
    from pipeline.streaming.landing import LandingRules
    from pipeline.streaming.watch import WatchPlan

    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / f"late{HOSTILE}.jsonl").write_text('{"messages": []}\n')
    rules = LandingRules((f"{landing}/*.jsonl",), str(tmp_path / "out"))
    plan = WatchPlan(rules, str(tmp_path / "out"), 1.0, 10, (), None)
    left = _clean(left_for_next_start(plan))
    assert _line_with(left, "left pending").endswith(f"late{ESCAPED}.jsonl")
