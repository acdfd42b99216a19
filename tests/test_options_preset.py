"""Presets and flags: typed preset values, command-line precedence, one-line errors."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.config.options import ConfigError, ConvNormOptions, load_job

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


def test_an_unquoted_on_or_off_is_the_word_for_a_flag_that_takes_it(tmp_path):
    """YAML reads on / off as booleans: `call_logs: off` was refused as `false`."""
    off = _job(tmp_path, "call_logs: off\nprogress: off\n")
    assert not off.call_logs and not off.settings.calls_sampled_out
    assert off.options.view_as(ConvNormOptions).progress == "off"
    assert _job(tmp_path, "call_logs: on\n").call_logs
    with pytest.raises(ConfigError, match="'progress' expects one of auto, line, log, off, not true"):
        _job(tmp_path, "progress: on\n")


def test_preset_values_are_the_options_values(tmp_path):
    job = _job(
        tmp_path,
        "batch_size: 7\njob-endpoint-timeout: 45\ncheck: true\nwarn-dead-letters: 90\n"
        "experiments: [a, b]\ndirect_num_workers: 3\nformat: flat\n",
    )
    ours = job.options.view_as(ConvNormOptions)
    assert job.batch_size == 7 and ours.check is True and ours.warn_dead_letters == "90"
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
    for module in (
        "pipeline/config/options.py",
        "pipeline/config/precheck.py",
        "pipeline/config/presets.py",
        "pipeline/cli/help.py",
        "pipeline/cli/commands.py",
    ):
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


# --------------------------------------------------------------------------------------------
# Hostile presets and absurd numbers: one-line errors, exit status 2


def _bomb(levels: int = 9) -> list[str]:
    """A YAML alias bomb: nine aliases of nine aliases ... (9**levels strings once expanded)."""
    items = ['&a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    items += [f"&a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return items


@pytest.mark.slow
@pytest.mark.parametrize(
    "preset_text",
    [
        # Found: json.dumps of the mapping took over 4 GB.
        "transform_name_mapping: {" + ", ".join(f"k{i}: {item}" for i, item in enumerate(_bomb())) + "}\n",
        "experiments: [" + ", ".join(_bomb()) + ", *a8]\n",  # str() of each item of a list option
    ],
)
def test_a_yaml_alias_bomb_is_refused_before_it_expands(preset_text, tmp_path):
    preset = tmp_path / "bomb.yaml"
    preset.write_text(f"input: [{SAMPLE}]\n" + preset_text)
    limit = "import resource; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30));"
    code = f"{limit} import sys; from pipeline.cli.main import main; sys.exit(main(sys.argv[1:]))"
    result = subprocess.run(
        [sys.executable, "-c", code, "--config", str(preset), "--output", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("convnorm: error:")]
    assert len(errors) == 1 and "alias" in errors[0] and "Traceback" not in result.stderr


def test_a_preset_file_past_the_size_limit_is_refused(tmp_path):
    preset = tmp_path / "big.yaml"
    preset.write_text("# " + "x" * (2 << 20) + "\nbatch_size: 7\n")
    with pytest.raises(ConfigError, match="larger than"):
        load_job(["--config", str(preset), "--input", str(SAMPLE), "--output", str(tmp_path / "o")])


@pytest.mark.parametrize(
    "line, message",
    [
        ("batch_size: " + "7" * 5000, "'batch_size'"),  # Found: a traceback (int -> str past 4,300 digits)
        ("check: " + "7" * 5000, "'check'"),
        ("direct_num_workers: " + "7" * 5000, "'direct_num_workers'"),
        ("experiments: [" + "7" * 5000 + "]", "'experiments'"),
        ("job-endpoint-timeout: .inf", "--job-endpoint-timeout"),
        ("job-endpoint-timeout: .nan", "--job-endpoint-timeout"),
        ("max-record-bytes: 9999999999999999999", "max-record-bytes"),
        ("max-record-bytes: 99999999999999", "--max-record-bytes"),
    ],
)
def test_absurd_numbers_in_a_preset_are_one_line_errors(line, message, tmp_path):
    with pytest.raises(ConfigError) as raised:
        _job(tmp_path, line + "\n")
    assert message in str(raised.value) and "\n" not in str(raised.value)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--job-endpoint-timeout", "inf"], "--job-endpoint-timeout"),  # Found: an OverflowError traceback
        (["--job-endpoint-timeout", "nan"], "--job-endpoint-timeout"),  # Found: waited forever
        (["--max-record-bytes", "9999999999999999999"], "--max-record-bytes"),  # Found: every record a dead letter
        (["--shard-bytes", "9" * 30], "--shard-bytes"),
        (["--batch-size", "9" * 30], "--batch-size"),
        (["--dead-letter-raw-limit", "9" * 30], "--dead-letter-raw-limit"),
    ],
)
def test_absurd_numbers_on_the_command_line_exit_2_in_one_line(argv, message, tmp_path, capsys):
    from pipeline.cli.main import main

    assert main(["--input", str(SAMPLE), "--output", str(tmp_path / "o"), *argv]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("convnorm: error:")]
    assert len(errors) == 1 and message in errors[0]
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "argv, said, not_said",
    [
        # Found: a seed's limit read "(1 TiB)", a number limit shown as a size.
        (["--split", "eval=0.1", "--split-seed", "9" * 30], "--split-seed", "TiB"),
        # Found: "--split-by needs --splits", a flag that does not exist.
        (["--split-by", "metadata.user"], "--split-by needs --split ", "--splits"),
    ],
)
def test_refusals_name_real_flags_and_units(argv, said, not_said, tmp_path, capsys):
    from pipeline.cli.main import main

    assert main(["--input", str(SAMPLE), "--output", str(tmp_path / "o"), *argv]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("convnorm: error:")]
    assert len(errors) == 1 and said in errors[0] and not_said not in errors[0], errors
