"""convnorm on a real Dask cluster (Beam's DaskRunner), byte-identical to FnApiRunner.

The test makes a network namespace whose only interface is loopback (``unshare --net``; a
holder process keeps it), starts a real ``dask scheduler`` and two ``dask worker`` processes in
it (``nsenter``), runs ``python -m pipeline --runner DaskRunner --dask_scheduler_file F`` in it
on the bundled sample and on a multi-file, multi-format input (JSONL cut into byte ranges,
gzip, zstd, a JSON array, Parquet, every provider format, an invalid and a blank line),
requires ``normalized/``, ``drops/``, ``dead_letter/`` and ``summary.json`` to be
byte-identical to FnApiRunner's run of the same input, checks that every socket any of these
processes listened on was on loopback, and stops every process it started by its PID.

A second test runs ``--runner DaskRunner`` without a scheduler: convnorm's own LocalCluster,
which must listen on loopback only and be gone when the run ends.

Skipped, saying so, where the ``dask`` extra is not installed (``pip install -e '.[dask]'``;
``.ci/run`` installs it) or no network namespace can be made.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from engine_outputs import SAMPLE, SHARD_BYTES, assert_same_outputs, tree, write_mixed_input
from intruder import intruder_problem, run_as_intruder
from listeners import interfaces, is_loopback, listeners, private_netns_problem, process_tree
from portable_services import popen_in_group, service_env, tail

from pipeline import testhooks

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
#: Seconds for a cluster to come up, and for one job.
START_TIMEOUT_S = 90
JOB_TIMEOUT_S = 300


def _dask_problem() -> str | None:
    try:
        import dask.distributed  # noqa: F401
    except ImportError:
        return "the dask extra is not installed (pip install -e '.[dask]'; .ci/run installs it)"
    if not (Path(sys.executable).parent / "dask").exists():
        return f"no dask command beside {sys.executable}"
    return None


@dataclass
class Started:
    name: str
    proc: subprocess.Popen
    log: Path

    def describe(self) -> str:
        state = "running" if self.proc.poll() is None else f"exit status {self.proc.returncode}"
        return f"--- {self.name} (pid {self.proc.pid}, {state}):\n{tail(self.log, 40)}"


@dataclass
class LoopbackNamespace:
    """A network namespace with loopback only, and the processes this test starts in it."""

    work: Path
    env: dict[str, str]
    holder: subprocess.Popen | None = None
    started: list[Started] = field(default_factory=list)
    #: (name, pid, address, port) of every listening socket seen while the processes ran.
    seen: set[tuple[str, int, str, int]] = field(default_factory=set)

    def open(self) -> None:
        # unshare execs sh, which brings loopback up and execs sleep: one pid holds the namespace.
        self.holder = popen_in_group(["unshare", "--net", "sh", "-c", "ip link set lo up && exec sleep 3600"])
        ours = os.readlink("/proc/self/ns/net")
        deadline = time.monotonic() + 10
        while os.readlink(f"/proc/{self.holder.pid}/ns/net") == ours or b"sleep" not in self._cmdline():
            assert self.holder.poll() is None and time.monotonic() < deadline, "the namespace holder did not start"
            time.sleep(0.05)
        assert interfaces(self.holder.pid) == ["lo"], interfaces(self.holder.pid)

    def _cmdline(self) -> bytes:
        return Path(f"/proc/{self.holder.pid}/cmdline").read_bytes()

    def start(self, name: str, argv: list[str]) -> Started:
        log = self.work / f"{name}.log"
        with log.open("wb") as handle:
            proc = popen_in_group(
                ["nsenter", f"--net=/proc/{self.holder.pid}/ns/net", *argv],
                stdin=subprocess.DEVNULL,
                stdout=handle,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.work,
            )
        started = Started(name, proc, log)
        self.started.append(started)
        return started

    def sample(self) -> None:
        """Record the listening sockets of every process started (and their children)."""
        for started in self.started:
            if started.proc.poll() is None:
                for pid, address, port in listeners([started.proc.pid], netns_pid=self.holder.pid):
                    self.seen.add((started.name, pid, address, port))

    def wait(self, started: Started, timeout: float) -> int:
        """Wait for a process to end, sampling sockets meanwhile; its exit status."""
        deadline = time.monotonic() + timeout
        while started.proc.poll() is None:
            self.sample()
            if time.monotonic() > deadline:
                self.stop_one(started)
                pytest.fail(f"{started.name} did not finish within {timeout} s\n{started.describe()}", pytrace=False)
            time.sleep(0.2)
        return started.proc.returncode

    def stop_one(self, started: Started) -> None:
        """SIGTERM by PID (a nanny stops its worker), SIGKILL whatever of its tree is left."""
        tree = process_tree([started.proc.pid])
        if started.proc.poll() is None:
            os.kill(started.proc.pid, signal.SIGTERM)
            try:
                started.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                pass
        for pid in tree:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        started.proc.wait()

    def close(self) -> None:
        for started in reversed(self.started):
            self.stop_one(started)
        if self.holder is not None:
            os.kill(self.holder.pid, signal.SIGTERM)
            self.holder.wait()


@pytest.fixture
def namespace(tmp_path):
    for problem in (_dask_problem(), private_netns_problem()):
        if problem:
            pytest.skip(problem)
    env = service_env(ROOT)
    # Dask's sampling profiler costs ~17% of a worker's CPU (docs/cluster.md).
    env["DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED"] = "False"
    ns = LoopbackNamespace(tmp_path, env)
    ns.open()
    try:
        yield ns
    finally:
        ns.close()
    left = [pid for s in ns.started for pid in [s.proc.pid] if Path(f"/proc/{pid}").exists()]
    assert not left, f"processes left running: {left}"


def _dask(*args: str) -> list[str]:
    return [str(Path(sys.executable).parent / "dask"), *args]


def start_cluster(ns: LoopbackNamespace, scheduler_file: Path, workers: int = 2) -> None:
    """A scheduler and ``workers`` worker processes (one thread each), all bound to loopback."""
    scheduler = ns.start(
        "scheduler",
        _dask(
            "scheduler",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--dashboard-address",
            "127.0.0.1:0",
            "--scheduler-file",
            str(scheduler_file),
        ),
    )
    deadline = time.monotonic() + START_TIMEOUT_S
    while not (scheduler_file.exists() and scheduler_file.read_text().strip()):
        assert scheduler.proc.poll() is None and time.monotonic() < deadline, scheduler.describe()
        time.sleep(0.2)
    for i in range(workers):
        ns.start(
            f"worker-{i + 1}",
            _dask(
                "worker",
                "--scheduler-file",
                str(scheduler_file),
                "--host",
                "127.0.0.1",
                "--dashboard-address",
                "127.0.0.1:0",
                "--nworkers",
                "1",
                "--nthreads",
                "1",
                "--name",
                f"worker-{i + 1}",
            ),
        )
    while len(_ask(ns, scheduler_file, "c.scheduler_info()['workers']") or {}) < workers:
        assert all(s.proc.poll() is None for s in ns.started), "\n".join(s.describe() for s in ns.started)
        assert time.monotonic() < deadline, "the workers did not join\n" + "\n".join(s.describe() for s in ns.started)
        ns.sample()
        time.sleep(0.5)


def _ask(ns: LoopbackNamespace, scheduler_file: Path, expression: str):
    """``expression`` (of a dask.distributed Client ``c``) evaluated from inside the namespace,
    as JSON; None if the scheduler did not answer."""
    probe = subprocess.run(
        [
            "nsenter",
            f"--net=/proc/{ns.holder.pid}/ns/net",
            sys.executable,
            "-c",
            "import json, sys; from distributed import Client; "
            "c = Client(scheduler_file=sys.argv[1], timeout=10); print(json.dumps(eval(sys.argv[2]), default=str)); c.close()",
            str(scheduler_file),
            expression,
        ],
        capture_output=True,
        text=True,
        env=ns.env,
        timeout=60,
    )
    return json.loads(probe.stdout.strip().splitlines()[-1]) if probe.returncode == 0 and probe.stdout.strip() else None


def _common(patterns: list[str], extra: tuple[str, ...] = ()) -> list[str]:
    inputs = [arg for pattern in patterns for arg in ("--input", pattern)]
    return [*inputs, f"--shard-bytes={SHARD_BYTES}", "--batch-size=64", "--no-report", "--progress=off", *extra]


#: A training set shaped on the cluster: duplicates across input files (shards), two splits.
DATASET_FLAGS = ("--part-bytes", "0", "--sink", "hf", "--dedupe", "prefix", "--split", "eval=0.25")


def write_dataset_input(directory: Path) -> list[str]:
    """The training chats in five files: a conversation and its duplicate in different ones."""
    directory.mkdir()
    lines = (ROOT / "tests" / "data" / "training" / "chats.jsonl").read_text().splitlines()
    for n, chunk in enumerate([lines[:1]] + [lines[i : i + 4] for i in range(1, len(lines), 4)]):
        (directory / f"chats-{n}.jsonl").write_text("\n".join(chunk) + "\n")
    return [str(directory / "*.jsonl")]


def _reference(tmp_path: Path, label: str, patterns: list[str], extra: tuple[str, ...] = ()) -> Path:
    out = tmp_path / f"{label}-fnapirunner"
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", *_common(patterns, extra), "--output", str(out)],
        capture_output=True,
        text=True,
        env=service_env(ROOT),
        cwd=tmp_path,
        timeout=JOB_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def _assert_loopback_only(ns: LoopbackNamespace) -> None:
    shown = ", ".join(f"{name} {address}:{port}" for name, _, address, port in sorted(ns.seen))
    print(f"listening sockets seen in the namespace: {shown}")
    assert {name for name, *_ in ns.seen} >= {"scheduler", "worker-1", "worker-2"}, shown
    outside = [entry for entry in ns.seen if not is_loopback(entry[2])]
    assert not outside, f"listening beyond loopback: {outside}"


def test_a_scheduler_and_two_workers_give_fnapirunners_bytes(namespace, tmp_path):
    scheduler_file = tmp_path / "scheduler.json"
    start_cluster(namespace, scheduler_file)
    inputs = {
        "sample": ([str(SAMPLE)], ()),
        "mixed": (write_mixed_input(tmp_path / "mixed-input"), ()),
        "dataset": (write_dataset_input(tmp_path / "dataset-input"), DATASET_FLAGS),
    }
    for label, (patterns, extra) in inputs.items():
        out = tmp_path / f"{label}-dask"
        job = namespace.start(
            f"convnorm-{label}",
            [
                sys.executable,
                "-m",
                "pipeline",
                *_common(patterns, extra),
                "--output",
                str(out),
                "--runner",
                "DaskRunner",
                "--dask_scheduler_file",
                str(scheduler_file),
            ],
        )
        status = namespace.wait(job, JOB_TIMEOUT_S)
        assert status == 0, job.describe() + "\n" + "\n".join(s.describe() for s in namespace.started[:3])
        assert_same_outputs(out, _reference(tmp_path, label, patterns, extra), f"DaskRunner on {label}")
        summary = json.loads((out / "summary.json").read_text())
        assert summary["accounted"]
        manifest = json.loads((out / "_convnorm_manifest.json").read_text())
        assert manifest["options"]["runner"].endswith("DaskRunner") and "scheduler_file" not in manifest["options"]
        if label == "mixed":
            assert len(list((out / "normalized").glob("part-*"))) > 5
        if label == "dataset":  # deduplicated across shards, and split, on the cluster
            assert summary["dedupe"]["duplicates_collapsed"] == 2 and summary["splits"]["eval"] > 0
            assert tree(out / "eval") == tree(tmp_path / "dataset-fnapirunner" / "eval")
    # Both workers did work: one Dask partition per shard spreads the shards.
    executed = _ask(namespace, scheduler_file, "c.run(lambda dask_worker: dask_worker.state.executed_count)")
    assert executed and len(executed) == 2 and all(n > 0 for n in executed.values()), executed
    _assert_loopback_only(namespace)


def test_without_a_scheduler_convnorm_runs_its_own_cluster_on_loopback(namespace, tmp_path):
    out = tmp_path / "local-dask"
    job = namespace.start(
        "convnorm",
        [sys.executable, "-m", "pipeline", *_common([str(SAMPLE)]), "--output", str(out), "--runner", "DaskRunner"],
    )
    assert namespace.wait(job, JOB_TIMEOUT_S) == 0, job.describe()
    assert_same_outputs(out, _reference(tmp_path, "sample", [str(SAMPLE)]), "DaskRunner's own LocalCluster")
    assert "started a local Dask cluster" in job.log.read_text()
    seen = {(address, port) for name, _, address, port in namespace.seen if name == "convnorm"}
    # The scheduler, the worker processes and their nannies (no dashboard): all on loopback.
    assert len(seen) >= 4, seen
    assert all(is_loopback(address) for address, _ in seen), seen


#: An intruder's Dask client: every way in it has, each tried; prints what each got.
DASK_INTRUDER = r"""
import os, sys
from distributed import Client
from distributed.security import Security
address = sys.argv[1]
tries = {
    "as given": dict(address=address),
    "plain TCP": dict(address=address.replace("tls://", "tcp://")),
    "a certificate of its own": dict(address=address, security=Security.temporary()),
}
for name, kwargs in tries.items():
    try:
        with Client(timeout=5, **kwargs) as client:
            print(name, "RAN", client.run(os.getpid))
    except Exception as error:
        print(name, "refused", type(error).__name__)
