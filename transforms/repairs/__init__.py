"""What the opt-in options do to one conversation around the MEM-5 core (no Beam import).

``profiles`` (``spec`` and the opt-in passes before the core), ``roles`` (``--drop-role``,
``--map-role``), ``message_extras`` (message keys carried around the core) and
``before_after`` (one conversation before and after, each repair with its reason).
"""
