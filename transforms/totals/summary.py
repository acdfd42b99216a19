"""Dataset totals, built from per-batch partials (no Beam import): one module, two views.

A partial summary is a plain dict of counts; ``merge`` adds two of them. A ``View`` reads the
totals for one command:

- ``RUN`` (``convnorm run``): ``partial`` of drop metrics and dead letters; ``finalize`` gives
  the canonical ``summary.json`` (every reason listed, in its closed order, so runs compare
  line by line); ``format_table`` renders it for a person at the end of a run;
- ``VALIDATE`` (``convnorm validate``): ``validation_partial`` of violation reports and dead
  letters; ``finalize_validation`` gives ``validation.json``; ``format_validation_table``.

Both share the record accounting (every record read ends in the view's main output or in the
dead letters: ``accounted``), the dead-letter and violation tallies, the table layout, the
recount from the files on disk (``View.recount``) and the exit rule of a finished run
(``View.verdict``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, NamedTuple

from transforms.core.counts import add_counts
from transforms.core.normalize import REASONS
from transforms.core.validate import VIOLATION_KINDS
from transforms.dataset.training_summary import DUPLICATE, tally_training, training_sections
from transforms.record.output_records import DeadLetter, DropMetrics, ViolationReport
from transforms.record.record_settings import Settings, TokenSettings
from transforms.record.record_steps import DEAD_LETTER_REASONS
from transforms.record.records import refusal_reason
from transforms.record.tokens import tally_example, token_figures
from transforms.repairs.profiles import REPAIRS
from transforms.totals.summary_table import INPUT_CHANGED as INPUT_CHANGED
from transforms.totals.summary_table import REPORTS, UNWRITABLE, format_validation_table, refusals
from transforms.totals.summary_table import changed_inputs as changed_inputs  # (also what the callers import from here)
from transforms.totals.summary_table import format_table as format_table

#: Buckets of the drops-per-conversation histogram: (label, lowest count, highest count).
HISTOGRAM_BUCKETS = (
    ("0", 0, 0),
    ("1", 1, 1),
    ("2", 2, 2),
    ("3", 3, 3),
    ("4", 4, 4),
    ("5-9", 5, 9),
    ("10-49", 10, 49),
    ("50+", 50, None),
)


def _bucket(dropped: int) -> str:
    for label, low, high in HISTOGRAM_BUCKETS:
        if dropped >= low and (high is None or dropped <= high):
            return label
    return HISTOGRAM_BUCKETS[0][0]


def merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Add two partial summaries (nested dicts of counts) into a new one."""
    return add_counts(a, b)


def merge_into(total: dict[Any, Any], part: dict[Any, Any]) -> dict[Any, Any]:
    """Add ``part`` to ``total`` in place and return ``total`` (``part`` is left as it was).

    For a combiner's accumulator: ``merge`` copies its whole first argument, so adding each
    batch's partial to a large total (``--tokens``' histogram of counts) would cost the total's
    size per batch; this costs the partial's.
    """
    for key, value in part.items():
        if isinstance(value, dict):
            merge_into(total.setdefault(key, {}), value)
        else:
            total[key] = total.get(key, 0) + value
    return total


#: Where ``_reasons`` gathers the sink refusals by the writer's reason, apart from the reasons.
_REFUSALS = " refusals"


def _add(counts: dict[str, Any], key: str, n: int = 1) -> None:
    counts[key] = counts.get(key, 0) + n


def _reasons(dead_letters: Iterable[DeadLetter]) -> dict[str, Any]:
    """Dead letters by reason; the sink refusals by the writer's reason under ``_REFUSALS``."""
    counts: dict[str, Any] = {}
    for letter in dead_letters:
        _add(counts, letter["reason"])
        if letter["reason"] == UNWRITABLE:
            # Sink refusals, by the writer's own reason (turn_order, unsupported_role ...).
            _add(counts.setdefault(_REFUSALS, {}), refusal_reason(letter["detail"]))
    return counts


def _accounting(
    records_in: int, blank_lines: int, through: str, n: int, dead_letters: Iterable[DeadLetter]
) -> dict[str, Any]:
    """The partial totals every view has: records read, ``n`` of them through to the main
    output (counted as ``through``), the rest dead letters by reason."""
    letters = _reasons(dead_letters)
    refusals = letters.pop(_REFUSALS, {})
    return {
        "records_in": records_in,
        "blank_lines": blank_lines,
        through: n,
        "dead_letters": sum(letters.values()),
        "dead_letters_by_reason": letters,
        "sink_refusals_by_reason": refusals,
    }


