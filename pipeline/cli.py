"""The ``convnorm`` console command: quiets Beam's import-time notice, then runs ``pipeline.main``.

The filter goes on before ``pipeline.main`` (and so ``apache_beam``) is imported: Beam prints
the notice while it is being imported, before ``main`` sets logging up.
"""

from __future__ import annotations

from pipeline.quiet import quiet_beam_noise


def main() -> int:
    quiet_beam_noise()
    from pipeline.main import main as run  # imports apache_beam: after the filter

    return run()
