"""The names convnorm gives the files and folders of an output directory, in one place.

Every module that writes, reads or refuses an output directory's files takes their names from
here: the part-file folders, the summaries, the manifest and ``_SUCCESS``, the lock, the
streaming marker, the run's temporary directory and its proof file, the report page, and the
patterns the drop and dead-letter files of a batch and a streaming run match.
No import: a leaf every layer may use."""

from __future__ import annotations

MANIFEST_FILE = "_convnorm_manifest.json"


SUCCESS_FILE = "_SUCCESS"


TEMP_PREFIX = "_convnorm_temp-"


#: In a run's temporary directory: a file of random content whose size and sha256 its lock
#: records (``temp_proof``). It, not the directory's name, proves the directory the run's.
TEMP_PROOF = "_convnorm_run.json"


#: In a run's temporary directory (local outputs): where Python's fatal-error handler writes if
#: the run crashes (a segmentation fault, an abort), for the next run to say how it died.
CRASH_NOTE = "_convnorm_crash.txt"


MANIFEST_FORMAT = "convnorm-manifest/1"


#: Marks a directory as the output of ``--streaming`` runs: a later streaming run goes on
#: writing into it (the final summary sums every window it holds).
STREAMING_MARKER = "_convnorm_streaming.json"


STREAMING_FORMAT = "convnorm-streaming/1"


LOCK_FILE = "_convnorm.lock"


OUTPUT_DIRS = ("normalized", "drops", "dead_letter")


SUMMARY_FILE = "summary.json"


#: ``convnorm validate``'s summary file (``summary.json`` is the run's).
VALIDATION_FILE = "validation.json"


REPORT_FILE = "report.html"


#: An ``hf`` run's dataset card: which files each split is, the features of every part
#: (``pipeline.io.dataset_card``), for ``datasets.load_dataset(<output>)``.
CARD_FILE = "README.md"


#: Where a batch run keeps its drop lines, and a streaming run (one file per landed file).
DROPS_PATTERNS = ("drops/part-*.jsonl", "*/*/drops.jsonl")


#: Where they keep their dead letters.
DEAD_LETTER_PATTERNS = ("dead_letter/part-*.jsonl", "*/*/dead_letter.jsonl")


#: Files convnorm writes beside its part files; a directory holding a manifest is a convnorm
#: output, whose summaries are never inputs (``[0]`` is the manifest).
OWN_OUTPUT_FILES = (MANIFEST_FILE, SUMMARY_FILE, VALIDATION_FILE)
