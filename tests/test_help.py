"""Help that explains itself: defaults, metavars, validate's own help, paths as a user types them."""

from __future__ import annotations

import argparse
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.cli.help import RUN_ONLY_FLAGS
from pipeline.cli.main import main
from pipeline.config.options import ConvNormOptions, load_job

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "conversations.jsonl"


def _actions() -> list[argparse.Action]:
    parser = argparse.ArgumentParser(add_help=False)
    ConvNormOptions._add_argparse_args(parser)
    return [a for a in parser._actions if a.option_strings]


def _help(capsys, *argv: str) -> str:
    assert main([*argv, "--help"]) == 0
    return " ".join(capsys.readouterr().out.split())  # argparse wraps lines anywhere


def test_help_shows_every_default(capsys):
    text = _help(capsys)
    for action in _actions():
        if action.default is None:
            continue
        flag = action.option_strings[0]
        shown = (
            (("--" if action.default else "--no-") + flag[2:])
            if isinstance(action.default, bool)
            else str(action.default)
        )
        assert f"(default: {shown})" in text, flag
    assert "64 MiB" in text  # the shard size, also in a unit people read


def test_metavars_are_the_flag_names(capsys):
    text = _help(capsys)
    for action in _actions():
        if action.nargs == 0 or isinstance(action, argparse.BooleanOptionalAction):
            continue
        flag = action.option_strings[0]
        metavar = flag[2:].upper().replace("-", "_")
        assert action.metavar == metavar, flag
        assert f"{flag} {metavar}" in text or f"{flag} [{metavar}]" in text, flag


def test_validate_help_describes_validate_and_lists_only_its_flags(capsys):
    text = _help(capsys, "validate")
    assert text.startswith("usage: convnorm validate")
    assert "nothing is normalized or changed" in text
    assert "OUTPUT/violations/part-*.jsonl" in text and "OUTPUT/validation.json" in text
    assert "3 the validation pipeline failed" in text
    flags = {action.dest: action.option_strings[0] for action in _actions()}
    for dest, flag in flags.items():
        listed = f"{flag} " in text or f"{flag}," in text
        assert listed == (dest not in RUN_ONLY_FLAGS), flag


def test_run_help_names_the_other_commands_and_exit_statuses(capsys):
    text = _help(capsys)
    assert "convnorm validate --help" in text and "convnorm report OUT_DIR" in text
    assert "exit status: 0 done" in text and "2 bad options" in text


def test_output_expands_the_tilde_and_loses_trailing_slashes(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    job = load_job(["--input", str(SAMPLE), "--output", "~/x/"])
    assert job.output == str(tmp_path / "x")


def test_the_printed_outputs_line_has_no_double_slash(tmp_path, capsys):
    assert main(["--input", str(SAMPLE), "--output", f"{tmp_path}/o/", "--no-report"]) == 0
    line = [line for line in capsys.readouterr().out.splitlines() if line.startswith("outputs:")][0]
    assert "//" not in line and f"{tmp_path}/o/summary.json" in line


def test_corpus_generator_has_help_and_refuses_a_terminal(tmp_path):
    script = str(ROOT / "bench" / "corpus.py")
    helped = subprocess.run([sys.executable, script, "--help"], capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0 and "COUNT" in helped.stdout and "--output" in helped.stdout
    controller, terminal = pty.openpty()
    try:
        refused = subprocess.run(
            [sys.executable, script, "5"], stdout=terminal, stderr=subprocess.PIPE, text=True, timeout=60
        )
    finally:
        os.close(terminal)
        os.close(controller)
    assert refused.returncode == 2 and "to a terminal" in refused.stderr
    out = tmp_path / "c.jsonl"
    written = subprocess.run([sys.executable, script, "5", "--output", str(out)], capture_output=True, timeout=60)
    assert written.returncode == 0 and len(out.read_bytes().splitlines()) == 5


@pytest.mark.parametrize("argv", [["report", "--help"]])
def test_report_command_has_help(argv, capsys):
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 0
    assert "OUT_DIR" in capsys.readouterr().out
