"""The summary as a table for a person (no Beam import): what a run prints at its end
(``format_table``: ``convnorm run``; ``format_validation_table``: ``convnorm validate``), from
the finalized document (``transforms.totals.summary``). Every value from the data is escaped for the
terminal (``console_text``)."""

from __future__ import annotations

from typing import Any

from transforms.core.normalize import split_drops
from transforms.dataset.dataset_keys import TRAIN
from transforms.dataset.training_summary import training_rows
from transforms.record.record_steps import DeadLetterReason
from transforms.totals.console_text import console_text

UNWRITABLE = DeadLetterReason.UNWRITABLE.value
INPUT_CHANGED = DeadLetterReason.INPUT_CHANGED.value
#: The reports of a record's reader and writer, partial totals merged by name (``transforms.totals.summary``).
REPORTS = ("reader_report", "writer_report")


def _shown(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def _nonzero(counts: dict[str, Any], indent: str) -> list[tuple[str, int]]:
    return [(f"{indent}{name}", n) for name, n in counts.items() if n]


def _letter_rows(doc: dict[str, Any], label: str, indent: str) -> list[tuple[str, Any]]:
    rows = [(label, doc["dead_letters"])]
    for row in _nonzero(doc["dead_letters_by_reason"], indent):
        rows.append(row)
        if row[0].strip() == UNWRITABLE:  # why the sink refused them, by the writer's reason
            rows += _nonzero(refusals(doc), indent + "  ")
    return rows


def refusals(doc: dict[str, Any]) -> dict[str, int]:
    """The sink's refusals (``unwritable`` dead letters) by the writer's reason, most first."""
    refusals = doc.get("sink_refusals_by_reason") or {}
    return dict(sorted(refusals.items(), key=lambda item: -item[1]))


def _violation_rows(doc: dict[str, Any], label: str) -> list[tuple[str, Any]]:
    return [(label, doc["conversations_with_violations"]), *_nonzero(doc["violations"], "  ")]


def _render(title: str, rows: list[tuple[str, Any]], footer: list[str]) -> str:
    """The table layout both views print: labels left, values right-aligned. Every piece is
    escaped for the terminal before the layout (a discarded field's name is the data's): each
    stays on its row, and the columns line up."""
    cells = [(console_text(label), console_text(_shown(value))) for label, value in rows]
    width = max(len(label) for label, _ in cells)
    lines = [
        console_text(title),
        *(f"  {label.ljust(width)}  {value:>12}" for label, value in cells),
        *map(console_text, footer),
    ]
    return "\n".join(lines)


def format_table(doc: dict[str, Any]) -> str:
    """A short human-readable rendering of a finalized summary."""
    rows = [
        *_record_rows(doc),
        *_message_rows(doc),
        *_ledger_rows(doc),
        *_opt_in_rows(doc),
        *_report_rows(doc),
        *training_rows(doc),
        *_token_rows(doc.get("tokens")),
    ]
    histogram = "  ".join(f"{label}:{n:,}" for label, n in doc["drops_histogram"].items())
    footer = [f"  drops per conversation  {histogram}"]
    if not doc.get("accounted", True):
        footer.append("  WARNING: records in != normalized + dead-lettered")
    if changed_inputs(doc):
        footer.append(f"  WARNING: an input changed while it was read ({INPUT_CHANGED} in dead_letter/)")
    return _render(f"convnorm summary (profile {doc.get('profile', 'spec')})", rows, footer)


def _record_rows(doc: dict[str, Any]) -> list[tuple[str, Any]]:
    rows = [
        ("records in", doc["records_in"]),
        ("  normalized", doc["records_out"]),
        *_letter_rows(doc, "  dead-lettered", "    "),
    ]
    if doc.get("blank_lines"):
        rows.append(("blank lines skipped", doc["blank_lines"]))
    return rows + call_log_rows(doc)


def call_log_rows(doc: dict[str, Any]) -> list[tuple[str, Any]]:
    """The call logs' rows: the records that held calls, and the conversations made of them."""
    calls = doc.get("call_logs")
    if not calls:
        return []
    return [
        ("call-log records", calls["records"]),
        ("  calls / tool results in them", f"{calls['calls']:,} / {calls['tool_results']:,}"),
        ("  conversations assembled", calls["conversations"]),
        ("  calls collapsed into a longer one", calls["prefixes_collapsed"]),
        ("  branches split out", calls["branches"]),
        ("  tool results filled in", calls["tool_results_filled"]),
        *(
            [("  answers' texts put back", calls["answer_texts_restored"])]
            if calls.get("answer_texts_restored")
            else []
        ),
        *([("  parts refused alone (dead letters)", calls["parts_refused"])] if calls.get("parts_refused") else []),
        *(
            [("  parts skipped (no call, no tool result)", _kinds(calls["skipped_by_kind"]))]
            if calls.get("skipped_by_kind")
            else []
        ),
    ]


def _kinds(counts: dict[str, int]) -> str:
    """Counts by kind on one line, the largest first: ``http 12, chain 3``."""
    return ", ".join(f"{kind} {n:,}" for kind, n in sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def _message_rows(doc: dict[str, Any]) -> list[tuple[str, Any]]:
    """Messages in - messages dropped + results added = messages out; then the calls dropped
    from turns that stayed, which MEM-5's drop count adds to the messages (it counts both)."""
    messages, calls = split_drops(doc["dropped_by_reason"])
    return [
        ("messages in", doc["messages_in"]),
        ("messages dropped", sum(messages.values())),
        *_nonzero(messages, "  "),
        ("results added (healed)", doc["healed"]),
        ("messages out", doc["messages_out"]),
        ("calls dropped from turns kept", sum(calls.values())),
        *_nonzero(calls, "  "),
        ("dropped, MEM-5's count", doc["dropped"]),
        ("conversations with drops", doc["conversations_with_drops"]),
        *((f"non-finite floats nulled in {field}", n) for field, n in doc.get("non_finite_nulled", {}).items()),
        *(
            (("partial conversations (history at the provider)", doc["partial_conversations"]),)
            if doc.get("partial_conversations")
            else ()
        ),
        *((("conversations with a stream cut off", doc["truncated_streams"]),) if doc.get("truncated_streams") else ()),
    ]


def _ledger_rows(doc: dict[str, Any]) -> list[tuple[str, Any]]:
    if "discarded_fields" not in doc:
        return []
    # Not message drops: the fields rule 1 does not keep (transforms.core.ledger).
    return [
        ("fields discarded by coercion", doc["discarded_fields"]),
        ("  text characters in them", doc["discarded_chars"]),
        *((f"  {name}", f"{c['fields']:,} ({c['chars']:,} ch)") for name, c in doc["discarded_by_name"].items()),
        ("conversations with discards", doc["conversations_with_discards"]),
    ]


def _opt_in_rows(doc: dict[str, Any]) -> list[tuple[str, Any]]:
    rows = [(f"repair {kind}", n) for kind, n in doc.get("repairs", {}).items()]
    if "violations" in doc:
        rows += _violation_rows(doc, "conversations with violations")
    return rows


def _token_rows(t: dict[str, Any] | None) -> list[tuple[str, Any]]:
    if t is None:
        return []
    rows = [
        (f"tokens ({t['encoding']})", t["total"]),
        ("  examples counted", t["examples"]),
        ("  p50 / p90 / p99 / max", " / ".join(f"{t[k]:,}" for k in ("p50", "p90", "p99", "max"))),
    ]
    if t["max_example_tokens"] is not None:
        limit = f"{t['max_example_tokens']:,}" + (f" ({t['limit_model']})" if t["limit_model"] else "")
        rows.append((f"  over {limit}", t["over_limit"]))
        if t["over_limit_dropped"]:
            rows.append(("    dead-lettered (over_token_limit)", t["over_limit_dropped"]))
    epochs = f"{t['epochs']} epoch{'s' if t['epochs'] != 1 else ''}" + (" (default)" if t["epochs_default"] else "")
    rows += [
        ("  without an assistant message", t["without_assistant"]),
        ("training tokens per epoch", t["training_tokens_per_epoch"]),
        (f"training tokens, {epochs}", t["training_tokens"]),
    ]
    for name, split in t.get("splits", {}).items():
        if name != TRAIN:
            rows.append(
                (f"  {name} split (not billed): {split['examples']:,} examples", split["tokens_per_epoch"]),
            )
    if "estimated_cost" in t:
        rows.append((f"estimated cost at {t['price_per_mtok']:g} per 1M tokens", f"{t['estimated_cost']:,.2f}"))
    return rows


def _report_rows(doc: dict[str, Any]) -> list[tuple[str, Any]]:
    rows = []
    for name in REPORTS:
        who = name.split("_")[0]
        for kind, n in doc.get(name, {}).items():
            if isinstance(n, dict):
                rows += [(f"{who} {kind} {key}", k) for key, k in n.items()]
            else:
                rows.append((f"{who} {kind}", n))
    return rows


def format_validation_table(doc: dict[str, Any]) -> str:
    rows = [
        ("records in", doc["records_in"]),
        ("conversations checked", doc["conversations_checked"]),
        *_violation_rows(doc, "with violations"),
        *_letter_rows(doc, "unreadable records", "  "),
        *call_log_rows(doc),
    ]
    verdict = "  verdict: " + ("sendable" if doc["sendable"] else "NOT sendable")
    return _render("convnorm validate", rows, [verdict])


def changed_inputs(doc: dict[str, Any]) -> int:
    """The ``input_changed`` dead letters of a summary: shards whose file was not the one planned."""
    return int((doc.get("dead_letters_by_reason") or {}).get(INPUT_CHANGED, 0))