# Every port the run listens on, asked for the pages Dask's web servers serve in plain HTTP
# (dashboard, cluster information, metrics, health, the proxy to the workers): one line a port.
import urllib.error, urllib.request
PAGES = ["/", "/status", "/info/main/workers.html", "/json/identity.json", "/metrics", "/health", "/proxy/1/x/status"]
for port in sys.argv[2:]:
    got = []
    for page in PAGES:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{page}", timeout=5) as answer:
                got.append(f"{page} {answer.status}")
        except urllib.error.HTTPError as error:
            if error.code != 404:
                got.append(f"{page} {error.code}")
        except Exception as error:
            pass  # not an HTTP server (a TLS port closes the connection)
    print(f"http {port}", "SERVED " + ", ".join(got) if got else "refused (nothing served)")
"""


def test_another_user_on_the_host_cannot_run_code_on_convnorms_own_cluster(namespace, tmp_path):
    # Found: the local cluster had no TLS and no authentication: any local user's
    # Client(...).run(...) ran code on its workers. It now speaks TLS with the run's own
    # credentials, in memory.
    problem = intruder_problem()
    if problem:
        pytest.skip(problem)
    ready = tmp_path / "paused"
    namespace.env = {**namespace.env, testhooks.PAUSE_AT: "write", testhooks.PAUSE_FILE: str(ready)}
    out = tmp_path / "local-dask"
    job = namespace.start(
        "convnorm",
        [sys.executable, "-m", "pipeline", *_common([str(SAMPLE)]), "--output", str(out), "--runner", "DaskRunner"],
    )
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while not ready.exists():
        assert job.proc.poll() is None and time.monotonic() < deadline, job.describe()
        time.sleep(0.1)
    found = re.search(r"scheduler (\S+), no dashboard", job.log.read_text())
    assert found, job.describe()
    # Found: the cluster's dashboard (plain HTTP, no authentication) answered any local user.
    namespace.sample()
    ports = sorted({str(port) for name, _, _, port in namespace.seen if name == "convnorm"})
    assert len(ports) >= 4, ports  # the scheduler, the worker processes and their nannies
    intruder = run_as_intruder(
        DASK_INTRUDER, found.group(1), *ports, prefix=("nsenter", f"--net=/proc/{namespace.holder.pid}/ns/net")
    )
    ready.unlink()
    assert namespace.wait(job, JOB_TIMEOUT_S) == 0, job.describe()
    lines = intruder.stdout.strip().splitlines()
    assert len(lines) == 3 + len(ports), intruder.stdout + intruder.stderr[-3000:]
    assert all(" refused " in line for line in lines), intruder.stdout + intruder.stderr[-3000:]
    assert found.group(1).startswith("tls://127.0.0.1:"), found.group(1)


def test_a_users_own_scheduler_without_tls_is_warned_about(caplog):
    from apache_beam.options.pipeline_options import PipelineOptions

    from pipeline.config import dask_flags
    from pipeline.runners import dask_cluster

    dask_flags.register_options(["--runner=DaskRunner"])
    plain = PipelineOptions(["--dask_client_address=tcp://127.0.0.1:8786"])
    with caplog.at_level("WARNING", logger="convnorm"):
        dask_cluster.warn_without_tls(plain)
        dask_cluster.warn_without_tls(PipelineOptions(["--dask_client_address=tls://10.0.0.5:8786"]))
    warned = [r.getMessage() for r in caplog.records if r.name == "convnorm"]
    assert len(warned) == 1 and "tcp://127.0.0.1:8786 takes connections without TLS" in warned[0], warned
