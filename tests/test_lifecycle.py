"""A run's life around its outputs (docs/outputs.md): stopped by SIGTERM, a finalize that fails
on a full or unwritable disk, a hand-edited lock, `convnorm report` and `explain` while a run is
finalizing, a drops/ line naming a file the run never read. Each case once broke a run or said
something untrue; docs/outputs.md lists them.

The runs use a three-line input (one conversation kept, one that drops a message, one line that
is not JSON), so every output has a file and a run takes a fraction of a second.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import paused_runs
import pytest
from prism_build import prism_binary

from pipeline.interrupts import interrupted_line
from pipeline.lock import LOCK_FILE
from pipeline.main import main
from pipeline.outputs import SUCCESS_FILE, TEMP_PREFIX

LINES = (
    b'{"id":"a","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]}\n'
    b'{"id":"b","messages":[{"role":"tool","content":"orphan","tool_call_id":"t"},{"role":"user","content":"x"}]}\n'
    b"not json\n"
)


@pytest.fixture
def small(tmp_path) -> Path:
    path = tmp_path / "in.jsonl"
    path.write_bytes(LINES)
    return path


def _run(*argv) -> int:
    return main([str(a) for a in argv])


def _tree(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def _said(printed: str) -> list[str]:
    """convnorm's own lines of a run's output (not the plan's INFO lines)."""
    return [line for line in printed.splitlines() if line.startswith("convnorm:") and "warning" not in line]


def _no_leftovers(out: Path) -> bool:
    return not os.path.lexists(out / LOCK_FILE) and not list(out.glob(TEMP_PREFIX + "*"))


# --------------------------------------------------------------------------------------------
# SIGTERM (timeout, systemd, Kubernetes) stops a run as Ctrl-C does


@pytest.mark.slow
def test_sigterm_mid_pipeline_leaves_the_output_as_it_was_and_the_same_command_runs_again(small, tmp_path):
    # Found: SIGTERM killed the run outright, its lock and temporary directory stayed, and the
    # same command then failed (a stale lock) until --break-stale-lock.
    out = tmp_path / "out"
    argv = ["--input", small, "--output", out, "--no-report", "--overwrite"]
    assert _run(*argv) == 0
    before = _tree(out)
    proc, ready = paused_runs.start_paused(argv, "read", tmp_path)
    try:
        os.kill(proc.pid, signal.SIGTERM)  # to the process alone, as Kubernetes sends it
        status = proc.wait(timeout=paused_runs.RUN_TIMEOUT_S)
    finally:
        paused_runs.kill(proc)
    printed = proc.log_path.read_text()
    assert status == 143, printed[-3000:]
    assert _said(printed) == [interrupted_line("the run pipeline", str(out), signum=signal.SIGTERM)], printed
    assert "Traceback" not in printed
    assert _tree(out) == before and _no_leftovers(out)
    assert _run(*argv) == 0  # no --break-stale-lock needed


@pytest.mark.slow
def test_sigterm_while_the_outputs_move_into_place_finishes_them_first(small, tmp_path):
    out = tmp_path / "out"
    argv = ["--input", small, "--output", out, "--no-report", "--overwrite"]
    assert _run(*argv) == 0
    reference = _tree(out)
    proc, ready = paused_runs.start_paused(argv, "finalize", tmp_path)
    try:
        os.kill(proc.pid, signal.SIGTERM)
        status, printed = paused_runs.resume(proc, ready)
    finally:
        paused_runs.kill(proc)
    assert status == 143, printed[-3000:]
    line = interrupted_line("the run pipeline", str(out), written=True, signum=signal.SIGTERM)
    assert _said(printed) == [line], printed
    assert _tree(out) == reference and (out / SUCCESS_FILE).exists() and _no_leftovers(out)
    assert _run(*argv) == 0


def _wait_for(proc, text: str) -> str:
    """What the paused run printed, once it holds ``text`` (it waits in a stop marker's drain)."""
    deadline = time.monotonic() + paused_runs.RUN_TIMEOUT_S
    while text not in (printed := proc.log_path.read_text(errors="replace")):
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"never printed {text!r}:\n{printed[-3000:]}")
        time.sleep(0.05)
    return printed


@pytest.mark.slow
def test_a_second_sigterm_aborts_a_draining_streaming_run_cleanly(tmp_path):
    # Found: the first SIGTERM drains, but a second one killed the run outright (the default
    # action), leaving its lock and temporary directory.
    landing, out = tmp_path / "landing", tmp_path / "out"
    landing.mkdir()
    (landing / "a.jsonl").write_bytes(LINES)
    argv = [
        "--streaming",
        "--runner=PrismRunner",
        f"--prism_location={prism_binary()}",
        f"--input={landing}/*.jsonl",
        f"--output={out}",
        "--no-report",
    ]
    proc, ready = paused_runs.start_paused(argv, "streaming-commit", tmp_path)
    try:
        os.kill(proc.pid, signal.SIGTERM)
        _wait_for(proc, "SIGTERM: draining")  # the commit is paused: the drain waits for it
        os.kill(proc.pid, signal.SIGTERM)
        status = proc.wait(timeout=paused_runs.RUN_TIMEOUT_S)
    finally:
        ready.unlink(missing_ok=True)
        paused_runs.kill(proc)
    printed = proc.log_path.read_text(errors="replace")
    assert status == 143, printed[-3000:]
    line = interrupted_line("the streaming run", str(out), streaming=True, signum=signal.SIGTERM)
    assert printed.strip().splitlines()[-1] == line, printed[-3000:]
    assert "Traceback" not in printed and _no_leftovers(out)
    # The same command again (told to stop soon): nothing of the aborted run is in its way.
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", *argv, "--stop-after=1s"],
        cwd=tmp_path,
        env=paused_runs.env(),
        capture_output=True,
        text=True,
        timeout=paused_runs.RUN_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "took over" not in done.stderr and "taking over" not in done.stderr and _no_leftovers(out)
