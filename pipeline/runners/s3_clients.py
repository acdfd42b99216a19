"""One boto3 client per set of S3 settings in a process, for Beam's S3 filesystem.

Beam 2.77's S3 filesystem makes a new boto3 session and client for every call (``exists``,
``open``, ``match``, each rename batch): 0.3 s of CPU each, two thirds of a small run's time,
spent loading botocore's service models again. ``share`` makes the calls of one process share
one client per set of S3 settings (botocore's clients are thread-safe; Beam's wrapper keeps the
state of one download, so each wrapper stays its own).

``empty_objects`` lets Beam's S3 writer make an empty object: its multipart upload of no bytes
completes with no part, which S3 refuses (MalformedXML); convnorm writes an empty part file
for every planned part an output got nothing in (the plan names every file).

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


def empty_objects() -> None:
    """Beam's S3 uploader, made to upload one empty part when nothing was written, so an empty
    file is an empty object (idempotent; nothing without the aws extra or on another release)."""
    try:
        from apache_beam.io.aws import s3io
    except ImportError:  # no aws extra: no s3:// paths
        return
    uploader = s3io.S3Uploader
    if getattr(uploader, "_convnorm_empty", False) or not written_for("empty S3 objects", WRITTEN_FOR):
        return
    finish = uploader.finish

    def finish_even_empty(self: Any) -> None:
        if not self.parts and not self.buffer and self.last_error is None:
            self._write_to_s3(b"")  # the one part of an empty object
        finish(self)

    uploader.finish = finish_even_empty  # type: ignore[method-assign]
    uploader._convnorm_empty = True  # type: ignore[attr-defined]


def patched() -> None:
    """Every change convnorm makes to Beam's S3 filesystem (``share``, ``empty_objects``)."""
    share()
    empty_objects()
