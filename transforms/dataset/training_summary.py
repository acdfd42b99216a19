"""The training-set options' totals (no Beam import): their partial counts per conversation and
their sections of ``summary.json`` and of the printed table, apart from ``transforms.totals.summary``.

``--weights`` and ``--trailing`` (``training``), ``--examples`` (``examples``), ``--dedupe``
(``dedupe``), ``--chat-template`` (``chat_template``), ``--redact`` (``redacted``); ``splits``
is counted in the files on disk (``pipeline.execution.output_spec.recount_splits``).
"""

from __future__ import annotations

from typing import Any

from transforms.dataset.training import TRAINING_COUNTS

#: The dead-letter reason of a conversation ``--dedupe`` collapsed into another (listed only
#: when it occurs: transforms.record.dedupe).
DUPLICATE = "duplicate"


def _add(counts: dict[str, int], key: str, n: int = 1) -> None:
    counts[key] = counts.get(key, 0) + n


def tally_training(training: dict[str, int], redacted: dict[str, int], m: Any) -> None:
    """Add one drop-metrics record's training-set counts to the batch's partial tallies."""
    for name, n in m.get("training", {}).items():
        _add(training, name, n)
    for kind, n in m.get("redacted", {}).items():  # --redact
        _add(redacted, kind, n)
    if "template_tokens" in m:  # --chat-template with a tokenizer
        _add(training, "template_tokens", m["template_tokens"])
    if "example" in m:  # --examples each: one of a conversation's examples
        _add(training, "examples_beyond_first" if m["example"]["k"] > 1 else "conversations_with_examples", 1)
    if "duplicates" in m:  # --dedupe: a conversation kept for others collapsed into it
        _add(training, "kept_with_duplicates", 1)
        _add(training, "duplicates_collapsed", len(m["duplicates"]))


def _ordered(counts: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    ordered = {name: counts.get(name, 0) for name in names}
    ordered.update({k: counts[k] for k in sorted(counts) if k not in ordered})
    return ordered


def training_sections(
    s: dict[str, Any],
    training: bool,
    dedupe: str,
    examples: str,
    chat_template: Any,
    redact: tuple[str, ...],
    redact_region: str | None = None,
) -> dict[str, Any]:
    """The summary document's sections of the options in force (``s``: the run's totals)."""
    counts = dict(s.get("training", {}))
    doc: dict[str, Any] = {}
    taken: set[str] = {"conversations_with_examples"}
    if examples != "whole":
        doc["examples"] = {
            "mode": examples,
            "written": s["records_out"],  # the examples kept (--dedupe may collapse some)
            "beyond_first": counts.get("examples_beyond_first", 0),
            "skipped_weight_0": counts.get("examples_skipped_weight_0", 0),
        }
        taken |= {"examples_written", "examples_beyond_first", "examples_skipped_weight_0"}
    if redact:
        # The option as in force: a streaming output has no manifest, and explain and the report
        # show what it read redacted as it was written (pipeline.finished.output_dir.run_settings).
        doc["redact"] = ",".join(
            f"{kind}:{redact_region}" if kind == "phones" and redact_region else kind for kind in redact
        )
        doc["redacted"] = {kind: s.get("redacted", {})[kind] for kind in sorted(s.get("redacted", {}))}
    if chat_template is not None:
        doc["chat_template"] = {
            "template": chat_template.path,
            "examples_rendered": counts.get("examples_rendered", 0),
            # Counted with the folder's tokenizer.json; null without one.
            "tokens": counts.get("template_tokens", 0) if chat_template.tokenizer else None,
        }
        taken |= {"examples_rendered", "template_tokens"}
    if dedupe != "none":
        doc["dedupe"] = {
            "mode": dedupe,
            "kept_with_duplicates": counts.get("kept_with_duplicates", 0),
            "duplicates_collapsed": counts.get("duplicates_collapsed", 0),
        }
        taken |= {"kept_with_duplicates", "duplicates_collapsed"}
    rest = {k: v for k, v in counts.items() if k not in taken}
    if training or rest:
        # transforms.dataset.training: every count listed, in its order, when the run shapes a training set.
        doc = {"training": _ordered(rest, TRAINING_COUNTS), **doc}
    return doc


def training_rows(doc: dict[str, Any]) -> list[tuple[str, Any]]:
    """The printed table's rows of those sections (and of ``splits``)."""
    rows = [(f"training {name}", n) for name, n in doc.get("training", {}).items() if n]
    if "dedupe" in doc:
        d = doc["dedupe"]
        rows.append((f"dedupe ({d['mode']}): duplicates collapsed", d["duplicates_collapsed"]))
        rows.append(("  into conversations kept", d["kept_with_duplicates"]))
    rows += [(f"redacted {kind}", n) for kind, n in doc.get("redacted", {}).items()]
    if "chat_template" in doc:
        c = doc["chat_template"]
        rows.append(("examples rendered (--chat-template)", c["examples_rendered"]))
        if c["tokens"] is not None:
            rows.append(("  tokens, its tokenizer", c["tokens"]))
    if "examples" in doc:
        e = doc["examples"]
        rows.append((f"examples ({e['mode']}) written", e["written"]))
        if e["skipped_weight_0"]:
            rows.append(("  skipped (weight 0)", e["skipped_weight_0"]))
    rows += [(f"split {name}", n) for name, n in doc.get("splits", {}).items()]
    return rows