def _tally_violations(counts: dict[str, int], found: dict[str, int]) -> int:
    """Add one conversation's violations by kind to ``counts``; 1 if it has any, else 0."""
    for kind, n in found.items():
        _add(counts, kind, n)
    return 1 if found else 0


def _ordered(counts: dict[str, Any], names: Iterable[str]) -> dict[str, Any]:
    names = list(names)
    ordered = {name: counts.get(name, 0) for name in names}
    # Anything outside the closed list would be a bug upstream; keep it visible, sorted.
    ordered.update({k: counts[k] for k in sorted(counts) if k not in ordered})
    return ordered


def _letters_and_blanks(s: dict[str, Any]) -> dict[str, Any]:
    doc = {
        "dead_letters": s["dead_letters"],
        "dead_letters_by_reason": _ordered(s["dead_letters_by_reason"], DEAD_LETTER_REASONS),
    }
    if s.get("sink_refusals_by_reason"):
        # The unwritable dead letters by the writer's reason: what a sink refused, and why.
        doc["sink_refusals_by_reason"] = {
            k: s["sink_refusals_by_reason"][k] for k in sorted(s["sink_refusals_by_reason"])
        }
    doc["blank_lines"] = s["blank_lines"]
    return doc


def _violation_totals(s: dict[str, Any]) -> dict[str, Any]:
    return {
        "conversations_with_violations": s["conversations_with_violations"],
        "violations": _ordered(s["violations"], VIOLATION_KINDS),
    }


def accounted(doc: dict[str, Any], through: str) -> bool:
    """Every record read ended in exactly one output: ``doc[through]`` (the records that reached
    the command's main output) or the dead letters; a call-log record instead went into the
    conversations assembled from call logs (``call_logs``), each of which ended in one of the two.
    ``--examples each`` writes several records for one conversation: the ones beyond the first
    (``examples.beyond_first``) are not records read."""
    calls = doc.get("call_logs", {})
    handed_on = calls.get("records", 0) - calls.get("conversations", 0)
    beyond = doc.get("examples", {}).get("beyond_first", 0)
    return bool(doc["records_in"] == doc[through] - beyond + doc["dead_letters"] + handed_on)


#: The ``call_logs`` counts of a summary, in order: call-log records read, the calls and tool
#: results they held, the conversations assembled (and group dead letters), how many calls
#: collapsed into a longer one, the branches split out, the tool results filled in.
CALL_LOG_COUNTS = (
    "records",
    "calls",
    "tool_results",
    "conversations",
    "prefixes_collapsed",
    "branches",
    "tool_results_filled",
    "reopened",
)


#: The ``labels`` counts of a summary, in order: label records read, joined to a conversation,
#: left out as stale versions of another (``superseded``), and unmatched, by source.
LABEL_COUNTS = ("read", "joined", "superseded", "label_unmatched")


def _labels(s: dict[str, Any]) -> dict[str, Any]:
    """The ``labels`` section, when the run read any label (``transforms.calllogs.labels``):
    every label read is joined, superseded or unmatched (``label_unmatched``, by source)."""
    found = s.get("labels")
    if not found:
        return {}
    ordered = _ordered({"read": 0, "joined": 0, "label_unmatched": {}, **found}, LABEL_COUNTS)
    if isinstance(ordered.get("label_unmatched"), dict):
        ordered["label_unmatched"] = {k: ordered["label_unmatched"][k] for k in sorted(ordered["label_unmatched"])}
    return {"labels": ordered}


def _call_logs(s: dict[str, Any]) -> dict[str, Any]:
    """The ``call_logs`` section, when the run read any call log (absent otherwise: the summary
    of a run of conversations is what it was before call logs were read)."""
    found = s.get("call_logs")
    if not found:
        return {}
    ordered = _ordered(found, CALL_LOG_COUNTS)
    if isinstance(ordered.get("skipped_by_kind"), dict):
        # Parts that are no call and no tool result (HTTP, chain, agent spans ...), by kind.
        ordered["skipped_by_kind"] = {k: ordered["skipped_by_kind"][k] for k in sorted(ordered["skipped_by_kind"])}
    return {"call_logs": ordered}


# --------------------------------------------------------------------------------------------
# Normalization runs (``convnorm run``)


#: The keys of a drop-metrics record with nothing optional (id, source, position, dropped,
#: drops, healed, messages_in, messages_out).
_PLAIN_METRICS = len(DropMetrics.__required_keys__)


