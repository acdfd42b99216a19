"""The job on Apache Flink (Beam's FlinkRunner, embedded mini-cluster), byte-identical to FnApiRunner.

``test_flink_embedded_matches_fnapirunner`` runs ``python -m pipeline --runner=FlinkRunner
--flink_master=[local] --flink_job_server_jar=JAR --environment_type=LOOPBACK`` on the bundled
sample and on a multi-file, multi-shard input (JSONL cut into several byte ranges, gzip, a
JSON array, an invalid and a blank line), and checks that ``normalized/``, ``drops/``,
``dead_letter/`` and ``summary.json`` are byte-identical to a FnApiRunner run of the same input.
It needs Beam's Flink job-server jar, which ``.ci/fetch-flink`` puts under ``build/flink/``
(or name one with ``CONVNORM_FLINK_JOB_SERVER_JAR``); without it the test is skipped, saying
why (the fetch log's reason). ``CONVNORM_REQUIRE_FLINK=1`` turns that skip into a failure.

No listening port beyond loopback. Beam's Java job server binds its job and artifact services
to every interface whatever ``--job-host`` says (its default gRPC server factory binds by port
only), and LOOPBACK's worker pool in the launching process binds ``[::]``. So the launcher, and
with it the job server and Flink's mini-cluster it starts, runs in a network namespace of its
own (``unshare --net``) whose only interface is loopback: whatever binds "every interface"
there is reachable from this machine's loopback-only namespace and nowhere else. The test checks
that the run was in such a namespace and prints every listening socket it saw there.

``test_harness_on_portable_loopback`` runs the same harness (namespace, socket sampling,
byte comparison) with Beam's in-process portable job service and LOOPBACK workers, so a Flink
failure can be told from a harness failure. Both run only where the jar is: without it they
skip before starting anything (the harness serves the Flink run, and its runs take tens of
seconds).

Deselect with ``-m "not flink"``.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine_outputs import SAMPLE, SHARD_BYTES, assert_same_outputs, write_multi_input  # noqa: E402
from listeners import interfaces, private_netns_problem  # noqa: E402
from portable_services import kill_group, popen_in_group, service_env, tail  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FLINK_DIR = ROOT / "build" / "flink"
JAR_ENV = "CONVNORM_FLINK_JOB_SERVER_JAR"
#: Wall-clock limit for one run (an embedded Flink run of the sample takes well under a minute).
JOB_TIMEOUT_S = 300

# --------------------------------------------------------------------------------------------
# Finding the jar and a private network namespace


def job_server_jar() -> tuple[Path | None, str]:
    """(jar, flink version) or (None, why not)."""
    named = os.environ.get(JAR_ENV)
    if named:
        path = Path(named)
        if not path.is_file():
            return None, f"{JAR_ENV}={named} is not a file"
        candidates = [path]
    else:
        import apache_beam

        candidates = sorted(FLINK_DIR.glob(f"beam-runners-flink-*-job-server-{apache_beam.__version__}.jar"))
        if not candidates:
            log = FLINK_DIR / "fetch-flink.log"
            reason = ""
            if log.exists():
                found = re.search(r"Could not (?:find|resolve)[^\n]*", log.read_text(errors="replace"))
                reason = f": {found.group(0)}" if found else ""
            return None, (
                f"no Beam {apache_beam.__version__} Flink job-server jar in {FLINK_DIR} "
                f"(.ci/fetch-flink could not fetch it{reason}); set {JAR_ENV} to run this test"
            )
    jar = candidates[-1]
    match = re.search(r"beam-runners-flink-(\d+\.\d+)-job-server", jar.name)
    if not match:
        return None, f"cannot tell the Flink version from the jar's name {jar.name!r}"
    return jar, match.group(1)


# --------------------------------------------------------------------------------------------
# Listening sockets of a process's network namespace, from /proc


def _address(hex_address: str) -> str:
    raw = bytes.fromhex(hex_address)
    # /proc/net/tcp{,6} print each 32-bit word in host (little-endian) order.
    swapped = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return socket.inet_ntop(socket.AF_INET if len(raw) == 4 else socket.AF_INET6, swapped)


def listening_sockets(pid: int | str = "self") -> set[tuple[str, int]]:
    """(address, port) of every TCP socket in LISTEN state in ``pid``'s network namespace."""
    found = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A":  # TCP_LISTEN
                host, port = fields[1].split(":")
                found.add((_address(host), int(port, 16)))
    return found


