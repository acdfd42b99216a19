"""The MEM-5 core and the rules the readers and writers share with it (no Beam import, no I/O).

``normalize`` (MEM-5 itself), ``ledger`` (what its rule 1's coercion discards), ``tool_blocks``
(a call's results follow its turn; fresh ids), ``validate`` (would a provider accept this
history?) and ``jsontext`` (JSON text in and out, one policy). Everything else in
``transforms`` builds on these; they import nothing of it.
"""
