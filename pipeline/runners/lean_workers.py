"""Beam's FnApiRunner with lean worker processes: a ``--direct_running_mode=multi_processing``
run's SDK workers start as ``python -m pipeline.runners.sdk_worker`` (Beam's worker without
pandas, see that module) instead of Beam's ``sdk_worker_main``."""

from __future__ import annotations

from apache_beam.options.pipeline_options import DirectOptions, StandardOptions
from apache_beam.portability import python_urns
from apache_beam.runners.portability.fn_api_runner import FnApiRunner

from pipeline.config.flags import DEFAULT_RUNNER
from pipeline.runners.beam_release import written_for
from pipeline.runners.sdk_worker import BEAM_WORKER_MODULE, WORKER_MODULE, worker_command

#: The Beam release ``FnApiRunnerLeanWorkers`` was written for: it overrides FnApiRunner's
#: ``run_via_runner_api`` and rewrites the worker command FnApiRunner writes into its
#: ``SUBPROCESS_SDK`` environments (``pipeline.runners.beam_release``).
WRITTEN_FOR = "2.77"


class FnApiRunnerLeanWorkers(FnApiRunner):
    """Beam's FnApiRunner whose multi-process workers start as ``python -m pipeline.runners.sdk_worker``
    (Beam's worker, without importing pandas: ``pipeline.runners.sdk_worker``) instead of Beam's
    ``python -m apache_beam.runners.worker.sdk_worker_main``."""

    def run_via_runner_api(self, pipeline_proto, options):
        # FnApiRunner writes its worker command into the pipeline's environments, and its
        # worker handlers start what an environment says.
        beam_command = worker_command(BEAM_WORKER_MODULE).encode()
        for environment in pipeline_proto.components.environments.values():
            if environment.urn == python_urns.SUBPROCESS_SDK and environment.payload == beam_command:
                environment.payload = worker_command(WORKER_MODULE).encode()
        return super().run_via_runner_api(pipeline_proto, options)


def pipeline_runner(options) -> FnApiRunner | None:
    """The runner ``beam.Pipeline`` is given: ``FnApiRunnerLeanWorkers`` for a FnApiRunner run
    in worker processes, None otherwise (Beam makes the one ``--runner`` names), and None on a
    Beam release it was not written for (Beam's workers then: they import pandas, no more)."""
    runner = options.view_as(StandardOptions).runner or DEFAULT_RUNNER
    multi_process = options.view_as(DirectOptions).direct_running_mode == "multi_processing"
    if not (multi_process and runner.lower() == "fnapirunner"):
        return None
    if not written_for("convnorm's lean SDK workers (FnApiRunner.run_via_runner_api)", WRITTEN_FOR):
        return None
    return FnApiRunnerLeanWorkers()
