"""What the report page reads from a finished output: the totals, each source's counts (the
worst sources), the example conversations and dead letters per reason, read back and
explained (``pipeline.finished.explain``), and the versions that made the page: ``collect``."""

from __future__ import annotations

import platform
from dataclasses import dataclass, field
from typing import Iterable

from pipeline.finished.explain import Located, RunInputs
from pipeline.finished.output_dir import Window, json_lines, matched, read_json, windows
from pipeline.finished.report_dataset import DatasetStats
from pipeline.io.output_names import DEAD_LETTER_PATTERNS, MANIFEST_FILE

#: Rows of the worst-sources table.
WORST_SOURCES = 10


#: Example conversations (or dead letters) shown per reason.
EXAMPLES_PER_REASON = 3


#: Examples over --max-example-tokens listed one by one (all are counted in summary.json).
OVER_LIMIT_LISTED = 20


@dataclass
class SourceStats:
    records: int = 0
    dead_letters: int = 0
    conversations_with_drops: int = 0
    messages_in: int = 0
    dropped: int = 0

    @property
    def affected_rate(self) -> float:
        """Share of the source's records that lost messages or were dead-lettered."""
        return (self.dead_letters + self.conversations_with_drops) / self.records if self.records else 0.0


@dataclass
class RunDetails:
    """What the per-record outputs add to summary.json."""

    sources: dict[str, SourceStats] = field(default_factory=dict)
    #: drop reason -> the first conversations (in output order) that dropped for it
    drop_examples: dict[str, list[dict]] = field(default_factory=dict)
    #: dead-letter reason -> the first dead letters of that reason
    dead_letter_examples: dict[str, list[dict]] = field(default_factory=dict)
    #: drops and dead letters as the per-record lines count them (the page checks them against summary.json)
    dropped: int = 0
    dead_letters: int = 0
    #: The first examples over --max-example-tokens (--tokens): drop metrics of those kept,
    #: dead letters of those dropped, in output order.
    over_limit: list[dict] = field(default_factory=list)
    #: (source, position) of the call-log records counted in ``sources`` (each counted once)
    call_records: set[tuple[str, object]] = field(default_factory=set)
    #: The dataset written, per split (``pipeline.finished.report_dataset``)
    dataset: DatasetStats = field(default_factory=DatasetStats)

    def source(self, path: str) -> SourceStats:
        stats = self.sources.get(path)
        if stats is None:
            stats = self.sources[path] = SourceStats()
        return stats

    def examples(self, order: Iterable[str] = ()) -> list[tuple[dict, list[str]]]:
        """Each example conversation once, with the reasons it is an example of: in the order of
        ``order`` (summary.json's reasons), then any other reason."""
        reasons = list(order) + sorted(set(self.drop_examples) - set(order))
        shown: dict[str, tuple[dict, list[str]]] = {}
        for reason in reasons:
            for metrics in self.drop_examples.get(reason, []):
                key = f"{metrics.get('source')}\0{metrics.get('position')}"
                shown.setdefault(key, (metrics, []))[1].append(reason)
        return list(shown.values())


def scan_drops(metrics: Iterable[dict], details: RunDetails, examples: int = EXAMPLES_PER_REASON) -> None:
    """Fold drop-metrics records (one per normalized conversation) into ``details``."""
    for m in metrics:
        stats = details.source(str(m.get("source", "?")))
        assembly = m.get("assembly")
        if isinstance(assembly, dict):
            _count_call_records(assembly, details)
        else:
            stats.records += 1
        stats.messages_in += m.get("messages_in", 0)
        stats.dropped += m.get("dropped", 0)
        details.dropped += m.get("dropped", 0)
        stats.conversations_with_drops += m.get("dropped", 0) > 0
        for reason, n in (m.get("drops") or {}).items():
            shown = details.drop_examples.setdefault(reason, [])
            if n and len(shown) < examples:
                shown.append(m)
        if m.get("over_token_limit") and len(details.over_limit) < OVER_LIMIT_LISTED:
            details.over_limit.append(m)
        details.dataset.add(m)


def _count_call_records(assembly: dict, details: RunDetails) -> None:
    """A conversation assembled from call logs: the records it was made of, each counted once
    in its own file (a record read holds one call or more; a conversation is made of several)."""
    for entry in (*assembly.get("calls", ()), *assembly.get("tool_results_unused", ())):
        if not isinstance(entry, dict):
            continue
        source, position = str(entry.get("source", "?")), entry.get("position")
        if (source, position) not in details.call_records:
            details.call_records.add((source, position))
            details.source(source).records += 1


def scan_dead_letters(letters: Iterable[dict], details: RunDetails, examples: int = EXAMPLES_PER_REASON) -> None:
    """Fold dead-letter records into ``details``."""
    for letter in letters:
        stats = details.source(str(letter.get("source", "?")))
        stats.records += 1
        stats.dead_letters += 1
        details.dead_letters += 1
        shown = details.dead_letter_examples.setdefault(str(letter.get("reason", "?")), [])
        if len(shown) < examples:
            shown.append(letter)
        if letter.get("reason") == "over_token_limit" and len(details.over_limit) < OVER_LIMIT_LISTED:
            details.over_limit.append(letter)


