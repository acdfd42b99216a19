"""``python -m pipeline`` runs the convnorm job (see ``pipeline.cli.commands``)."""

import sys

from pipeline.cli.main import main

sys.exit(main())
