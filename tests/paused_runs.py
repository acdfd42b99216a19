"""Runs of ``python -m pipeline`` as subprocesses paused at a chosen point (``pipeline.testhooks``):
a test then kills one (``kill``), or changes its output directory and lets it go on (``resume``).
Deterministic: no sleeps guessing at timing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline import testhooks

ROOT = Path(__file__).resolve().parent.parent
#: Limit for a subprocess run (healthy: a few seconds) and for reaching a pause point.
RUN_TIMEOUT_S = 240


def env(**extra: str) -> dict[str, str]:
    variables = dict(os.environ)
    variables["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *(p for p in variables.get("PYTHONPATH", "").split(os.pathsep) if p)]
    )
    variables.update(extra)
    return variables


def start_paused(argv: list, point: str, work: Path, prefix: list[str] = ()) -> tuple[subprocess.Popen, Path]:
    """``[PREFIX] python -m pipeline ARGV`` in its own process group, paused at ``point``; returns
    the process and its pause file (delete it to let the run go on)."""
    ready = work / f"paused-{point}-{time.monotonic_ns()}"
    log = (work / f"{ready.name}.log").open("wb")
    proc = subprocess.Popen(
        [*prefix, sys.executable, "-m", "pipeline", *map(str, argv)],
        cwd=work,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env=env(**{testhooks.PAUSE_AT: point, testhooks.PAUSE_FILE: str(ready)}),
    )
    proc.log_path = Path(log.name)  # type: ignore[attr-defined]
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            kill(proc)
            pytest.fail(f"the run never reached {point!r}:\n{Path(log.name).read_text()[-3000:]}")
        time.sleep(0.05)
    return proc, ready


def resume(proc: subprocess.Popen, ready: Path) -> tuple[int, str]:
    """Let a paused run go on to its end: (exit status, what it printed)."""
    ready.unlink()
    try:
        status = proc.wait(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        kill(proc)
        raise
    return status, proc.log_path.read_text(errors="replace")  # type: ignore[attr-defined]


def kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid
