"""Beam portability services for ``test_portable.py``: a job service and a worker pool, each
in its own process group, bound to localhost, stopped by process group (SIGTERM, then SIGKILL).
They also get SIGTERM if the test process dies outright (Linux parent-death signal).

- Job service: Beam's ``apache_beam.runners.portability.local_job_service_main`` started
  through ``python -m pipeline.runners.loopback job-service``, as configs/portable.yaml says, so the
  FnApiRunner servers of each job bind localhost as well as its job port; ``--port=0
  --port_file`` lets it pick a free port and report it, so there is no window between
  choosing a port and binding it.
- Worker pool: Beam's own ``BeamFnExternalWorkerPoolServicer`` in process mode, the servicer
  that ``worker_pool_main`` (and the SDK container's ``--worker_pool`` mode, as used with Flink
  and Spark) runs. It is started by this file's ``__main__`` rather than by ``worker_pool_main``
  only because that entry point binds ``[::]`` (every interface) with no flag to change it,
  and its ``StartWorker`` runs code for whoever asks. The launcher binds ``localhost`` and logs
  one ``WORKER_STARTED_MARK`` line per worker it starts, so a test can prove that the job ran
  on the external pool.

Both run with ``service_env``: the running interpreter's directory first on ``PATH`` (the pool
starts workers as plain ``python``) and the repository root on ``PYTHONPATH`` (workers import
``pipeline`` and ``transforms``).

Run as ``python tests/portable_services.py worker-pool --port 0 --port-file FILE``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Logged by the worker pool launcher for every SDK worker process it starts.
WORKER_STARTED_MARK = "portable-test: started SDK worker"


class ServiceError(RuntimeError):
    """A service that did not come up; the message carries its log."""


def service_env(repo_root: Path = ROOT) -> dict[str, str]:
    """The environment for services and jobs: this interpreter first on PATH, the repo importable."""
    env = dict(os.environ)
    bin_dir = os.path.dirname(sys.executable)
    env["PATH"] = os.pathsep.join([bin_dir, *(p for p in env.get("PATH", "").split(os.pathsep) if p)])
    env["PYTHONPATH"] = os.pathsep.join(
        [str(repo_root), *(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)]
    )
    env["PYTHONUNBUFFERED"] = "1"
    return env


def check_worker_python(env: dict[str, str]) -> None:
    """The worker pool starts workers as ``python``: it must be an interpreter of this venv."""
    found = shutil.which("python", path=env["PATH"])
    expected = os.path.dirname(sys.executable)
    if found is None or os.path.dirname(found) != expected:
        raise ServiceError(
            f"'python' on the services' PATH is {found!r}, not one in {expected}; "
            "the worker pool would start workers without this venv and the job would hang"
        )


def tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as error:
        return f"<cannot read {path}: {error}>"
    return "\n".join(text.splitlines()[-lines:]) or "<empty>"


def _die_with_parent() -> None:
    """In the child, before exec: get SIGTERM when the parent dies (Linux), so a test process
    killed outright (SIGKILL, a hard timeout) does not leave services behind."""
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def popen_in_group(argv: list[str], **kwargs) -> subprocess.Popen:
    """``Popen`` leading a new session (so ``kill_group`` reaches its children) that also ends
    when this process dies."""
    return subprocess.Popen(argv, start_new_session=True, preexec_fn=_die_with_parent, **kwargs)


def kill_group(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    """SIGTERM the process group led by ``proc``, SIGKILL it after ``timeout``; reap ``proc``.

    The group is signalled again with SIGKILL at the end in every case, so children that
    outlived their parent (SDK workers of a pool) go too.
    """
    pgid = proc.pid  # started with start_new_session=True: the leader's pid is the group id
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("localhost", port), timeout=1):
            return True
    except OSError:
        return False


@dataclass
class Service:
    name: str
    proc: subprocess.Popen
    log: Path
    port: int = 0

    @property
    def address(self) -> str:
        return f"localhost:{self.port}"

    def describe(self, lines: int = 40) -> str:
        state = "running" if self.proc.poll() is None else f"exited with status {self.proc.returncode}"
        return f"--- {self.name} (pid {self.proc.pid}, {state}), last lines of {self.log}:\n{tail(self.log, lines)}"


def launch_service(name: str, argv: list[str], log: Path, env: dict[str, str], *, cwd: Path) -> Service:
    """Start ``argv`` in a new session (its own process group), its output to ``log``."""
    with log.open("wb") as handle:
        proc = popen_in_group(argv, stdin=subprocess.DEVNULL, stdout=handle, stderr=subprocess.STDOUT, env=env, cwd=cwd)
    return Service(name, proc, log)


def wait_until_serving(service: Service, port_file: Path, *, timeout: float = 60.0) -> None:
    """Wait (bounded) for the service's port file and for its port to accept connections.

    Raises ``ServiceError``, with the service's log, if it exits or the time runs out first.
    """
    deadline = time.monotonic() + timeout
    while True:
        if service.proc.poll() is not None:
            raise ServiceError(f"{service.name} exited before serving\n{service.describe()}")
        if not service.port and port_file.exists():
            text = port_file.read_text().strip()
            if text:
                service.port = int(text)
        if service.port and _accepts(service.port):
            return
        if time.monotonic() > deadline:
            raise ServiceError(
                f"{service.name} did not accept connections within {timeout:.0f} s\n{service.describe()}"
            )
        time.sleep(0.1)


@dataclass
class PortableServices:
    """A running job service and worker pool; ``stop()`` ends both process groups."""

    job_service: Service | None = None
    worker_pool: Service | None = None
    started: list[Service] = field(default_factory=list)

    def diagnostics(self, lines: int = 40) -> str:
        return "\n".join(s.describe(lines) for s in self.started)

    def workers_started(self) -> int:
        if self.worker_pool is None:
            return 0
        try:
            return self.worker_pool.log.read_text(errors="replace").count(WORKER_STARTED_MARK)
        except OSError:
            return 0

    def stop(self) -> None:
        for service in reversed(self.started):
            kill_group(service.proc)


def start_services(work_dir: Path, env: dict[str, str], *, timeout: float = 60.0) -> PortableServices:
    """Start the worker pool and the job service side by side (logs and port files under
    ``work_dir``) and wait until both serve.

    On any failure, whatever was started is stopped before the ``ServiceError`` propagates.
    """
    check_worker_python(env)
    staging = work_dir / "staging"
    staging.mkdir()
    pool_port, job_port = work_dir / "worker_pool.port", work_dir / "job_service.port"
    services = PortableServices()
    try:
        services.worker_pool = launch_service(
            "worker pool",
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "worker-pool",
                "--port",
                "0",
                "--port-file",
                str(pool_port),
            ],
            work_dir / "worker_pool.log",
            env,
            cwd=work_dir,
        )
        services.started.append(services.worker_pool)
        services.job_service = launch_service(
            "job service",
            [
                sys.executable,
                "-m",
                "pipeline.runners.loopback",
                "job-service",
                "--port=0",
                f"--port_file={job_port}",
                f"--staging_dir={staging}",
            ],
            work_dir / "job_service.log",
            env,
            cwd=work_dir,
        )
        services.started.append(services.job_service)
        wait_until_serving(services.worker_pool, pool_port, timeout=timeout)
        wait_until_serving(services.job_service, job_port, timeout=timeout)
    except BaseException:
        services.stop()
        raise
    return services


# --------------------------------------------------------------------------------------------
# The worker pool launcher (runs in its own process)


def _serve_worker_pool(port: int, port_file: str) -> None:
    import logging

    import grpc
    from apache_beam.portability.api import beam_fn_api_pb2_grpc
    from apache_beam.runners.worker.worker_pool_main import BeamFnExternalWorkerPoolServicer
    from apache_beam.utils import thread_pool_executor

    # apache_beam installs a root handler on import: force=True replaces it.
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True)
    log = logging.getLogger("portable_services")

    class Pool(BeamFnExternalWorkerPoolServicer):
        def StartWorker(self, request, context):
            response = super().StartWorker(request, context)
            if response.error:
                log.error("StartWorker %s failed: %s", request.worker_id, response.error)
            else:
                process = self._worker_processes.get(request.worker_id)
                log.info("%s %s (pid %s)", WORKER_STARTED_MARK, request.worker_id, process.pid if process else "?")
            return response

    # As BeamFnExternalWorkerPoolServicer.start(use_process=True) does for worker_pool_main,
    # but bound to localhost only.
    server = grpc.server(
        thread_pool_executor.shared_unbounded_instance(),
        options=[("grpc.http2.max_pings_without_data", 0), ("grpc.http2.max_ping_strikes", 0)],
    )
    bound = server.add_insecure_port(f"localhost:{port}")
    if not bound:
        raise SystemExit(f"worker pool: cannot bind localhost:{port}")
    pool = Pool(use_process=True, state_cache_size=0, data_buffer_time_limit_ms=-1)
    beam_fn_api_pb2_grpc.add_BeamFnExternalWorkerPoolServicer_to_server(pool, server)
    server.start()

    def stop(signum, frame):
        server.stop(0)
        for process in list(pool._worker_processes.values()):
            process.kill()
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    log.info("worker pool listening at localhost:%d", bound)
    with open(port_file + ".tmp", "w") as handle:
        handle.write(str(bound))
    os.rename(port_file + ".tmp", port_file)
    server.wait_for_termination()


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="portable_services")
    sub = parser.add_subparsers(dest="command", required=True)
    pool = sub.add_parser("worker-pool", help="serve a Beam external worker pool on localhost")
    pool.add_argument("--port", type=int, default=0)
    pool.add_argument("--port-file", required=True)
    args = parser.parse_args(argv)
    if args.command == "worker-pool":
        _serve_worker_pool(args.port, args.port_file)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
