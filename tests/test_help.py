"""Help that explains itself: defaults, metavars, validate's own help, paths as a user types them."""

from __future__ import annotations

import argparse
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.cli.help import HELP_GROUPS, MAX_GROUP_FLAGS, RUN_ONLY_FLAGS, UNGROUPED, help_text
from pipeline.cli.main import main
from pipeline.config.flags import our_flags
from pipeline.config.options import ConvNormOptions, load_job

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "conversations.jsonl"


def _actions() -> list[argparse.Action]:
    parser = argparse.ArgumentParser(add_help=False)
    ConvNormOptions._add_argparse_args(parser)
    return [a for a in parser._actions if a.option_strings]


def _help(capsys, *argv: str, flag: str = "--help-all") -> str:
    assert main([*argv, flag]) == 0
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


def _sections(text: str) -> dict[str, list[str]]:
    """The flags each section of a help text lists: {title: [--flag, ...]}, option groups only."""
    sections: dict[str, list[str]] = {}
    title = None
    for line in text.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            title = line[:-1]
            sections[title] = []
        elif title is not None and line.startswith("  --"):
            sections[title].append(line.split()[0].rstrip(","))
    return sections


def test_run_help_groups_the_flags_by_task_none_over_the_limit():
    flags = {dest: action.option_strings[0] for dest, action in our_flags().actions.items()}
    grouped = [dest for group in HELP_GROUPS for dest in group.dests]
    assert sorted(grouped) == sorted(flags)  # every flag in exactly one group
    listed = _sections(help_text("run", show_all=True))
    groups = {group.title: [flags[dest] for dest in group.dests] for group in HELP_GROUPS}
    assert UNGROUPED not in listed
    for title, wanted in groups.items():
        assert sorted(listed[title]) == sorted(wanted), title
        assert 0 < len(listed[title]) <= MAX_GROUP_FLAGS, title
    assert len(groups) >= 5
    assert {"input", "output and sinks", "repair"} <= set(groups)
    assert any(title.startswith("tuning") for title in groups)


def test_plain_help_says_where_the_hidden_groups_are(capsys):
    full = _sections(help_text("run", show_all=True))
    plain = _sections(help_text("run"))
    for group in HELP_GROUPS:
        assert plain[group.title] == ([] if group.hidden else full[group.title]), group.title
    text = _help(capsys, flag="--help")
    tuning = next(group for group in HELP_GROUPS if group.hidden)
    assert f"{tuning.title}: {len(tuning.dests)} options, listed by convnorm --help-all" in text
    assert "--batch-bytes" not in text and "--shard-bytes BATCH" not in text
    assert "--batch-bytes BATCH_BYTES" in _help(capsys)
    assert "listed by convnorm validate --help-all" in _help(capsys, "validate", flag="--help")


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
