"""Every use of Beam's private API checks the Beam release it was written for, and on another
one steps aside (Beam's own behaviour) or refuses, saying why (``pipeline.runners.beam_release``)."""

from __future__ import annotations

import logging
import pickle
import types
from pathlib import Path

import pytest
from apache_beam.portability.api import beam_job_api_pb2_grpc

from pipeline.config.options import parse_options
from pipeline.io import object_store
from pipeline.runners import beam_release, dask_cluster, job_service, lean_workers, loopback, prism, s3_clients
from pipeline.runners.job_service import JobService

SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "conversations.jsonl"


def _not_written_for(*args) -> bool:
    return False


def test_the_installed_release_is_the_one_written_for_and_another_is_said_once(monkeypatch, caplog):
    installed = beam_release.installed_beam_version()
    assert installed and installed.startswith("2.77.")  # pyproject pins apache-beam==2.77.*
    assert beam_release.written_for("this test's use", "2.77")
    beam_release.written_for.cache_clear()
    monkeypatch.setattr(beam_release, "installed_beam_version", lambda: "2.80.1")
    with caplog.at_level(logging.WARNING, logger="convnorm"):
        assert not beam_release.written_for("this test's use", "2.77")
        assert not beam_release.written_for("this test's use", "2.77")
    assert [r.getMessage() for r in caplog.records] == ["this test's use was written for Apache Beam 2.77, not 2.80.1"]
    beam_release.written_for.cache_clear()
    assert not beam_release.written_for("2.7 is not 2.77", "2.7")  # a release, not a prefix of one
    beam_release.written_for.cache_clear()


def test_the_lean_workers_step_aside_for_beams_own_on_another_release(monkeypatch):
    options = parse_options(
        ["--input", str(SAMPLE), "--output", "out", "--direct_num_workers=2", "--direct_running_mode=multi_processing"]
    )
    assert isinstance(lean_workers.pipeline_runner(options), lean_workers.FnApiRunnerLeanWorkers)
    monkeypatch.setattr(lean_workers, "written_for", _not_written_for)
    assert lean_workers.pipeline_runner(options) is None


def test_the_loopback_shim_patches_what_it_can_and_refuses_a_module_without_grpc(monkeypatch):
    monkeypatch.setattr(loopback, "written_for", _not_written_for)
    loopback.install()  # every module of Beam 2.77 has its grpc: patched all the same
    for name in loopback.PATCHED_MODULES:
        assert isinstance(__import__(name, fromlist=["grpc"]).grpc, loopback._LoopbackGrpc)
    monkeypatch.setattr(loopback, "PATCHED_MODULES", (*loopback.PATCHED_MODULES, "json"))
    with pytest.raises(RuntimeError, match="^json has no grpc to bind to localhost: .* written for Apache Beam 2.77"):
        loopback.install()


def test_prisms_loopback_worker_pool_is_refused_on_another_release(monkeypatch):
    monkeypatch.setattr(prism, "written_for", _not_written_for)
    with pytest.raises(prism.PrismError, match="written for Apache Beam 2.77.*--environment_type"):
        with prism._loopback_worker_pool():
            pass


def test_a_portable_result_is_waited_for_by_beam_on_another_release(monkeypatch):
    class Stub(beam_job_api_pb2_grpc.JobServiceStub):
        def __init__(self) -> None:  # no channel: never called
            pass

    result = types.SimpleNamespace(_job_service=Stub(), _job_id="job-001")
    assert isinstance(JobService.of(result), JobService)
    monkeypatch.setattr(job_service, "written_for", _not_written_for)
    assert JobService.of(result) is None


def test_the_dask_client_is_left_alone_on_another_release(monkeypatch):
    closed = []
    result = types.SimpleNamespace(client=types.SimpleNamespace(close=lambda: closed.append(True)))
    monkeypatch.setattr(dask_cluster, "written_for", _not_written_for)
    dask_cluster.close_client(result)
    assert closed == []
    monkeypatch.undo()
    dask_cluster.close_client(result)
    assert closed == [True]


def _s3_settings(endpoint: str) -> dict:
    return {
        "s3_region_name": "us-east-1",
        "s3_endpoint_url": endpoint,
        "s3_access_key_id": "k",
        "s3_secret_access_key": "s",
    }


@pytest.mark.slow  # boto3's first clients load botocore's service models
def test_beams_s3_clients_are_shared_per_settings_and_left_alone_on_another_release(monkeypatch):
    boto3_client = pytest.importorskip("apache_beam.io.aws.clients.s3.boto3_client")
    wrapper = boto3_client.Client
    # Beam's own __init__, also where an earlier test in this process (an in-process run with
    # s3 options) shared the clients already; undone after the test.
    beams = getattr(wrapper, "_convnorm_beam_init", wrapper.__init__)
    monkeypatch.setattr(wrapper, "__init__", beams)
    monkeypatch.setattr(wrapper, "_convnorm_shared", False, raising=False)
    monkeypatch.setattr(s3_clients, "written_for", _not_written_for)
    s3_clients.share()
    first, second = wrapper(_s3_settings("http://127.0.0.1:9")), wrapper(_s3_settings("http://127.0.0.1:9"))
    assert first.client is not second.client  # Beam's own: a client per wrapper
    monkeypatch.undo()
    monkeypatch.setattr(wrapper, "__init__", beams)
    monkeypatch.setattr(wrapper, "_convnorm_shared", False, raising=False)
    s3_clients.share()
    s3_clients.share()  # once only
    first, second = wrapper(_s3_settings("http://127.0.0.1:9")), wrapper(_s3_settings("http://127.0.0.1:9"))
    other = wrapper(_s3_settings("http://127.0.0.1:10"))
    assert first.client is second.client and other.client is not first.client
    assert first is not second and second._download_pos == 0  # each wrapper keeps its own download


#: What ``test_the_steps_carry_what_runs_after_the_options_to_their_workers`` saw run.
_RAN: list[str] = []


def _after_options_probe() -> None:
    _RAN.append("ran")


def test_the_steps_carry_what_runs_after_the_options_to_their_workers(monkeypatch):
    monkeypatch.setattr(object_store, "_after", [])
    monkeypatch.setattr(object_store, "_options", None)
    monkeypatch.setattr(object_store.FileSystems, "set_options", lambda options: None)
    _RAN.clear()
    object_store.after_options(_after_options_probe)
    assert _RAN == []  # no options yet
    object_store.use_options(parse_options(["--input", str(SAMPLE), "--output", "out", "--s3_region_name=eu-west-1"]))
    assert _RAN == ["ran"]
    step = pickle.dumps(object_store.WorkerFilesystems())  # as a step is sent to a worker
    # A worker process: nothing registered, no options given.
    monkeypatch.setattr(object_store, "_after", [])
    monkeypatch.setattr(object_store, "_options", None)
    pickle.loads(step).apply()
    assert _RAN == ["ran", "ran"] and object_store._after == [_after_options_probe]


def test_the_command_line_shares_s3_clients_before_the_job_touches_a_file(monkeypatch):
    from pipeline.cli import commands

    seen = []

    def load_job(*args, **kwargs):
        seen.append(list(object_store._after))
        raise commands.ConfigError("stop here")

    monkeypatch.setattr(object_store, "_after", [])
    monkeypatch.setattr(commands, "load_job", load_job)
    assert commands.run_command("run", ["--input", str(SAMPLE), "--output", "out"]) == 2
    assert seen == [[s3_clients.patched]]  # share, and empty objects
