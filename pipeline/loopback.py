"""Loopback only: the gRPC servers Beam starts inside convnorm listen on localhost.

Beam 2.77 binds several of its servers to every interface (``[::]``), with no option to
change it, although every client it hands the address to is told ``localhost:<port>``:

- ``apache_beam/runners/portability/fn_api_runner/worker_handlers.py``, ``GrpcServer``:
  control, data, state and logging servers of the FnApiRunner when it talks to workers over
  gRPC (``--direct_running_mode=multi_processing``, and inside a job service);
- ``apache_beam/runners/portability/local_job_service.py``, ``SubprocessSdkWorker.run``:
  the logging server of each worker process in multi-processing mode;
- ``apache_beam/runners/worker/worker_pool_main.py``,
  ``BeamFnExternalWorkerPoolServicer.start``: the worker pool that PortableRunner's LOOPBACK
  mode starts in the driver (it answers StartWorker/StopWorker from anyone);
- ``apache_beam/runners/portability/abstract_job_service.py``: an artifact staging server.

An unauthenticated control plane on a public address hands out the pipeline (pickled DoFns)
and starts processes for whoever asks. ``install()`` replaces the ``grpc`` name in those four
modules with a proxy whose ``server()`` returns servers that bind ``localhost`` wherever Beam
asks for ``[::]`` or ``0.0.0.0``; everything else is the real ``grpc``. Clients already use
``localhost``, so nothing else changes. It is idempotent and affects only servers created in
this process (the SDK worker processes of multi-processing mode listen on nothing).

``python -m pipeline.loopback job-service --port 8099`` runs Beam's local job service with the
same shim, for the portable preset: Beam's ``local_job_service_main`` binds its job port to
localhost but the FnApiRunner it runs jobs on binds ``[::]``. A job service you start any
other way (Flink's, Spark's, Beam's own) binds what it binds: see docs/outputs.md.
"""

from __future__ import annotations

import importlib
import logging
import sys
from typing import Any

import grpc

LOG = logging.getLogger(__name__)

#: Beam modules whose servers bind every interface (see the module docstring).
PATCHED_MODULES = (
    "apache_beam.runners.portability.fn_api_runner.worker_handlers",
    "apache_beam.runners.portability.local_job_service",
    "apache_beam.runners.worker.worker_pool_main",
    "apache_beam.runners.portability.abstract_job_service",
)
WILDCARD_HOSTS = ("[::]", "0.0.0.0", "[::0]", "")


def loopback_address(address: str) -> str:
    """``[::]:0`` -> ``localhost:0``; any other address as it is."""
    host, sep, port = address.rpartition(":")
    if sep and host in WILDCARD_HOSTS:
        return f"localhost:{port}"
    return address


class _LoopbackServer:
    """A grpc.Server whose insecure ports bind localhost instead of every interface."""

    def __init__(self, server) -> None:
        self._server = server

    def add_insecure_port(self, address: str) -> int:
        return self._server.add_insecure_port(loopback_address(address))

    def add_secure_port(self, address: str, credentials) -> int:
        return self._server.add_secure_port(loopback_address(address), credentials)

    def __getattr__(self, name):
        return getattr(self._server, name)


class _LoopbackGrpc:
    """The ``grpc`` module, except that ``server()`` binds localhost."""

    def __init__(self, module) -> None:
        self._module = module

    def server(self, *args, **kwargs):
        return _LoopbackServer(self._module.server(*args, **kwargs))

    def __getattr__(self, name):
        return getattr(self._module, name)


def install() -> None:
    """Make Beam's servers in this process bind localhost (idempotent)."""
    for name in PATCHED_MODULES:
        module: Any = importlib.import_module(name)  # one of Beam's, with a ``grpc`` attribute
        if not isinstance(module.grpc, _LoopbackGrpc):
            module.grpc = _LoopbackGrpc(grpc)


def _job_service(argv: list[str]) -> None:
    # Beam's own entry point, with the shim: its job port binds localhost already, the
    # FnApiRunner servers of each job do so only with it.
    install()
    from apache_beam.runners.portability import local_job_service_main

    local_job_service_main.run(argv or ["--port=8099"])


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "job-service":
        print(
            "usage: python -m pipeline.loopback job-service [--port 8099] [--port_file FILE] "
            "[local_job_service_main options]",
            file=sys.stderr,
        )
        return 2
    _job_service(argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
