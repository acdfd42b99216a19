"""The training-set options: what makes the normalized conversations a dataset (no Beam import).

``training`` (weights, trailing turns, examples per turn) and ``training_summary`` (their
totals), ``dataset_keys`` (what ``--dedupe`` and ``--split`` read of each conversation),
``redact`` (``--redact``) and ``chat_template`` (``--chat-template``). ``--tokens`` reads the
run's record settings, so it lives with them in ``transforms.record``.
"""
