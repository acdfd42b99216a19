"""``python -m pipeline`` runs the convnorm job (see ``pipeline.main``)."""

import sys

from pipeline.cli import main

sys.exit(main())
