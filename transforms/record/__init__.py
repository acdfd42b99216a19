"""The per-record path: one raw record in, exactly one outcome out (no Beam import).

``inputs`` (what readers hand the steps), ``record_settings`` (the settings the steps carry),
``record_steps`` (what both steps share), ``records`` (the run step), ``validate_step`` (the
validate step), ``tokens`` (``--tokens``, counted on what the sink wrote), ``output_records``
(drop metrics, dead letters, violation reports), ``flat_rows`` (flat records as Parquet rows)
and ``assembled_calls`` (call logs' assembled conversations as records).
"""
