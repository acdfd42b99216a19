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
built); ``pipeline.execute`` builds the graph (``pipeline.build``), takes the output
directory's lock, runs the pipeline and finalizes the outputs (docs/outputs.md); ``main``
prints the summary.
"""

from __future__ import annotations

import dataclasses
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
from apache_beam.options.pipeline_options import DirectOptions, StandardOptions

from pipeline.build import build
from pipeline.cli_help import help_text
from pipeline.execute import OutputSpec, execute, run_pipeline
from pipeline.options import ConfigError, ConvNormOptions, Job, is_local_runner, load_job
from pipeline.prism import PrismError, prism_services
from pipeline.progress import ProgressMonitor, choose_mode, configure_console
from pipeline.report import REPORT_FILE, report_command, try_write_report, versions
from pipeline.sinks import FILE_FORMATS, SUMMARY_FILE, WriteShards, WriteSummary
from pipeline.sources import ReadConversationLogs, shard_sizes
from transforms.conversations import CheckConversations, SummarizeValidation
from transforms.summary import format_table, format_validation_table, run_failures

LOG = logging.getLogger("convnorm")

VALIDATION_FILE = "validation.json"
#: Conversations with violations shown on the console by ``convnorm validate``.
SHOWN_REPORTS = 5


def _quiet(job: Job) -> bool:
    return job.options.view_as(ConvNormOptions).quiet


def _pipeline_runner(job: Job) -> Callable[[beam.Pipeline], bool]:
    """``execute``'s run step with the live progress of local runs around it."""
    ours = job.options.view_as(ConvNormOptions)
    local = is_local_runner(job.options)
    mode = choose_mode(ours.progress, ours.quiet, local)
    multi_process = local and job.options.view_as(DirectOptions).direct_running_mode == "multi_processing"

    def run(pipeline: beam.Pipeline) -> bool:
        with ProgressMonitor(mode, shard_sizes(job.shards), multi_process) as monitor:
            done = run_pipeline(pipeline)
            if not done:
                worker_log = monitor.failed()
                if worker_log:
                    LOG.error("the worker processes' own output is in %s", worker_log)
            return done
    return run


def _recount_run(summary: dict, on_disk: dict) -> dict:
    """The run's summary with its record counts taken from the files written."""
    summary = dict(summary)
    summary["records_out"] = on_disk["normalized"]
    summary["dead_letters"] = on_disk["dead_letter"]
    summary["accounted"] = (summary["records_in"] == summary["records_out"] + summary["dead_letters"]
                            and on_disk["drops"] == on_disk["normalized"])
    return summary


def _run_outputs(job: Job) -> OutputSpec:
    return OutputSpec("run", {"normalized": FILE_FORMATS[job.output_format].extension, "drops": ".jsonl",
                              "dead_letter": ".jsonl"}, SUMMARY_FILE, _recount_run)


def run_job(job: Job) -> int:
    """Normalize: read, normalize, write the three outputs and summary.json; print the summary."""
    LOG.info(
        "%d input file(s) in %d shard(s) -> %s (profile %s, format %s, sink %s, runner %s)",
        len({s.path for s in job.shards}), len(job.shards), job.output, job.settings.profile,
        job.settings.input_format, job.settings.sink, job.options.get_all_options()["runner"],
    )
    started = time.time()
    outcome = execute(job, _run_outputs(job), build, _pipeline_runner(job))
    if outcome.status is not None:
        return outcome.status
    summary = outcome.summary
    if not _quiet(job):
        print(format_table(summary))
    wants_report = job.options.view_as(ConvNormOptions).report
    report = try_write_report(job.output, _run_details(job, started)) if wants_report else None
    report_line = f", {job.output}/{REPORT_FILE}" if report else ""
    if not _quiet(job):
        print(f"outputs: {job.output}/{{normalized,drops,dead_letter}}/, {job.output}/{SUMMARY_FILE}{report_line}")
    failures = run_failures(summary, job.max_dead_letters)
    for failure in failures:
        print(f"convnorm: error: {failure}", file=sys.stderr)
    return 1 if failures else 0


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


