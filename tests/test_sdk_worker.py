"""The worker processes of a local multi-process run start as ``python -m pipeline.runners.sdk_worker``:
Beam's worker without pandas' import (``pipeline.runners.sdk_worker``, docs/per-record-speed.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
from apache_beam.portability import python_urns
from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.runners.portability.fn_api_runner import FnApiRunner

from pipeline.config.options import parse_options
from pipeline.runners.lean_workers import FnApiRunnerLeanWorkers, pipeline_runner
from pipeline.runners.sdk_worker import BEAM_WORKER_MODULE, WORKER_MODULE, worker_command
from tests.listeners import process_tree
from tests.paused_runs import kill, start_paused

SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "conversations.jsonl"
TWO_WORKERS = ["--direct_num_workers=2", "--direct_running_mode=multi_processing"]


def _options(*flags: str):
    return parse_options(["--input", str(SAMPLE), "--output", "out", *flags])


@pytest.mark.parametrize(
    "flags, lean",
    [
        (TWO_WORKERS, True),
        (["--runner=FnApiRunner", *TWO_WORKERS], True),
        ([], False),  # in-process: no worker command
        (["--direct_num_workers=2", "--direct_running_mode=multi_threading"], False),
        (["--runner=DirectRunner", *TWO_WORKERS], False),  # Beam's choice of runner stands
    ],
)
def test_the_lean_runner_is_given_for_fnapi_worker_processes_only(flags, lean):
    runner = pipeline_runner(_options(*flags))
    assert isinstance(runner, FnApiRunnerLeanWorkers) if lean else runner is None


def test_the_runner_replaces_beams_worker_command_and_nothing_else(monkeypatch):
    seen = []
    monkeypatch.setattr(FnApiRunner, "run_via_runner_api", lambda self, proto, options: seen.append(proto))
    proto = beam_runner_api_pb2.Pipeline()
    envs = proto.components.environments
    envs["beam"].urn = python_urns.SUBPROCESS_SDK
    envs["beam"].payload = worker_command(BEAM_WORKER_MODULE).encode()
    envs["user"].urn = python_urns.SUBPROCESS_SDK
    envs["user"].payload = b"/opt/python -m my_worker"  # someone's own command is left alone
    envs["embedded"].urn = python_urns.EMBEDDED_PYTHON
    FnApiRunnerLeanWorkers().run_via_runner_api(proto, None)
    assert seen == [proto]
    assert envs["beam"].payload == worker_command(WORKER_MODULE).encode()
    assert envs["user"].payload == b"/opt/python -m my_worker"
    assert envs["embedded"].payload == b""


def _command_line(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


@pytest.mark.slow
def test_worker_processes_run_beams_worker_without_pandas(tmp_path):
    pytest.importorskip("pandas")  # what is saved is pandas' import: installed here by the test extra
    proc, ready = start_paused(["--input", SAMPLE, "--output", tmp_path / "out", *TWO_WORKERS], "write", tmp_path)
    try:
        workers = [
            pid
            for pid in process_tree([proc.pid])
            if _command_line(pid).split()[:1] != ["/bin/sh"] and "sdk_worker" in _command_line(pid)
        ]
        assert workers, [_command_line(pid) for pid in process_tree([proc.pid])]
        maps = [Path(f"/proc/{pid}/maps").read_text() for pid in workers]
        assert all(f"-m {WORKER_MODULE}" in _command_line(pid) for pid in workers)
        # The paused worker has imported Beam (its compiled modules are mapped); the other one
        # may still be starting.
        assert any("/apache_beam/" in found for found in maps)
        assert not any("/pandas/" in found for found in maps)
    finally:
        kill(proc)
