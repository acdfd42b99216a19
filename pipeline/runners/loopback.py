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

Loopback is not a boundary on a shared host: every local user reaches 127.0.0.1. So every
server made through the proxy (and convnorm's own worker pool, ``same_user_server``) also
answers only calls from a process of this run's user: ``SameUserOnly`` looks the caller's
socket up in the kernel's table of TCP sockets (``/proc/net/tcp``, ``/proc/net/tcp6``: each
socket's owner uid, as identd does) and refuses any other caller with ``PERMISSION_DENIED``
before the method runs. A caller it cannot place (not loopback, no such socket, no /proc) is
refused too.

``python -m pipeline.runners.loopback job-service --port 8099`` runs Beam's local job service with the
same shim, for the portable preset: Beam's ``local_job_service_main`` binds its job port to
localhost but the FnApiRunner it runs jobs on binds ``[::]``. A job service you start any
other way (Flink's, Spark's, Beam's own) binds what it binds: see docs/outputs.md.
"""

from __future__ import annotations

import importlib
import ipaddress
import logging
import os
import socket
import sys
from typing import Any, Callable, Iterator
from urllib.parse import unquote

import grpc

from pipeline.runners.beam_release import written_for

LOG = logging.getLogger(__name__)

#: The Beam release the shim was written for: it replaces the ``grpc`` name inside Beam's modules
#: below and runs ``local_job_service_main.run`` (``pipeline.runners.beam_release``).
WRITTEN_FOR = "2.77"
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


# --------------------------------------------------------------------------------------------
# The kernel's tables of TCP sockets (Linux's /proc): who owns a socket, what a process listens on

#: A socket's state in the tables when it listens.
LISTEN = "0A"


def _tcp_rows(proc: str = "/proc") -> Iterator[list[str]]:
    """The fields of every socket's line in ``proc``'s TCP tables (``/proc/PID``: the network
    namespace that process is in): local address, state, owner uid, inode, ..."""
    for table in (f"{proc}/net/tcp", f"{proc}/net/tcp6"):
        try:
            with open(table, encoding="ascii") as handle:
                next(handle, None)  # the header
                for line in handle:
                    fields = line.split()
                    if len(fields) > 9:
                        yield fields
        except OSError:
            continue


def _host_order(packed: bytes) -> bytes:
    # The tables spell an address as the host holds each 32-bit word of it in memory; the same
    # swap turns it back.
    words = [packed[i : i + 4] for i in range(0, len(packed), 4)]
    return b"".join(word[::-1] if sys.byteorder == "little" else word for word in words)


def _proc_address(address: str, port: int) -> str:
    """``127.0.0.1``, 5 -> ``0100007F:0005``: an address as the tables spell it."""
    packed = socket.inet_pton(socket.AF_INET6 if ":" in address else socket.AF_INET, address)
    return f"{_host_order(packed).hex().upper()}:{port:04X}"


def _text_address(spelled: str) -> tuple[str, int]:
    """``0100007F:0005`` -> (``127.0.0.1``, 5)."""
    hex_address, port = spelled.rsplit(":", 1)
    packed = _host_order(bytes.fromhex(hex_address))
    return socket.inet_ntop(socket.AF_INET6 if len(packed) == 16 else socket.AF_INET, packed), int(port, 16)


def socket_owner(address: str, port: int) -> int | None:
    """The uid owning the TCP socket whose local end is ``address:port`` (in this network
    namespace), or None when there is none, or when sockets of several owners have that end."""
    # An IPv4 address may stand in either table: gRPC's clients use dual-stack IPv6 sockets.
    ipv4 = address.removeprefix("::ffff:")
    wanted = {_proc_address(address, port)}
    if "." in ipv4:
        wanted |= {_proc_address(ipv4, port), _proc_address(f"::ffff:{ipv4}", port)}
    # Only sockets a process holds (inode not 0): a closed connection's row lingers in
    # TIME_WAIT with uid 0 and its old local port, which a new caller may get again, and a run
    # as root would take that row for its own. Rows that disagree on the owner place no one.
    owners = {int(fields[7]) for fields in _tcp_rows() if fields[1] in wanted and fields[9] != "0"}
    return owners.pop() if len(owners) == 1 else None


def listening_sockets(netns_pid: int | None = None) -> dict[str, tuple[str, int]]:
    """inode -> (address, port) of every listening TCP socket in this network namespace (or in
    the one process ``netns_pid`` is in)."""
    proc = "/proc" if netns_pid is None else f"/proc/{netns_pid}"
    return {fields[9]: _text_address(fields[1]) for fields in _tcp_rows(proc) if fields[3] == LISTEN}


def socket_inodes(pid: int) -> set[str]:
    """The inodes of the sockets process ``pid`` holds open."""
    inodes: set[str] = set()
    try:
        descriptors = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return inodes
    for fd in descriptors:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    return inodes


def listening_addresses(pid: int) -> list[tuple[str, int]]:
    """(address, port) of every TCP socket process ``pid`` listens on."""
    table = listening_sockets(pid)
    return sorted(table[inode] for inode in socket_inodes(pid) if inode in table)


def is_loopback(address: str) -> bool:
    """A loopback address (an IPv4 one mapped into IPv6 included); False for anything else."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def peer_address(peer: str) -> tuple[str, int] | None:
    """gRPC's ``context.peer()`` (``ipv4:127.0.0.1:5``, ``ipv6:%5B::1%5D:5``) -> (address, port);
    None for anything else (a Unix socket, a name)."""
    kind, _, rest = peer.partition(":")
    host, sep, port = unquote(rest).rpartition(":")  # gRPC spells [::1] as %5B::1%5D
    if kind not in ("ipv4", "ipv6") or not sep or not port.isdigit():
        return None
    return host.strip("[]").split("%", 1)[0], int(port)


def caller_is_this_user(peer: str) -> bool:
    """The gRPC caller ``peer`` is a process of this process's user, on this host's loopback."""
    where = peer_address(peer)
    return where is not None and is_loopback(where[0]) and socket_owner(*where) == os.geteuid()


class SameUserOnly(grpc.ServerInterceptor):
    """Refuses, before the method runs, every call from a process of another user (see the
    module docstring): the servers a run starts take work from that run only."""

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        kind = (
            "unary_unary"
            if handler.unary_unary
            else "unary_stream"
            if handler.unary_stream
            else "stream_unary"
            if handler.stream_unary
            else "stream_stream"
        )
        behaviour = getattr(handler, kind)

        def guarded(request, context):
            if not caller_is_this_user(context.peer()):
                LOG.warning("refused a call to %s from another user (%s)", handler_call_details.method, context.peer())
                context.abort(grpc.StatusCode.PERMISSION_DENIED, "this service takes calls from its own run only")
            return behaviour(request, context)

        make: Callable[..., grpc.RpcMethodHandler] = getattr(grpc, f"{kind}_rpc_method_handler")
        return make(
            guarded, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer
        )


def same_user_server(*args, **kwargs):
    """``grpc.server(...)`` whose every method refuses callers of another user."""
    kwargs["interceptors"] = [SameUserOnly(), *(kwargs.get("interceptors") or ())]
    return grpc.server(*args, **kwargs)


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
        return _LoopbackServer(same_user_server(*args, **kwargs))

    def __getattr__(self, name):
        return getattr(self._module, name)


def install() -> None:
    """Make Beam's servers in this process bind localhost (idempotent).

    On a Beam release the shim was not written for, every module that still has its ``grpc``
    is patched all the same, and one that lacks it is a ``RuntimeError``: the shim and
    ``SameUserOnly`` are what keep Beam's servers from other users and interfaces, so a server
    it could not reach is never started unguarded (fail closed)."""
    written_for("convnorm's loopback shim (the grpc of Beam's server modules)", WRITTEN_FOR)
    for name in PATCHED_MODULES:
        module: Any = importlib.import_module(name)  # one of Beam's, with a ``grpc`` attribute
        if not hasattr(module, "grpc"):
            raise RuntimeError(
                f"{name} has no grpc to bind to localhost: convnorm's loopback shim was written for Apache Beam "
                f"{WRITTEN_FOR}; install apache-beam=={WRITTEN_FOR}.* (pyproject.toml pins it)"
            )
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
            "usage: python -m pipeline.runners.loopback job-service [--port 8099] [--port_file FILE] "
            "[local_job_service_main options]",
            file=sys.stderr,
        )
        return 2
    _job_service(argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
