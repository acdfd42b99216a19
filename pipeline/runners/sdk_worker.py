"""The SDK worker processes of a local multi-process run, started the way the console command starts.

With ``--direct_running_mode=multi_processing`` Beam's FnApiRunner starts each worker as
``python -m apache_beam.runners.worker.sdk_worker_main``, which imports Beam and so pandas when
it is installed (a test or notebook environment): about 0.3 s of CPU per worker spent on
DataFrame type hints convnorm never uses, on the path of every two-worker run
(docs/per-record-speed.md). ``pipeline.runners.lean_workers.FnApiRunnerLeanWorkers`` is the
FnApiRunner with that one command replaced by ``python -m pipeline.runners.sdk_worker``: this
module's ``main``, Beam's own worker (``sdk_worker_main.main``) after Beam was imported with
pandas hidden (``import_beam_without_pandas``, which the console command calls too before its
own import of Beam). Nothing else changes: the same runner, the same worker code, the same
environment variables; anything that imports pandas later still gets it.

This module imports nothing of Beam at its top: a worker process imports it first (the runner
lives in ``pipeline.runners.lean_workers``). It runs only where that runner starts it, which is
bound to the Beam release it was written for (``lean_workers.WRITTEN_FOR``).
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


def import_beam_without_pandas() -> None:
    """Import Apache Beam with pandas hidden, then unhide it.

    When pandas is installed (a test or notebook environment, not convnorm's own
    dependencies), Beam imports it only to register its DataFrame type hints, which convnorm
    never uses: about a third of the command's import time (bench/bench_startup.py). Anything
    that imports pandas later still gets it.
    """
    if "pandas" in sys.modules or "apache_beam" in sys.modules:
        return
    sys.modules["pandas"] = None  # type: ignore[assignment]  # ``import pandas`` raises ImportError; Beam skips it
    try:
        import apache_beam  # noqa: F401
    finally:
        if sys.modules.get("pandas", 0) is None:
            del sys.modules["pandas"]


def main(argv: list[str]) -> None:
    import_beam_without_pandas()
    from apache_beam.runners.worker import sdk_worker_main

    sdk_worker_main.main(argv)


if __name__ == "__main__":
    main(sys.argv)
