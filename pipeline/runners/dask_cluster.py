"""convnorm on Dask: Beam's DaskRunner on a dask.distributed cluster (docs/cluster.md).

- What configuration knows of Dask (the runner's name, Beam's Dask flags, registering them)
  is ``pipeline.config.dask_flags``'s.
- ``--dask_npartitions`` defaults to the number of shards (Beam's ``Create`` would put 128
  shards in one partition: one task, one worker busy), but to no more than
  ``PARTITIONS_PER_THREAD`` per worker thread of the cluster: each partition is a task, and the
  shuffle of the final combine (Beam's GroupByKey, a Dask bag ``groupby``) costs in proportion
  to the partitions (measured, 20,000 shards on two workers: 64 partitions 43 s, 256 105 s,
  1,024 178 s; one per shard never started: the launcher reached 10 GB building the graph).
- Without ``--dask_client_address`` or ``--dask_scheduler_file``, DaskRunner would start a
  LocalCluster whose dashboard listens on every interface (0.0.0.0:8787). ``local_cluster``
  starts one of convnorm's own instead, every server bound to loopback, no dashboard and
  nothing else served over HTTP (plain HTTP without authentication: any local user could read
  it, on loopback too; ``WORKER_CONFIG``), worker
  processes of one thread each and Dask's sampling profiler off (it cost ~17% of the workers'
  CPU), names its address to the runner, and stops it after the run. ``close_client`` closes
  the client the runner opened.
- Loopback is not a boundary: any local user's ``Client(...).run(...)`` would run code on an
  open cluster's workers. Convnorm's own cluster speaks TLS only, with credentials made for the
  run and held in memory (``Security.temporary()``: scheduler, workers and the runner's client
  present the same certificate, and a connection without it is refused). Beam's DaskRunner
  takes no security argument, so the client finds them in Dask's configuration, set for the
  run's length. A cluster of the user's own is used as it is, with a warning when its
  scheduler's address is not ``tls://``; one that takes plain TCP beyond loopback is refused
  before the run unless ``--insecure-dask-scheduler`` (``pipeline.config.dask_flags``;
  docs/cluster.md shows a TLS set-up).
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any, Iterator

from pipeline.config.dask_flags import is_dask_runner, named_scheduler
from pipeline.runners.beam_release import written_for

LOG = logging.getLogger("convnorm")

#: Bound to loopback: convnorm never listens beyond it.
LOOPBACK = "127.0.0.1"
#: Dask's configuration for convnorm's own cluster: no sampling profiler, Beam's import-time
#: notices kept off the console as in the launcher (``pipeline.console``), and nothing served
#: over HTTP: the scheduler and every worker open a web server even without a dashboard (cluster
#: information, Prometheus metrics, a proxy to the workers), in plain HTTP that any local user
#: can ask; with no routes it answers nothing but "not found".
WORKER_CONFIG = {
    "distributed.worker.profile.enabled": False,
    "distributed.worker.preload": ["pipeline.console", "pipeline.runners.dask_worker"],
    "distributed.scheduler.http.routes": [],
    "distributed.worker.http.routes": [],
}


def dask_options(options):
    """Beam's ``DaskOptions`` view of ``options`` (its module imported)."""
    from apache_beam.runners.dask.dask_runner import DaskOptions

    return options.view_as(DaskOptions)


#: Dask partitions per worker thread, at most, when ``--dask_npartitions`` is not given.
PARTITIONS_PER_THREAD = 4


def default_partitions(options, shards: int, threads: int) -> None:
    """``--dask_npartitions``, unless a partition count or size was given: one per shard, at
    most ``PARTITIONS_PER_THREAD`` per worker thread of the cluster (``threads``)."""
    dask = dask_options(options)
    if dask.npartitions is None and dask.partition_size is None:
        dask.npartitions = max(1, min(shards, PARTITIONS_PER_THREAD * max(threads, 1)))


def _runner(options) -> str | None:
    from apache_beam.options.pipeline_options import StandardOptions

    return options.view_as(StandardOptions).runner


def plan_chunks(job: Any) -> int | None:
    """For a DaskRunner run, the chunks the plan of shards travels in: one per Dask partition
    (DaskRunner's ``Reshuffle`` does nothing, so ``Create``'s partitions are the tasks);
    None (the default chunking) for other runners."""
    options = job.options
    if not is_dask_runner(_runner(options)):
        return None
    return dask_options(options).npartitions or len(job.shards)


def has_cluster(options) -> bool:
    """The run names a Dask scheduler (``--dask_client_address``, ``--dask_scheduler_file``)."""
    dask = dask_options(options)
    return bool(dask.address or dask.scheduler_file)


