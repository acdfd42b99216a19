"""Preloaded by each worker of convnorm's own Dask cluster (``dask_cluster.WORKER_CONFIG``), after
``pipeline.console``: Beam imported with pandas hidden before a task imports it, as the SDK
workers of a multi-process run do (``sdk_worker.import_beam_without_pandas``). When pandas is
installed (a test or notebook environment), Beam's import of it for DataFrame type hints
convnorm never uses cost each worker about 0.3 s of CPU: with two workers, a few percent of a
200,000-record run (bench/bench_dataset.py ``--only engines``)."""

from __future__ import annotations

from pipeline.runners.sdk_worker import import_beam_without_pandas


def dask_setup(worker: object) -> None:
    """Dask's preload hook, run in the worker process before its first task."""
    import_beam_without_pandas()