def worst_sources(details: RunDetails, limit: int = WORST_SOURCES) -> list[tuple[str, SourceStats]]:
    """Sources with any drop or dead letter, highest affected rate first (then most records, path)."""
    hit = [(path, s) for path, s in details.sources.items() if s.dead_letters or s.conversations_with_drops]
    hit.sort(key=lambda item: (-item[1].affected_rate, -item[1].records, item[0]))
    return hit[:limit]


@dataclass
class ReportData:
    output: str
    summary: dict
    details: RunDetails
    #: The run's manifest (options, versions), or {} (a streaming output has none)
    manifest: dict
    #: What only the run itself knows (``took``: how long it ran, in words), shown in the footer; {} when rebuilt
    run: dict
    #: A streaming output's windows, oldest first ([] for a batch run)
    windows: list[Window] = field(default_factory=list)
    #: (source, position) -> 1-based line, for the positions the page shows
    lines: dict[tuple[str, int], int] = field(default_factory=dict)
    #: example id -> its explanation (``pipeline.finished.explain.Located``) or why there is none
    explained: dict[str, Located | str] = field(default_factory=dict)


def collect(output: str, run: dict | None = None, explain_examples: bool = True) -> ReportData:
    """Read a finished run's outputs under ``output``. Raises FileNotFoundError without summary.json."""
    from apache_beam.io.filesystems import FileSystems

    from pipeline.finished.explain import run_inputs
    from pipeline.io.output_names import DROPS_PATTERNS

    summary = read_json(FileSystems.join(output, "summary.json"))
    if summary is None:
        raise FileNotFoundError(f"{output!r} holds no summary.json (is it a convnorm run's --output?)")
    manifest = read_json(FileSystems.join(output, MANIFEST_FILE)) or {}
    details = RunDetails(dataset=DatasetStats(seed=_split_seed(manifest)))
    scan_drops(json_lines(matched(output, DROPS_PATTERNS)), details)
    scan_dead_letters(json_lines(matched(output, DEAD_LETTER_PATTERNS)), details)
    data = ReportData(output, summary, details, manifest, dict(run or {}), windows(output))
    # The examples' sources are opened only when the run read them (a drops/ line can name any file).
    inputs = run_inputs(output) if _example_sources(details) else None
    data.lines = _example_lines(details, inputs)
    if explain_examples:
        data.explained = _explain_examples(output, details, summary, inputs)
    return data


def _split_seed(manifest: dict) -> int:
    """The run's ``--split-seed`` (0, its default, when not given): the seed of the samples."""
    options = manifest.get("options")
    seed = options.get("split_seed") if isinstance(options, dict) else None
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else 0


def _example_sources(details: RunDetails) -> dict[str, set[int]]:
    """Source -> the positions the examples show there."""
    wanted: dict[str, set[int]] = {}
    shown = (*details.drop_examples.values(), *details.dead_letter_examples.values(), details.over_limit)
    for records in (*shown, details.dataset.sampled()):
        for record in records:
            wanted.setdefault(str(record.get("source")), set()).add(int(record.get("position", -1)))
    return wanted


def _read_by_the_run(inputs: RunInputs | None, source: str) -> bool:
    """Whether the run read ``source`` (``inputs``: ``run_inputs``; None: no example to ask for)."""
    from pipeline.finished.explain import Refused, check_source

    if inputs is None:
        return False
    try:
        check_source(inputs, source, None)
    except Refused:
        return False  # its example says why (``_explain_examples``); no line number shown
    return True


def _example_lines(details: RunDetails, inputs: RunInputs | None = None) -> dict[tuple[str, int], int]:
    """Line numbers of every position the examples show, one read per source file the run read
    (``inputs``: ``run_inputs``; None: none is read)."""
    from pipeline.io.reread import line_numbers

    return {
        (source, position): line
        for source, positions in _example_sources(details).items()
        if _read_by_the_run(inputs, source)
        for position, line in line_numbers(source, positions).items()
    }


def _explain_examples(
    output: str, details: RunDetails, summary: dict, inputs: RunInputs | None = None
) -> dict[str, Located | str]:
    """Each example conversation read back and explained, or the reason it could not be."""
    from pipeline.finished.explain import NotFound, locate

    explained: dict[str, Located | str] = {}
    examples = [metrics for metrics, _ in details.examples(summary.get("dropped_by_reason", {}))]
    for metrics in (*examples, *details.dataset.sampled()):
        rid = str(metrics.get("id"))
        try:
            explained[rid] = locate(output, rid, metrics=metrics, inputs=inputs)
        except NotFound as why:
            explained[rid] = str(why)
        except Exception as error:  # noqa: BLE001 — the page is still worth having without this block
            explained[rid] = f"could not be read back: {type(error).__name__}: {error}"
    return explained


def versions() -> dict[str, str]:
    """Versions of the software that made the report."""
    from importlib import metadata

    found = {"python": platform.python_version()}
    for name in ("convnorm", "apache-beam", "orjson", "pyarrow"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found
