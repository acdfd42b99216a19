"""Beam's log messages that a local run's user cannot act on, and the filter that drops them.

No Beam import here: the command line installs the filter before ``apache_beam`` is imported
(Beam prints its "apitools not found" notice while it is being imported), and the console
handler (``pipeline.cli.progress.configure_console``) uses the same filter afterwards.
"""

from __future__ import annotations

import logging

#: Substrings of Beam log messages that a local run's user cannot act on.
BEAM_NOISE = (
    "apitools not found",
    "semi_persistent_directory",
    "semi-persistent directory",
)


class BeamNoiseFilter(logging.Filter):
    """Drops Beam's messages that a local run's user cannot act on (see ``BEAM_NOISE``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith(("apache_beam", "root")) and record.name != "__main__":
            return True
        message = record.getMessage()
        return not any(noise in message for noise in BEAM_NOISE)


def quiet_beam_noise() -> None:
    """Add the filter to the root logger once (a second call changes nothing)."""
    root = logging.getLogger()
    if not any(isinstance(f, BeamNoiseFilter) for f in root.filters):
        root.addFilter(BeamNoiseFilter())


def dask_setup(worker: object) -> None:
    """Dask's preload hook (``dask worker --preload pipeline.quiet``): the same filter in a Dask
    worker process, before a task imports Beam."""
    quiet_beam_noise()
