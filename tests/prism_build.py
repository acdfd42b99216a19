"""The Prism binary for tests: ``.ci/build-prism`` builds it once into build/prism/ (or finds
it there). Without Go the Prism tests are skipped, saying why; any other build failure fails
them. ``$CONVNORM_PRISM`` names a binary to use instead."""

from __future__ import annotations

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
    proc = subprocess.run(
        [str(ROOT / ".ci" / "build-prism")], capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, cwd=ROOT
    )
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
