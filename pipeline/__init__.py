"""convnorm's job: options, sources, sinks, the graph and the command line."""

import logging


class _QuietOptionalGcpNotice(logging.Filter):
    # Importing apache_beam warns that the Google Cloud clients are missing; they are an
    # optional extra that local runs never use, and the notice reads like an error.
    def filter(self, record: logging.LogRecord) -> bool:
        return "apitools not found" not in record.getMessage()


logging.getLogger().addFilter(_QuietOptionalGcpNotice())
