"""convnorm's transforms: the pure normalization core and the Beam transforms around it.

Modules without an ``apache_beam`` import (``normalize``, ``jsontext``, ``inputs``,
``settings``, ``record_steps``, ``records``, ``validate_step``, ``profiles``, ``validate``,
``formats``) hold all the logic; the Beam modules only route and count.
"""