def partial(
    records_in: int = 0,
    metrics: Iterable[DropMetrics] = (),
    dead_letters: Iterable[DeadLetter] = (),
    blank_lines: int = 0,
) -> dict[str, Any]:
    """The partial summary of one batch: raw records read, drop metrics, dead letters."""
    dropped_by: dict[str, int] = {}
    repairs: dict[str, int] = {}
    violations: dict[str, int] = {}
    conversations_by_drops: dict[int, int] = {}  # into the histogram's buckets once, at the end
    nulled: dict[str, int] = {}
    discarded: dict[str, dict[str, int]] = {}
    tokens: dict[str, Any] = {}  # --tokens only: transforms.record.tokens.tally_example
    training: dict[str, int] = {}  # transforms.dataset.training's counts
    redacted: dict[str, int] = {}  # --redact: finds by kind
    reports: dict[str, Any] = {name: {} for name in REPORTS}
    records_out = messages_in = messages_out = dropped = healed = with_drops = with_violations = 0
    with_discards = partial_conversations = truncated_streams = 0
    # Once per record of the run (twice: the counters and the summary): plain dict operations
    # inline, a key looked up only where a record has it (most have no repairs, reports, ledger).
    for m in metrics:
        records_out += 1
        messages_in += m["messages_in"]
        messages_out += m["messages_out"]
        healed += m["healed"]
        n_dropped = m["dropped"]
        conversations_by_drops[n_dropped] = conversations_by_drops.get(n_dropped, 0) + 1
        if n_dropped:
            dropped += n_dropped
            with_drops += 1
        for reason, n in m["drops"].items():
            dropped_by[reason] = dropped_by.get(reason, 0) + n
        if len(m) == _PLAIN_METRICS:
            continue  # the eight keys every drop-metrics record has, and nothing else
        for kind, n in m.get("repairs", {}).items():
            _add(repairs, kind, n)
        if "reader_report" in m:
            reports["reader_report"] = merge(reports["reader_report"], m["reader_report"])
        if "writer_report" in m:
            reports["writer_report"] = merge(reports["writer_report"], m["writer_report"])
        for field, n in m.get("non_finite_nulled", {}).items():
            _add(nulled, field, n)
        if m.get("discarded"):
            with_discards += 1
            _add_ledger(discarded, m["discarded"])
        if "violations" in m:
            with_violations += _tally_violations(violations, m["violations"])
        partial_conversations += m.get("partial_conversation", False) is True
        truncated_streams += "truncated_stream" in m
        if "tokens" in m:
            tally_example(tokens, m)
        tally_training(training, redacted, m)  # the training-set options' counts
    histogram: dict[str, int] = {}
    for n_dropped in sorted(conversations_by_drops):
        _add(histogram, _bucket(n_dropped), conversations_by_drops[n_dropped])
    dead_letters = list(dead_letters)
    for letter in dead_letters:
        if "tokens" in letter:  # refused for its length (over_token_limit)
            tally_example(tokens, letter)
    part = {
        **_accounting(records_in, blank_lines, "records_out", records_out, dead_letters),
        "messages_in": messages_in,
        "messages_out": messages_out,
        "dropped": dropped,
        "dropped_by_reason": dropped_by,
        "healed": healed,
        "conversations_with_drops": with_drops,
        "drops_histogram": histogram,
        "discarded": discarded,
        "conversations_with_discards": with_discards,
        "repairs": repairs,
        "conversations_with_violations": with_violations,
        "violations": violations,
        **reports,
        "non_finite_nulled": nulled,
        "partial_conversations": partial_conversations,
    }
    if truncated_streams:  # absent without: the summary of other runs is as it was
        part["truncated_streams"] = truncated_streams
    if tokens:  # absent without --tokens: the summary is the same as before it existed
        part["tokens"] = tokens
    if training:
        part["training"] = training
    if redacted:
        part["redacted"] = redacted
    return part


def _add_ledger(discarded: dict[str, dict[str, int]], ledger: dict[str, Any]) -> None:
    for name, counts in ledger.items():
        total = discarded.setdefault(name, {"fields": 0, "chars": 0})
        total["fields"] += counts["fields"]
        total["chars"] += counts["chars"]


#: Names listed one by one in a run's ledger; the rest are summed under ``OTHER_NAMES``. Names
#: are whatever keys the input holds, so a hostile file could make millions of them.
MAX_LEDGER_NAMES = 50
OTHER_NAMES = "(other names)"


