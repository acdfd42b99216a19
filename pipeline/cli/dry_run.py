"""``--dry-run``: the plan and what a run would write where, without writing anything.

Prints the input files with their sizes and shards, the reader each file gets (detected on a
sample of its first records, exactly as the run detects them: ``record_steps.read_conversation``),
the outputs the command would write, and what it would find in the output directory (new,
empty, an earlier run's outputs that ``--overwrite`` replaces, or a refusal: exit status 2 as
the run would). Reads only the sample; creates, locks and deletes nothing.
"""

from __future__ import annotations

import os

from apache_beam.options.pipeline_options import StandardOptions

from pipeline.cli.progress import size_text
from pipeline.config.options import ConvNormOptions, Job
from pipeline.console import print_error, print_line
from pipeline.execution import lock as locks
from pipeline.execution.output_spec import OutputSpec, without_a_users_card
from pipeline.graph.build import call_shards
from pipeline.io import files
from pipeline.io import ownership as owned
from pipeline.io.input_sample import SAMPLE_RECORDS, first_shards, holds_call_logs, sample_readers
from pipeline.io.output_names import MANIFEST_FILE, REPORT_FILE, SUCCESS_FILE
from pipeline.io.parts import plan_parts
from pipeline.io.planning import shard_sizes
from pipeline.io.shard import FILE_KINDS
from pipeline.streaming.driver import TAKEN_OVER, streaming_refusal
from transforms.totals.console_text import console_text


def _readers_text(counts: dict) -> str:
    total = sum(counts.values())
    if not total:
        return "no records"
    return ", ".join(f"{name} {n}" for name, n in counts.items()) + f" (of the first {total})"


def file_samples(job: Job) -> dict[str, dict]:
    """Per input file, how the first records of its first shard are read (``sample_readers``)."""
    return {shard.path: sample_readers(shard, job.settings, job.max_record_bytes) for shard in first_shards(job.shards)}


def input_lines(job: Job, samples: dict[str, dict] | None = None) -> list[str]:
    """One line per input file: size, shards, kind, readers of its sample (``file_samples``).
    File names (in the notes too) are escaped for the terminal before the columns are laid out."""
    samples = file_samples(job) if samples is None else samples
    sizes = shard_sizes(job.shards)
    by_file: dict[str, list[int]] = {}
    for shard in job.shards:
        by_file.setdefault(shard.path, []).append(shard.number)
    total = sum(sizes)
    limit = f"; --limit {job.limit:,}: only the first {job.limit:,} records" if job.limit is not None else ""
    lines = [
        f"input: {len(by_file)} file(s), {len(job.shards)} shard(s), {size_text(total)}{limit}",
        *(f"  {console_text(note)}" for note in job.notes),
    ]
    shown = {path: console_text(job.shards[indexes[0]].name) for path, indexes in by_file.items()}
    width = min(max(map(len, shown.values()), default=4), 60)
    for path, indexes in by_file.items():
        first = job.shards[indexes[0]]
        file_bytes = sum(sizes[i] for i in indexes)
        kind = FILE_KINDS[first.suffix][0] + ("" if FILE_KINDS[first.suffix][1] is None else f" ({first.suffix[1:]})")
        readers = _readers_text(samples[path])
        records = sum(job.shards[i].limit or 0 for i in indexes)
        taken = f", {records:,} record(s)" if job.limit is not None else ""
        lines.append(
            f"  {shown[path]:<{width}}  {size_text(file_bytes):>10}  {len(indexes)} shard(s){taken}  "
            f"{kind}  reader: {readers}"
        )
    return lines


