"""Dataset totals of a run, built from per-batch partials (no Beam import).

A partial summary is a plain dict of counts; ``merge`` adds two of them; ``finalize`` gives
the canonical ``summary.json`` document (every reason listed, in its closed order, so runs
compare line by line); ``format_table`` renders it for a person at the end of a run.
"""

from __future__ import annotations

from typing import Iterable, NamedTuple

from transforms.normalize import REASONS
from transforms.profiles import REPAIRS
from transforms.record_steps import DEAD_LETTER_REASONS
from transforms.validate import VIOLATION_KINDS

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


def merge(a: dict, b: dict) -> dict:
    """Add two partial summaries (nested dicts of counts) into a new one."""
    out = dict(a)
    for key, value in b.items():
        if isinstance(value, dict):
            out[key] = merge(out.get(key, {}), value)
        else:
            out[key] = out.get(key, 0) + value
    return out


def _add(counts: dict, key: str, n: int = 1) -> None:
    counts[key] = counts.get(key, 0) + n


def _reasons(dead_letters: Iterable[dict]) -> dict:
    counts: dict = {}
    for letter in dead_letters:
        _add(counts, letter["reason"])
    return counts


def partial(records_in: int = 0, metrics: Iterable[dict] = (), dead_letters: Iterable[dict] = (),
            blank_lines: int = 0) -> dict:
    """The partial summary of one batch: raw records read, drop metrics, dead letters."""
    out: dict = {"records_in": records_in, "blank_lines": blank_lines}
    dropped_by, repairs, violations, histogram, nulled, discarded = {}, {}, {}, {}, {}, {}
    reader_report: dict = {}
    writer_report: dict = {}
    records_out = messages_in = messages_out = dropped = healed = with_drops = with_violations = 0
    with_discards = 0
    for m in metrics:
        records_out += 1
        messages_in += m["messages_in"]
        messages_out += m["messages_out"]
        dropped += m["dropped"]
        healed += m["healed"]
        with_drops += m["dropped"] > 0
        _add(histogram, _bucket(m["dropped"]))
        for reason, n in m["drops"].items():
            _add(dropped_by, reason, n)
        for kind, n in m.get("repairs", {}).items():
            _add(repairs, kind, n)
        if "reader_report" in m:
            reader_report = merge(reader_report, m["reader_report"])
        if "writer_report" in m:
            writer_report = merge(writer_report, m["writer_report"])
        for field, n in m.get("non_finite_nulled", {}).items():
            _add(nulled, field, n)
        ledger = m.get("discarded")
        if ledger:
            with_discards += 1
            for name, counts in ledger.items():
                total = discarded.setdefault(name, {"fields": 0, "chars": 0})
                total["fields"] += counts["fields"]
                total["chars"] += counts["chars"]
        found = m.get("violations")
        if found:
            with_violations += 1
            for kind, n in found.items():
                _add(violations, kind, n)
    letters = _reasons(dead_letters)
    out.update(
        records_out=records_out,
        dead_letters=sum(letters.values()),
        dead_letters_by_reason=letters,
        messages_in=messages_in,
        messages_out=messages_out,
        dropped=dropped,
        dropped_by_reason=dropped_by,
        healed=healed,
        conversations_with_drops=with_drops,
        drops_histogram=histogram,
        discarded=discarded,
        conversations_with_discards=with_discards,
        repairs=repairs,
        conversations_with_violations=with_violations,
        violations=violations,
        reader_report=reader_report,
        writer_report=writer_report,
        non_finite_nulled=nulled,
    )
    return out


def _ordered(counts: dict, names: Iterable[str]) -> dict:
    names = list(names)
    ordered = {name: counts.get(name, 0) for name in names}
    # Anything outside the closed list would be a bug upstream; keep it visible, sorted.
    ordered.update({k: counts[k] for k in sorted(counts) if k not in ordered})
    return ordered


#: Names listed one by one in a run's ledger; the rest are summed under ``OTHER_NAMES``. Names
#: are whatever keys the input holds, so a hostile file could make millions of them.
MAX_LEDGER_NAMES = 50
OTHER_NAMES = "(other names)"


