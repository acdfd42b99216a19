"""Options that failed late are refused at the start: exit status 2, one line, nothing written.

Each case once got past the checks: a traceback after the run (an over-long --output), a
streaming marker left behind that then refused every batch run into the directory (--window
1e30), a flag that did nothing (a streaming flag in a batch run), argparse's "expected one
argument" (a negative duration), or a run that never started (--config naming a FIFO).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from pipeline.cli.main import main
from pipeline.config.checks import DERIVED_PATH_BYTES

GOOD = b'{"id":"g%d","messages":[{"role":"user","content":"hi"}]}\n'


def _input(tmp_path: Path) -> str:
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"".join(GOOD % i for i in range(3)))
    return str(path)


def _refused(capsys, argv: list[str], *expected: str) -> str:
    """Run ``argv``: exit status 2 and one error line holding each of ``expected``."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("convnorm: error:")]
    assert len(errors) == 1, err
    for text in expected:
        assert text in errors[0], err
    return errors[0]


# --------------------------------------------------------------------------------------------
# --output too long for the file system


def test_an_output_name_over_name_max_is_refused_before_anything_is_created(tmp_path, capsys):
    # Found: a traceback from the lock's makedirs (exit status 1), its parent folder created.
    out = tmp_path / "new" / ("n" * 256)
    _refused(capsys, ["--input", _input(tmp_path), "--output", str(out)], "256 bytes", "NAME_MAX")
    assert not (tmp_path / "new").exists()


def test_an_output_past_path_max_with_the_names_made_under_it_is_refused(tmp_path, capsys):
    # Found: a path 60 bytes short of PATH_MAX passed; the run failed in the pipeline (exit
    # status 1) when a temporary part file's name went past it, 20 folders left behind.
    path_max = os.pathconf(tmp_path, "PC_PATH_MAX")
    out = str(tmp_path / "deep")
    while len(os.fsencode(out)) + 201 < path_max - 60:
        out += "/" + "d" * 200
    out += "/" + "e" * (path_max - 60 - len(os.fsencode(out)) - 1)
    _refused(capsys, ["--input", _input(tmp_path), "--output", out], "PATH_MAX", f"{path_max:,}")
    assert not (tmp_path / "deep").exists()
    _refused(capsys, ["validate", "--input", _input(tmp_path), "--output", out], "PATH_MAX")


@pytest.mark.slow
def test_an_output_with_just_room_for_the_names_made_under_it_is_run(tmp_path):
    path_max = os.pathconf(tmp_path, "PC_PATH_MAX")
    out = str(tmp_path / "deep")
    while len(os.fsencode(out)) + 201 < path_max:
        out += "/" + "d" * 200
    room = out[: path_max - DERIVED_PATH_BYTES - 2].rstrip("/")  # ASCII: a byte a character
    assert main(["--input", _input(tmp_path), "--output", room, "--quiet", "--no-report"]) == 0
    assert (Path(room) / "_SUCCESS").exists()


def test_derived_path_bytes_covers_the_longest_names_convnorm_makes():
    from pipeline.io.output_names import TEMP_PREFIX
    from pipeline.io.processed_files import source_id
    from pipeline.io.written_files import temp_name

    uuid_hex = uuid.uuid4().hex

    def write_temp(name: str) -> str:  # pipeline.io.files.write_file's temporary name
        return f".{name}.{uuid_hex}.tmp"

    window = "20261130T120000Z-20261130T120100Z"
    landed = source_id("/landing/" + "\u00e9" * 200 + ".jsonl", version=999_999)
    longest = [
        f"{window}/{landed}/{write_temp('dead_letter.jsonl')}",
        f"{TEMP_PREFIX}{uuid_hex}/in-flight/{uuid_hex}-v999999-{uuid_hex[:8]}/{write_temp('dead_letter.jsonl')}",
        f"{TEMP_PREFIX}{uuid_hex}/dead_letter/{temp_name(9_999_999, 1 << 40, uuid_hex)}",
        f"processed/{write_temp(uuid_hex + '.json')}",
        write_temp("_convnorm_manifest.json"),
    ]
    assert max(len(os.fsencode(path)) for path in longest) <= DERIVED_PATH_BYTES


