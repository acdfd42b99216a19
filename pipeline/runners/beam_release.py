"""The Apache Beam release each use of Beam's private API was written for, and the one check
they make.

pyproject pins ``apache-beam==2.77.*``; another release may have moved what the modules of
``pipeline.runners`` reach into. Each use names the release it was written for (its
``WRITTEN_FOR``); on another release it steps aside (Beam's own behaviour) or refuses, saying
why; it never guesses:

- ``lean_workers.pipeline_runner``: Beam's FnApiRunner and Beam's worker command (the workers
  then import pandas: slower, the same outputs);
- ``loopback.install``: still patches every module that has its ``grpc`` and refuses
  (``RuntimeError``) where one lacks it: the shim is what keeps Beam's servers from other users;
- ``prism._loopback_worker_pool``: a ``PrismError`` (give an environment of your own);
- ``job_service.JobService.of``: None (Beam's own ``wait_until_finish``);
- ``dask_cluster.close_client``: nothing closed;
- ``s3_clients.share``: Beam's own S3 clients, a new one per call (slower, the same outputs).
- ``s3_clients.empty_objects``: Beam's S3 writer, which cannot write an empty object (an empty
  part file on S3 fails the run).

Beam's flag table (``pipeline.config.make_beam_flag_table``) is bound to its release by
``pipeline.config.beam_flags.table_is_current``.
"""

from __future__ import annotations

import functools
import logging

from pipeline.config.beam_flags import installed_beam_version  # reads Beam's version.py, imports no Beam

LOG = logging.getLogger("convnorm")


@functools.lru_cache(maxsize=None)
def written_for(what: str, release: str) -> bool:
    """Is the installed Beam ``release`` (``"2.77"``: any 2.77.x)? Logs once, naming ``what``,
    when it is not."""
    installed = installed_beam_version() or ""
    if installed == release or installed.startswith(release + "."):
        return True
    LOG.warning("%s was written for Apache Beam %s, not %s", what, release, installed or "(none found)")
    return False
