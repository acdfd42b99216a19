"""Presets and flags: typed preset values, command-line precedence, one-line errors (issue #10)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.options import ConfigError, ConvNormOptions, load_job

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "conversations.jsonl"


def _job(tmp_path, preset_text: str, *argv: str):
    preset = tmp_path / "p.yaml"
    preset.write_text(f"input: [{SAMPLE}]\n" + preset_text)
    return load_job(["--config", str(preset), "--output", str(tmp_path / "o"), *argv])


@pytest.mark.parametrize(
    "line, message",
    [
        # A string where an integer is expected (the flag would have converted it; a preset is typed).
        ("batch_size: '500'", "'batch_size' expects an integer, not the string '500'"),
        # A YAML list for a one-value option used to take its last item silently.
        ("sink: [flat, anthropic]", "'sink' expects a string, not a list"),
        ("model: {name: gpt}", "'model' expects a string, not a mapping"),
        ("check: 1", "'check' expects true or false, not 1"),
        ("progress: sometimes", "'progress' expects one of auto, line, log, off, not the string 'sometimes'"),
        ("max_record_bytes: 1.5", "'max_record_bytes' expects an integer, not 1.5"),
        # Beam's options: their flag's type, and one value where the flag takes one.
        ("direct_num_workers: two", "'direct_num_workers': invalid int value: 'two'"),
        ("project: [a, b]", "'project' takes one value, not a list"),
        ("runner: {name: FnApiRunner}", "'runner' takes one value, not a mapping"),
        ("streaming: 3", "'streaming' expects true or false, not 3"),
        ("project: true", "'project' takes a value, not true"),
    ],
)
def test_a_preset_value_of_the_wrong_type_is_a_one_line_error_naming_the_key(tmp_path, line, message):
    with pytest.raises(ConfigError) as raised:
        _job(tmp_path, line + "\n")
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_preset_values_are_the_options_values(tmp_path):
    job = _job(
        tmp_path,
        "batch_size: 7\njob-endpoint-timeout: 45\ncheck: true\nwindow: 90\n"
        "experiments: [a, b]\ndirect_num_workers: 3\nformat: flat\n",
    )
    ours = job.options.view_as(ConvNormOptions)
    assert job.batch_size == 7 and ours.check is True and ours.window == "90"
    assert job.job_endpoint_timeout == 45.0 and isinstance(job.job_endpoint_timeout, float)
    assert job.settings.input_format == "flat"
    everything = job.options.get_all_options()
    assert everything["experiments"] == ["a", "b"] and everything["direct_num_workers"] == 3


def test_the_command_line_wins_over_the_preset(tmp_path):
    job = _job(
        tmp_path,
        "batch_size: 7\ncheck: true\ndirect_num_workers: 3\nexperiments: [a]\n",
        "--batch-size",
        "9",
        "--no-check",
        "--direct_num_workers=1",
        "--experiments=b",
    )
    assert job.batch_size == 9 and not job.options.view_as(ConvNormOptions).check
    everything = job.options.get_all_options()
    assert everything["direct_num_workers"] == 1
    assert everything["experiments"] == ["b"]  # a repeatable option's list is replaced, not extended


def test_a_key_with_no_value_leaves_the_option_as_it_was(tmp_path):
    assert _job(tmp_path, "model:\n").settings.model is None


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--batch-size", "lots"], "argument --batch-size: invalid int value: 'lots'"),
        (["--direct_num_workers=two"], "argument --direct_num_workers: invalid int value: 'two'"),
        (["--progress=sometimes"], "argument --progress: invalid choice: 'sometimes'"),
    ],
)
def test_a_bad_value_on_the_command_line_is_one_line_not_beams_usage(argv, message, tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "pipeline", "--input", str(SAMPLE), "--output", str(tmp_path / "o"), *argv],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if "apitools" not in line]
    assert errors == [errors[0]] and errors[0].startswith("convnorm: error: " + message), result.stderr
    assert "usage:" not in result.stderr
    assert not (tmp_path / "o").exists()


def test_option_parsing_reads_no_private_parser_or_beam_attributes():
    # argparse's and Beam's private fields change without notice; the public API is enough.
    private = re.compile(r"_BeamArgumentParser|\._actions\b|\._action_groups\b|\._group_actions\b|\._option_string")
    for module in ("pipeline/options.py", "pipeline/cli_help.py", "pipeline/main.py"):
        text = (ROOT / module).read_text()
        assert not private.search(text), (module, private.search(text).group(0))


@pytest.mark.parametrize("sink", ["openai-batch", "openai-responses", "anthropic"])
def test_writer_option_precedence_is_what_the_help_says(sink):
    # --model, when given, replaces a record's own model; --max-tokens only fills in for a record
    # without max_tokens; with neither model, openai-batch refuses the record, the others leave it out.
    from transforms.formats import WRITERS, FormatError, WriteContext

    def model_of(out: dict):
        return (out.get("body") or {}).get("model") if sink == "openai-batch" else out.get("model")

    record = {
        "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
        "model": "own",
        "max_tokens": 5,
    }
    write = WRITERS[sink].write
    assert model_of(write(record, WriteContext("r", model="flag", max_tokens=9))) == "flag"
    assert model_of(write(record, WriteContext("r"))) == "own"
    bare = {"messages": record["messages"]}
    if sink == "openai-batch":
        with pytest.raises(FormatError, match="model"):
            write(bare, WriteContext("r"))
    else:
        assert "model" not in write(bare, WriteContext("r"))
    if sink == "anthropic":
        assert write(record, WriteContext("r", max_tokens=9))["max_tokens"] == 5
        assert write(bare, WriteContext("r", max_tokens=9))["max_tokens"] == 9
