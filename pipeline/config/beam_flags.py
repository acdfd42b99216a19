"""Beam's command-line flags as data, so the command line can check flags without importing Beam.

Importing Apache Beam takes 1-3 s; ``convnorm --help``, ``--version`` and a mistyped flag must
answer at once (``pipeline.config.precheck.precheck``). What such a check needs from Beam is small and
fixed for a Beam release: every option string of Beam's own options with how many values it
takes (so that ``--runner X`` is not read as a stray ``X``), the options' names (a preset's
keys), and the runners Beam knows. This module holds that table for the Beam release it was
made from (``BEAM_VERSION``); with another release installed, ``table_is_current`` is False and
the check leaves Beam's flags to Beam (the full check after the import still runs).

``tests/test_command_line.py`` compares the table with the installed Beam; when Beam is upgraded,
regenerate it::

    python -m pipeline.config.make_beam_flag_table > pipeline/config/_beam_flag_table.py
"""

from __future__ import annotations

import importlib.util
import os
import re

from pipeline.config._beam_flag_table import BEAM_VERSION, DESTS, FLAGS, RUNNERS

__all__ = ["BEAM_VERSION", "DESTS", "FLAGS", "RUNNERS", "installed_beam_version", "table_is_current"]


def installed_beam_version() -> str | None:
    """The installed Apache Beam's version, read from its ``version.py`` without importing Beam
    (importing it is what this module avoids; ``importlib.metadata`` alone costs ~0.07 s)."""
    spec = importlib.util.find_spec("apache_beam")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "version.py")
    try:
        with open(path, encoding="utf-8") as handle:
            found = re.search(r"""^__version__\s*=\s*['"]([^'"]+)['"]""", handle.read(), re.MULTILINE)
    except OSError:
        return None
    return found.group(1) if found else None


def table_is_current() -> bool:
    """Is the installed apache-beam the release the table was made from?"""
    return installed_beam_version() == BEAM_VERSION
