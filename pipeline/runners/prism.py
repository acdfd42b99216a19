"""Running convnorm on Prism, Beam's own local runner, with no one else able to reach it.

Given ``--runner PrismRunner``, Beam would start Prism itself and, for the Python workers, a
"loopback" worker pool. Both listen on every interface and take work from anyone: Prism's job
service runs any job it is sent (a ``PROCESS`` environment is a command Prism runs as
convnorm's user), and the worker pool starts SDK workers in this process for whoever asks. So
``prism_services(options)`` starts them itself, inside the run's private network namespace
(``pipeline.runners.private_network``, entered before Beam's import):

- Prism as a child process in its own session (a Ctrl-C on the terminal reaches convnorm,
  which drains the job, not Prism, which would kill it), on a free loopback port, with its
  web UI off; stopped by its PID when the run ends (SIGTERM, then SIGKILL). Once it answers,
  the sockets it really listens on are read from /proc and logged; outside a private
  namespace (``--host-loopback``) one beyond loopback stops the run (a binary of upstream's
  listens on every interface; the one ``.ci/build-prism`` builds, on 127.0.0.1 only).
- Beam's worker-pool service, in this process as Beam's loopback mode runs it, but bound to
  ``localhost`` and refusing callers of another user (``pipeline.runners.loopback.same_user_server``);
  the job is submitted with ``--environment_type EXTERNAL`` pointing at it.

The binary is found in this order: ``--prism_location``, ``$CONVNORM_PRISM``, the
repository's ``build/prism/prism``. Other runners are left alone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

from apache_beam.options.pipeline_options import (
    PipelineOptions,
    PortableOptions,
    PrismRunnerOptions,
    StandardOptions,
)

from pipeline.runners import private_network
from pipeline.runners.beam_release import written_for
from pipeline.runners.loopback import is_loopback, listening_addresses, same_user_server

LOG = logging.getLogger("convnorm")

#: Where ``.ci/build-prism`` puts the binary (the repository's git-ignored build dir).
BUILT_PRISM = Path(__file__).resolve().parents[2] / "build" / "prism" / "prism"
#: Seconds to wait for Prism to accept connections.
PRISM_START_TIMEOUT_S = 60


class PrismError(RuntimeError):
    """Prism cannot be found or did not start; the message says what to do."""


def is_prism(options: PipelineOptions) -> bool:
    return (options.view_as(StandardOptions).runner or "").lower() in ("prismrunner", "prism")


def find_prism(options: PipelineOptions) -> str:
    """The Prism binary to run (see the module docstring for the order)."""
    for candidate in (options.view_as(PrismRunnerOptions).prism_location, os.environ.get("CONVNORM_PRISM")):
        if candidate:
            if not os.access(candidate, os.X_OK):
                raise PrismError(f"Prism binary {candidate!r} does not exist or is not executable")
            return candidate
    if os.access(BUILT_PRISM, os.X_OK):
        return str(BUILT_PRISM)
    raise PrismError("no Prism binary: build one with .ci/build-prism (needs Go), or pass --prism_location PATH")


def _free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _die_with_parent() -> None:
    # In the child before exec: SIGTERM when convnorm dies outright (Linux), so Prism never
    # outlives the run that started it.
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG


def _stop(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
    proc.wait()


def _listening_or_refuse(binary: str, pid: int) -> list[tuple[str, int]]:
    """What Prism listens on; ``PrismError`` when that is beyond loopback and the run is not in
    a private network namespace (where nothing outside reaches any of its addresses)."""
    listening = listening_addresses(pid)
    beyond = [f"{address}:{port}" for address, port in listening if not is_loopback(address)]
    if beyond and not private_network.entered():
        raise PrismError(
            f"Prism ({binary}) listens beyond loopback, on {', '.join(beyond)}: anyone who reaches "
            "that address can run code as this user. Use a Prism that binds 127.0.0.1 "
            "(.ci/build-prism builds one), or run where a private network namespace can be made"
        )
    return listening


@contextlib.contextmanager
def _prism_process(binary: str) -> Iterator[str]:
    """Start Prism on a free loopback port; yield its job endpoint; stop it by PID."""
    port = _free_loopback_port()
    log = tempfile.NamedTemporaryFile(prefix="convnorm-prism-", suffix=".log", delete=False)
    argv = [
        binary,
        "--job_port",
        str(port),
        "--serve_http=false",
        "--log_level",
        "warn",
        "--idle_shutdown_timeout",
        "-1s",
    ]
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=_die_with_parent,
    )
    log.close()
    try:
        deadline = time.monotonic() + PRISM_START_TIMEOUT_S
        while not _accepts(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = Path(log.name).read_text(errors="replace")[-4000:]
                raise PrismError(f"Prism ({binary}) did not start on 127.0.0.1:{port}:\n{tail}")
            time.sleep(0.05)
        listening = _listening_or_refuse(binary, proc.pid)
        LOG.info(
            "Prism %s (pid %d, log %s) listening on %s%s",
            binary,
            proc.pid,
            log.name,
            ", ".join(f"{address}:{port}" for address, port in listening) or f"127.0.0.1:{port}",
            " inside this run's private network namespace"
            if private_network.entered()
            else f", on the host's loopback, where every local user can reach it (--host-loopback: "
            f"{private_network.why_not()})",
        )
        yield f"localhost:{port}"
    finally:
        _stop(proc)
        with contextlib.suppress(OSError):
            os.unlink(log.name)


#: The Beam release ``_loopback_worker_pool`` was written for: it builds Beam's worker-pool
#: servicer (``BeamFnExternalWorkerPoolServicer``) on Beam's shared thread pool itself
#: (``pipeline.runners.beam_release``).
WORKER_POOL_WRITTEN_FOR = "2.77"


@contextlib.contextmanager
def _loopback_worker_pool() -> Iterator[str]:
    """Beam's worker-pool service as its loopback mode runs it (SDK workers as threads of this
    process), bound to localhost instead of every interface and refusing callers of another
    user; yields its address. PrismError on a Beam release it was not written for."""
    if not written_for("convnorm's loopback worker pool for Prism", WORKER_POOL_WRITTEN_FOR):
        raise PrismError(
            f"convnorm's loopback worker pool was written for Apache Beam {WORKER_POOL_WRITTEN_FOR}, not the one "
            "installed; give --environment_type/--environment_config of your own, or install "
            f"apache-beam=={WORKER_POOL_WRITTEN_FOR}.*"
        )
    from apache_beam.portability.api import beam_fn_api_pb2_grpc
    from apache_beam.runners.worker.worker_pool_main import BeamFnExternalWorkerPoolServicer
    from apache_beam.utils import thread_pool_executor

    server = same_user_server(
        thread_pool_executor.shared_unbounded_instance(),
        options=[("grpc.http2.max_pings_without_data", 0), ("grpc.http2.max_ping_strikes", 0)],
    )
    port = server.add_insecure_port("localhost:0")
    beam_fn_api_pb2_grpc.add_BeamFnExternalWorkerPoolServicer_to_server(
        BeamFnExternalWorkerPoolServicer(use_process=False, data_buffer_time_limit_ms=-1), server
    )
    server.start()
    try:
        yield f"localhost:{port}"
    finally:
        server.stop(1)


@contextlib.contextmanager
def prism_services(options: PipelineOptions) -> Iterator[None]:
    """For a Prism run: start Prism and a worker pool on loopback and point ``options`` at
    them (unless the user gave a ``--job_endpoint`` or an environment of their own)."""
    portable = options.view_as(PortableOptions)
    if not is_prism(options) or portable.job_endpoint:
        yield
        return
    binary = find_prism(options)
    if not private_network.entered() and not options.get_all_options().get("host_loopback"):
        # ``pipeline.cli.main`` enters the namespace before Beam's import; a caller that did not
        # would start Prism where every local user reaches it.
        raise PrismError(
            "Prism would run on the host's loopback, where every local user can send it work: start "
            "the run with the convnorm command (it runs Prism in a private network namespace), or "
            "pass --host-loopback where every local user is trusted"
        )
    with contextlib.ExitStack() as stack:
        portable.job_endpoint = stack.enter_context(_prism_process(binary))
        if not portable.environment_type or portable.environment_type.upper() == "LOOPBACK":
            portable.environment_type = "EXTERNAL"
            portable.environment_config = stack.enter_context(_loopback_worker_pool())
        yield
