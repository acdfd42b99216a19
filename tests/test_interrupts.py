"""Ctrl-C as a terminal sends it (SIGINT to the whole process group): one line, exit 130, no
traceback, and the output directory as it was, in-process, with two worker processes, and
for validate. The run is paused inside its reading DoFn (pipeline.testhooks) when the signal
comes, so it is stopped mid-pipeline every time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from prism_build import prism_binary  # noqa: E402

from pipeline.execution.interrupts import InterruptedAfterWrite, interrupted_line, shielded  # noqa: E402
from pipeline.testhooks import PAUSE_AT, PAUSE_FILE  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "conversations.jsonl"


def _interrupt(argv: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    paused = tmp_path / "paused"
    env = dict(os.environ, **{PAUSE_AT: "read", PAUSE_FILE: str(paused)})
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipeline", *argv],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    deadline = time.monotonic() + 120
    while not paused.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"the run never reached its reading step: {proc.communicate()[1][-3000:]}")
        time.sleep(0.1)
    time.sleep(0.3)
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C does: every process of the group
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _listing(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.mark.slow
@pytest.mark.parametrize(
    "command, flags, what",
    [
        ([], [], "the run pipeline"),
        ([], ["--direct_num_workers=2", "--direct_running_mode=multi_processing"], "the run pipeline"),
        (["validate"], [], "the validate pipeline"),
        ([], ["--runner=PrismRunner"], "the run pipeline"),
    ],
    ids=["in-process", "two-workers", "validate", "prism"],
)
def test_ctrl_c_stops_with_one_line_and_leaves_the_output_as_it_was(command, flags, what, tmp_path):
    if "--runner=PrismRunner" in flags:  # waited for through its job service (pipeline.runners.job_service)
        flags = [*flags, f"--prism_location={prism_binary()}"]
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")  # the user's file, beside where convnorm would write
    before = _listing(out)
    done = _interrupt([*command, "--input", str(SAMPLE), "--output", str(out), "--progress", "log", *flags], tmp_path)
    assert done.returncode == 130, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if not line.startswith("INFO convnorm: ")]  # the plan
    assert lines == [interrupted_line(what, str(out))], done.stderr[-3000:]
    assert "Traceback" not in done.stderr + done.stdout
    assert _listing(out) == before  # no temporary directory, no lock, no part file left


def test_the_step_that_moves_outputs_into_place_finishes_before_ctrl_c_counts():
    # The handler the block found (Python's default; pytest-xdist's workers ignore SIGINT).
    before = signal.getsignal(signal.SIGINT)
    steps = []
    with pytest.raises(InterruptedAfterWrite):
        with shielded():
            os.kill(os.getpid(), signal.SIGINT)
            steps.append("after the signal")  # not interrupted
    assert steps == ["after the signal"]
    assert signal.getsignal(signal.SIGINT) is before  # restored


def test_the_line_says_what_stopped_and_where_the_output_stands():
    assert interrupted_line("the run pipeline", "out") == (
        "convnorm: interrupted (Ctrl-C): stopped the run pipeline; the output directory out is unchanged"
    )
    # Found: Ctrl-C while the finished run drew its report said "stopped the run pipeline",
    # which had finished: the outputs were whole, only the summary table was not printed.
    assert interrupted_line("the run pipeline", "out", written=True) == (
        "convnorm: interrupted (Ctrl-C) after the run pipeline finished: its outputs in out are complete "
        "(the summary is in their summary file, the table was not printed)"
    )
    assert "windows already closed" in interrupted_line("the streaming run", "out", streaming=True)
    assert interrupted_line("convnorm", None).endswith("nothing was written")


@pytest.mark.slow
@pytest.mark.parametrize("presses", [1, 2], ids=["drain", "abort"])
def test_ctrl_c_stops_a_streaming_run_with_one_line(presses, tmp_path):
    """Streaming: the first Ctrl-C drains (every file seen is finished, the last windows close),
    then exits 130 saying so; a second one aborts at once, with one line and no traceback."""
    prism = prism_binary()
    landing, out = tmp_path / "landing", tmp_path / "out"
    landing.mkdir()
    (landing / "a.jsonl").write_bytes(SAMPLE.read_bytes())
    argv = ["--streaming", "--runner", "PrismRunner", "--input", str(landing / "*.jsonl"), "--output", str(out)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipeline", *argv, "--window", "4s", "--no-report"],
        cwd=ROOT,
        env=dict(os.environ, CONVNORM_PRISM=prism),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    seen: list[str] = []

    def read_until(marker: str) -> None:
        deadline = time.monotonic() + 120
        for line in proc.stdout:
            seen.append(line)
            if marker in line or time.monotonic() > deadline:
                break
        assert any(marker in line for line in seen), "".join(seen)[-3000:]

    read_until("running total")  # the first window is written
    os.killpg(proc.pid, signal.SIGINT)
    if presses == 2:
        # Pressed again once the first press is handled, not after a while: two presses before
        # Python runs the handler are one signal to it (a loaded machine drained, not aborted).
        read_until(": draining")
        os.killpg(proc.pid, signal.SIGINT)
    try:
        rest, _ = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    text = "".join(seen) + rest
    assert proc.returncode == 130, text[-3000:]
    assert "Traceback" not in text and "Exception in thread" not in text, text[-3000:]
    last = text.strip().splitlines()[-1]
    if presses == 1:
        assert last == interrupted_line("the streaming run", str(out), drained=True)
        assert (out / "summary.json").exists()
    else:
        assert last == interrupted_line("the streaming run", str(out), streaming=True)


def test_sigterm_while_outputs_move_into_place_waits_too():
    # Found: shielded() held back Ctrl-C only; SIGTERM killed the run between two renames.
    before = signal.getsignal(signal.SIGTERM)
    steps = []
    with pytest.raises(InterruptedAfterWrite) as stopped:
        with shielded():
            os.kill(os.getpid(), signal.SIGTERM)
            steps.append("after the signal")
    assert steps == ["after the signal"] and stopped.value.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is before


def test_the_sigterm_line_names_the_signal():
    assert interrupted_line("the run pipeline", "out", signum=signal.SIGTERM) == (
        "convnorm: terminated (SIGTERM): stopped the run pipeline; the output directory out is unchanged"
    )
