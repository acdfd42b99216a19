"""An S3-protocol server for the object-storage tests: moto's standalone server (the ``test``
extra's ``moto[server]``), started on 127.0.0.1 on a port the kernel picks, and stopped by its
PID (its process group) when the tests are done.

It is a test fixture, nothing more: it accepts any key, keeps the objects in memory, and, bound
to loopback, it is reachable by every local user for the minutes it runs (loopback is not a
boundary); the tests put only their own generated data in it. docs/operations.md says so.
"""

from __future__ import annotations

import re
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from portable_services import kill_group, popen_in_group, service_env, tail

#: Seconds for the server to say where it listens.
START_TIMEOUT_S = 60
#: The keys the tests give (moto takes any).
ACCESS_KEY, SECRET_KEY, REGION = "convnorm-test", "convnorm-test-secret", "us-east-1"


def s3_problem() -> str | None:
    """Why the object-storage tests cannot run here, or None."""
    try:
        import boto3  # noqa: F401
        import moto.server  # noqa: F401
        from apache_beam.io.aws import s3filesystem  # noqa: F401
    except ImportError as error:
        return f"needs the aws extra and moto[server] (pip install -e '.[test,aws]'; .ci/run installs them): {error}"
    return None


@dataclass
class S3Server:
    endpoint: str
    proc: object
    log: Path

    def flags(self) -> list[str]:
        """The Beam flags that send convnorm's S3 filesystem here."""
        return [
            f"--s3_endpoint_url={self.endpoint}",
            f"--s3_access_key_id={ACCESS_KEY}",
            f"--s3_secret_access_key={SECRET_KEY}",
            f"--s3_region_name={REGION}",
        ]

    def client(self):
        import boto3

        return boto3.session.Session().client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
        )

    def new_bucket(self) -> str:
        name = f"logs-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def upload(self, bucket: str, prefix: str, directory: Path) -> None:
        for path in sorted(directory.iterdir()):
            if path.is_file():
                self.client().put_object(Bucket=bucket, Key=f"{prefix}/{path.name}", Body=path.read_bytes())

    def objects(self, bucket: str, prefix: str = "") -> dict[str, bytes]:
        """Key (below ``prefix/``) -> bytes of every object under ``prefix``."""
        client = self.client()
        found = {}
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for entry in page.get("Contents", []):
                key = entry["Key"]
                found[key[len(prefix) :].lstrip("/")] = client.get_object(Bucket=bucket, Key=key)["Body"].read()
        return dict(sorted(found.items()))

    def stop(self) -> None:
        kill_group(self.proc)  # type: ignore[arg-type]


def start_s3_server(work: Path) -> S3Server:
    """moto's server on 127.0.0.1, a free port; raises RuntimeError with its log if it does not come up."""
    log = work / "moto.log"
    env = service_env()
    with open(log, "wb") as out:
        proc = popen_in_group(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", "0"],
            stdout=out,
            stderr=out,
            env=env,
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        found = re.search(rb"Running on (http://127\.0\.0\.1:\d+)", log.read_bytes())
        if found:
            return S3Server(found.group(1).decode(), proc, log)
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    kill_group(proc)
    raise RuntimeError(f"moto's S3 server did not come up:\n{tail(log)}")
