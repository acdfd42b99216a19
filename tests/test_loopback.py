"""Loopback only: no listener on a non-loopback address while a run is going, in
multi-process mode and on the portable runner with LOOPBACK workers; and a job endpoint that
does not answer fails in bounded time naming it.

The runs pause inside a DoFn (``pipeline.testhooks``), when every server of the run is up;
the test then lists the listening sockets of the whole process tree from /proc
(``listeners.py``) and kills the run.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from intruder import DENIED, intruder_problem, probe_as, run_as_intruder, run_as_this_user  # noqa: E402
from listeners import is_loopback, listeners  # noqa: E402
from portable_services import (  # noqa: E402
    ServiceError,
    kill_group,
    launch_service,
    service_env,
    wait_until_serving,
)

from pipeline import testhooks  # noqa: E402
from pipeline.runners.loopback import loopback_address  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "conversations.jsonl"
TIMEOUT_S = 240

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="reads /proc (Linux)")


def _paused_run(argv: list[str], work: Path) -> subprocess.Popen:
    ready = work / "paused"
    env = service_env(ROOT)
    env.update({testhooks.PAUSE_AT: "write", testhooks.PAUSE_FILE: str(ready)})
    log = work / "run.log"
    with log.open("wb") as handle:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pipeline", *map(str, argv)],
            cwd=work,
            stdin=subprocess.DEVNULL,
            stdout=handle,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    deadline = time.monotonic() + TIMEOUT_S
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            kill_group(proc, timeout=5)
            pytest.fail(f"the run never started writing:\n{log.read_text()[-3000:]}")
        time.sleep(0.05)
    return proc


def _paused_multi_process_run(tmp_path: Path) -> subprocess.Popen:
    """The bundled sample on two worker processes, paused once every server is up."""
    argv = ["--input", SAMPLE, "--output", tmp_path / "out", "--direct_num_workers=2"]
    return _paused_run([*argv, "--direct_running_mode=multi_processing"], tmp_path)


def _assert_nothing_taken(theirs: dict[int, dict[str, str]]) -> None:
    """Another user's probe of every port (``intruder.probe_as``) got no method answered."""
    accepted = {port: {m: c for m, c in answers.items() if c not in DENIED} for port, answers in theirs.items()}
    assert not any(accepted.values()), f"another user's calls were taken: {accepted}"


def _assert_all_loopback(found: list[tuple[int, str, int]]) -> None:
    assert found, "no listening socket found: the enumeration sees nothing, so it proves nothing"
    public = [f for f in found if not is_loopback(f[1])]
    assert not public, f"listening beyond loopback (pid, address, port): {public}"


def test_loopback_address_rewrites_only_wildcards():
    assert loopback_address("[::]:0") == "localhost:0"
    assert loopback_address("0.0.0.0:8099") == "localhost:8099"
    assert loopback_address("localhost:5") == "localhost:5"
    assert loopback_address("10.0.0.1:5") == "10.0.0.1:5"


def test_in_process_run_listens_on_nothing_public(tmp_path):
    proc = _paused_run(["--input", SAMPLE, "--output", tmp_path / "out"], tmp_path)
    try:
        found = listeners([proc.pid])
    finally:
        kill_group(proc, timeout=5)
    assert [f for f in found if not is_loopback(f[1])] == []


@pytest.mark.slow
def test_multi_process_run_listens_on_loopback_only(tmp_path):
    # Found: the local-parallel preset listened on several ports on all interfaces, and a
    # control-plane call from another address returned the pipeline descriptor.
    proc = _paused_multi_process_run(tmp_path)
    try:
        found = listeners([proc.pid])
    finally:
        kill_group(proc, timeout=5)
    _assert_all_loopback(found)
    assert len(found) >= 4  # control, data, state, logging at least


@pytest.mark.slow
def test_another_user_on_the_host_cannot_call_a_multi_process_runs_services(tmp_path):
    # Found: loopback is reachable by every local user, and the runner's control server handed
    # the pipeline (pickled DoFns) to whoever asked, its data server took records from anyone.
    problem = intruder_problem()
    if problem:
        pytest.skip(problem)
    proc = _paused_multi_process_run(tmp_path)
    try:
        ports = sorted({port for _, _, port in listeners([proc.pid])})
        theirs = {port: probe_as(run_as_intruder, f"127.0.0.1:{port}") for port in ports}
        ours = {port: probe_as(run_as_this_user, f"127.0.0.1:{port}") for port in ports}
    finally:
        kill_group(proc, timeout=5)
    assert len(ports) >= 4, ports  # control, data, state, logging at least
    # The run's own user reaches the services (so the probe can tell), another user none of them.
    descriptor = "/org.apache.beam.model.fn_execution.v1.BeamFnControl/GetProcessBundleDescriptor"
    assert any(answers[descriptor] == "OK" for answers in ours.values()), ours
    _assert_nothing_taken(theirs)
    assert all("PERMISSION_DENIED" in answers.values() for answers in theirs.values()), theirs


def test_a_caller_is_placed_by_the_owner_of_its_socket():
    from pipeline.runners.loopback import caller_is_this_user, peer_address, socket_owner

    with socket.create_server(("127.0.0.1", 0)) as server:
        with socket.create_connection(server.getsockname()) as client:
            address, port = client.getsockname()
            assert socket_owner(address, port) == os.geteuid()
            assert caller_is_this_user(f"ipv4:{address}:{port}")
        # An IPv4 caller on a dual-stack IPv6 socket (gRPC's clients): listed in /proc/net/tcp6.
        with socket.socket(socket.AF_INET6) as client:
            client.connect(("::ffff:127.0.0.1", server.getsockname()[1]))
            port = client.getsockname()[1]
            assert caller_is_this_user(f"ipv4:127.0.0.1:{port}")
    assert peer_address("ipv6:[::1]:5") == peer_address("ipv6:%5B::1%5D:5") == ("::1", 5)
    assert peer_address("unix:/tmp/x") is None
    assert not caller_is_this_user("unix:/tmp/x")
    assert not caller_is_this_user("ipv4:10.0.0.1:5")  # not loopback: never ours
    assert not caller_is_this_user("ipv4:127.0.0.1:1")  # no such socket


