"""convnorm reads and writes ``s3://`` through Beam's S3 filesystem, against a real S3-protocol
server on loopback (moto's, ``tests/s3_server.py``, started and stopped by its PID).

Found: ``--output s3://logs/out`` with ``--s3_endpoint_url`` and keys was refused at the first
check ("Must provide one of client or options": Beam's S3 filesystem was never given the
pipeline's options); once given them, ``_SUCCESS`` could not be written (an empty file is a
multipart upload without a part, which S3 refuses), the run's temporary "directory" stayed in
the bucket (an object store has no directory to delete), and FnApiRunner's worker processes
and Dask's workers, which get no options, looked for the bucket at amazonaws.com.

What must hold: the same normalized bytes as a local run of the same files (drop metrics and
dead letters too, but for the ``source`` they name), ``_SUCCESS`` written last with every file
the manifest lists in place at its sha256, nothing of the run's own (lock, temporary objects)
left, and the ownership rules of docs/outputs.md on a store without rename or links.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from engine_outputs import write_mixed_input
from portable_services import service_env
from s3_server import SECRET_KEY, S3Server, s3_problem, start_s3_server

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "conversations.jsonl"
RUN_TIMEOUT_S = 300
OUTPUT_DIRS = ("normalized", "drops", "dead_letter")


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory):
    problem = s3_problem()
    if problem:
        pytest.skip(problem)
    server = start_s3_server(tmp_path_factory.mktemp("moto"))
    try:
        yield server
    finally:
        server.stop()


def convnorm(
    *args: str, cwd: Path, prelude: str = "", env: dict | None = None, timeout: float = RUN_TIMEOUT_S
) -> subprocess.CompletedProcess:
    """``python -m pipeline ARGS`` (after ``prelude``, Python run first in the same process)."""
    code = f"{prelude}\nimport sys\nfrom pipeline.cli.main import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, *args, "--quiet"],
        cwd=cwd,
        env=env or service_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def local_tree(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def data_files(tree: dict[str, bytes]) -> dict[str, bytes]:
    return {k: v for k, v in tree.items() if k.split("/")[0] in OUTPUT_DIRS or k == "summary.json"}


def assert_manifest_holds(tree: dict[str, bytes]) -> dict:
    manifest = json.loads(tree["_convnorm_manifest.json"])
    assert manifest["complete"] is True
    for entry in manifest["files"]:
        data = tree[entry["path"]]
        assert (len(data), hashlib.sha256(data).hexdigest()) == (entry["bytes"], entry["sha256"]), entry["path"]
    assert tree["_SUCCESS"] == b""
    leftovers = [k for k in tree if k.startswith("_convnorm_temp-") or k == "_convnorm.lock"]
    assert not leftovers, f"the run left its own objects behind: {leftovers}"
    return manifest


def run_both(s3: S3Server, tmp_path: Path, *extra: str) -> tuple[str, dict[str, bytes], dict[str, bytes]]:
    """The mixed input run from a local directory and from the bucket; (bucket, local tree, bucket tree)."""
    inputs = tmp_path / "in"
    write_mixed_input(inputs)
    bucket = s3.new_bucket()
    s3.upload(bucket, "logs", inputs)
    common = ["--shard-bytes=65536", "--no-report"]
    local = convnorm("--input", f"{inputs}/", "--output", str(tmp_path / "local"), *common, cwd=tmp_path)
    assert local.returncode == 0, local.stderr
    remote = convnorm(
        "--input",
        f"s3://{bucket}/logs/",
        "--output",
        f"s3://{bucket}/clean",
        *common,
        *s3.flags(),
        *extra,
        cwd=tmp_path,
    )
    assert remote.returncode == 0, remote.stderr
    return bucket, local_tree(tmp_path / "local"), s3.objects(bucket, "clean")


def assert_same_data(local: dict[str, bytes], remote: dict[str, bytes], inputs: Path, bucket: str) -> None:
    """The data files of both runs are the same bytes, but for the input paths drops and dead letters name."""
    ours = data_files(remote)
    theirs = {
        k: v.replace(f"{inputs}/".encode(), f"s3://{bucket}/logs/".encode()) for k, v in data_files(local).items()
    }
    assert list(ours) == list(theirs)
    for name in ours:
        assert ours[name] == theirs[name], f"{name} differs from the local run's"
    assert any(local[k] == remote[k] for k in local if k.startswith("normalized/"))  # no paths in these


def test_s3_input_and_output_give_the_local_bytes(s3: S3Server, tmp_path: Path) -> None:
    bucket, local, remote = run_both(s3, tmp_path)
    assert_same_data(local, remote, tmp_path / "in", bucket)
    manifest = assert_manifest_holds(remote)
    assert SECRET_KEY.encode() not in remote["_convnorm_manifest.json"]  # named, never its value
    assert manifest["options"]["s3_secret_access_key"] == "<redacted>"
    # The inputs are as they were: convnorm never writes beside them.
    assert sorted(s3.objects(bucket, "logs")) == sorted(p.name for p in (tmp_path / "in").iterdir() if p.is_file())


def test_s3_with_two_worker_processes(s3: S3Server, tmp_path: Path) -> None:
    # FnApiRunner's worker processes start without the pipeline's options: the steps carry them.
    bucket, local, remote = run_both(s3, tmp_path, "--direct_num_workers=2", "--direct_running_mode=multi_processing")
    assert_same_data(local, remote, tmp_path / "in", bucket)
    assert_manifest_holds(remote)


def test_s3_on_dask_workers(s3: S3Server, tmp_path: Path) -> None:
    pytest.importorskip("dask.distributed", reason="the dask extra is not installed (pip install -e '.[dask]')")
    # Beam's DaskRunner gives its workers no options: they read and write the bucket all the same.
    bucket, local, remote = run_both(s3, tmp_path, "--runner=DaskRunner")
    assert_same_data(local, remote, tmp_path / "in", bucket)
    assert_manifest_holds(remote)


#: Run before convnorm in its process: what is in the bucket when _SUCCESS is written, into a file.
_WATCH_SUCCESS = r"""
import json, os
from pipeline.io import object_store
_put_empty = object_store.put_empty
def _watched(path):
    import boto3
    bucket, _, key = path.split("://", 1)[1].partition("/")
    s3 = boto3.session.Session().client("s3", endpoint_url=os.environ["WATCH_ENDPOINT"], region_name="us-east-1",
        aws_access_key_id="k", aws_secret_access_key="k")
    keys = [o["Key"] for p in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket) for o in p.get("Contents", [])]
    with open(os.environ["WATCH_FILE"], "a") as out:
        out.write(json.dumps({"put": key, "present": keys}) + "\n")
    _put_empty(path)