def _recount_validation(summary: dict, on_disk: dict) -> dict:
    summary = dict(summary)
    summary["conversations_checked"] = on_disk["violations"]
    summary["dead_letters"] = on_disk["dead_letter"]
    summary["accounted"] = summary["records_in"] == summary["conversations_checked"] + summary["dead_letters"]
    return summary


VALIDATE_SPEC = OutputSpec("validate", {"violations": ".jsonl", "dead_letter": ".jsonl"}, VALIDATION_FILE,
                           _recount_validation)


def _build_validation(pipeline: beam.Pipeline, job: Job, temp_dir: str) -> None:
    read = pipeline | "Read" >> ReadConversationLogs(job.shards, job.batch_size, job.max_record_bytes, job.batch_bytes)
    checked = read.batches | "CheckConversations" >> CheckConversations(job.settings)
    checked.reports | "WriteReports" >> WriteShards(temp_dir, "violations")
    checked.dead_letters | "WriteDeadLetters" >> WriteShards(temp_dir, "dead_letter")
    (
        (read.stats, checked.reports, checked.dead_letters)
        | "Summarize" >> SummarizeValidation()
        | "WriteSummary" >> WriteSummary(FileSystems.join(temp_dir, VALIDATION_FILE))
    )


def validate_job(job: Job) -> int:
    """Check records as they are; exit status 1 when any is not sendable (or unreadable)."""
    if not job.output and not is_local_runner(job.options):
        print("convnorm: error: validate on a remote runner needs --output (a directory its workers "
              "and this machine share)", file=sys.stderr)
        return 2
    output = job.output or tempfile.mkdtemp(prefix="convnorm-validate-")
    try:
        outcome = execute(dataclasses.replace(job, output=output), VALIDATE_SPEC, _build_validation,
                          _pipeline_runner(job))
        if outcome.status is not None:
            return 3 if outcome.status == 1 else outcome.status
        summary = outcome.summary
        if not _quiet(job):
            print(format_validation_table(summary))
            shown = _show_reports(FileSystems.join(output, "violations"))
            if shown:
                print("first conversations with violations:")
                print("\n".join(shown))
            if job.output:
                print(f"reports: {output}/violations/ and {output}/{VALIDATION_FILE}")
        return 0 if summary["sendable"] and summary["accounted"] else 1
    finally:
        if not job.output:
            shutil.rmtree(output, ignore_errors=True)


#: command -> (handler, --output required)
COMMANDS: dict[str, tuple[Callable[[Job], int], bool]] = {
    "run": (run_job, True),
    "validate": (validate_job, False),
}


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``convnorm`` and ``python -m pipeline``; returns the exit status.

    Exit status: 0 done (validate: all sendable); 1 the run failed, did not account for
    every record, normalized none of the records it read, had more dead letters than
    ``--max-dead-letters``, or a file it wrote is missing (validate: violations or unreadable
    records); 2 bad options, an output directory refused, or another run holds its lock
    (nothing was run or deleted); 3 the validation pipeline failed (crashed). See
    docs/outputs.md.
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
    handler, output_required = COMMANDS[command]
    try:
        job = load_job(argv, output_required=output_required)
    except ConfigError as error:
        print(f"convnorm: error: {error}", file=sys.stderr)
        return 2
    configure_console(quiet=_quiet(job))
    try:
        if job.options.view_as(StandardOptions).streaming:
            return _run_streaming(command, job)
        with prism_services(job.options):  # a Prism run: Prism and its workers on loopback only
            return handler(job)
    except PrismError as error:
        print(f"convnorm: error: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # noqa: BLE001 — a crash gets its documented status, not a traceback's 1
        LOG.exception("the %s pipeline failed", command)
        print(f"convnorm: error: the {command} pipeline failed: {type(error).__name__}: {error}", file=sys.stderr)
        return 3 if command == "validate" else 1


def _run_streaming(command: str, job: Job) -> int:
    if command != "run":
        print(f"convnorm: error: {command} does not stream; drop --streaming", file=sys.stderr)
        return 2
    from pipeline.streaming import run_streaming  # see docs/streaming.md

    return run_streaming(job)
