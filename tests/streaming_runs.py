"""Helpers for the end-to-end streaming tests: a ``convnorm --streaming`` subprocess on Prism,
the landing convention, and reading a streaming output directory back.

Only the command line and the files on disk are used (no import of the streaming modules), so
the same tests run against any version of convnorm.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from prism_build import ROOT, prism_binary

SAMPLE = ROOT / "samples" / "conversations.jsonl"
START_TIMEOUT_S = 90
DRAIN_TIMEOUT_S = 90


def sample_lines() -> list[bytes]:
    """The bundled sample's lines (307 records: drops, heals, discarded fields, dead letters,
    one blank line)."""
    return SAMPLE.read_bytes().splitlines(keepends=True)


def land(landing: Path, name: str | bytes, data: bytes) -> float:
    """The landing convention: write under a dot-name, rename into place; returns the time."""
    raw = os.fsencode(landing)
    final = os.path.join(raw, os.fsencode(name))
    temp = os.path.join(raw, b".landing-" + os.urandom(4).hex().encode())
    with open(temp, "wb") as handle:
        handle.write(data)
    os.rename(temp, final)
    return time.monotonic()


class Streaming:
    """One ``convnorm --streaming`` run as a subprocess, its output in a log file."""

    def __init__(self, work: Path, landing: Path, out: Path, name: str, *extra: str, env: dict | None = None) -> None:
        self.log = work / f"{name}.log"
        self.work = work
        argv = [
            sys.executable,
            "-m",
            "pipeline",
            "--streaming",
            "--runner=PrismRunner",
            f"--prism_location={prism_binary()}",
            f"--input={landing}/*.jsonl",
            f"--input={landing}/*.jsonl.gz",
            f"--output={out}",
            "--window=4s",
            "--poll-interval=0.3s",
            *extra,
        ]
        environment = dict(os.environ)
        environment["PYTHONPATH"] = os.pathsep.join([str(ROOT), environment.get("PYTHONPATH", "")])
        environment.update(env or {})
        with self.log.open("wb") as handle:
            self.proc = subprocess.Popen(
                argv, stdout=handle, stderr=subprocess.STDOUT, cwd=work, env=environment, start_new_session=True
            )
        self.started = time.monotonic()

    @property
    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, predicate, timeout: float, what: str) -> float:
        start = time.monotonic()
        while not predicate():
            if self.proc.poll() is not None:
                raise AssertionError(f"convnorm exited ({self.proc.returncode}) waiting for {what}:\n{self.text}")
            if time.monotonic() - start > timeout:
                self.kill()
                raise AssertionError(f"no {what} within {timeout} s:\n{self.text}")
            time.sleep(0.1)
        return time.monotonic()

    def wait_started(self) -> None:
        self.wait_for(lambda: "watching" in self.text, START_TIMEOUT_S, "start")

    def finish(self, timeout: float = DRAIN_TIMEOUT_S) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"convnorm did not finish within {timeout} s:\n{self.text}") from None

    def stop(self, timeout: float = DRAIN_TIMEOUT_S) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.finish(timeout)

    def kill(self) -> None:
        """SIGKILL convnorm alone (Prism goes with it: it is told to when its parent dies)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> "Streaming":
        return self

    def __exit__(self, *exc) -> None:
        self.kill()


def sources(out: Path) -> dict[str, list[tuple[Path, dict]]]:
    """Landed path -> [(outputs directory, source.json)] of every file processed into ``out``."""
    found: dict[str, list[tuple[Path, dict]]] = {}
    for path in sorted(out.glob("*T*Z-*T*Z/*/source.json")):  # window directories only
        doc = json.loads(path.read_text())
        found.setdefault(doc["source"], []).append((path.parent, doc))
    for versions in found.values():
        versions.sort(key=lambda item: item[1].get("version", 1))
    return found


def outputs_of(out: Path, landed: Path | str) -> list[Path]:
    return [directory for directory, _ in sources(out).get(str(landed), [])]


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


COUNTED = (
    "records_in",
    "records_out",
    "dead_letters",
    "blank_lines",
    "messages_in",
    "messages_out",
    "dropped",
    "healed",
    "conversations_with_drops",
    "discarded_fields",
)


def sum_of_windows(out: Path) -> dict:
    total = dict.fromkeys(COUNTED, 0)
    for path in out.glob("*/summary.json"):
        doc = json.loads(path.read_text())
        assert doc["accounted"], path
        for key in COUNTED:
            total[key] += doc.get(key, 0)
    return total


def no_leftovers(out: Path) -> list[str]:
    """Temporary files or directories left in ``out`` (dot-names, a run's temporary directory)."""
    return sorted(
        str(p.relative_to(out)) for p in out.rglob("*") if p.name.startswith(".") or "_convnorm_temp-" in p.name
    )