def _directory_state(output: str, job: Job, spec: OutputSpec) -> tuple[str, str | None]:
    """(what the run would find in the output directory, the refusal the run would print)."""
    if files.is_local(output) and not os.path.exists(output):
        return "does not exist: the run creates it", None
    holder = locks.read_lock(output)
    taking_over = ""
    if holder is not None:
        # As the run judges it: in use, unreadable, stale (refused without --break-stale-lock).
        streaming = job.options.view_as(StandardOptions).streaming
        refused = locks.refusal(output, holder, break_stale=job.break_stale_lock or streaming)
        if refused:
            return "", refused
        taking_over = f"; has the stale lock of a dead run ({locks.describe(holder)}), which the run takes over"
        if streaming and holder.get("command") not in TAKEN_OVER:
            return "", streaming_refusal(output, holder)
    report = spec.command == "run" and job.options.view_as(ConvNormOptions).report
    side_files = (*spec.side_files, *((REPORT_FILE,) if report and spec.page is None else ()))
    try:
        previous = owned.check_output(output, tuple(spec.shard_outputs), side_files, job.overwrite, spec.command)
    except owned.OutputError as error:
        return "", str(error)
    if previous is not None:
        count = len(previous.files)
        return (
            f"holds an earlier run's outputs: --overwrite replaces the {count} file(s) its manifest lists{taking_over}",
            None,
        )
    return f"exists; nothing of convnorm's in it yet{taking_over}", None


def output_lines(job: Job, spec: OutputSpec, call_logs: bool = False) -> list[str]:
    """What the command writes where: one line per output. ``call_logs``: the input holds call
    logs (``holds_call_logs``), so the conversations assembled from them have parts of their own,
    numbered after the input's."""
    output = job.shown_output
    what = {
        "normalized": f"the normalized records (sink {job.settings.sink})",
        "drops": "per conversation: what it lost, by reason",
        "dead_letter": "records that could not be processed, with the reason",
        "violations": "per conversation: its violations by kind",
    }
    shards = len(plan_parts(job.shards, job.part_bytes))  # a file per output part (pipeline.io.parts)
    assembled = call_shards(job.shards) if call_logs else 0
    lines = []
    for name, extension in spec.shard_outputs.items():
        last = f" … part-{shards - 1:05d}{extension}" if shards > 1 else ""
        # Another output of the run's is a --split's records (pipeline.graph.shard_step.by_split).
        about = what.get(name, f"the {name} split's records (--split)")
        if name in spec.one_file:  # its parts joined into one file (pipeline.execution.finalize.join_files)
            lines.append(f"  {output}/{name}/part-00000{extension}  {about}, one file")
            continue
        lines.append(f"  {output}/{name}/part-00000{extension}{last}  {about}")
        if assembled:
            first = len(job.shards)  # the assembled conversations' parts follow the input's shards
            more = f" … part-{first + assembled - 1:05d}{extension}" if assembled > 1 else ""
            lines.append(
                f"  {output}/{name}/part-{first:05d}{extension}{more}  (the conversations assembled from call logs)"
            )
    lines.append("  (each part is written, an empty one too)")
    extras = [spec.summary_file, *([spec.card.name] if spec.card else []), MANIFEST_FILE, SUCCESS_FILE]
    if spec.command == "run" and job.options.view_as(ConvNormOptions).report:
        extras.append(REPORT_FILE)
    lines.append("  " + ", ".join(f"{output}/{name}" for name in extras))
    return lines


def dry_run(job: Job, command: str, spec: OutputSpec) -> int:
    """Print the plan; 0, or 2 when the run would be refused (it prints why)."""
    print(f"convnorm {command} --dry-run: the plan; nothing is written")
    samples = file_samples(job)
    for line in input_lines(job, samples):
        print(line)
    settings = job.settings
    runner = job.options.get_all_options()["runner"]
    print(f"profile {settings.profile}, format {settings.input_format}, sink {settings.sink}, runner {runner}")
    if settings.calls_sampled_out:
        print("call logs: none in the first records of any input file, so the run leaves out their assembly")
        print("  (a call-log record past them becomes a call_log dead letter; --call-logs on builds it)")
    if not job.output:
        print("output: a temporary directory, removed at the end (give --output to keep the reports)")
        return 0
    spec, card_note = without_a_users_card(spec, job.output)
    state, refusal = _directory_state(job.output, job, spec)
    if card_note:
        print_line(card_note)
    if refusal:
        print_error(f"the run would be refused: {refusal}")
        return 2
    print_line(f"output: {job.shown_output} ({state}); the run would write:")
    for line in output_lines(job, spec, job.call_logs and holds_call_logs(samples)):
        print_line(line)
    return 0


__all__ = [
    "SAMPLE_RECORDS",
    "dry_run",
    "file_samples",
    "holds_call_logs",
    "input_lines",
    "output_lines",
    "sample_readers",
]
