"""convnorm's job around the pure core (``transforms``), laid out by stage. Each package
imports only those before it in this list (``tests/test_layout.py`` checks it):

- ``pipeline.testhooks``, ``pipeline.console``: pause points for the kill tests; what reaches
  the terminal;
- ``pipeline.io``: files, no Beam graph (reading inputs, the names and ownership of an output);
- ``pipeline.config``: flags, presets, the checks, Beam's options and the checked Job;
- ``pipeline.runners``: Prism, Dask, the job service, loopback, the SDK worker (every use of
  Beam's private API);
- ``pipeline.graph``: the Beam graphs;
- ``pipeline.execution``: running a command so that its outputs can be trusted;
- ``pipeline.finished``: reading a finished output (the report, explain);
- ``pipeline.streaming``: ``--streaming``;
- ``pipeline.cli``: the command line (``pipeline.cli.main.main``: the ``convnorm`` command and
  ``python -m pipeline``).

Importing this package changes no global state and imports nothing: logging is set up by the
command line, and SDK worker processes import ``pipeline.runners.sdk_worker`` first.
"""
