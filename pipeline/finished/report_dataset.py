"""The report's view of the dataset written: one section per split (``--split``; the whole
output as ``train`` without it) with its examples, messages, tool calls, tokens, the largest
duplicate clusters (``--dedupe``) and a seeded sample of clean conversations to read; and the
training-set options' counts (weights, trailing turns, the split's key, duplicates) under
titles a person reads, not as raw summary keys.

Folded from the ``drops/`` lines (``DatasetStats.add``) while the report reads them, in bounded
memory: per split, counts, a token histogram, the few largest clusters and the few sampled ids.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Callable

from pipeline.finished.charts import OK_COLOR, bar_chart
from pipeline.finished.html_page import escape, figure, number_text, tile
from transforms.dataset.dataset_keys import TRAIN
from transforms.record.tokens import histogram_key, length_histogram

#: Duplicate clusters shown per split, largest first.
CLUSTERS_SHOWN = 5
#: Clean conversations sampled per split to read.
SAMPLE_SIZE = 3


@dataclass
class SplitStats:
    examples: int = 0
    messages: int = 0
    tool_calls: int = 0
    with_drops: int = 0
    tokens: int = 0
    #: tokens per example -> examples (``transforms.record.tokens.histogram_key`` buckets)
    token_counts: dict[int, int] = field(default_factory=dict)
    duplicates_collapsed: int = 0
    #: (size, id, ids collapsed) of the largest clusters (``clusters_of``), bounded
    clusters: list[tuple[int, str, list[str]]] = field(default_factory=list)
    #: (rank, id, drops line) of clean conversations, the lowest ranks drawn (``sample_of``), bounded
    sample: list[tuple[int, str, dict]] = field(default_factory=list)
    #: Conversations with scores (``metadata.scores``: their labels), and per score name its
    #: distribution (``ScoreStats``).
    labelled: int = 0
    scores: dict[str, ScoreStats] = field(default_factory=dict)


#: How many distinct values of a score that is not a number a split's statistics keep.
SCORE_VALUES_KEPT = 50


@dataclass
class ScoreStats:
    """One score name's values in a split: numbers by count, least, greatest and sum; other
    values (true / false, categories) counted by value (at most ``SCORE_VALUES_KEPT``)."""

    conversations: int = 0
    numbers: int = 0
    least: float | None = None
    greatest: float | None = None
    total: float = 0.0
    values: dict[str, int] = field(default_factory=dict)

    def add(self, value: Any) -> None:
        self.conversations += 1
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            self.numbers += 1
            self.total += value
            self.least = value if self.least is None else min(self.least, value)
            self.greatest = value if self.greatest is None else max(self.greatest, value)
            return
        text = str(value).lower() if isinstance(value, bool) else str(value)[:60]
        if text in self.values or len(self.values) < SCORE_VALUES_KEPT:
            self.values[text] = self.values.get(text, 0) + 1

    def described(self) -> str:
        parts = []
        if self.numbers:
            mean = self.total / self.numbers
            parts.append(f"least {self.least:g} · mean {mean:.3g} · greatest {self.greatest:g}")
        ranked = sorted(self.values.items(), key=lambda item: (-item[1], item[0]))
        parts.extend(f"{value}: {number_text(n)}" for value, n in ranked[:8])
        return " · ".join(parts)


def _rank(seed: int, split: str, rid: str) -> int:
    digest = hashlib.sha256(f"{seed}\0{split}\0{rid}".encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big")


@dataclass
class DatasetStats:
    """Per split, what its ``drops/`` lines say; ``seed`` draws the sample (``--split-seed``)."""

    seed: int = 0
    splits: dict[str, SplitStats] = field(default_factory=dict)
    has_tokens: bool = False
    has_tool_calls: bool = False
    has_labels: bool = False

    def add(self, m: dict) -> None:
        name = str(m.get("split", TRAIN))
        split = self.splits.get(name)
        if split is None:
            split = self.splits[name] = SplitStats()
        split.examples += 1
        split.messages += int(m.get("messages_out", 0))
        split.with_drops += m.get("dropped", 0) > 0
        if isinstance(m.get("tool_calls"), int):
            self.has_tool_calls = True
            split.tool_calls += m["tool_calls"]
        if isinstance(m.get("tokens"), int):
            self.has_tokens = True
            split.tokens += m["tokens"]
            key = histogram_key(m["tokens"])
            split.token_counts[key] = split.token_counts.get(key, 0) + 1
        if isinstance(m.get("scores"), dict) and m["scores"]:
            self.has_labels = True
            split.labelled += 1
            for name, value in m["scores"].items():
                split.scores.setdefault(str(name), ScoreStats()).add(value)
        rid = str(m.get("id", ""))
        duplicates = m.get("duplicates")
        if isinstance(duplicates, list) and duplicates:
            split.duplicates_collapsed += len(duplicates)
            split.clusters.append((len(duplicates), rid, [str(d) for d in duplicates]))
            _keep_first(split.clusters, lambda c: (-c[0], c[1]), CLUSTERS_SHOWN)
        later = isinstance(m.get("example"), dict) and m["example"].get("k", 1) != 1
        if not m.get("dropped") and not later:  # --examples each: the conversation's first only
            split.sample.append((_rank(self.seed, name, rid), rid, m))
            _keep_first(split.sample, lambda c: (c[0], c[1]), SAMPLE_SIZE)

    def ordered(self) -> list[tuple[str, SplitStats]]:
        """``train`` first, then the other splits by name."""
        return sorted(self.splits.items(), key=lambda item: (item[0] != TRAIN, item[0]))

    def sampled(self) -> list[dict]:
        """The drops lines of every split's sample, in the order the page shows them."""
        return [m for _, split in self.ordered() for m in sample_of(split)]