def _ledger(discarded: dict[str, Any], conversations: int) -> dict[str, Any]:
    """The run's ledger of what coercion discarded (``transforms.core.ledger``), apart from drops.

    The most frequent names (by fields, then name) are listed, sorted by name, the rest summed:
    decided on the run's total, so the document does not depend on merge order.
    """
    ranked = sorted(discarded, key=lambda name: (-discarded[name]["fields"], name))
    listed = {name: discarded[name] for name in sorted(ranked[:MAX_LEDGER_NAMES])}
    if len(ranked) > MAX_LEDGER_NAMES:
        rest = [discarded[name] for name in ranked[MAX_LEDGER_NAMES:]]
        listed[OTHER_NAMES] = {"fields": sum(c["fields"] for c in rest), "chars": sum(c["chars"] for c in rest)}
    return {
        "discarded_fields": sum(c["fields"] for c in discarded.values()),
        "discarded_chars": sum(c["chars"] for c in discarded.values()),
        "discarded_by_name": listed,
        "conversations_with_discards": conversations,
    }


def finalize(
    summary: dict[str, Any],
    *,
    profile: str = "spec",
    check: bool = False,
    tokens: TokenSettings | None = None,
    training: bool = False,
    dedupe: str = "none",
    examples: str = "whole",
    chat_template: Any = None,
    redact: tuple[str, ...] = (),
    redact_region: str | None = None,
) -> dict[str, Any]:
    """The canonical summary document (stable key order, every known reason listed); with
    ``tokens`` (``--tokens``), the ``tokens`` section (``token_figures``)."""
    s = merge(partial(), summary)
    doc = {
        "records_in": s["records_in"],
        "records_out": s["records_out"],
        **_letters_and_blanks(s),
        "messages_in": s["messages_in"],
        "messages_out": s["messages_out"],
        "dropped": s["dropped"],
        "dropped_by_reason": _ordered(s["dropped_by_reason"], REASONS),
        "healed": s["healed"],
        "conversations_with_drops": s["conversations_with_drops"],
        "drops_histogram": _ordered(s["drops_histogram"], (b[0] for b in HISTOGRAM_BUCKETS)),
        **_ledger(s["discarded"], s["conversations_with_discards"]),
        **_call_logs(s),
        **_labels(s),
        "profile": profile,
    }
    if s["non_finite_nulled"]:
        # Parquet NaN / infinities written as null (JSON cannot hold them), by field.
        doc["non_finite_nulled"] = {k: s["non_finite_nulled"][k] for k in sorted(s["non_finite_nulled"])}
    if s["partial_conversations"]:
        # Conversations continued from a history stored at the provider (previous_response_id).
        doc["partial_conversations"] = s["partial_conversations"]
    if s.get("truncated_streams"):
        # Conversations written holding an answer whose event stream was cut off (the training
        # sinks refuse them unless --keep-truncated-streams: sink_refusals_by_reason.truncated_stream).
        doc["truncated_streams"] = s["truncated_streams"]
    if profile != "spec" or s["repairs"]:
        doc["repairs"] = _ordered(s["repairs"], REPAIRS)
    if check or s["violations"]:
        doc.update(_violation_totals(s))
    # Documented choices of the reader and writer (``docs/formats-readers-writers.md``), sorted.
    for name in REPORTS:
        if s[name]:
            doc[name] = _sorted_counts(s[name])
    if tokens is not None:
        doc["tokens"] = token_figures(s.get("tokens", {}), tokens)
    doc.update(training_sections(s, training, dedupe, examples, chat_template, redact, redact_region))
    doc["accounted"] = accounted(doc, "records_out")
    return doc


