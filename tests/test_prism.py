"""Batch mode on Prism, Beam's local runner: same bytes as the in-process FnApiRunner, and
nothing listening beyond loopback (Prism's job port, the SDK worker pool)."""

from __future__ import annotations

import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from apache_beam.options.pipeline_options import PipelineOptions, PortableOptions

sys.path.insert(0, str(Path(__file__).resolve().parent))
from intruder import DENIED, PROBE, intruder_problem, probe_as, run_as_intruder  # noqa: E402
from paused_runs import kill, resume, start_paused  # noqa: E402
from prism_build import BUILD_TIMEOUT_S, ROOT, prism_binary, run_locked  # noqa: E402

from pipeline.cli.main import main  # noqa: E402
from pipeline.graph import shard_step  # noqa: E402
from pipeline.runners import private_network  # noqa: E402
from pipeline.runners.prism import PrismError, prism_services  # noqa: E402
from pipeline.testhooks import PAUSE_AT, PAUSE_FILE, PAUSE_SECONDS_ENV  # noqa: E402

#: The first test to ask for Prism may build it (tests/prism_build.py) before its run.
pytestmark = pytest.mark.timeout(BUILD_TIMEOUT_S + 600)

JOB_TIMEOUT_S = 300
SAMPLES = [ROOT / "samples" / "conversations.jsonl", *sorted((ROOT / "samples" / "formats").glob("*.jsonl"))]