def _keep_first(items: list, order: Callable[[Any], Any], size: int) -> None:
    """Keep ``items`` bounded: past twice ``size``, only the first ``size`` by ``order``."""
    if len(items) > 2 * size:
        items.sort(key=order)
        del items[size:]


def clusters_of(split: SplitStats) -> list[tuple[int, str, list[str]]]:
    """The split's largest clusters, largest first (then by id)."""
    return sorted(split.clusters, key=lambda c: (-c[0], c[1]))[:CLUSTERS_SHOWN]


def sample_of(split: SplitStats) -> list[dict]:
    """The split's sampled clean conversations, in the order of their draw."""
    return [m for _, _, m in sorted(split.sample, key=lambda c: (c[0], c[1]))[:SAMPLE_SIZE]]


# --------------------------------------------------------------------------------------------
# Rendering

#: The training-set counts of summary.json, in words (docs/fine-tuning.md).
TRAINING_LABELS = {
    "weights_kept": "messages whose training weight was kept",
    "weights_not_written": "weights the sink cannot write (left out)",
    "weights_invalid": "weights that were not 0 or 1 (left out)",
    "weights_lost_with_message": "weights lost with a dropped message",
    "trailing_trimmed": "messages after the last answer, trimmed",
    "conversations_trimmed": "conversations that had them trimmed",
    "split_key_missing": "conversations without a --split-by value (split by id)",
    "examples_written": "examples written (--examples each)",
}


