"""The names of convnorm's Beam metrics, in one neutral place (no Beam import).

The DoFns that update them (``transforms.conversations``, ``pipeline.io.text_containers``) and the code
that reads them back (``pipeline.streaming.driver``, tests) import the names from here, so none of
them depends on another's module for a string. Documented in docs/operations.md ("Metrics").
"""

from __future__ import annotations

from transforms.core.normalize import REASONS
from transforms.core.validate import VIOLATION_KINDS
from transforms.record.record_steps import DEAD_LETTER_REASONS
from transforms.repairs.profiles import REPAIRS
from transforms.repairs.roles import DROPPED_ROLE, MAPPED_ROLE

#: The metrics namespace of every convnorm counter and distribution.
NAMESPACE = "convnorm"

#: Every counter the job reports (run and validate): (name, what it counts).
COUNTER_NAMES = (
    ("records_in", "raw input records processed"),
    ("records_out", "records written to the normalized output"),
    ("dead_letters", "records routed to the dead-letter output (run and validate)"),
    *((f"dead_letter_{r}", f"dead letters with reason {r}") for r in DEAD_LETTER_REASONS),
    ("messages_in", "messages in normalized conversations, before normalization"),
    ("messages_out", "messages in normalized conversations, after normalization"),
    ("dropped", "messages (entries) dropped by normalization"),
    *((f"dropped_{r}", f"entries dropped with reason {r}") for r in REASONS),
    (f"dropped_{DROPPED_ROLE}", "messages dropped by --drop-role"),
    ("healed", "synthetic interrupted results inserted"),
    ("discarded_fields", "non-empty fields coercion discarded (the ledger; not message drops)"),
    ("discarded_chars", "characters of text in the fields coercion discarded"),
    *((f"repair_{r}", f"opt-in repairs {r} (lossless profile)") for r in REPAIRS),
    (f"repair_{MAPPED_ROLE}", "messages given another role by --map-role"),
    *((f"violation_{k}", f"sendability violations {k} (run with --check, and validate)") for k in VIOLATION_KINDS),
    # Counted by pipeline.io.text_containers while it reads.
    ("blank_lines", "blank JSONL lines skipped (not records)"),
    ("shards_read", "planned input shards read"),
    # convnorm validate; it counts its unreadable records under dead_letters too.
    ("conversations_checked", "conversations checked by convnorm validate"),
    ("conversations_with_violations", "checked conversations with at least one violation"),
)

#: Distributions, per conversation (run only).
DISTRIBUTION_NAMES = ("messages_per_conversation", "drops_per_conversation")

#: The totals of a command's partial summary (``transforms.totals.summary``) counted under the same
#: name, by the command (``View.command``).
COUNTED_TOTALS = {
    "run": ("records_in", "records_out", "dead_letters", "messages_in", "messages_out", "dropped", "healed"),
    "validate": ("records_in", "conversations_checked", "conversations_with_violations", "dead_letters"),
}

#: A partial summary's counts by kind, counted as ``<prefix><kind>`` (where the view has them).
COUNTED_BY_KIND = (
    ("dead_letters_by_reason", "dead_letter_"),
    ("dropped_by_reason", "dropped_"),
    ("repairs", "repair_"),
    ("violations", "violation_"),
)
