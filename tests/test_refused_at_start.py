"""Options that failed late are refused at the start: exit status 2, one line, nothing written.

Each case once got past the checks: --config naming a FIFO (a run that never started).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.main import main

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