def training_html(s: dict, split_by: str | None) -> str:
    """What shaping the training set did: weights, trailing turns, the split's key, duplicates."""
    parts = []
    training = s.get("training")
    if training:
        rows = "".join(
            f"<tr><td>{escape(TRAINING_LABELS.get(name, name))}</td>"
            f'<td class="n" data-key="training.{escape(name)}">{number_text(n)}</td></tr>'
            for name, n in training.items()
        )
        parts.append(f'<table class="counts"><tr><th>training set</th><th class="n">count</th></tr>{rows}</table>')
        missing = training.get("split_key_missing", 0)
        if missing:
            path = f"<code>{escape(split_by)}</code>" if split_by else "the --split-by path"
            parts.append(
                f'<p class="banner">{number_text(missing)} conversation(s) had no value at {path}: each one\'s '
                "split was drawn from its own id instead, so they are not kept with the rest of their "
                "user or session.</p>"
            )
    dedupe = s.get("dedupe")
    if dedupe:
        parts.append(
            f'<h3>Duplicates (--dedupe <span data-key="dedupe.mode">{escape(dedupe.get("mode", ""))}</span>)</h3>'
            '<div class="tiles">'
            + tile("conversations kept with duplicates", "dedupe.kept_with_duplicates", dedupe["kept_with_duplicates"])
            + tile("duplicates collapsed into them", "dedupe.duplicates_collapsed", dedupe["duplicates_collapsed"])
            + "</div><p>Each duplicate is a dead letter (reason <code>duplicate</code>) naming the conversation "
            "kept; the largest clusters are listed per split above.</p>"
        )
    labelled = labelled_sets_html(s)
    if labelled:
        parts.append(labelled)
    redacted = s.get("redacted")
    if redacted:
        rows = "".join(
            f'<tr><td>{escape(kind)}</td><td class="n" data-key="redacted.{escape(kind)}">{number_text(n)}</td></tr>'
            for kind, n in redacted.items()
        )
        parts.append(
            "<h3>Redacted (--redact)</h3>"
            f'<table class="counts"><tr><th>what was found</th><th class="n">replaced</th></tr>{rows}</table>'
        )
    if not parts:
        return ""
    return '<h2>Training set</h2><div class="card">' + "".join(parts) + "</div>"


def scores_table(split: SplitStats) -> str:
    """A split's scores (its conversations' ``metadata.scores``): per name, how many
    conversations have one, and how they are spread."""
    rows = "".join(
        f'<tr><td class="mono">{escape(name)}</td><td class="n">{number_text(stats.conversations)}</td>'
        f"<td>{escape(stats.described())}</td></tr>"
        for name, stats in sorted(split.scores.items())
    )
    return (
        '<h4>Scores (their labels: docs/call-logs.md)</h4><div class="scroll"><table class="examples">'
        f'<tr><th>score</th><th class="n">conversations</th><th>values</th></tr>{rows}</table></div>'
    )


#: What the TRL sinks count (their writer reports), in words (docs/fine-tuning.md).
LABELLED_COUNTS = {
    ("pairs_from", "correction"): "pairs: a correction chosen against the logged answer",
    ("pairs_from", "rejected_output"): "pairs: the logged answer chosen against a rejected one",
    ("pairs_from", "regeneration"): "pairs: regenerations of one prompt, by thumbs",
    ("pairs_from", "score_difference"): "pairs: answers to one prompt, by score (--pair-by)",
    ("labels_written", "true"): "KTO rows labelled good",
    ("labels_written", "false"): "KTO rows labelled bad",
    ("prompts_with", "answer"): "prompts with their logged answer",
    ("prompts_with", "no_answer"): "prompts without an answer",
}


def labelled_sets_html(s: dict) -> str:
    """The TRL sinks' rows by what made them (pairs by kind, KTO rows by label, prompts), and
    the conversations they refused by reason; empty for another sink."""
    report = s.get("writer_report") or {}
    made = [
        (f"writer_report.{group}.{key}", LABELLED_COUNTS[(group, key)], n)
        for group in ("pairs_from", "labels_written", "prompts_with")
        for key, n in sorted((report.get(group) or {}).items())
        if (group, key) in LABELLED_COUNTS
    ]
    if not made:
        return ""
    refused = s.get("sink_refusals_by_reason") or {}
    rows = "".join(
        f'<tr><td>{escape(label)}</td><td class="n" data-key="{escape(key)}">{number_text(n)}</td></tr>'
        for key, label, n in made
    )
    rows += "".join(
        f"<tr><td>refused: <code>{escape(reason)}</code></td>"
        f'<td class="n" data-key="sink_refusals_by_reason.{escape(reason)}">{number_text(n)}</td></tr>'
        for reason, n in refused.items()
    )
    return (
        "<h3>Preference, KTO and prompt rows (labels)</h3>"
        f'<table class="counts"><tr><th>rows made and conversations refused</th><th class="n">count</th></tr>'
        f"{rows}</table><p>Each refused conversation is a dead letter (reason <code>unwritable</code>) saying "
        "why; <code>convnorm explain OUT --id ID</code> shows the pair a conversation went into.</p>"
    )


