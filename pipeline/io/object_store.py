"""What an object store (``s3://``, ``gs://``) needs that Beam's FileSystems do not give.

Beam makes each filesystem from the pipeline options it was last given
(``FileSystems.set_options``); its S3 filesystem refuses to exist without them ("Must provide
one of client or options"), so convnorm gives them as soon as the options are parsed
(``use_options``), before the checks and the plan touch ``--input`` and ``--output``.

Beam's S3 filesystem writes every file as a multipart upload, and S3 refuses to complete one
without a part: an empty file (``_SUCCESS``) cannot be written through it. ``put_empty`` writes
one in a single request, with a client made from the same options (``--s3_endpoint_url``,
the keys, the region) as Beam's.

Workers need the same options, and do not all get them: FnApiRunner's worker processes start
with none, Beam's DaskRunner gives its workers none. So every step that opens files carries
the filesystems' options the driver was given (``WorkerFilesystems``, captured when the graph
is built) and gives them to Beam in its worker (``apply``) before it touches a file.

What else a process needs once its filesystems have options runs after them, in the driver
and in each worker: the functions given to ``after_options`` (the command line gives
``pipeline.runners.s3_clients.patched``: one boto3 client per set of S3 settings instead of one
per call). This module patches nothing of Beam's: that is ``pipeline.runners``' part.
"""

from __future__ import annotations

from typing import Any, Callable

from apache_beam.io.filesystems import FileSystems

#: The options last given to ``use_options``: the S3 settings of ``put_empty``.
_options: Any = None
#: What ``use_options`` runs after giving Beam the options (``after_options``).
_after: list[Callable[[], None]] = []


def after_options(function: Callable[[], None]) -> None:
    """Run ``function`` whenever this process's filesystems are given options (``use_options``),
    now if they have been, and in each worker a ``WorkerFilesystems`` made after this call gives
    them to. A module-level function: workers get it pickled by name (idempotent)."""
    if function not in _after:
        _after.append(function)
        if _options is not None:
            function()


def use_options(options: Any) -> None:
    """Make Beam's filesystems (in this process) from ``options``."""
    global _options
    _options = options
    FileSystems.set_options(options)
    for function in _after:
        function()


def filesystem_values(options: Any) -> dict:
    """The filesystems' options ``options`` sets (Beam's ``S3Options``: ``--s3_*``), as plain values."""
    if options is None:
        return {}
    given = options.get_all_options(drop_default=True, retain_unknown_options=False)
    return {name: value for name, value in given.items() if name.startswith("s3_") and value is not None}


class WorkerFilesystems:
    """The filesystems' options of the driver (``use_options``), carried to a worker step.

    Made while the graph is built (in the driver); pickled with the step; ``apply`` in the
    worker gives them to Beam's FileSystems there, once per process. In the driver's own
    process (an in-process run) Beam has them already, and nothing is done."""

    def __init__(self) -> None:
        self._values = filesystem_values(_options)
        self._after = tuple(_after)

    def apply(self) -> None:
        if not self._values or _options is not None:
            return
        from apache_beam.options.pipeline_options import PipelineOptions

        for function in self._after:
            after_options(function)
        use_options(PipelineOptions.from_dictionary(self._values))


def scheme(path: str) -> str:
    """``s3`` of ``s3://bucket/key``; ``""`` for a local path."""
    return path.split("://", 1)[0] if "://" in path else ""


def needs_put_empty(path: str, data: bytes) -> bool:
    """Whether ``data`` at ``path`` cannot be written through Beam's filesystem (see above)."""
    return not data and scheme(path) == "s3"


def _s3_client(config: Any = None) -> Any:
    import boto3  # the aws extra (apache-beam[aws]) brings it
    from apache_beam.options.pipeline_options import PipelineOptions, S3Options

    s3 = (_options if _options is not None else PipelineOptions([])).view_as(S3Options)
    return boto3.session.Session().client(
        config=config,
        service_name="s3",
        region_name=s3.s3_region_name,
        api_version=s3.s3_api_version,
        use_ssl=not s3.s3_disable_ssl,
        verify=s3.s3_verify,
        endpoint_url=s3.s3_endpoint_url,
        aws_access_key_id=s3.s3_access_key_id,
        aws_secret_access_key=s3.s3_secret_access_key,
        aws_session_token=s3.s3_session_token,
    )


def put_empty(path: str) -> None:
    """Write an empty object at ``s3://bucket/key``, replacing what is there."""
    bucket, _, key = path.split("://", 1)[1].partition("/")
    _s3_client().put_object(Bucket=bucket, Key=key, Body=b"")


#: Seconds the access check waits to connect to the store, and for its answer.
CHECK_CONNECT_S, CHECK_READ_S = 10, 30


def access_problem(paths: list[str]) -> str | None:
    """Why the ``s3://`` paths among ``paths`` cannot be used, in one line, or None.

    One request per bucket (a listing of one key under the path, which reading and the output
    check need anyway), made once, without retries: Beam retries an error without an HTTP
    status (no credentials, no answer) with growing waits for minutes, a traceback each time,
    before the run has done anything."""
    buckets: dict[str, str] = {}
    for path in paths:
        if scheme(path) == "s3":
            bucket, _, key = path.split("://", 1)[1].partition("/")
            buckets.setdefault(bucket, key.split("*", 1)[0].split("?", 1)[0].split("[", 1)[0])
    if not buckets:
        return None
    try:
        import botocore.exceptions as aws
        from botocore.config import Config
    except ImportError:  # Beam refuses s3:// itself without the aws extra, in one line
        return None
    config = Config(connect_timeout=CHECK_CONNECT_S, read_timeout=CHECK_READ_S, retries={"total_max_attempts": 1})
    try:
        client = _s3_client(config)
    except aws.BotoCoreError as error:  # a bad region, an endpoint that is no URL ...
        return f"s3:// paths cannot be used: {_said(error)}"
    for bucket, prefix in buckets.items():
        where = f"s3://{bucket}/{prefix}"
        try:
            client.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1)
        except aws.NoCredentialsError:
            return (
                f"{where}: no credentials for the object store: give --s3_access_key_id and "
                "--s3_secret_access_key, or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE "
                "or a credentials file; nothing was run"
            )
        except aws.ClientError as error:
            answer = error.response.get("Error", {})
            code, message = answer.get("Code", "?"), answer.get("Message", "")
            return f"{where}: the object store refused to list it: {code}: {_said(message)}; nothing was run"
        except aws.BotoCoreError as error:  # no answer: a wrong endpoint, a network down
            return f"{where}: the object store could not be asked: {_said(error)}; nothing was run"
    return None


def _said(error: object) -> str:
    return " ".join(str(error).split())[:300]