def _ledger(discarded: dict, conversations: int) -> dict:
    """The run's ledger of what coercion discarded (``transforms.ledger``), apart from drops.

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


def finalize(summary: dict, *, profile: str = "spec", check: bool = False) -> dict:
    """The canonical summary document (stable key order, every known reason listed)."""
    s = merge(partial(), summary)
    doc = {
        "records_in": s["records_in"],
        "records_out": s["records_out"],
        "dead_letters": s["dead_letters"],
        "dead_letters_by_reason": _ordered(s["dead_letters_by_reason"], DEAD_LETTER_REASONS),
        "blank_lines": s["blank_lines"],
        "messages_in": s["messages_in"],
        "messages_out": s["messages_out"],
        "dropped": s["dropped"],
        "dropped_by_reason": _ordered(s["dropped_by_reason"], REASONS),
        "healed": s["healed"],
        "conversations_with_drops": s["conversations_with_drops"],
        "drops_histogram": _ordered(s["drops_histogram"], (b[0] for b in HISTOGRAM_BUCKETS)),
        **_ledger(s["discarded"], s["conversations_with_discards"]),
        "profile": profile,
    }
    if s["non_finite_nulled"]:
        # Parquet NaN / infinities written as null (JSON cannot hold them), by field.
        doc["non_finite_nulled"] = {k: s["non_finite_nulled"][k] for k in sorted(s["non_finite_nulled"])}
    if profile != "spec" or s["repairs"]:
        doc["repairs"] = _ordered(s["repairs"], REPAIRS)
    if check or s["violations"]:
        doc["conversations_with_violations"] = s["conversations_with_violations"]
        doc["violations"] = _ordered(s["violations"], VIOLATION_KINDS)
    # Documented choices of the reader and writer (``docs/formats-readers-writers.md``), sorted.
    for name in ("reader_report", "writer_report"):
        if s[name]:
            doc[name] = _sorted_counts(s[name])
    doc["accounted"] = doc["records_in"] == doc["records_out"] + doc["dead_letters"]
    return doc


def _sorted_counts(counts: dict) -> dict:
    return {k: _sorted_counts(v) if isinstance(v, dict) else v for k, v in sorted(counts.items())}
class DeadLetterLimit(NamedTuple):
    """``--max-dead-letters``: a count (``10``) or a share of the records read (``2.5%``)."""

    count: int | None = None
    percent: float | None = None

    @classmethod
    def parse(cls, text: str) -> "DeadLetterLimit":
        """Raises ``ValueError`` with a sentence for a person."""
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
            raise ValueError(f"--max-dead-letters {text!r}: expected a count (10) or a percentage "
                             "of the records read (2.5%), not negative") from None

    def exceeded_by(self, dead_letters: int, records_in: int) -> bool:
        if self.count is not None:
            return dead_letters > self.count
        return dead_letters * 100 > self.percent * records_in

    def __str__(self) -> str:
        return f"{self.count:,}" if self.count is not None else f"{self.percent:g}% of the records read"


def run_failures(doc: dict, limit: DeadLetterLimit | None = None) -> list[str]:
    """Why a finished run must exit with status 1 (its outputs are written either way)."""
    failures = []
    if not doc["accounted"]:
        failures.append("records in != normalized + dead-lettered: some records are not accounted for")
    if doc["records_in"] and not doc["records_out"]:
        failures.append(f"read {doc['records_in']:,} record(s) but normalized none: every one is a dead "
                        "letter (see dead_letter/ for the reasons)")
    elif limit is not None and limit.exceeded_by(doc["dead_letters"], doc["records_in"]):
        failures.append(f"{doc['dead_letters']:,} dead letter(s) of {doc['records_in']:,} record(s) read is "
                        f"past --max-dead-letters {limit}")
    return failures


def format_table(doc: dict) -> str:
    """A short human-readable rendering of a finalized summary."""
    rows: list[tuple[str, str]] = []

    def row(label: str, value) -> None:
        rows.append((label, f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)))

    row("records in", doc["records_in"])
    row("  normalized", doc["records_out"])
    row("  dead-lettered", doc["dead_letters"])
    for reason, n in doc["dead_letters_by_reason"].items():
        if n:
            row(f"    {reason}", n)
    if doc.get("blank_lines"):
        row("blank lines skipped", doc["blank_lines"])
    row("messages in", doc["messages_in"])
    row("messages out", doc["messages_out"])
    row("messages dropped", doc["dropped"])
    for reason, n in doc["dropped_by_reason"].items():
        if n:
            row(f"  {reason}", n)
    row("synthetic results (healed)", doc["healed"])
    row("conversations with drops", doc["conversations_with_drops"])
    for field, n in doc.get("non_finite_nulled", {}).items():
        row(f"non-finite floats nulled in {field}", n)
    if "discarded_fields" in doc:
        # Not message drops: the fields rule 1 does not keep (transforms.ledger).
        row("fields discarded by coercion", doc["discarded_fields"])
        row("  text characters in them", doc["discarded_chars"])
        for name, counts in doc["discarded_by_name"].items():
            row(f"  {name}", f"{counts['fields']:,} ({counts['chars']:,} ch)")
        row("conversations with discards", doc["conversations_with_discards"])
    for kind, n in doc.get("repairs", {}).items():
        row(f"repair {kind}", n)
    if "violations" in doc:
        row("conversations with violations", doc["conversations_with_violations"])
        for kind, n in doc["violations"].items():
            if n:
                row(f"  {kind}", n)
    for name in ("reader_report", "writer_report"):
        for kind, n in doc.get(name, {}).items():
            if isinstance(n, dict):
                for key, k in n.items():
                    row(f"{name.split('_')[0]} {kind} {key}", k)
            else:
                row(f"{name.split('_')[0]} {kind}", n)
    histogram = "  ".join(f"{label}:{n:,}" for label, n in doc["drops_histogram"].items())
    width = max(len(label) for label, _ in rows)
    lines = [f"convnorm summary (profile {doc.get('profile', 'spec')})"]
    lines += [f"  {label.ljust(width)}  {value:>12}" for label, value in rows]
    lines.append(f"  drops per conversation  {histogram}")
    if not doc.get("accounted", True):
        lines.append("  WARNING: records in != normalized + dead-lettered")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Validation runs (``convnorm validate``): conversations checked as they are


def validation_partial(records_in: int = 0, reports: Iterable[dict] = (), dead_letters: Iterable[dict] = (),
                       blank_lines: int = 0) -> dict:
    violations: dict = {}
    checked = with_violations = 0
    for report in reports:
        checked += 1
        with_violations += bool(report["violations"])
        for kind, n in report["violations"].items():
            _add(violations, kind, n)
    letters = _reasons(dead_letters)
    return {
        "records_in": records_in,
        "blank_lines": blank_lines,
        "conversations_checked": checked,
        "conversations_with_violations": with_violations,
        "violations": violations,
        "dead_letters": sum(letters.values()),
        "dead_letters_by_reason": letters,
    }


def finalize_validation(summary: dict) -> dict:
    s = merge(validation_partial(), summary)
    doc = {
        "records_in": s["records_in"],
        "conversations_checked": s["conversations_checked"],
        "conversations_with_violations": s["conversations_with_violations"],
        "violations": _ordered(s["violations"], VIOLATION_KINDS),
        "dead_letters": s["dead_letters"],
        "dead_letters_by_reason": _ordered(s["dead_letters_by_reason"], DEAD_LETTER_REASONS),
        "blank_lines": s["blank_lines"],
    }
    doc["accounted"] = doc["records_in"] == doc["conversations_checked"] + doc["dead_letters"]
    doc["sendable"] = doc["conversations_with_violations"] == 0 and doc["dead_letters"] == 0
    return doc


def format_validation_table(doc: dict) -> str:
    lines = ["convnorm validate"]
    rows = [
        ("records in", doc["records_in"]),
        ("conversations checked", doc["conversations_checked"]),
        ("with violations", doc["conversations_with_violations"]),
    ]
    rows += [(f"  {kind}", n) for kind, n in doc["violations"].items() if n]
    rows.append(("unreadable records", doc["dead_letters"]))
    rows += [(f"  {reason}", n) for reason, n in doc["dead_letters_by_reason"].items() if n]
    width = max(len(label) for label, _ in rows)
    lines += [f"  {label.ljust(width)}  {n:>12,}" for label, n in rows]
    lines.append("  verdict: " + ("sendable" if doc["sendable"] else "NOT sendable"))
    return "\n".join(lines)