def _cluster_threads(options) -> int:
    """The worker threads of the cluster a run names, asked of its scheduler (0: no answer)."""
    from distributed import Client

    dask = dask_options(options)
    try:
        with Client(address=dask.address, scheduler_file=dask.scheduler_file, timeout=dask.timeout or 30) as client:
            return sum(client.nthreads().values())
    except Exception as error:  # noqa: BLE001 — the runner will report an unreachable scheduler itself
        LOG.warning("could not ask the Dask scheduler for its workers: %s", error)
        return 0


@contextlib.contextmanager
def local_cluster(options, shards: int = 1) -> Iterator[None]:
    """For a DaskRunner run: the cluster it runs on, and ``--dask_npartitions`` for it
    (``default_partitions``). A run that names no scheduler gets a LocalCluster on loopback
    for the run's length, its address given to the runner. Anything else runs as it is."""
    if not is_dask_runner(_runner(options)):
        yield
        return
    if has_cluster(options):
        warn_without_tls(options)
        default_partitions(options, shards, _cluster_threads(options))
        yield
        return
    import dask
    from distributed import LocalCluster
    from distributed.security import Security

    # The scheduler runs in this process: its INFO lines (every connection) are not for a user;
    # convnorm says where it listens.
    logging.getLogger("distributed").setLevel(logging.WARNING)
    security = Security.temporary()
    with dask.config.set(WORKER_CONFIG):
        cluster = LocalCluster(
            host=LOOPBACK,
            # No dashboard: its HTTP has no authentication, and loopback is every local user's.
            # (The scheduler's web server, serving nothing, still listens: on a free port.)
            dashboard_address=f"{LOOPBACK}:0",
            scheduler_kwargs={"dashboard": False},
            worker_dashboard_address=None,
            processes=True,
            threads_per_worker=1,  # Python's GIL: one process per core does the work
            protocol="tls://",
            security=security,
        )
    dask_options(options).address = cluster.scheduler_address
    default_partitions(options, shards, len(cluster.workers))  # one thread each
    LOG.info(
        "started a local Dask cluster: %d worker process(es), scheduler %s, no dashboard",
        len(cluster.workers),
        cluster.scheduler_address,
    )
    try:
        with dask.config.set(client_tls_config(security)):
            yield
    finally:
        dask_options(options).address = None
        cluster.close()


def client_tls_config(security: Any) -> dict:
    """Dask's configuration under which a ``Client()`` that is given no security (Beam's
    DaskRunner makes one so) presents ``security``'s certificate and requires TLS."""
    return {
        "distributed.comm.require-encryption": True,
        "distributed.comm.tls.ca-file": security.tls_ca_file,
        "distributed.comm.tls.client.cert": security.tls_client_cert,
        "distributed.comm.tls.client.key": security.tls_client_key,
    }


def scheduler_address(options) -> str | None:
    """The scheduler a run names: ``--dask_client_address``, or the one its scheduler file holds."""
    dask = dask_options(options)
    named = named_scheduler(dask.address, dask.scheduler_file)
    return named[1] if named else None  # the runner reports a scheduler file it cannot read


def warn_without_tls(options) -> None:
    """A user's own scheduler that takes plain TCP: anyone who reaches it can run code there
    (one beyond loopback got here only through ``--insecure-dask-scheduler``)."""
    address = scheduler_address(options)
    if address and not address.startswith("tls://"):
        LOG.warning(
            "the Dask scheduler %s takes connections without TLS: anyone who can reach it (every local "
            "user, for a loopback address) can run code on its workers; docs/cluster.md shows a TLS set-up",
            address,
        )


#: The Beam release ``close_client`` was written for: Beam's DaskRunner result keeps its client
#: as ``result.client``, no API of Beam's (``pipeline.runners.beam_release``).
CLOSE_CLIENT_WRITTEN_FOR = "2.77"


def close_client(result: Any) -> None:
    """Close the dask.distributed client a DaskRunner result holds (its connections stay open
    otherwise); nothing for other runners' results, nor on a Beam release this was not written
    for."""
    client = getattr(result, "client", None)
    if client is not None and hasattr(client, "close"):
        if not written_for(
            "convnorm's closing of the Dask client (a DaskRunner result's client)", CLOSE_CLIENT_WRITTEN_FOR
        ):
            return
        try:
            client.close()
        except Exception as error:  # noqa: BLE001 — the run is over; closing is tidying up
            LOG.warning("could not close the Dask client: %s", error)