def test_a_closed_connections_row_places_no_caller(monkeypatch):
    # Found: a run as root took another user's call for its own. The caller's port was the
    # local port of a closed connection, whose row lingers in TIME_WAIT with uid 0 and inode 0,
    # listed before the caller's own row.
    from pipeline.runners import loopback

    end = loopback._proc_address("127.0.0.1", 40000)
    lingering = ["0:", end, "0100007F:1F90", "06", "0:0", "0:0", "0", "0", "0", "0"]
    theirs = ["1:", end, "0100007F:1F91", "01", "0:0", "0:0", "0", "1234", "0", "987"]
    ours = ["2:", end, "0100007F:1F92", "01", "0:0", "0:0", "0", str(os.geteuid()), "0", "988"]
    for rows, owner in (([lingering, theirs], 1234), ([lingering], None), ([theirs, ours], None)):
        monkeypatch.setattr(loopback, "_tcp_rows", lambda rows=rows: iter(rows))
        assert loopback.socket_owner("127.0.0.1", 40000) == owner


@pytest.mark.slow
@pytest.mark.portable
def test_portable_loopback_run_listens_on_loopback_only(tmp_path):
    # Found: the portable preset's LOOPBACK worker pool and the job service's FnApiRunner
    # listened on all interfaces (the pool answers StartWorker/StopWorker from anyone).
    work = tmp_path / "services"
    work.mkdir()
    env = service_env(ROOT)
    port_file = work / "job_service.port"
    service = launch_service(
        "job service",
        [
            sys.executable,
            "-m",
            "pipeline.runners.loopback",
            "job-service",
            "--port=0",
            f"--port_file={port_file}",
            f"--staging_dir={work / 'staging'}",
        ],
        work / "job_service.log",
        env,
        cwd=work,
    )
    try:
        try:
            wait_until_serving(service, port_file, timeout=60)
        except ServiceError as error:
            pytest.fail(f"job service did not start: {error}", pytrace=False)
        proc = _paused_run(
            [
                "--input",
                SAMPLE,
                "--output",
                tmp_path / "out",
                "--runner=PortableRunner",
                f"--job_endpoint={service.address}",
                "--environment_type=LOOPBACK",
            ],
            tmp_path,
        )
        try:
            driver = listeners([proc.pid])
            served = listeners([service.proc.pid])
            # Another user on the host, calling every one of those ports (the job port, each
            # job's runner ports, the driver's worker pool): refused, where the run's own user
            # is answered.
            problem = intruder_problem()
            ports = sorted({port for _, _, port in driver + served})
            theirs = {} if problem else {port: probe_as(run_as_intruder, f"127.0.0.1:{port}") for port in ports}
            ours = {} if problem else {port: probe_as(run_as_this_user, f"127.0.0.1:{port}") for port in ports}
        finally:
            kill_group(proc, timeout=5)
    finally:
        kill_group(service.proc, timeout=5)
    _assert_all_loopback(driver)  # the LOOPBACK worker pool lives in the driver
    _assert_all_loopback(served)
    assert any(port == service.port for _, _, port in served)
    if problem:
        pytest.skip(f"listeners checked; no second user here: {problem}")
    get_jobs = "/org.apache.beam.model.job_management.v1.JobService/GetJobs"
    assert ours[service.port][get_jobs] == "OK", ours
    _assert_nothing_taken(theirs)
    assert theirs[service.port][get_jobs] == "PERMISSION_DENIED", theirs


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_a_job_endpoint_that_does_not_answer_fails_in_bounded_time(tmp_path):
    # Found: the portable preset with no job service running hung silently for minutes.
    endpoint = f"localhost:{_free_port()}"
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipeline",
            "--input",
            str(SAMPLE),
            "--output",
            str(tmp_path / "out"),
            "--runner=PortableRunner",
            f"--job_endpoint={endpoint}",
            "--environment_type=LOOPBACK",
            "--job-endpoint-timeout=2",
        ],
        cwd=tmp_path,
        env=service_env(ROOT),
        capture_output=True,
        text=True,
        timeout=120,
    )
    elapsed = time.monotonic() - started
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"no job service answered at --job_endpoint {endpoint} within 2 s" in done.stderr
    assert elapsed < 60
    assert not (tmp_path / "out").exists()


def test_job_endpoint_timeout_defaults_to_30_seconds():
    from pipeline.config.options import load_job

    job = load_job(["--input", str(SAMPLE), "--output", "unused"])
    assert job.job_endpoint_timeout == 30.0


def test_the_pause_hook_does_nothing_without_its_variables(monkeypatch):
    monkeypatch.delenv(testhooks.PAUSE_AT, raising=False)

    def sleep(seconds: float) -> None:  # a pause sleeps (not timed: a loaded machine is slow)
        raise AssertionError(f"pause_point slept {seconds} s without its variables")

    monkeypatch.setattr(testhooks.time, "sleep", sleep)
    testhooks.pause_point("write")
    assert signal.SIGKILL  # the tests above kill paused runs with it