object_store.put_empty = _watched
"""


def test_s3_success_is_written_last(s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bucket = s3.new_bucket()
    s3.client().put_object(Bucket=bucket, Key="logs/conversations.jsonl", Body=SAMPLE.read_bytes())
    watch = tmp_path / "watch.jsonl"
    monkeypatch.setenv("WATCH_ENDPOINT", s3.endpoint)
    monkeypatch.setenv("WATCH_FILE", str(watch))
    out = f"s3://{bucket}/clean"
    run = convnorm(
        "--input",
        f"s3://{bucket}/logs/conversations.jsonl",
        "--output",
        out,
        *s3.flags(),
        cwd=tmp_path,
        prelude=_WATCH_SUCCESS,
    )
    assert run.returncode == 0, run.stderr
    (seen,) = [json.loads(line) for line in watch.read_text().splitlines()]
    assert seen["put"] == "clean/_SUCCESS"
    final = s3.objects(bucket, "clean")
    manifest = assert_manifest_holds(final)
    present = {key.removeprefix("clean/") for key in seen["present"]}
    # Every file the manifest lists (the page too) and the manifest are there before the marker.
    assert {entry["path"] for entry in manifest["files"]} | {"_convnorm_manifest.json"} <= present
    assert "_SUCCESS" not in present


def test_s3_overwrite_deletes_only_what_the_manifest_lists(s3: S3Server, tmp_path: Path) -> None:
    bucket = s3.new_bucket()
    client = s3.client()
    client.put_object(Bucket=bucket, Key="logs/conversations.jsonl", Body=SAMPLE.read_bytes())
    args = ["--input", f"s3://{bucket}/logs/conversations.jsonl", "--output", f"s3://{bucket}/clean", "--no-report"]
    first = convnorm(*args, *s3.flags(), cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    before = s3.objects(bucket, "clean")
    # A file of the user's among convnorm's: kept by --overwrite, which deletes only what the manifest lists.
    client.put_object(Bucket=bucket, Key="clean/normalized/notes.txt", Body=b"mine")
    again = convnorm(*args, *s3.flags(), cwd=tmp_path)
    assert again.returncode == 2 and "--overwrite" in again.stderr
    replaced = convnorm(*args, "--overwrite", *s3.flags(), cwd=tmp_path)
    assert replaced.returncode == 0, replaced.stderr
    after = s3.objects(bucket, "clean")
    assert after.pop("normalized/notes.txt") == b"mine"
    assert data_files(after) == data_files(before)
    assert_manifest_holds(after)
    # A listed file changed since (its sha256 is not the manifest's): perhaps the user's now, nothing deleted.
    client.put_object(Bucket=bucket, Key="clean/drops/part-00000.jsonl", Body=b"edited\n")
    changed = s3.objects(bucket, "clean")
    refused = convnorm(*args, "--overwrite", *s3.flags(), cwd=tmp_path)
    assert refused.returncode == 2 and "changed since convnorm wrote them" in refused.stderr
    assert s3.objects(bucket, "clean") == changed


def test_s3_output_without_a_manifest_is_refused(s3: S3Server, tmp_path: Path) -> None:
    bucket = s3.new_bucket()
    client = s3.client()
    client.put_object(Bucket=bucket, Key="logs/conversations.jsonl", Body=SAMPLE.read_bytes())
    client.put_object(Bucket=bucket, Key="clean/summary.json", Body=b"{}")
    args = ["--input", f"s3://{bucket}/logs/conversations.jsonl", "--output", f"s3://{bucket}/clean"]
    for extra in ((), ("--overwrite",)):
        run = convnorm(*args, *extra, *s3.flags(), cwd=tmp_path)
        assert run.returncode == 2 and "no _convnorm_manifest.json" in run.stderr, run.stderr
    assert s3.objects(bucket, "clean") == {"summary.json": b"{}"}


def without_credentials(tmp_path: Path) -> dict[str, str]:
    """The environment with no AWS credentials anywhere: no AWS_* variable, empty credentials and
    config files, no instance metadata."""
    env = {k: v for k, v in service_env().items() if not k.startswith("AWS_")}
    empty = tmp_path / "empty-aws-file"
    empty.write_text("")
    env.update(AWS_SHARED_CREDENTIALS_FILE=str(empty), AWS_CONFIG_FILE=str(empty), AWS_EC2_METADATA_DISABLED="true")
    return env


#: Found: Beam retried "Unable to locate credentials" with a traceback and growing waits
#: (3, 7, 16, 35 s ...) until killed. Far more than the one request now made, far less than that.
NO_CREDENTIALS_TIMEOUT_S = 120


@pytest.mark.parametrize("side", ["output", "input"])
def test_s3_without_credentials_is_one_line_before_any_work(s3: S3Server, tmp_path: Path, side: str) -> None:
    bucket = s3.new_bucket()
    s3.client().put_object(Bucket=bucket, Key="logs/conversations.jsonl", Body=SAMPLE.read_bytes())
    remote_in, local_out = f"s3://{bucket}/logs/", tmp_path / "out"
    paths = ["--input", str(SAMPLE), "--output", f"s3://{bucket}/clean"]
    if side == "input":
        paths = ["--input", remote_in, "--output", str(local_out)]
    keyless = [flag for flag in s3.flags() if "access_key" not in flag]  # the endpoint and region only
    run = convnorm(
        *paths,
        *keyless,
        "--no-report",
        cwd=tmp_path,
        env=without_credentials(tmp_path),
        timeout=NO_CREDENTIALS_TIMEOUT_S,
    )
    assert run.returncode == 2, run.stderr
    (line,) = run.stderr.splitlines()
    assert line.startswith("convnorm: error: s3://") and "no credentials" in line and "Traceback" not in line
    assert sorted(s3.objects(bucket)) == ["logs/conversations.jsonl"]  # nothing written
    assert not local_out.exists()


def test_s3_an_endpoint_that_does_not_answer_is_one_line(s3: S3Server, tmp_path: Path) -> None:
    dead = [f"--s3_endpoint_url=http://127.0.0.1:{_closed_port()}", *(f for f in s3.flags() if "endpoint" not in f)]
    run = convnorm(
        "--input", str(SAMPLE), "--output", "s3://nowhere/clean", *dead, cwd=tmp_path, timeout=NO_CREDENTIALS_TIMEOUT_S
    )
    assert run.returncode == 2, run.stderr
    (line,) = run.stderr.splitlines()
    assert "could not be asked" in line and "s3://nowhere/clean" in line


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
