"""Another user on the same host, for the tests that prove a run's services take work from
that run only: Python code run as ``nobody`` (uid 65534, through ``setpriv``), with this
environment's packages (grpc, Beam's protos, dask) on its path, so it can do what an attacker
on a shared machine would: open a gRPC channel to 127.0.0.1 and call a service, or connect a
Dask client.

The packages are this venv's, run by the system's Python of the same version (the venv's own
interpreter may live where that user cannot read, as pyenv's under /root does). A venv or
checkout in a folder the other user cannot enter (a clone under a private temporary
directory, as CI makes) is bind-mounted for it onto a readable folder, in a mount namespace
of its own (``unshare --mount``): the other user reads the same files, nothing on the host
changes. Needs root, Linux, ``setpriv``, that Python and, for such a venv, ``unshare`` and
``mount``; ``intruder_problem`` says which is missing, and the tests skip saying so.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import site
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOBODY = 65534
SYSTEM_PYTHON = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"

#: Run first in the intruder: this venv's packages and the checkout on its path.
PRELUDE = "import sys; sys.path[:0] = {paths!r}\n"


def _paths() -> list[str]:
    return [*site.getsitepackages(), str(ROOT)]


def _readable_by_others(path: str) -> bool:
    # Every folder from / down must let others in, and the file itself be readable.
    current = Path(path).resolve()
    for part in [current, *current.parents]:
        mode = part.stat().st_mode
        if not mode & 0o001 or (part == current and not mode & 0o004):
            return False
    return True


def intruder_problem() -> str | None:
    """Why no second user can be played here, or None."""
    if not sys.platform.startswith("linux"):
        return "needs Linux"
    if os.geteuid() != 0:
        return "needs root, to run code as another user (setpriv)"
    if not shutil.which("setpriv"):
        return "needs setpriv (util-linux)"
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        return f"needs {SYSTEM_PYTHON} (the system's Python of this version) for the other user"
    unreadable = [path for path in _paths() if not _readable_by_others(path)]
    if unreadable and not (shutil.which("unshare") and shutil.which("mount")):
        return f"the other user cannot read {unreadable[0]}, and no unshare/mount to lend it a readable view"
    return None


def run_as_intruder(
    code: str, *args: str, timeout: float = 120, prefix: tuple[str, ...] = ()
) -> subprocess.CompletedProcess:
    """Run ``code`` (Python) as uid 65534 with this environment's packages; its stdout and
    stderr come back as text. ``prefix``: a command to run it under, as root (``nsenter``)."""
    paths = _paths()
    # Folders the other user cannot reach: each bind-mounted onto a readable empty folder,
    # seen only inside the intruder's own mount namespace.
    mounts = {
        path: tempfile.mkdtemp(prefix="convnorm-intruder-", dir="/tmp")
        for path in paths
        if not _readable_by_others(path)
    }
    argv = [*prefix]
    if mounts:
        for point in mounts.values():
            os.chmod(point, 0o755)
        binds = "; ".join(f"mount --bind {shlex.quote(path)} {shlex.quote(point)}" for path, point in mounts.items())
        argv += ["unshare", "--mount", "--propagation", "private", "sh", "-c", f'{binds} && exec "$@"', "sh"]
    argv += ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", SYSTEM_PYTHON, "-c"]
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "PYTHONDONTWRITEBYTECODE": "1"}
    seen = [mounts.get(path, path) for path in paths]
    try:
        return subprocess.run(
            [*argv, PRELUDE.format(paths=seen) + code, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd="/",
        )
    finally:
        for point in mounts.values():
            os.rmdir(point)


#: Calls every method the services a run starts might serve, on one port, and prints a JSON
#: object {method: status code name}: ``OK`` for a call the service answered, whatever else
#: it said. argv: host:port. A stream is opened and its first answer awaited.
PROBE = r"""
import json, sys, grpc
from apache_beam.portability.api import (beam_fn_api_pb2, beam_job_api_pb2, beam_artifact_api_pb2,
    beam_provision_api_pb2)
CALLS = [
    ("/org.apache.beam.model.fn_execution.v1.BeamFnControl/GetProcessBundleDescriptor", "unary",
     beam_fn_api_pb2.GetProcessBundleDescriptorRequest(process_bundle_descriptor_id="1")),
    ("/org.apache.beam.model.fn_execution.v1.BeamFnControl/Control", "stream", beam_fn_api_pb2.InstructionResponse()),
    ("/org.apache.beam.model.fn_execution.v1.BeamFnData/Data", "stream", beam_fn_api_pb2.Elements()),
    ("/org.apache.beam.model.fn_execution.v1.BeamFnState/State", "stream", beam_fn_api_pb2.StateRequest()),
    ("/org.apache.beam.model.fn_execution.v1.BeamFnLogging/Logging", "stream", beam_fn_api_pb2.LogEntry.List()),
    ("/org.apache.beam.model.fn_execution.v1.BeamFnExternalWorkerPool/StopWorker", "unary",
     beam_fn_api_pb2.StopWorkerRequest(worker_id="intruder")),
    ("/org.apache.beam.model.job_management.v1.JobService/GetJobs", "unary", beam_job_api_pb2.GetJobsRequest()),
    ("/org.apache.beam.model.job_management.v1.ArtifactRetrievalService/ResolveArtifacts", "unary",
     beam_artifact_api_pb2.ResolveArtifactsRequest()),
    ("/org.apache.beam.model.fn_execution.v1.ProvisionService/GetProvisionInfo", "unary",
     beam_provision_api_pb2.GetProvisionInfoRequest()),
]
found = {}
with grpc.insecure_channel(sys.argv[1]) as channel:
    for method, kind, request in CALLS:
        try:
            if kind == "unary":
                channel.unary_unary(method, request_serializer=lambda m: m.SerializeToString())(request, timeout=5)
            else:
                call = channel.stream_stream(method, request_serializer=lambda m: m.SerializeToString())(
                    iter([request]), timeout=3)
                next(call, None)
            found[method] = "OK"
        except grpc.RpcError as error:
            code = error.code()
            # A stream the service kept open until our deadline: it took the call.
            found[method] = "OK" if code == grpc.StatusCode.DEADLINE_EXCEEDED and kind == "stream" else code.name
print(json.dumps(found))
"""


def probe_as(user_runs, address: str) -> dict[str, str]:
    """{method: status} of ``PROBE`` against ``address``, run by ``user_runs(code, *args)``."""
    proc = user_runs(PROBE, address)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_as_this_user(code: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``run_as_intruder``'s twin for the run's own user: the probe's control case."""
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


#: What an intruder's probe may get back: refused by us, unknown to that server, or no server.
DENIED = {"PERMISSION_DENIED", "UNIMPLEMENTED", "UNAVAILABLE"}