def finalize_run(summary: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """``finalize`` with the options the record settings give (profile, ``--check``, ``--tokens``):
    the one way a run's totals become its document, batch or streaming, whole or per window."""
    return finalize(
        summary,
        profile=settings.profile,
        check=settings.check,
        tokens=settings.tokens,
        training=settings.keep_weights or settings.trailing_policy != "keep",
        dedupe=settings.dedupe,
        examples=settings.examples,
        chat_template=settings.chat_template,
        redact=settings.redact,
        redact_region=settings.redact_region,
    )


def _sorted_counts(counts: dict[str, Any]) -> dict[str, Any]:
    return {k: _sorted_counts(v) if isinstance(v, dict) else v for k, v in sorted(counts.items())}


# --------------------------------------------------------------------------------------------
# Validation runs (``convnorm validate``): conversations checked as they are


def validation_partial(
    records_in: int = 0,
    reports: Iterable[ViolationReport] = (),
    dead_letters: Iterable[DeadLetter] = (),
    blank_lines: int = 0,
) -> dict[str, Any]:
    """The partial summary of one batch: raw records read, violation reports, dead letters."""
    violations: dict[str, Any] = {}
    checked = with_violations = 0
    for report in reports:
        checked += 1
        with_violations += _tally_violations(violations, report["violations"])
    return {
        **_accounting(records_in, blank_lines, "conversations_checked", checked, dead_letters),
        "conversations_with_violations": with_violations,
        "violations": violations,
    }


def finalize_validation(summary: dict[str, Any]) -> dict[str, Any]:
    """The canonical ``validation.json`` document."""
    s = merge(validation_partial(), summary)
    doc = {
        "records_in": s["records_in"],
        "conversations_checked": s["conversations_checked"],
        **_violation_totals(s),
        **_letters_and_blanks(s),
        **_call_logs(s),
        **_labels(s),
    }
    doc["accounted"] = accounted(doc, "conversations_checked")
    doc["sendable"] = doc["conversations_with_violations"] == 0 and doc["dead_letters"] == 0
    return doc


# --------------------------------------------------------------------------------------------
# Exit rules of a finished run (its outputs are written either way)


@dataclass(frozen=True)
class DeadLetterLimit:
    """``--max-dead-letters``: a count (``10``) or a share of the records read (``2.5%``).

    A dataclass, not a NamedTuple: a tuple's ``count`` method would shadow the field."""

    count: int | None = None
    percent: float | None = None

    @classmethod
    def parse(cls, text: str, flag: str = "--max-dead-letters") -> "DeadLetterLimit":
        """Raises ``ValueError`` with a sentence for a person (naming ``flag``)."""
        text = str(text).strip()
        try:
            if text.endswith("%"):
                percent = float(text[:-1])
                if not 0 <= percent <= 100:
                    raise ValueError
                return cls(percent=percent)
            count = int(text)
            if count < 0:
                raise ValueError
            return cls(count=count)
        except ValueError:
            raise ValueError(
                f"{flag} {text!r}: expected a count (10) or a percentage of the records read (2.5%), not negative"
            ) from None

    def exceeded_by(self, dead_letters: int, records_in: int) -> bool:
        if self.count is not None:
            return dead_letters > self.count
        assert self.percent is not None  # parse sets exactly one of the two
        return dead_letters * 100 > self.percent * records_in

    def __str__(self) -> str:
        return f"{self.count:,}" if self.count is not None else f"{self.percent:g}% of the records read"


def dead_letter_warning(doc: dict[str, Any], limit: DeadLetterLimit | None) -> str | None:
    """The warning of a run whose dead letters (sink refusals included: ``unwritable``) pass
    ``--warn-dead-letters``, naming the reasons; ``None`` under it. Not an exit rule."""
    if limit is None or not doc["records_in"] or not limit.exceeded_by(_failed(doc), doc["records_in"]):
        return None
    refused = ", ".join(f"{reason} {n:,}" for reason, n in refusals(doc).items())
    reasons = ", ".join(
        f"{reason} {n:,}" + (f" ({refused})" if reason == UNWRITABLE and refused else "")
        for reason, n in doc["dead_letters_by_reason"].items()
        if n and reason != DUPLICATE
    )
    failed = _failed(doc)
    duplicates = doc.get("dead_letters_by_reason", {}).get(DUPLICATE, 0)
    chosen = doc.get("sink_refusals_by_reason", {}).get(CHOSEN_IN_PAIRS, 0)
    # The figures are those the limit was held to: a duplicate is set apart, as the docs say.
    plural = duplicates != 1
    apart = f"; {duplicates:,} duplicate{'s are' if plural else ' is'} collapsed by --dedupe and not counted"
    apart_chosen = f"; {chosen:,} chosen side{'s' if chosen != 1 else ''} of pairs written by trl-dpo not counted"
    return (
        f"{failed:,} of {doc['records_in']:,} records read "
        f"({failed / doc['records_in']:.1%}) are dead letters, past --warn-dead-letters "
        f"{limit}: {reasons}" + (apart if duplicates else "") + (apart_chosen if chosen else "")
    )


#: A ``trl-dpo`` refusal that is a choice: the conversation's answer is the chosen side of the
#: pairs written (``transforms.record.pairs``), as a duplicate is in the conversation kept.
CHOSEN_IN_PAIRS = "chosen_in_pairs"


def _failed(doc: dict[str, Any]) -> int:
    """Dead letters that are failures: a duplicate (``--dedupe``) and the chosen side of pairs
    written (``trl-dpo``) are choices, not failures."""
    chosen = doc.get("sink_refusals_by_reason", {}).get(CHOSEN_IN_PAIRS, 0)
    return int(doc["dead_letters"] - doc.get("dead_letters_by_reason", {}).get(DUPLICATE, 0) - chosen)


def _unaccounted(through: str) -> str:
    return f"records in != {through} + dead-lettered: some records are not accounted for (no _SUCCESS written)"


def changed_input_problem(doc: dict[str, Any]) -> str | None:
    """Why a run whose inputs changed under it cannot vouch for its outputs (None: none did).

    Its records add up, but they are not those of the files planned: half a truncated file
    was never read. So it exits 1 and writes no ``_SUCCESS``, like records not accounted for."""
    n = changed_inputs(doc)
    if not n:
        return None
    return (
        f"an input changed while the run read it ({n:,} {INPUT_CHANGED} dead letter{'s' if n != 1 else ''}, "
        "one per shard, in dead_letter/): the outputs do not hold the files as planned (no _SUCCESS written)"
    )


def run_failures(doc: dict[str, Any], limit: DeadLetterLimit | None = None) -> list[str]:
    """Why a finished run must exit with status 1 (its outputs are written either way)."""
    failures = []
    if not doc["accounted"]:
        failures.append(_unaccounted("normalized"))
    changed = changed_input_problem(doc)
    if changed:
        failures.append(changed)
    if doc["records_in"] and not doc["records_out"]:
        failures.append(
            f"read {doc['records_in']:,} record(s) but normalized none: every one is a dead "
            "letter (see dead_letter/ for the reasons)"
        )
    elif limit is not None and limit.exceeded_by(_failed(doc), doc["records_in"]):
        failures.append(
            f"{doc['dead_letters']:,} dead letter(s) of {doc['records_in']:,} record(s) read is "
            f"past --max-dead-letters {limit}"
        )
    return failures


class Verdict(NamedTuple):
    """The exit status of a finished run and the error lines that explain it."""

    status: int
    errors: list[str]


def run_verdict(doc: dict[str, Any], limit: DeadLetterLimit | None = None) -> Verdict:
    failures = run_failures(doc, limit)
    return Verdict(1 if failures else 0, failures)


def validation_verdict(doc: dict[str, Any], limit: DeadLetterLimit | None = None) -> Verdict:
    """Status 1 for a conversation that is not sendable or a record that could not be read
    (the table prints that verdict itself), or for records not accounted for (an error line)."""
    errors = [] if doc["accounted"] else [_unaccounted("checked")]
    changed = changed_input_problem(doc)
    if changed:
        errors.append(changed)
    return Verdict(0 if doc["sendable"] and not errors else 1, errors)


@dataclass(frozen=True)
class View:
    """One command's reading of the shared totals."""

    command: str
    #: The summary's count of the records that reached the command's main output.
    through: str
    #: That output's directory, and the other outputs that hold one row per such record.
    main_output: str
    per_record_outputs: tuple[str, ...]
    #: ``partial(records_in, items, dead_letters, blank_lines)``: the totals of one batch.
    partial: Callable[..., dict[str, Any]]
    #: ``finalize(total, **options)``: the document written as the command's summary file.
    finalize: Callable[..., dict[str, Any]]
    format_table: Callable[[dict[str, Any]], str]
    #: ``verdict(doc, limit)``: the exit status of a finished run (``--max-dead-letters``: ``limit``).
    verdict: Callable[..., Verdict]

    def recount(self, doc: dict[str, Any], on_disk: dict[str, Any]) -> dict[str, Any]:
        """``doc`` with its record counts taken from the files on disk (records per output)."""
        doc = dict(doc)
        doc[self.through] = on_disk[self.main_output]
        doc["dead_letters"] = on_disk["dead_letter"]
        doc["accounted"] = accounted(doc, self.through) and all(
            on_disk[name] == on_disk[self.main_output] for name in self.per_record_outputs
        )
        return doc


RUN = View("run", "records_out", "normalized", ("drops",), partial, finalize, format_table, run_verdict)
VALIDATE = View(
    "validate",
    "conversations_checked",
    "violations",
    (),
    validation_partial,
    finalize_validation,
    format_validation_table,
    validation_verdict,
)
