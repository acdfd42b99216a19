"""Running a command so its outputs can be trusted: execute, finalize, the output lock, Ctrl-C."""
