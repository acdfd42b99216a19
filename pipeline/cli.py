"""The ``convnorm`` console command: quiets Beam's import-time notice, then runs ``pipeline.main``.

The filter goes on before ``pipeline.main`` (and so ``apache_beam``) is imported: Beam prints
the notice while it is being imported, before ``main`` sets logging up.
"""

from __future__ import annotations

import sys

from pipeline.quiet import quiet_beam_noise


def import_beam_without_pandas() -> None:
    """Import Apache Beam with pandas hidden, then unhide it.

    When pandas is installed (a test or notebook environment, not convnorm's own
    dependencies), Beam imports it only to register its DataFrame type hints, which convnorm
    never uses: about a third of the command's import time (bench/bench_startup.py). Anything
    that imports pandas later still gets it.
    """
    if "pandas" in sys.modules or "apache_beam" in sys.modules:
        return
    # ``import pandas`` raises ImportError; Beam skips it (a None entry: what typeshed does not allow).
    sys.modules["pandas"] = None  # type: ignore[assignment]
    try:
        import apache_beam  # noqa: F401
    finally:
        if sys.modules.get("pandas", 0) is None:
            del sys.modules["pandas"]


def main() -> int:
    quiet_beam_noise()
    import_beam_without_pandas()
    from pipeline.main import main as run  # imports apache_beam: after the filter

    return run()