def _run(output: Path, *extra: str) -> subprocess.CompletedProcess:
    inputs = [f"--input={path}" for path in SAMPLES]
    return subprocess.run(
        # One part file per input (--part-bytes 0): the bytes of each input's own part compared.
        [sys.executable, "-m", "pipeline", *inputs, f"--output={output}", "--part-bytes=0", *extra],
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


def test_two_workers_asking_for_prism_build_it_one_after_the_other(tmp_path):
    # Found: on a fresh clone the two xdist workers could both start .ci/build-prism, each
    # deleting the sources the other was building from. A build that finds another one under
    # way fails here; the lock makes the second wait for the first.
    build = "mkdir {d}/building || exit 7; sleep 0.3; rmdir {d}/building".format(d=tmp_path)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        runs = [pool.submit(run_locked, ["sh", "-c", build], tmp_path / "lock") for _ in range(2)]
        assert [run.result()[0] for run in runs] == [0, 0]


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


@pytest.mark.slow
def test_a_deduplicated_split_dataset_on_prism_is_fnapirunners(tmp_path):
    """--dedupe and --split (shuffles after the normalizing step) on Prism: FnApiRunner's files."""
    chats = ROOT / "samples" / "training" / "chats.jsonl"  # conversations that repeat others
    shaped = (f"--input={chats}", "--sink=hf", "--dedupe=prefix", "--split=eval=0.25", "--no-report")
    reference = _run(tmp_path / "fnapi", *shaped)
    assert reference.returncode == 0, reference.stderr
    on_prism = _run(tmp_path / "prism", *shaped, "--runner=PrismRunner", f"--prism_location={prism_binary()}")
    assert on_prism.returncode == 0, on_prism.stderr
    expected, got = _files(tmp_path / "fnapi"), _files(tmp_path / "prism")
    assert any(name.startswith("eval/") for name in expected) and "README.md" in expected
    assert json.loads(expected["summary.json"])["dedupe"]["duplicates_collapsed"] == 2
    assert got == expected


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
    # In this test's own process (it cannot enter a namespace): on the host's loopback.
    options = PipelineOptions(["--runner=PrismRunner", f"--prism_location={prism_binary()}", "--host-loopback"])
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
            "--host-loopback",  # in this test's own process, which cannot enter a namespace
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

    monkeypatch.setattr(shard_step, "normalize_batch", crash)  # outside the per-record guard
    out = tmp_path / "out"
    status = main(
        [
            f"--input={SAMPLES[0]}",
            f"--output={out}",
            "--runner=PrismRunner",
            f"--prism_location={prism_binary()}",
            "--progress=off",
            "--host-loopback",  # in this test's own process, which cannot enter a namespace
        ]
    )
    assert status == 1
    err = capsys.readouterr().err
    failed = [line for line in err.splitlines() if line.startswith("ERROR convnorm: the pipeline failed")]
    assert len(failed) == 1 and "failed: " in failed[0] and "a crash on purpose" in failed[0], err[-3000:]
    assert "convnorm: error: the run pipeline failed (the error is logged above)" in err
    assert not out.exists()


GET_JOBS = "/org.apache.beam.model.job_management.v1.JobService/GetJobs"


@pytest.mark.slow
def test_another_user_on_the_host_cannot_reach_the_prism_a_run_starts(tmp_path):
    # Found: while a run was up, any local user could submit a job to Prism's port (a PROCESS
    # environment is a command Prism runs as convnorm's user). The run now keeps Prism in a
    # network namespace of its own.
    problem = intruder_problem() or (None if shutil.which("nsenter") else "needs nsenter (util-linux)")
    if problem:
        pytest.skip(problem)
    argv = [f"--input={SAMPLES[0]}", f"--output={tmp_path / 'out'}", "--runner=PrismRunner"]
    proc, ready = start_paused([*argv, f"--prism_location={prism_binary()}"], "write", tmp_path)
    try:
        log = proc.log_path.read_text()  # type: ignore[attr-defined]
        found = re.search(r"listening on [^ ]*?:(\d+).* inside this run's private network namespace", log)
        assert found, log[-3000:]
        endpoint = f"127.0.0.1:{found.group(1)}"
        theirs = probe_as(run_as_intruder, endpoint)
        # From inside the run's namespace, the same call is answered: Prism is there.
        inside = subprocess.run(
            ["nsenter", f"--net=/proc/{proc.pid}/ns/net", sys.executable, "-c", PROBE, endpoint],
            capture_output=True,
            text=True,
            timeout=120,
        )
        status, printed = resume(proc, ready)
    finally:
        kill(proc)
    assert json.loads(inside.stdout.strip().splitlines()[-1])[GET_JOBS] == "OK", inside.stderr[-3000:]
    assert theirs[GET_JOBS] == "UNAVAILABLE", theirs  # nothing listens there, for anyone outside
    assert set(theirs.values()) <= DENIED, theirs
    assert status == 0, printed[-3000:]


FAKE_PRISM = """#!{python}
# A Prism stand-in that, like upstream's build, listens on every interface.
import socket, sys, time
port = int(sys.argv[sys.argv.index("--job_port") + 1])
server = socket.create_server(("0.0.0.0", port))
while True:
    time.sleep(1)
"""


def test_a_prism_that_listens_beyond_loopback_is_refused_outside_a_private_namespace(tmp_path):
    # Found: a Prism given by --prism_location that bound every interface was used, and the log
    # said "serving on 127.0.0.1". What it binds is now read from /proc after it starts.
    if not os.path.exists("/proc/self/net/tcp"):
        pytest.skip("reads /proc (Linux)")
    fake = tmp_path / "prism"
    fake.write_text(FAKE_PRISM.format(python=sys.executable))
    fake.chmod(0o755)
    options = PipelineOptions(["--runner=PrismRunner", f"--prism_location={fake}", "--host-loopback"])
    with pytest.raises(PrismError, match=r"listens beyond loopback, on 0\.0\.0\.0:\d+"):
        with prism_services(options):
            pass


def test_a_prism_run_outside_a_private_namespace_needs_host_loopback(tmp_path):
    fake = tmp_path / "prism"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    options = PipelineOptions(["--runner=PrismRunner", f"--prism_location={fake}"])
    with pytest.raises(PrismError, match="every local user can send it work"):
        with prism_services(options):
            pass


def test_a_prism_run_is_refused_where_no_private_namespace_can_be_made(monkeypatch):
    def refuse() -> None:
        raise private_network.PrivateNetworkError("unshare(2) refused: Operation not permitted")

    monkeypatch.setattr(private_network, "enter", refuse)
    argv = ["--input=x.jsonl", "--output=out", "--runner=PrismRunner"]
    refused = private_network.isolate_prism_run(argv)
    assert refused and "cannot be made here: unshare(2) refused" in refused and "--host-loopback" in refused
    assert private_network.isolate_prism_run([*argv, "--host-loopback"]) is None  # the user's opt-in
    assert private_network.isolate_prism_run(["--input=x.jsonl", "--output=out"]) is None  # no Prism
    assert private_network.isolate_prism_run([*argv, "--job_endpoint=localhost:8099"]) is None  # not ours


def test_a_prism_run_on_remote_paths_is_refused_before_it_enters_a_namespace_without_network(monkeypatch):
    # The namespace has no network: a gs:// or s3:// path would fail as a read error deep in the run.
    def enter() -> None:
        raise AssertionError("entered a namespace a remote path cannot be reached from")

    monkeypatch.setattr(private_network, "enter", enter)
    for argv in (
        ["--input=gs://logs/a.jsonl", "--output=out", "--runner=PrismRunner"],
        ["--input=a.jsonl", "--output=s3://bucket/out", "--runner=PrismRunner"],
    ):
        refused = private_network.isolate_prism_run(argv)
        assert refused and "local paths only" in refused and "://" in refused, refused


def test_the_cli_enters_the_private_namespace_before_beam_is_imported(tmp_path):
    # In a fresh process, as the command runs: one thread, then a namespace of its own.
    code = (
        "import os, sys\n"
        "from pipeline.runners import private_network\n"
        "before = os.readlink('/proc/self/ns/net')\n"
        "assert private_network.isolate_prism_run(sys.argv[1:]) is None\n"
        "print(before != os.readlink('/proc/self/ns/net'), 'apache_beam' in sys.modules)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, "--input=x.jsonl", f"--output={tmp_path}/o", "--runner=PrismRunner"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    if "cannot be made here" in proc.stderr or proc.returncode:
        pytest.skip(f"no private network namespace here: {proc.stderr[-500:]}")
    assert proc.stdout.split() == ["True", "False"], proc.stderr
