"""The convnorm command line: ``convnorm [run] ...`` and ``convnorm validate ...``.

Examples::

    # Normalize the bundled sample (outputs under out/, summary printed at the end)
    convnorm --config configs/local.yaml

    # Any input, another sink, two worker processes
    convnorm --input 'logs/*.jsonl.gz' --output out/ --sink openai-finetune \\
        --direct_num_workers=2 --direct_running_mode=multi_processing

    # Check files as they are against providers' pairing rules (exit status 1 if not sendable)
    convnorm validate --input 'out/normalized/*.jsonl'

``main`` parses and validates the options (errors exit with status 2 before any pipeline is
built), builds the graph with ``pipeline.build``, runs it and prints the summary.
"""

from __future__ import annotations

import datetime
import difflib
import json
import logging
import shutil
import sys
import tempfile
import time
from typing import Callable

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import DirectOptions
from apache_beam.runners.runner import PipelineState

from pipeline.build import build
from pipeline.cli_help import help_text
from pipeline.options import ConfigError, ConvNormOptions, Job, is_local_runner, load_job
from pipeline.progress import ProgressMonitor, choose_mode, configure_console
from pipeline.report import REPORT_FILE, report_command, try_write_report, versions
from pipeline.sinks import OUTPUT_DIRS, SUMMARY_FILE, WriteShards, WriteSummary
from pipeline.sources import ReadConversationLogs, shard_sizes
from transforms.conversations import CheckConversations, SummarizeValidation
from transforms.summary import format_table, format_validation_table

LOG = logging.getLogger("convnorm")

VALIDATION_FILE = "validation.json"
RUN_OUTPUTS = (*OUTPUT_DIRS, SUMMARY_FILE, REPORT_FILE)
VALIDATE_OUTPUTS = ("violations", "dead_letter", VALIDATION_FILE)
#: Conversations with violations shown on the console by ``convnorm validate``.
SHOWN_REPORTS = 5


def _quiet(job: Job) -> bool:
    return job.options.view_as(ConvNormOptions).quiet


def _load_json_file(path: str) -> dict:
    with FileSystems.open(path) as handle:
        return json.loads(handle.read())


def _run(pipeline: beam.Pipeline, job: Job) -> bool:
    ours = job.options.view_as(ConvNormOptions)
    local = is_local_runner(job.options)
    mode = choose_mode(ours.progress, ours.quiet, local)
    multi_process = local and job.options.view_as(DirectOptions).direct_running_mode == "multi_processing"
    with ProgressMonitor(mode, shard_sizes(job.shards), multi_process) as monitor:
        try:
            result = pipeline.run()
            state = result.wait_until_finish()
        except BaseException:
            _point_at_worker_log(monitor.failed())
            raise
        if state != PipelineState.DONE:
            LOG.error("the pipeline ended in state %s", state)
            _point_at_worker_log(monitor.failed())
            return False
    return True


def _point_at_worker_log(path: str | None) -> None:
    if path:
        LOG.error("the worker processes' own output is in %s", path)


def _clear_outputs(output: str, names: tuple[str, ...]) -> None:
    paths = [FileSystems.join(output, name) for name in names]
    existing = [p for p in paths if FileSystems.exists(p)]
    if existing:
        FileSystems.delete(existing)


def run_job(job: Job) -> int:
    """Normalize: read, normalize, write the three outputs and summary.json; print the summary."""
    if job.overwrite:
        _clear_outputs(job.output, RUN_OUTPUTS)
    LOG.info(
        "%d input file(s) in %d shard(s) -> %s (profile %s, format %s, sink %s, runner %s)",
        len({s.path for s in job.shards}), len(job.shards), job.output, job.settings.profile,
        job.settings.input_format, job.settings.sink, job.options.get_all_options()["runner"],
    )
    started = time.time()
    pipeline = beam.Pipeline(options=job.options)
    build(pipeline, job)
    if not _run(pipeline, job):
        return 1
    summary = _load_json_file(FileSystems.join(job.output, SUMMARY_FILE))
    if not _quiet(job):
        print(format_table(summary))
    wants_report = job.options.view_as(ConvNormOptions).report
    report = try_write_report(job.output, _run_details(job, started)) if wants_report else None
    report_line = f", {job.output}/{REPORT_FILE}" if report else ""
    if not _quiet(job):
        print(f"outputs: {job.output}/{{normalized,drops,dead_letter}}/, {job.output}/{SUMMARY_FILE}{report_line}")
    return 0 if summary["accounted"] else 1


