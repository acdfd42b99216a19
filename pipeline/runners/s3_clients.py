"""One boto3 client per set of S3 settings in a process, for Beam's S3 filesystem.

Beam 2.77's S3 filesystem makes a new boto3 session and client for every call (``exists``,
``open``, ``match``, each rename batch): 0.3 s of CPU each, two thirds of a small run's time,
spent loading botocore's service models again. ``share`` makes the calls of one process share
one client per set of S3 settings (botocore's clients are thread-safe; Beam's wrapper keeps the
state of one download, so each wrapper stays its own).

It replaces ``__init__`` of Beam's client wrapper and sets its private fields, so it lives here
and checks the Beam release it was written for (``pipeline.runners.beam_release``): on another
one it steps aside (Beam's own behaviour, a client per call). The command line hands it to
``pipeline.io.object_store.after_options``, which runs it wherever Beam's filesystems are given
options: in the driver and in every worker a step carries them to.
"""

from __future__ import annotations

from typing import Any

from pipeline.runners.beam_release import written_for

#: The Beam release whose S3 client wrapper ``share`` knows (its attributes).
WRITTEN_FOR = "2.77"


def share() -> None:
    """Beam's S3 client wrapper, made to reuse one boto3 client per S3 settings in this process
    (idempotent; nothing without the aws extra or on another release)."""
    try:
        from apache_beam.io.aws.clients.s3 import boto3_client
    except ImportError:  # no aws extra: no s3:// paths
        return
    wrapper = boto3_client.Client
    if getattr(wrapper, "_convnorm_shared", False) or not written_for("sharing Beam's S3 clients", WRITTEN_FOR):
        return
    from pipeline.io.object_store import filesystem_values

    made = wrapper.__init__
    shared: dict[str, Any] = {}

    def __init__(self: Any, options: Any) -> None:
        values = filesystem_values(options) if hasattr(options, "view_as") else dict(options or {})
        key = repr(sorted(values.items()))
        if key not in shared:
            made(self, options)
            shared[key] = self.client
            return
        self.client = shared[key]
        self._download_request = None
        self._download_stream = None
        self._download_pos = 0

    wrapper.__init__ = __init__  # type: ignore[method-assign]
    wrapper._convnorm_shared = True  # type: ignore[attr-defined]
    wrapper._convnorm_beam_init = made  # type: ignore[attr-defined]  # Beam's own, for a test to restore
