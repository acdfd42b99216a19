"""Batch mode on Prism, Beam's local runner: same bytes as the in-process FnApiRunner, and
nothing listening beyond loopback (Prism's job port, the SDK worker pool)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from apache_beam.options.pipeline_options import PipelineOptions, PortableOptions

sys.path.insert(0, str(Path(__file__).resolve().parent))
from prism_build import BUILD_TIMEOUT_S, ROOT, prism_binary  # noqa: E402

from pipeline.main import main  # noqa: E402
from pipeline.prism import prism_services  # noqa: E402
from pipeline.testhooks import PAUSE_AT, PAUSE_FILE, PAUSE_SECONDS_ENV  # noqa: E402
from transforms import conversations  # noqa: E402

#: The first test to ask for Prism may build it (tests/prism_build.py) before its run.
pytestmark = pytest.mark.timeout(BUILD_TIMEOUT_S + 600)

JOB_TIMEOUT_S = 300
SAMPLES = [ROOT / "samples" / "conversations.jsonl", *sorted((ROOT / "samples" / "formats").glob("*.jsonl"))]


def _run(output: Path, *extra: str) -> subprocess.CompletedProcess:
    inputs = [f"--input={path}" for path in SAMPLES]
    return subprocess.run(
        [sys.executable, "-m", "pipeline", *inputs, f"--output={output}", *extra],
        capture_output=True,
        text=True,
        timeout=JOB_TIMEOUT_S,
        cwd=ROOT,
    )


#: Not outputs of the data: the manifest records the options (the runner among them) and the
#: report says when the run was made. The manifest's list of files is compared on its own.
RUN_RECORDS = {"_convnorm_manifest.json", "report.html"}


def _files(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and p.name not in RUN_RECORDS
    }


@pytest.mark.slow
def test_batch_on_prism_writes_the_same_bytes_as_fnapirunner(tmp_path):
    binary = prism_binary()
    reference = _run(tmp_path / "fnapi")
    assert reference.returncode == 0, reference.stderr
    on_prism = _run(tmp_path / "prism", "--runner=PrismRunner", f"--prism_location={binary}")
    assert on_prism.returncode == 0, on_prism.stderr
    expected, got = _files(tmp_path / "fnapi"), _files(tmp_path / "prism")
    assert sum(name.startswith("normalized/") for name in expected) == len(SAMPLES)  # one file per input
    assert sorted(got) == sorted(expected)
    for name in expected:
        assert got[name] == expected[name], f"{name} differs between FnApiRunner and Prism"
    manifests = [json.loads((tmp_path / run / "_convnorm_manifest.json").read_text()) for run in ("fnapi", "prism")]
    listed = [[e for e in m["files"] if e["path"] not in RUN_RECORDS] for m in manifests]  # the page's entry too
    assert listed[0] == listed[1]


def _listening(port: int) -> list[str]:
    """Local addresses (hex, as /proc/net/tcp* shows them) listening on ``port``."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            address, hex_port = fields[1].split(":")
            if int(hex_port, 16) == port and fields[3] == "0A":  # 0A: LISTEN
                found.append(address)
    return found


LOOPBACK = {
    "0100007F",  # 127.0.0.1
    "00000000000000000000000001000000",  # ::1
    "0000000000000000FFFF00000100007F",  # ::ffff:127.0.0.1
}


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux's /proc/net/tcp")
@pytest.mark.slow  # builds Prism (minutes) when none is built: never in the fast tier
def test_prism_and_its_worker_pool_listen_on_loopback_only():
    options = PipelineOptions(["--runner=PrismRunner", f"--prism_location={prism_binary()}"])
    with prism_services(options):
        portable = options.view_as(PortableOptions)
        assert portable.environment_type == "EXTERNAL"
        ports = {
            "prism": int(portable.job_endpoint.rsplit(":", 1)[1]),
            "worker pool": int(portable.environment_config.rsplit(":", 1)[1]),
        }
        for name, port in ports.items():
            addresses = _listening(port)
            assert addresses, f"{name} is not listening on {port}"
            assert set(addresses) <= LOOPBACK, f"{name} listens beyond loopback: {addresses}"


def test_prism_without_a_binary_is_a_clear_error(tmp_path, capsys):
    status = main(
        [
            f"--input={SAMPLES[0]}",
            f"--output={tmp_path / 'out'}",
            "--runner=PrismRunner",
            f"--prism_location={tmp_path / 'no-such-prism'}",
        ]
    )
    assert status == 2
    assert "does not exist or is not executable" in capsys.readouterr().err


#: Beam's deadline for its calls to the job service, lowered so that a short run outlasts it.
SHORT_JOB_SERVER_TIMEOUT_S = 5


@pytest.mark.slow
def test_a_batch_run_on_prism_outlasts_the_job_server_timeout(tmp_path):
    """Found: a batch run on Prism ended at Beam's --job_server_timeout (300 s) in
    DEADLINE_EXCEEDED, because Beam waits by reading a state stream opened with that deadline.
    Here the deadline is 5 s and the reading step pauses longer than that (pipeline.testhooks)."""
    out = tmp_path / "out"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipeline",
            f"--input={SAMPLES[0]}",
            f"--output={out}",
            "--runner=PrismRunner",
            f"--prism_location={prism_binary()}",
            f"--job_server_timeout={SHORT_JOB_SERVER_TIMEOUT_S}",
            "--progress=off",
        ],
        capture_output=True,
        text=True,
        timeout=JOB_TIMEOUT_S,
        cwd=ROOT,
        env=dict(
            os.environ,
            **{
                PAUSE_AT: "read",
                PAUSE_FILE: str(tmp_path / "paused"),
                PAUSE_SECONDS_ENV: str(SHORT_JOB_SERVER_TIMEOUT_S + 3),
            },
        ),
    )
    assert (tmp_path / "paused").exists()  # the job did pause past the deadline
    failure = [line for line in done.stderr.splitlines() if "the pipeline failed" in line]
    assert "DEADLINE_EXCEEDED" not in done.stderr, failure
    assert done.returncode == 0, done.stderr[-3000:]
    assert (out / "_SUCCESS").exists()  # every file on disk as reported, every record accounted for
    summary = json.loads((out / "summary.json").read_text())
    normalized = [line for path in sorted((out / "normalized").glob("*.jsonl")) for line in path.open()]
    assert summary["accounted"] and summary["records_in"] == 307  # the whole sample
    assert len(normalized) == summary["records_out"] > 0


@pytest.mark.slow
def test_a_failed_batch_job_on_prism_is_reported_in_one_line_with_its_error(tmp_path, monkeypatch, capsys):
    """The job service's error for the failed job is the line logged (Prism sends it after the
    job's final state); the worker threads run in this process, so the crash patched in here
    is the one they meet."""

    def crash(*args, **kwargs):
        raise RuntimeError("a crash on purpose")

    monkeypatch.setattr(conversations, "normalize_batch", crash)  # outside the per-record guard
    out = tmp_path / "out"
    status = main(
        [
            f"--input={SAMPLES[0]}",
            f"--output={out}",
            "--runner=PrismRunner",
            f"--prism_location={prism_binary()}",
            "--progress=off",
        ]
    )
    assert status == 1
    err = capsys.readouterr().err
    failed = [line for line in err.splitlines() if line.startswith("ERROR convnorm: the pipeline failed")]
    assert len(failed) == 1 and "failed: " in failed[0] and "a crash on purpose" in failed[0], err[-3000:]
    assert "convnorm: error: the run pipeline failed (the error is logged above)" in err
    assert not out.exists()
