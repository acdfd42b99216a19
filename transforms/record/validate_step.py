"""The validate step: one raw record checked as it is, no normalization (no Beam import).

Parses and reads a raw record like the run step (``transforms.record.record_steps``) and reports
what ``transforms.core.validate.check_sendable`` finds in its messages.
"""

from __future__ import annotations

from transforms.core.validate import check_sendable, check_user_first, count_by_kind, violation_order
from transforms.dataset.redact import Redaction
from transforms.record.inputs import RawRecord
from transforms.record.output_records import ViolationReport
from transforms.record.record_settings import Settings
from transforms.record.record_steps import (
    CallLogRead,
    Outcome,
    ReaderHint,
    guarded,
    parse_payload,
    read_call_log,
    read_conversation,
    record_id,
)

#: The readers of providers that want a user message first: their bodies are also checked by
#: ``check_user_first`` (the rule their writers refuse ``leading_assistant`` by).
USER_FIRST_READERS = frozenset(("anthropic", "bedrock-converse", "gemini"))


def _check(raw: RawRecord, settings: Settings) -> tuple[ViolationReport, None] | CallLogRead:
    record = parse_payload(raw)
    pieces = read_call_log(record, settings)
    if pieces is not None:
        return pieces  # a call log: checked once assembled with the other calls of its conversation
    hint = ReaderHint()
    conversation = read_conversation(record, settings, hint)
    violations = check_sendable(conversation.messages)
    reader = settings.input_format if settings.input_format != "auto" else getattr(hint.reader, "name", None)
    if reader in USER_FIRST_READERS:
        violations = sorted(violations + check_user_first(conversation.messages), key=violation_order)
    report: ViolationReport = {
        "id": record_id(record, settings),
        "source": raw.source,
        "position": raw.position,
        "messages": len(conversation.messages),
        "violations": count_by_kind(violations),
        "details": [
            {"kind": v.kind, "index": v.index, "tool_call_id": v.tool_call_id, "detail": v.detail}
            for v in violations[:MAX_REPORTED_VIOLATIONS]
        ],
    }
    if settings.redact:
        # --redact: the report names ids and quotes details; redacted as the run step's outputs.
        redaction = Redaction(settings.redact, settings.redact_region, {})
        report["id"] = redaction.id(report["id"])
        report["details"] = [
            {**d, "tool_call_id": redaction.id(d["tool_call_id"]), "detail": redaction.text(d["detail"])}
            for d in report["details"]
        ]
    return report, None


#: Violations listed one by one in a conversation's report (all are counted).
MAX_REPORTED_VIOLATIONS = 50


def check_record(raw: RawRecord, settings: Settings) -> Outcome:
    """Parse and read one raw record and check it as it is (no normalization); never raises.

    The outcome's ``record`` is the conversation's violation report.
    """
    return guarded(_check, raw, settings)