def _run_details(job: Job, started: float) -> dict:
    """What the report says about how the run was made (summary.json holds what it did)."""
    settings = job.settings
    return {
        "options": {
            "profile": settings.profile, "format": settings.input_format, "sink": settings.sink,
            "output_format": job.output_format,
            **{k: v for k, v in job.options.get_all_options(drop_default=True).items() if k != "report"},
        },
        "shards": len(job.shards),
        "started": datetime.datetime.fromtimestamp(started, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "run_seconds": round(time.time() - started, 1),
        "versions": versions(),
    }


def _show_reports(directory: str) -> list[str]:
    lines: list[str] = []
    matched = FileSystems.match([FileSystems.join(directory, "*.jsonl")])[0].metadata_list
    for meta in sorted(matched, key=lambda m: m.path):
        with FileSystems.open(meta.path) as handle:
            for raw in handle:
                report = json.loads(raw)
                if not report["violations"]:
                    continue
                kinds = ", ".join(f"{k} x{n}" for k, n in report["violations"].items())
                lines.append(f"  {report['id']} ({report['source']} @ {report['position']}): {kinds}")
                if len(lines) >= SHOWN_REPORTS:
                    return lines
    return lines


def validate_job(job: Job) -> int:
    """Check records as they are; exit status 1 when any is not sendable (or unreadable)."""
    if not job.output and not is_local_runner(job.options):
        print("convnorm: error: validate on a remote runner needs --output (a directory its workers "
              "and this machine share)", file=sys.stderr)
        return 2
    output = job.output or tempfile.mkdtemp(prefix="convnorm-validate-")
    try:
        if job.overwrite:
            _clear_outputs(output, VALIDATE_OUTPUTS)
        pipeline = beam.Pipeline(options=job.options)
        read = pipeline | "Read" >> ReadConversationLogs(job.shards, job.batch_size)
        checked = read.batches | "CheckConversations" >> CheckConversations(job.settings)
        checked.reports | "WriteReports" >> WriteShards(FileSystems.join(output, "violations"))
        checked.dead_letters | "WriteDeadLetters" >> WriteShards(FileSystems.join(output, "dead_letter"))
        (
            (read.stats, checked.reports, checked.dead_letters)
            | "Summarize" >> SummarizeValidation()
            | "WriteSummary" >> WriteSummary(FileSystems.join(output, VALIDATION_FILE))
        )
        if not _run(pipeline, job):
            return 3
        summary = _load_json_file(FileSystems.join(output, VALIDATION_FILE))
        if not _quiet(job):
            print(format_validation_table(summary))
            shown = _show_reports(FileSystems.join(output, "violations"))
            if shown:
                print("first conversations with violations:")
                print("\n".join(shown))
            if job.output:
                print(f"reports: {output}/violations/ and {output}/{VALIDATION_FILE}")
        return 0 if summary["sendable"] else 1
    finally:
        if not job.output:
            shutil.rmtree(output, ignore_errors=True)


#: command -> (handler, --output required, the entries it writes under --output)
COMMANDS: dict[str, tuple[Callable[[Job], int], bool, tuple[str, ...]]] = {
    "run": (run_job, True, RUN_OUTPUTS),
    "validate": (validate_job, False, VALIDATE_OUTPUTS),
}


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``convnorm`` and ``python -m pipeline``; returns the exit status.

    Exit status: 0 done (validate: all sendable); 1 the run failed or did not account for
    every record (validate: violations or unreadable records); 2 bad options; 3 the
    validation pipeline failed.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    command = "run"
    if argv and not argv[0].startswith("-"):
        command = argv.pop(0)
        if command == "report":
            return report_command(argv)
        if command not in COMMANDS:
            known = [*COMMANDS, "report"]
            close = difflib.get_close_matches(command, known, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            print(f"convnorm: error: unknown command {command!r}{hint}; commands: {', '.join(known)}",
                  file=sys.stderr)
            return 2
    if any(a in ("-h", "--help") for a in argv):
        print(help_text(command))
        return 0
    configure_console()
    handler, output_required, output_names = COMMANDS[command]
    try:
        job = load_job(argv, output_required=output_required, output_names=output_names)
    except ConfigError as error:
        print(f"convnorm: error: {error}", file=sys.stderr)
        return 2
    configure_console(quiet=_quiet(job))
    return handler(job)
