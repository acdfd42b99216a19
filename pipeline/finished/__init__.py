"""Reading a finished output directory: the report page, its charts, explain."""
