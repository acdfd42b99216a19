"""The Prism binary for tests: ``.ci/build-prism`` builds it once into build/prism/ (or finds
it there). Without Go the Prism tests are skipped, saying why; any other build failure fails
them. ``$CONVNORM_PRISM`` names a binary to use instead."""

from __future__ import annotations

import fcntl
import functools
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The first build compiles Prism and its dependencies: minutes on a loaded machine.
BUILD_TIMEOUT_S = 900
#: ``.ci/build-prism``'s exit status when Go is not installed.
NO_GO = 3


@functools.lru_cache(maxsize=1)
def _build() -> tuple[int, str]:
    return run_locked([str(ROOT / ".ci" / "build-prism")], ROOT / "build" / "prism.lock")


def run_locked(command: list[str], lock: Path) -> tuple[int, str]:
    """``command`` run while this process holds ``lock`` (exit status, stdout or stderr). The
    xdist workers each build when they first need Prism: one at a time, the second finds the
    binary built, where two at once deleted each other's sources mid-build."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released when the file closes
        proc = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, cwd=ROOT)
    return proc.returncode, (proc.stdout.strip() if proc.returncode == 0 else proc.stderr)


def prism_binary() -> str:
    """The path of a Prism binary; skips the calling test when Go is absent."""
    given = os.environ.get("CONVNORM_PRISM")
    if given:
        return given
    status, out = _build()
    if status == NO_GO:
        pytest.skip(f"Prism cannot be built here: {out.strip()}")
    if status != 0:
        pytest.fail(f".ci/build-prism failed (exit {status}):\n{out}")
    return out.splitlines()[-1]
