"""A root-logger filter for a notice Beam prints on import; installed by the command line only."""

from __future__ import annotations

import logging


class QuietOptionalGcpNotice(logging.Filter):
    # Importing apache_beam warns that the Google Cloud clients are missing; they are an
    # optional extra that local runs never use, and the notice reads like an error.
    def filter(self, record: logging.LogRecord) -> bool:
        return "apitools not found" not in record.getMessage()


def quiet_optional_gcp_notice() -> None:
    """Add the filter to the root logger once (a second call changes nothing)."""
    root = logging.getLogger()
    if not any(isinstance(f, QuietOptionalGcpNotice) for f in root.filters):
        root.addFilter(QuietOptionalGcpNotice())
