"""Beam's FnApiRunner with lean worker processes: a ``--direct_running_mode=multi_processing``
run's SDK workers start as ``python -m pipeline.runners.sdk_worker`` (Beam's worker without
pandas, see that module) instead of Beam's ``sdk_worker_main``."""

from __future__ import annotations

import re

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
    _watch_worker_exits()
    WORKER_EXITS.clear()  # this run's
    return FnApiRunnerLeanWorkers()


#: Exit statuses of this process's worker processes that ended in error, this run's: a worker
#: killed (the kernel's out-of-memory killer, a crash) makes the pipeline fail with only
#: "Channel closed prematurely"; ``pipeline.execution.execute.run_pipeline`` says which signal.
WORKER_EXITS: list[int] = []


def _watch_worker_exits() -> None:
    """Note the exit status Beam's worker thread raises (and nobody reads) when its worker
    process ends in error: ``RuntimeError('Worker subprocess exited with return code N')``."""
    from apache_beam.runners.portability import local_job_service

    worker = local_job_service.SubprocessSdkWorker
    if getattr(worker, "_convnorm_watched", False):
        return
    run = worker.run

    def watched(self) -> None:
        try:
            run(self)
        except RuntimeError as error:
            found = re.search(r"exited with return code (-?\d+)", str(error))
            if found:
                WORKER_EXITS.append(int(found.group(1)))
            raise

    worker.run = watched  # type: ignore[method-assign]
    worker._convnorm_watched = True  # type: ignore[attr-defined]