class SocketSampler:
    """Polls a process's listening sockets and network namespace while it runs."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.listening: set[tuple[str, int]] = set()
        self.namespaces: set[str] = set()
        self.interfaces: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                # Until unshare and sh have exec'd the launcher, the pid is still in ours.
                launched = Path(f"/proc/{self.pid}/cmdline").read_bytes().split(b"\0")[0] == os.fsencode(sys.executable)
                if not launched:
                    self._stop.wait(0.05)
                    continue
                self.namespaces.add(os.readlink(f"/proc/{self.pid}/ns/net"))
                self.interfaces.update(interfaces(self.pid))
                self.listening |= listening_sockets(self.pid)
            except OSError:
                pass  # the process is gone, or not yet exec'd
            self._stop.wait(0.2)

    def __enter__(self) -> SocketSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


# --------------------------------------------------------------------------------------------
# Inputs, runs and comparisons


@dataclass
class JobRun:
    name: str
    returncode: int
    stdout: Path
    stderr: Path
    seconds: float
    sampler: SocketSampler | None = None
    notes: list[str] = field(default_factory=list)

    def describe(self, lines: int = 60) -> str:
        return (
            f"--- job {self.name}: exit status {self.returncode} after {self.seconds:.1f} s\n"
            f"stdout (last lines):\n{tail(self.stdout, lines)}\n"
            f"stderr (last lines):\n{tail(self.stderr, lines)}"
        )


def run_job(name: str, args: list[str], work: Path, *, netns: bool = False) -> JobRun:
    """``python -m pipeline ARGS`` in its own process group (in a loopback-only network
    namespace if ``netns``), killed with its group after JOB_TIMEOUT_S."""
    argv = [sys.executable, "-m", "pipeline", *args]
    if netns:
        # unshare execs sh, which brings loopback up and execs the launcher: same pid throughout.
        argv = ["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *argv]
    stdout, stderr = work / f"{name}.stdout", work / f"{name}.stderr"
    started = time.monotonic()
    with stdout.open("wb") as out, stderr.open("wb") as err:
        proc = popen_in_group(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=service_env(ROOT), cwd=work)
        sampler = SocketSampler(proc.pid) if netns else None
        timed_out = False
        try:
            if sampler:
                sampler.__enter__()
            proc.wait(timeout=JOB_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            if sampler:
                sampler.__exit__(None, None, None)
            if proc.poll() is None:
                kill_group(proc, timeout=10)
    run = JobRun(name, proc.returncode, stdout, stderr, time.monotonic() - started, sampler)
    if timed_out:
        pytest.fail(f"job {name} did not finish within {JOB_TIMEOUT_S} s; killed\n{run.describe()}", pytrace=False)
    return run


def assert_isolated(run: JobRun) -> None:
    """The run had a network namespace of its own with loopback as its only interface."""
    sampler = run.sampler
    ours = os.readlink("/proc/self/ns/net")
    assert sampler.namespaces, f"never saw the launcher's network namespace\n{run.describe()}"
    assert ours not in sampler.namespaces, "the launcher ran in this machine's network namespace"
    assert sampler.interfaces == {"lo"}, f"the job's namespace has interfaces {sorted(sampler.interfaces)}"
    shown = ", ".join(f"{h}:{p}" for h, p in sorted(sampler.listening)) or "none"
    print(f"{run.name}: {run.seconds:.1f} s; listening in its loopback-only namespace: {shown}")


def compare_engines(tmp_path: Path, engine_name: str, engine_flags: list[str]) -> list[JobRun]:
    """Run the sample and the multi-file input on ``engine_flags`` (isolated) and on FnApiRunner."""
    inputs = {
        "sample": [str(SAMPLE)],
        "multi": write_multi_input(tmp_path / "multi-input"),
    }
    runs = []
    for label, patterns in inputs.items():
        common = [arg for p in patterns for arg in ("--input", p)] + [f"--shard-bytes={SHARD_BYTES}", "--batch-size=64"]
        engine_out, reference_out = tmp_path / f"{label}-{engine_name}", tmp_path / f"{label}-reference"
        engine = run_job(
            f"{label}-{engine_name}", [*common, "--output", str(engine_out), *engine_flags], tmp_path, netns=True
        )
        assert engine.returncode == 0, f"{engine_name} run on {label} failed\n{engine.describe()}"
        assert_isolated(engine)
        reference = run_job(f"{label}-reference", [*common, "--output", str(reference_out)], tmp_path)
        assert reference.returncode == 0, f"FnApiRunner run on {label} failed\n{reference.describe()}"
        summary = json.loads((engine_out / "summary.json").read_text())
        assert summary["accounted"] is True
        if label == "sample":
            sample_summary = summary
        else:  # the same records, plus the invalid line and the blank line written into a.jsonl
            assert summary["records_in"] == sample_summary["records_in"] + 1
            assert summary["dead_letters_by_reason"]["invalid_json"] == (
                sample_summary["dead_letters_by_reason"]["invalid_json"] + 1
            )
            assert summary["blank_lines"] == sample_summary["blank_lines"] + 1
            assert len(list((engine_out / "normalized").glob("part-*"))) > 5  # several shards
        assert_same_outputs(engine_out, reference_out, f"{engine_name} on {label}")
        runs.append(engine)
    return runs


# --------------------------------------------------------------------------------------------
# Tests


def test_listening_sockets_reads_proc_net():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert ("127.0.0.1", port) in listening_sockets()
    assert ("127.0.0.1", port) not in listening_sockets()
    assert _address("00000000000000000000000001000000") == "::1"
    assert _address("0100007F") == "127.0.0.1"


def test_flink_preset_parses(tmp_path):
    from apache_beam.options.pipeline_options import FlinkRunnerOptions, PortableOptions

    from pipeline.config.options import load_job

    job = load_job(
        ["--config", str(ROOT / "configs" / "flink.yaml"), "--input", str(SAMPLE), "--output", str(tmp_path / "out")]
    )
    flink = job.options.view_as(FlinkRunnerOptions)
    assert job.options.get_all_options()["runner"] == "FlinkRunner"
    assert flink.flink_master == "[local]"
    assert flink.flink_version in FlinkRunnerOptions.PUBLISHED_FLINK_VERSIONS
    assert flink.flink_job_server_jar.startswith("build/flink/beam-runners-flink-" + flink.flink_version)
    assert job.options.view_as(PortableOptions).environment_type == "LOOPBACK"


def test_fetch_flink_keeps_a_jar_that_is_there(tmp_path):
    # A jar already in place: no mvn call (a fake mvn that fails would make it fail).
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "mvn").write_text("#!/bin/sh\necho called >&2\nexit 7\n")
    (fake_bin / "mvn").chmod(0o755)
    dest = tmp_path / "flink"
    dest.mkdir()
    (dest / "beam-runners-flink-2.2-job-server-9.9.9.jar").write_bytes(b"PK")
    env = {
        **os.environ,
        "PATH": f"{fake_bin}:{os.environ['PATH']}",
        "CONVNORM_FLINK_DIR": str(dest),
        "CONVNORM_BEAM_VERSION": "9.9.9",
        "CONVNORM_FLINK_VERSION": "2.2",
    }
    kept = subprocess.run(
        ["bash", str(ROOT / ".ci" / "fetch-flink")], env=env, capture_output=True, text=True, timeout=60
    )
    assert kept.returncode == 0 and "is there" in kept.stdout, kept.stderr
    # Missing, and mvn fails: a clear message, exit 0 (test skipped) unless Flink is required.
    (dest / "beam-runners-flink-2.2-job-server-9.9.9.jar").unlink()
    missing = subprocess.run(
        ["bash", str(ROOT / ".ci" / "fetch-flink")], env=env, capture_output=True, text=True, timeout=60
    )
    assert missing.returncode == 0 and "could not fetch" in missing.stderr
    required = subprocess.run(
        ["bash", str(ROOT / ".ci" / "fetch-flink")],
        env={**env, "CONVNORM_REQUIRE_FLINK": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert required.returncode == 1
    assert not list(dest.glob("*.jar"))


@pytest.mark.slow
@pytest.mark.flink
def test_harness_on_portable_loopback(tmp_path):
    jar, why = job_server_jar()
    if jar is None:
        pytest.skip(f"the harness serves the Flink run, which cannot run here: {why}")
    problem = private_netns_problem()
    if problem:
        pytest.skip(problem)
    runs = compare_engines(
        tmp_path, "portable", ["--runner=PortableRunner", "--job_endpoint=embed", "--environment_type=LOOPBACK"]
    )
    # The sampler sees what LOOPBACK opens: its worker pool (bound to every interface, [::]),
    # here inside the private namespace.
    assert all(run.sampler.listening for run in runs), "the socket sampler saw no listening socket"


@pytest.mark.slow
@pytest.mark.flink
@pytest.mark.timeout(4 * JOB_TIMEOUT_S + 300)  # two inputs on two engines, each run bounded
def test_flink_embedded_matches_fnapirunner(tmp_path):
    jar, flink_version = job_server_jar()
    if jar is None:
        if os.environ.get("CONVNORM_REQUIRE_FLINK") == "1":
            pytest.fail(flink_version, pytrace=False)
        pytest.skip(flink_version)
    problem = private_netns_problem()
    if problem:
        pytest.skip(problem)
    compare_engines(
        tmp_path,
        "flink",
        [
            "--runner=FlinkRunner",
            "--flink_master=[local]",
            f"--flink_version={flink_version}",
            f"--flink_job_server_jar={jar}",
            "--environment_type=LOOPBACK",
            "--parallelism=2",
        ],
    )
