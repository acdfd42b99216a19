"""Dataflow, offline: the preset, Beam's own option checks, and a dry run that stages this project.

No test here reaches Google Cloud. ``configs/dataflow.yaml`` must name every value to fill in
and explain it, and ``convnorm`` must refuse it until they are filled (at once: matching
``gs://YOUR_BUCKET/...`` would retry the network for minutes). With ``pip install -e '.[gcp]'``
the rest runs too: once filled in, the preset passes Beam's DataflowRunner validation, and a
``--dry_run`` of the job builds the Dataflow job (every step of ours, Beam's SDK container for
this Beam and Python version) and the ``workflow.tar.gz`` that workers install, built from
``setup.py``/``pyproject.toml``, holding both of our packages.
"""

from __future__ import annotations

import re
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PRESET = ROOT / "configs" / "dataflow.yaml"
SAMPLE = ROOT / "samples" / "conversations.jsonl"
#: What a user fills in: every placeholder of the preset, replaced.
FILLED = [
    "--project=my-project",
    "--region=europe-west4",
    "--temp_location=gs://my-bucket/tmp",
    "--staging_location=gs://my-bucket/staging",
]


def _placeholders_in(text: str) -> set[str]:
    return set(re.findall(r"\bYOUR_[A-Z]+\b", text))


def test_preset_explains_every_placeholder():
    text = PRESET.read_text()
    header = "\n".join(line for line in text.splitlines() if line.startswith("#"))
    values = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    placeholders = _placeholders_in(values)
    assert placeholders == {"YOUR_PROJECT", "YOUR_REGION", "YOUR_BUCKET"}
    for name in placeholders:
        # Each one has its own line in the header saying what it is.
        assert re.search(rf"^#\s+{name}\s+\S", header, re.M), f"{name} is not explained in the preset's header"


def test_unfilled_preset_is_refused_at_once(monkeypatch):
    from pipeline.config.options import ConfigError, load_job

    monkeypatch.chdir(ROOT)
    with pytest.raises(ConfigError) as error:
        load_job(["--config", str(PRESET)])
    message = str(error.value)
    assert "replace the placeholders first" in message
    for name in (
        "--project=YOUR_PROJECT",
        "--region=YOUR_REGION",
        "--input=gs://YOUR_BUCKET/logs/*.jsonl.gz",
        "--temp_location=gs://YOUR_BUCKET/tmp",
    ):
        assert name in message


def test_a_flag_that_fills_a_placeholder_wins(monkeypatch, tmp_path):
    from pipeline.config.options import ConfigError, load_job

    monkeypatch.chdir(ROOT)
    with pytest.raises(ConfigError) as error:
        load_job(["--config", str(PRESET), "--input", str(SAMPLE), "--project=my-project"])
    assert "YOUR_PROJECT" not in str(error.value) and "YOUR_REGION" in str(error.value)


def _filled_job(tmp_path, *extra):
    from pipeline.config.options import load_job

    # Local input and output: the dry run must not touch GCS.
    return load_job(
        ["--config", str(PRESET), *FILLED, "--input", str(SAMPLE), "--output", str(tmp_path / "out"), *extra]
    )


def test_filled_preset_passes_dataflow_validation(monkeypatch, tmp_path):
    pytest.importorskip("google.cloud.storage", reason="needs pip install -e '.[gcp]'")
    from apache_beam.options.pipeline_options_validator import PipelineOptionsValidator
    from apache_beam.runners.dataflow.dataflow_runner import DataflowRunner

    monkeypatch.chdir(ROOT)
    # --dry_run: Beam's validation otherwise asks GCS whether the buckets soft-delete.
    job = _filled_job(tmp_path, "--dry_run=True")
    assert PipelineOptionsValidator(job.options, DataflowRunner()).validate() == []


@pytest.mark.slow
def test_dry_run_builds_the_job_and_stages_this_project(monkeypatch, tmp_path):
    pytest.importorskip("google.cloud.storage", reason="needs pip install -e '.[gcp]'")
    import apache_beam as beam
    import apache_beam.version

    from pipeline.graph.build import build

    monkeypatch.chdir(ROOT)  # setup_file: ./setup.py
    job = _filled_job(tmp_path, "--dry_run=True", "--no_auth")
    pipeline = beam.Pipeline(options=job.options)
    build(pipeline, job, "gs://YOUR_BUCKET/convnorm/run-1/_convnorm_temp-dry-run")
    result = pipeline.run()
    assert result.state == "DONE"
    submitted = result.job
    assert submitted.proto.name == "convnorm-run-1"
    assert submitted.google_cloud_options.region == "europe-west4"

    graph = submitted.proto_pipeline
    names = {t.unique_name for t in graph.components.transforms.values()}
    assert {
        "NormalizeShards/Plan",
        "NormalizeShards/Process",
        "NormalizeShards/Merge",
        "NormalizeShards/Write",
    } <= names
    (environment,) = graph.components.environments.values()
    from apache_beam.portability.api import beam_runner_api_pb2

    image = beam_runner_api_pb2.DockerPayload.FromString(environment.payload).container_image
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert image.endswith(f"beam_python{python}_sdk:{apache_beam.version.__version__}"), image

    staged = {}
    for artifact in environment.dependencies:
        to = beam_runner_api_pb2.ArtifactStagingToRolePayload.FromString(artifact.role_payload).staged_name
        staged[to] = beam_runner_api_pb2.ArtifactFilePayload.FromString(artifact.type_payload).path
    assert "workflow.tar.gz" in staged, sorted(staged)
    with tarfile.open(staged["workflow.tar.gz"]) as sdist:
        members = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    assert {
        "pyproject.toml",
        "setup.py",
        "pipeline/graph/build.py",
        "pipeline/io/text_containers.py",
        "transforms/record/records.py",
        "transforms/formats/__init__.py",
    } <= members, sorted(members)
