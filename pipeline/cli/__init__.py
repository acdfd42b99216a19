"""The command line: the entry point, --help, the commands, the progress line, --dry-run."""