# --------------------------------------------------------------------------------------------
# Durations


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("--window", "1e30", "--window '1e30': at most 7 days"),
        ("--window", "inf", "--window 'inf': at most 7 days"),
        ("--window", "0.5", "--window '0.5': at least 1 s"),
        ("--stop-after", "1e30s", "--stop-after '1e30s': at most 7 days"),
        ("--poll-interval", "0", "--poll-interval '0': a duration must be more than 0"),
    ],
)
def test_a_streaming_duration_out_of_range_is_refused_before_the_marker_is_written(
    tmp_path, capsys, flag, value, message
):
    # Found: --window 1e30 passed the check, wrote the streaming marker, then failed with a
    # traceback; the marker left behind refused every batch run into the directory after.
    out = tmp_path / "out"
    argv = ["--streaming", "--runner=PrismRunner", "--input", str(tmp_path / "*.jsonl"), "--output", str(out)]
    _refused(capsys, [*argv, flag, value], message)
    assert not out.exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["--drain-timeout", "-5s"],
        ["--drain-timeout=-5s"],
        ["--window", "-1m"],
        ["--stop-after", "-.5h"],
        ["--job-endpoint-timeout", "-5s"],
    ],
    ids=lambda argv: " ".join(argv),
)
def test_a_negative_duration_says_durations_cannot_be_negative(tmp_path, capsys, argv):
    # Found: argparse took "-5s" for a flag and said "expected one argument".
    out = tmp_path / "out"
    base = ["--streaming", "--runner=PrismRunner", "--input", str(tmp_path / "*.jsonl"), "--output", str(out)]
    _refused(capsys, [*base, *argv], argv[0].split("=")[0], "cannot be negative")
    assert not out.exists()


def test_a_negative_duration_in_a_preset_says_so_too(tmp_path, capsys):
    preset = tmp_path / "p.yaml"
    preset.write_text("streaming: true\nrunner: PrismRunner\ndrain_timeout: -5s\n")
    argv = ["--config", str(preset), "--input", str(tmp_path / "*.jsonl"), "--output", str(tmp_path / "out")]
    _refused(capsys, argv, "--drain-timeout '-5s'", "cannot be negative")
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------------------------
# Streaming flags in a batch run


@pytest.mark.parametrize(
    "argv",
    [
        ["--window", "5m"],
        ["--poll-interval=1s"],
        ["--new-only"],
        ["--max-files-per-poll", "5"],
        ["--drain-timeout", "1m"],
        ["--changed-files", "report"],
        ["--stop-after", "10m"],
        ["--stop-file", "stop"],
    ],
    ids=lambda argv: argv[0].split("=")[0],
)
def test_a_streaming_flag_in_a_batch_run_is_refused_naming_it(tmp_path, capsys, argv):
    # Found: accepted and ignored: a batch run with --stop-after 10m ran to its end.
    out = tmp_path / "out"
    flag = argv[0].split("=")[0]
    _refused(capsys, ["--input", _input(tmp_path), "--output", str(out), *argv], flag, "--streaming")
    assert not out.exists()
    _refused(capsys, ["validate", "--input", _input(tmp_path), *argv], flag)


def test_a_streaming_key_in_a_batch_preset_is_refused_naming_the_preset(tmp_path, capsys):
    preset = tmp_path / "p.yaml"
    preset.write_text("window: 5m\n")
    argv = ["--config", str(preset), "--input", _input(tmp_path), "--output", str(tmp_path / "out")]
    _refused(capsys, argv, "--window", str(preset), "--streaming")
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------------------------
# --config that is not a regular file


def test_a_config_fifo_is_refused_not_waited_on(tmp_path):
    # Found: reading the preset waited for a writer, for ever.
    fifo = tmp_path / "preset.yaml"
    os.mkfifo(fifo)
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "--config", str(fifo), "--input", _input(tmp_path), "--output", str(out)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2, done.stderr
    assert "is a FIFO" in done.stderr and "regular file" in done.stderr
    assert not out.exists()


@pytest.mark.parametrize("special, kind", [("/dev/null", "a device"), (".", "a directory")])
def test_a_config_device_or_directory_is_refused(tmp_path, capsys, special, kind):
    config = str(tmp_path) if special == "." else special
    argv = ["--config", config, "--input", _input(tmp_path), "--output", str(tmp_path / "out")]
    _refused(capsys, argv, f"is {kind}", "regular file")
    assert not (tmp_path / "out").exists()
