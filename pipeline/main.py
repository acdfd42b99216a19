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
built); ``pipeline.execute`` builds the graph (``pipeline.build``: ``build`` or
``build_validate``), takes the output directory's lock, runs the pipeline and finalizes the
outputs (docs/outputs.md); ``main`` prints the summary and returns the exit status
(``COMMANDS`` and the summary views' ``verdict``).
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
from typing import Callable, NamedTuple

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import DirectOptions, StandardOptions

from pipeline import files
from pipeline.build import VALIDATE_SPEC, VALIDATION_FILE, build, build_validate, run_spec
from pipeline.cli_help import help_text
from pipeline.execute import Page, execute, run_pipeline
from pipeline.options import ConfigError, ConvNormOptions, Job, is_local_runner, load_job
from pipeline.prism import PrismError, prism_services
from pipeline.progress import ProgressMonitor, choose_mode, configure_console
from pipeline.report import REPORT_FILE, render_page, report_command, versions
from pipeline.sinks import SUMMARY_FILE
from pipeline.sources import shard_sizes
from transforms.summary import RUN, VALIDATE, View

LOG = logging.getLogger("convnorm")

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


def run_job(job: Job) -> int:
    """Normalize: read, normalize, write the three outputs and summary.json; print the summary."""
    LOG.info(
        "%d input file(s) in %d shard(s) -> %s (profile %s, format %s, sink %s, runner %s)",
        len({s.path for s in job.shards}),
        len(job.shards),
        job.output,
        job.settings.profile,
        job.settings.input_format,
        job.settings.sink,
        job.options.get_all_options()["runner"],
    )
    started = time.time()
    spec = run_spec(job)
    if job.options.view_as(ConvNormOptions).report:
        # Planned with the outputs, drawn from them once they are on disk, listed in the manifest.
        spec = dataclasses.replace(
            spec, page=Page(REPORT_FILE, lambda output: render_page(output, _run_details(job, started)))
        )
    outcome = execute(job, spec, build, _pipeline_runner(job))
    if outcome.status is not None:
        return outcome.status
    summary = outcome.summary
    if not _quiet(job):
        print(RUN.format_table(summary))
    report_line = f", {job.output}/{REPORT_FILE}" if outcome.page else ""
    if not _quiet(job):
        print(f"outputs: {job.output}/{{normalized,drops,dead_letter}}/, {job.output}/{SUMMARY_FILE}{report_line}")
    return _verdict(RUN, summary, job)


def _verdict(view: View, summary: dict, job: Job) -> int:
    """The exit status of a finished run, its reasons printed (the outputs are written either way)."""
    status, errors = view.verdict(summary, job.max_dead_letters)
    for error in errors:
        print(f"convnorm: error: {error}", file=sys.stderr)
    return status


def _run_details(job: Job, started: float) -> dict:
    """What the report says about how the run was made (summary.json holds what it did)."""
    settings = job.settings
    return {
        "options": {
            "profile": settings.profile,
            "format": settings.input_format,
            "sink": settings.sink,
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
    for path in files.matching(directory, "*.jsonl"):  # the directory literally: `v[1]` is not `v1`
        with FileSystems.open(path) as handle:
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
        print(
            "convnorm: error: validate on a remote runner needs --output (a directory its workers "
            "and this machine share)",
            file=sys.stderr,
        )
        return 2
    output = job.output or tempfile.mkdtemp(prefix="convnorm-validate-")
    try:
        outcome = execute(dataclasses.replace(job, output=output), VALIDATE_SPEC, build_validate, _pipeline_runner(job))
        if outcome.status is not None:
            return COMMANDS["validate"].failed if outcome.status == 1 else outcome.status
        summary = outcome.summary
        if not _quiet(job):
            print(VALIDATE.format_table(summary))
            shown = _show_reports(FileSystems.join(output, "violations"))
            if shown:
                print("first conversations with violations:")
                print("\n".join(shown))
            if job.output:
                print(f"reports: {output}/violations/ and {output}/{VALIDATION_FILE}")
        return _verdict(VALIDATE, summary, job)
    finally:
        if not job.output:
            shutil.rmtree(output, ignore_errors=True)


class Command(NamedTuple):
    handler: Callable[[Job], int]
    output_required: bool
    #: The exit status when its pipeline failed or crashed, or a file it wrote is missing.
    failed: int


#: The exit rules of the commands: the statuses of ``main``'s docstring. A finished run's
#: status is its summary view's ``verdict`` (``transforms.summary``).
COMMANDS: dict[str, Command] = {
    "run": Command(run_job, True, failed=1),
    "validate": Command(validate_job, False, failed=3),
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
            print(f"convnorm: error: unknown command {command!r}{hint}; commands: {', '.join(known)}", file=sys.stderr)
            return 2
    if any(a in ("-h", "--help") for a in argv):
        print(help_text(command))
        return 0
    configure_console()
    handler, output_required, _ = COMMANDS[command]
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
    except Exception as error:  # a crash gets its documented status, not a traceback's 1 (logged: BLE001 allows it)
        LOG.exception("the %s pipeline failed", command)
        print(f"convnorm: error: the {command} pipeline failed: {type(error).__name__}: {error}", file=sys.stderr)
        return COMMANDS[command].failed


def _run_streaming(command: str, job: Job) -> int:
    if command != "run":
        print(f"convnorm: error: {command} does not stream; drop --streaming", file=sys.stderr)
        return 2
    from pipeline.streaming import run_streaming  # see docs/streaming.md

    return run_streaming(job)