def splits_html(s: dict, stats: DatasetStats, sample_block: Callable[[dict], str], split_by: str | None = None) -> str:
    """A section per split; ``sample_block`` renders one sampled conversation."""
    if not stats.splits:
        return ""
    counted = s.get("splits", {})
    parts = [
        "<h2>The dataset, by split</h2>",
        "<p>What each split holds as written. "
        + (
            f"Conversations are split by <code>{escape(split_by)}</code>. "
            if split_by
            else ("Conversations are split by their id. " if counted else "")
        )
        + "The sample is drawn by a seeded hash of each id among conversations that lost nothing.</p>",
    ]
    for name, split in stats.ordered():
        key = f"dataset.{name}."
        # The split's count in summary.json (counted in the files) is the one shown.
        tiles = [
            tile("examples", f"splits.{name}" if name in counted else key + "examples", split.examples),
            tile("messages", key + "messages", split.messages),
        ]
        if stats.has_tool_calls:
            tiles.append(tile("tool calls", key + "tool_calls", split.tool_calls))
        tiles.append(tile("with drops", key + "with_drops", split.with_drops, "bad" if split.with_drops else "good"))
        if stats.has_tokens:
            tiles.append(tile("tokens", key + "tokens", split.tokens))
        if split.duplicates_collapsed:
            tiles.append(tile("duplicates collapsed", key + "duplicates", split.duplicates_collapsed))
        if stats.has_labels:
            tiles.append(tile("with scores", key + "labelled", split.labelled))
        where = "normalized/" if name == TRAIN else f"{name}/"
        body = [f'<div class="tiles">{"".join(tiles)}</div>']
        if split.token_counts:
            histogram = length_histogram(split.token_counts)
            used = [label for label, n in histogram.items() if n]
            shown = dict(list(histogram.items())[: list(histogram).index(used[-1]) + 1])
            chart = bar_chart(
                shown,
                f"{name}: examples by tokens",
                value_title="examples",
                label_title="tokens per example",
                horizontal=False,
                color=OK_COLOR,
            )
            body.append(figure(chart, f"split_tokens_{name}"))
        if split.scores:
            body.append(scores_table(split))
        clusters = clusters_of(split)
        if clusters:
            rows = "".join(
                f'<tr><td class="mono">{escape(rid)}</td><td class="n">{number_text(n + 1)}</td>'
                f'<td class="mono">{escape(", ".join(ids[:8]) + (" …" if len(ids) > 8 else ""))}</td></tr>'
                for n, rid, ids in clusters
            )
            body.append(
                '<h4>Largest duplicate clusters</h4><div class="scroll"><table class="examples"><tr><th>kept</th>'
                f'<th class="n">conversations</th><th>collapsed into it</th></tr>{rows}</table></div>'
            )
        sample = sample_of(split)
        body.append(
            "<h4>A sample to read</h4>" + "".join(sample_block(m) for m in sample)
            if sample
            else '<h4>A sample to read</h4><p class="none">Every conversation of this split lost something: '
            "see the examples below.</p>"
        )
        parts.append(
            f'<h3 data-split="{escape(name)}">{escape(name)} <span class="dir">({escape(where)})</span></h3>'
            f'<div class="card">{"".join(body)}</div>'
        )
    return "".join(parts)


__all__ = ["DatasetStats", "SplitStats", "labelled_sets_html", "splits_html", "training_html"]
