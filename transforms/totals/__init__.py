"""What a run counts and prints about its dataset (no Beam import).

``summary`` (the totals, built from per-batch partials), ``summary_table`` (the summary as a
table for a person), ``counters`` (the names of the Beam metrics), ``console_text`` (text from
the data as the console shows it) and ``record_step`` (the per-record steps, their outputs and
summaries).
"""
