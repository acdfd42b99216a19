"""convnorm's transforms: the pure normalization core and the Beam transforms around it.

By part, each importing only the parts before it (``tests/test_layout.py``'s
``TRANSFORMS_PARTS``): ``core`` (MEM-5 and the rules readers and writers share with it),
``formats`` and ``calllogs`` (the readers and writers), ``repairs`` (the opt-in repairs around
the core), ``dataset`` (the training-set options), ``record`` (the per-record path) and
``totals`` (what a run counts and prints). None imports Beam: they hold all the logic. The module
beside them, ``conversations``, is the Beam glue (the DoFns for library users): it only routes
and counts.
"""
