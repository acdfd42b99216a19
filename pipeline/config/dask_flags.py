"""What configuration knows of Dask, without importing Beam or dask (docs/cluster.md).

- ``--runner DaskRunner`` is accepted: Beam knows the runner only by its dotted path
  (``DASK_RUNNER``), which ``use_dask`` puts in its place.
- Beam's Dask flags (``--dask_client_address``, ``--dask_scheduler_file``,
  ``--dask_npartitions``, ...) exist only once ``apache_beam.runners.dask.dask_runner`` is
  imported, and importing dask costs most of a second: ``DASK_FLAGS`` lists them for the check
  before Beam's import, and ``register_options`` imports the module when a command line or
  preset names Dask (``names_dask``).

The cluster itself is ``pipeline.runners.dask_cluster``'s."""

from __future__ import annotations

import ipaddress
import json
import sys
from typing import Any, Iterable
from urllib.parse import urlsplit

#: The module whose import declares Beam's Dask flags (a string the layout test can read).
DASK_RUNNER_MODULE = "apache_beam.runners.dask.dask_runner"


#: Beam's DaskRunner, as Beam wants it named.
DASK_RUNNER = DASK_RUNNER_MODULE + ".DaskRunner"


#: Beam's Dask flags (``DaskOptions``) -> their option names, known without importing Beam or
#: dask: the command line's check before Beam's import (``pipeline.config.precheck.precheck``) and a
#: preset's keys (``dask_scheduler_file:``) need them. Each takes one value.
DASK_FLAGS = {
    "--dask_client_address": "address",
    "--dask_connection_timeout": "timeout",
    "--dask_scheduler_file": "scheduler_file",
    "--dask_client_name": "name",
    "--dask_connection_limit": "connection_limit",
    "--dask_npartitions": "npartitions",
    "--dask_partition_size": "partition_size",
}


#: The runner's name as the command line's runner check lists it.
DASK_RUNNER_NAME = "DaskRunner"


#: What to install when it is missing.
INSTALL_HINT = "install the dask extra: pip install -e '.[dask]' in convnorm's checkout"


def is_dask_runner(runner: str | None) -> bool:
    """``--runner`` names Beam's DaskRunner (``DaskRunner``, ``dask``, or its dotted path)."""
    name = (runner or "").lower()
    return name in ("daskrunner", "dask") or name == DASK_RUNNER.lower()


def dask_problem() -> str | None:
    """Why DaskRunner cannot run here (dask not installed), or None."""
    try:
        import dask.distributed  # noqa: F401
    except ImportError as error:
        return f"--runner DaskRunner needs dask.distributed ({error}); {INSTALL_HINT}"
    return None


def names_dask(word: str) -> bool:
    """A command-line word (or a preset's key or value) that names Dask: one of its flags, or
    the runner."""
    word = str(word).lower().lstrip("-")
    return word.startswith("dask_") or is_dask_runner(word.split("=", 1)[-1])


def register_options(words: Iterable[Any]) -> bool:
    """Beam declares the Dask flags only in the DaskRunner's module: import it when ``words``
    (a command line, a preset's keys and values) name Dask, not otherwise (importing dask costs
    most of a second). True if it was imported now; ``ValueError`` (why) if it cannot be."""
    if not any(isinstance(word, str) and names_dask(word) for word in words) or DASK_RUNNER_MODULE in sys.modules:
        return False
    problem = dask_problem()
    if problem:
        raise ValueError(problem)
    import importlib

    importlib.import_module(DASK_RUNNER_MODULE)
    return True


def use_dask(options) -> None:
    """For a DaskRunner run: the runner by its dotted path (Beam knows no short name for it)."""
    from apache_beam.options.pipeline_options import StandardOptions

    options.view_as(StandardOptions).runner = DASK_RUNNER


#: Dask's protocols that encrypt and authenticate (with certificates: ``distributed.comm.tls``).
TLS_PROTOCOLS = ("tls", "wss")
#: The flag that accepts a scheduler taking plain TCP beyond loopback.
INSECURE_FLAG = "--insecure-dask-scheduler"


def named_scheduler(address: str | None, scheduler_file: str | None) -> tuple[str, str] | None:
    """``(flag, address)`` of the scheduler a run names: ``--dask_client_address``, else the
    address its ``--dask_scheduler_file`` holds; ``None`` when neither (or a file the runner
    will report itself: missing, not JSON)."""
    if address:
        return "--dask_client_address", str(address)
    if not scheduler_file:
        return None
    try:
        with open(scheduler_file, encoding="utf-8") as handle:
            found = json.load(handle).get("address")
    except (OSError, ValueError, AttributeError):
        return None
    return (f"--dask_scheduler_file {scheduler_file}", found) if isinstance(found, str) and found else None


def is_plain_remote(address: str) -> bool:
    """A scheduler address without TLS on a host that is not this machine's loopback (a host
    name other than ``localhost`` counts as remote: no name is looked up)."""
    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    if parts.scheme in TLS_PROTOCOLS or parts.scheme == "inproc":
        return False
    host = parts.hostname or ""
    if host == "localhost":
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return True


def insecure_scheduler_problem(address: str | None, scheduler_file: str | None, accepted: bool) -> str | None:
    """Why a run must not be sent to the scheduler it names: plain TCP beyond loopback lets
    anyone on the network run code on the workers (and read their credentials), unless
    ``--insecure-dask-scheduler`` accepts that; ``None`` when it may."""
    named = named_scheduler(address, scheduler_file)
    if named is None or accepted or not is_plain_remote(named[1]):
        return None
    flag, where = named
    return (
        f"{flag}: the Dask scheduler {where} takes connections without TLS, so anyone on the network who "
        f"reaches it can run code on its workers and read their credentials; give it TLS (a tls:// address, "
        f"docs/cluster.md) or accept the risk with {INSECURE_FLAG}"
    )
