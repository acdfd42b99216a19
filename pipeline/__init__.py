"""convnorm's job: options, sources, sinks, the graph and the command line.

Importing this package changes no global state: logging is set up by the command line
(``pipeline.cli.main.main``: the ``convnorm`` command and ``python -m pipeline``).
"""
