"""--streaming: the landing directory watched, each landed file cleaned, its windows, the
processed-files ledger, and the driver."""
