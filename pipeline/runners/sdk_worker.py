"""The SDK worker processes of a local multi-process run, started the way the console command starts.

With ``--direct_running_mode=multi_processing`` Beam's FnApiRunner starts each worker as
``python -m apache_beam.runners.worker.sdk_worker_main``, which imports Beam and so pandas when
it is installed (a test or notebook environment): about 0.3 s of CPU per worker spent on
DataFrame type hints convnorm never uses, on the path of every two-worker run
(docs/per-record-speed.md). ``pipeline.execution.execute.FnApiRunnerLeanWorkers`` is the FnApiRunner
with that one command replaced by ``python -m pipeline.runners.sdk_worker``: this module's ``main``, Beam's own worker
(``sdk_worker_main.main``) after Beam was imported with pandas hidden
(``pipeline.cli.main.import_beam_without_pandas``). Nothing else changes: the same runner, the same
worker code, the same environment variables; anything that imports pandas later still gets it.

This module imports nothing of Beam at its top: a worker process imports it first (the runner
lives in ``pipeline.execution.execute``).
"""

from __future__ import annotations

import sys

#: Beam's worker command for multi_processing, as FnApiRunner writes it (``fn_runner.py``).
BEAM_WORKER_MODULE = "apache_beam.runners.worker.sdk_worker_main"
#: convnorm's.
WORKER_MODULE = "pipeline.runners.sdk_worker"


def worker_command(module: str, python: str | None = None) -> str:
    """The shell command that starts a worker process running ``module``."""
    return f"{python or sys.executable} -m {module}"


def main(argv: list[str]) -> None:
    from pipeline.cli.main import import_beam_without_pandas

    import_beam_without_pandas()
    from apache_beam.runners.worker import sdk_worker_main

    sdk_worker_main.main(argv)


if __name__ == "__main__":
    main(sys.argv)
