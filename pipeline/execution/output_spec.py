"""What a command writes under ``--output`` (``OutputSpec``): its shard outputs, its summary,
an ``hf`` run's dataset card and its page. ``run_spec`` is the run's, ``VALIDATE_SPEC``
validate's; ``pipeline.execution.execute`` checks and finalizes what a spec names,
``pipeline.cli.dry_run`` shows it."""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Callable

from apache_beam.io.filesystems import FileSystems

from pipeline.config.options import Job
from pipeline.io import ownership as owned
from pipeline.io.dataset_card import dataset_card
from pipeline.io.file_formats import FILE_FORMATS
from pipeline.io.output_names import CARD_FILE, SUMMARY_FILE, VALIDATION_FILE
from transforms.dataset.dataset_keys import output_names
from transforms.totals import summary as summaries


@dataclass(frozen=True)
class Page:
    """A page drawn from the finished outputs (``report.html``): planned and checked with them,
    listed in the manifest with its hash, but never the reason a run fails."""

    name: str
    #: ``render(output)`` -> the page's bytes, read from the outputs on disk.
    render: Callable[[str], bytes]


@dataclass(frozen=True)
class Card:
    """A file drawn from what finalize put in place, written beside the summary (the dataset
    card, ``README.md``): planned, checked and listed in the manifest like it."""

    name: str
    #: ``render(records per output folder on disk)`` -> its bytes, or None: nothing to write.
    render: Callable[[dict], bytes | None]


@dataclass(frozen=True)
class OutputSpec:
    """What a command writes under ``--output``."""

    command: str
    shard_outputs: dict[str, str]  # output directory name -> file extension
    summary_file: str
    #: ``recount(summary, records per output on disk)`` -> the summary written.
    recount: Callable[[dict, dict], dict]
    page: Page | None = None
    card: Card | None = None
    #: Output directories written as one file whatever the part layout (``finalize.join_files``).
    one_file: tuple[str, ...] = ()

    @property
    def side_files(self) -> tuple[str, ...]:
        """The files it writes at the top of ``--output`` (besides manifest and marker)."""
        return (self.summary_file, *([self.card.name] if self.card else []), *([self.page.name] if self.page else []))

    @property
    def names(self) -> tuple[str, ...]:
        return (*self.shard_outputs, *self.side_files)


#: Sinks whose runs write a dataset card (``pipeline.io.dataset_card``): those with a fixed schema
#: that ``datasets`` loads.
CARD_SINKS = frozenset({"hf", "trl-dpo", "trl-kto", "trl-prompts"})
#: Sinks whose every split is one file (``OutputSpec.one_file``).
ONE_FILE_SINKS = frozenset({"openai-finetune"})


def run_spec(job: Job) -> OutputSpec:
    """What ``build`` writes under ``--output``: with ``--split``, each split's directory too;
    with ``--sink hf`` or a TRL sink, the dataset card that loads them (``pipeline.io.dataset_card``)."""
    extension = FILE_FORMATS[job.output_format].extension
    records = {name: extension for name in output_names(job.settings.splits)}
    card = None
    if job.settings.sink in CARD_SINKS:
        render = functools.partial(dataset_card, job.settings.sink, job.settings.id_field, extension, tuple(records))
        card = Card(CARD_FILE, render)
    return OutputSpec(
        "run",
        {**records, "drops": ".jsonl", "dead_letter": ".jsonl"},
        SUMMARY_FILE,
        summaries.RUN.recount if not job.settings.splits else functools.partial(recount_splits, tuple(records)),
        card=card,
        # OpenAI's fine-tuning takes one training file and one validation file: a file per split.
        one_file=tuple(records) if job.settings.sink in ONE_FILE_SINKS else (),
    )


def without_a_users_card(spec: OutputSpec, output: str) -> tuple[OutputSpec, str | None]:
    """``spec`` without its dataset card when ``--output`` already holds a ``README.md`` that no
    manifest of convnorm's lists (a user's, or a cloned dataset repository's): that file stays
    as it is, the run writes no card, and the line returned says so (None: the card is
    written). A manifest that cannot be read is left for the output check to refuse."""
    if spec.card is None or not output:
        return spec, None
    path = FileSystems.join(output, spec.card.name)
    if not owned.exists(path):
        return spec, None
    try:
        loaded = owned.load_manifest(output)
    except owned.OutputError:
        return spec, None
    listed = loaded is not None and any(e.get("path") == spec.card.name for e in loaded[0].get("files", []))
    if listed:
        return spec, None
    note = (
        f"--output {output!r} holds a {spec.card.name} convnorm did not write: it stays as it is, and this "
        "hf run writes no dataset card there (load the parts as docs/fine-tuning.md says, or choose another "
        "--output for the card)"
    )
    return dataclasses.replace(spec, card=None), note


def recount_splits(names: tuple[str, ...], doc: dict, on_disk: dict) -> dict:
    """The run's recount (``View.recount``) when its records are in several split directories:
    they are its records out, and each split's count is its own (``splits``)."""
    doc = summaries.RUN.recount(doc, {**on_disk, "normalized": sum(on_disk[name] for name in names)})
    doc["splits"] = {("train" if name == "normalized" else name): on_disk[name] for name in names}
    return doc


#: What ``build_validate`` writes under ``--output``.
VALIDATE_SPEC = OutputSpec(
    "validate", {"violations": ".jsonl", "dead_letter": ".jsonl"}, VALIDATION_FILE, summaries.VALIDATE.recount
)
