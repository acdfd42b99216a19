"""The convnorm command line: ``convnorm [run] ...`` and ``convnorm validate ...``.

Examples::

    # Normalize the bundled sample (outputs under out/, summary printed at the end)
    convnorm --config configs/local.yaml

    # Any input, another sink, two worker processes
    convnorm --input 'logs/*.jsonl.gz' --output out/ --sink openai-finetune \\
        --direct_num_workers=2 --direct_running_mode=multi_processing

    # Check files as they are against providers' pairing rules (exit status 1 if not sendable)
    convnorm validate --input 'out/normalized/*.jsonl'

The entry point (``pipeline.cli.main.main``) answers what needs no pipeline first (help,
version, option errors, exit status 2), then hands a job to ``run_command``, which parses and
validates the options (errors exit with status 2 before any pipeline is built);
``pipeline.execution.execute`` builds the graph (``pipeline.graph.build``: ``build`` or
``build_validate``), takes the output directory's lock, runs the pipeline and finalizes the
outputs (docs/outputs.md); ``run_command`` prints the summary and returns the exit status
(``COMMANDS`` and the summary views' ``verdict``). ``--dry-run``
stops after the plan (``pipeline.cli.dry_run``); Ctrl-C or SIGTERM stops any step with one line and
exit status 130 or 143 (``pipeline.execution.interrupts``).
"""

from __future__ import annotations

import dataclasses
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

from pipeline.cli.progress import ProgressMonitor, choose_mode, duration_text
from pipeline.config.options import ConfigError, ConvNormOptions, Job, is_local_runner, load_job
from pipeline.config.precheck import CheckedArgs
from pipeline.console import configure_console, print_error, print_line
from pipeline.execution.execute import execute, run_pipeline
from pipeline.execution.interrupts import (
    Stopping,
    exit_status,
    handling_signals,
    silence_after_interrupt,
    stop_signal,
    stopping_line,
)
from pipeline.execution.output_spec import VALIDATE_SPEC, OutputSpec, Page, run_spec
from pipeline.finished.report import render_page
from pipeline.graph.build import build, build_validate
from pipeline.io import files, object_store
from pipeline.io.output_names import REPORT_FILE, SUMMARY_FILE, VALIDATION_FILE
from pipeline.io.planning import shard_sizes
from pipeline.io.reread import line_numbers
from pipeline.io.shard import where_text
from pipeline.runners import s3_clients
from pipeline.runners.dask_cluster import local_cluster
from pipeline.runners.prism import PrismError, prism_services
from transforms.totals.console_text import console_text
from transforms.totals.summary import INPUT_CHANGED, RUN, VALIDATE, View, changed_inputs, dead_letter_warning

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

    # --limit reads part of each shard: its bytes say nothing of the progress, its shards do.
    sizes = shard_sizes(job.shards) if job.limit is None else [0] * len(job.shards)

    def run(pipeline: beam.Pipeline) -> bool:
        with ProgressMonitor(mode, sizes, multi_process, [s.path for s in job.shards]) as monitor:
            done = run_pipeline(pipeline)
            if not done:
                worker_log = monitor.failed()
                if worker_log:
                    LOG.error("the worker processes' own output is in %s", worker_log)
            return done

    return run


def _plan_line(job: Job) -> str:
    limit = f", the first {job.limit:,} records" if job.limit is not None else ""
    return (
        f"{len({s.path for s in job.shards})} input file(s) in {len(job.shards)} shard(s){limit} -> {job.shown_output} "
        f"(profile {job.settings.profile}, format {job.settings.input_format}, sink {job.settings.sink}, "
        f"runner {job.options.get_all_options()['runner']})"
    )


def run_job(job: Job, stopping: Stopping) -> int:
    """Normalize: read, normalize, write the three outputs and summary.json; print the summary."""
    LOG.info("%s", _plan_line(job))
    started = stopping.started
    stopping.what = "the run pipeline"
    spec = run_spec(job)
    if job.options.view_as(ConvNormOptions).report:
        # Planned with the outputs, drawn from them once they are on disk, listed in the manifest.
        spec = dataclasses.replace(
            spec,
            page=Page(
                REPORT_FILE, lambda output: render_page(output, {"took": duration_text(time.monotonic() - started)})
            ),
        )
    outcome = execute(job, spec, build, _pipeline_runner(job), stopping)
    if outcome.status is not None:
        return outcome.status
    summary = outcome.summary
    quiet = _quiet(job)
    if not quiet:
        print(RUN.format_table(summary))
    warning = dead_letter_warning(summary, job.warn_dead_letters) if summary else None
    if warning:
        print_error(f"{warning}; see {job.shown_output}/dead_letter/", kind="warning")
    unassembled = _calls_sampled_out(summary, job)
    if unassembled:
        print_error(unassembled, kind="warning")
    if not quiet:
        shown = job.shown_output
        print_line(f"outputs: {shown}/{{{','.join(spec.shard_outputs)}}}/, {shown}/{SUMMARY_FILE}")
        if outcome.card:
            # Where a user looks first: a plain json load of the parts can fail, the folder's does not.
            print_line(
                f'load:    datasets.load_dataset("{shown}") loads every split; a "json" load of the part '
                f"files can fail on their columns ({shown}/{outcome.card} says why)"
            )
        if spec.one_file:
            print_line(upload_line(shown, spec.one_file))
        if outcome.page:
            print_line(f"report:  {shown}/{outcome.page}")
        print(f"done in {duration_text(time.monotonic() - started)}")
    return _verdict(RUN, summary, job)


def _calls_sampled_out(summary: dict | None, job: Job) -> str | None:
    """The warning of a run that left the call-log assembly out (``--call-logs auto``: no call log
    in the first records of any input file) and met call logs later: never a silent loss."""
    letters = (summary or {}).get("dead_letters_by_reason", {}).get("call_log", 0)
    if not letters or not job.settings.calls_sampled_out:
        return None
    return (
        f"{letters:,} call-log record(s) past the first records of each input file are call_log dead letters: "
        f"--call-logs auto found none there and left out their assembly; run again with --call-logs on "
        f"(see {job.shown_output}/dead_letter/)"
    )


def upload_line(shown: str, one_file: tuple[str, ...]) -> str:
    """How to give OpenAI what an openai-finetune run wrote: the train split is the training
    file, the first other split the validation file (fine-tuning takes one of each)."""
    training, *others = one_file
    line = f"upload:  {shown}/{training}/part-00000.jsonl is the training file"
    if others:
        line += f", {shown}/{others[0]}/part-00000.jsonl the validation file"
    return line + ' (client.files.create(file=..., purpose="fine-tune"))'


def _verdict(view: View, summary: dict, job: Job, output: str | None = None) -> int:
    """The exit status of a finished run, its reasons printed (the outputs are written either way)."""
    status, errors = view.verdict(summary, job.max_dead_letters)
    for error in errors:
        print_error(error)
    if changed_inputs(summary):
        for letter in _changed_letters(output or job.output, changed_inputs(summary)):
            print_error(f"{letter['source']}: {letter['detail']}")
    return status


def _changed_letters(output: str, count: int) -> list[dict]:
    """The first ``input_changed`` dead letters (at most ``SHOWN_REPORTS``; ``count`` in all),
    read back from ``dead_letter/``: which files changed under the run, and how."""
    found: list[dict] = []
    wanted = min(count, SHOWN_REPORTS)
    for path in files.matching(FileSystems.join(output, "dead_letter"), "*.jsonl"):
        with FileSystems.open(path) as handle:
            for raw in handle:
                if b'"input_changed"' in raw:  # most dead letters are other reasons: parse only these
                    letter = json.loads(raw)
                    if letter.get("reason") == INPUT_CHANGED:
                        found.append(letter)
                if len(found) >= wanted:
                    return found
    return found


def _show_reports(directory: str) -> list[str]:
    """The first conversations with violations, each with where it is (line numbers too), one
    line each (escaped for the terminal: the id and the path are the data's)."""
    shown: list[dict] = []
    for path in files.matching(directory, "*.jsonl"):  # the directory literally: `v[1]` is not `v1`
        if len(shown) >= SHOWN_REPORTS:
            break
        with FileSystems.open(path) as handle:
            for raw in handle:
                report = json.loads(raw)
                if report["violations"]:
                    shown.append(report)
                    if len(shown) >= SHOWN_REPORTS:
                        break
    lines: list[str] = []
    for report in shown:
        source, position = str(report["source"]), int(report["position"])
        where = where_text(source, position, line_numbers(source, [position]).get(position))
        kinds = ", ".join(f"{k} x{n}" for k, n in report["violations"].items())
        lines.append(console_text(f"  {report['id']} ({where}): {kinds}"))
    return lines


def validate_job(job: Job, stopping: Stopping) -> int:
    """Check records as they are; exit status 1 when any is not sendable (or unreadable)."""
    if not job.output and not is_local_runner(job.options):
        print(
            "convnorm: error: validate on a remote runner needs --output (a directory its workers "
            "and this machine share)",
            file=sys.stderr,
        )
        return 2
    output = job.output or tempfile.mkdtemp(prefix="convnorm-validate-")
    stopping.what = "the validate pipeline"
    started = stopping.started
    try:
        outcome = execute(
            dataclasses.replace(job, output=output), VALIDATE_SPEC, build_validate, _pipeline_runner(job), stopping
        )
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
                print_line(f"reports: {job.shown_output}/violations/ and {job.shown_output}/{VALIDATION_FILE}")
            print(f"done in {duration_text(time.monotonic() - started)}")
        return _verdict(VALIDATE, summary, job, output)
    finally:
        if not job.output:
            shutil.rmtree(output, ignore_errors=True)


class Command(NamedTuple):
    handler: Callable[[Job, Stopping], int]
    output_required: bool
    #: The exit status when its pipeline failed or crashed, or a file it wrote is missing.
    failed: int
    #: What it writes under ``--output`` (for ``--dry-run``).
    spec: Callable[[Job], OutputSpec]


#: The exit rules of the commands: the statuses of ``pipeline.cli.main.main``'s docstring. A finished run's
#: status is its summary view's ``verdict`` (``transforms.totals.summary``).
COMMANDS: dict[str, Command] = {
    "run": Command(run_job, True, failed=1, spec=run_spec),
    "validate": Command(validate_job, False, failed=3, spec=lambda job: VALIDATE_SPEC),
}


def run_command(command: str, args: list[str], started: float | None = None, checked: CheckedArgs | None = None) -> int:
    """``convnorm run`` or ``convnorm validate`` with their arguments; Ctrl-C or SIGTERM ends it
    in one line (exit status 130 or 143).

    ``started``: when the command started (``time.monotonic()``; default now), for ``done in``.
    ``checked``: the command line's check before Beam's import (``pipeline.cli.main.check_job``),
    which ``load_job`` takes instead of checking again.
    """
    configure_console()
    stopping = Stopping(f"planning the {command}", started=time.monotonic() if started is None else started)
    try:
        with handling_signals(stopping):
            return _command(command, args, stopping, checked)
    except KeyboardInterrupt as stop:
        silence_after_interrupt()
        print(stopping_line(stopping, stop_signal(stop)), file=sys.stderr, flush=True)
        return exit_status(stop_signal(stop))


def _command(command: str, args: list[str], stopping: Stopping, checked: CheckedArgs | None = None) -> int:
    handler, output_required, failed, spec = COMMANDS[command]
    # Before load_job gives Beam's filesystems their options: the checks and the plan already
    # call S3, and the steps carry it to the workers (pipeline.io.object_store).
    object_store.after_options(s3_clients.patched)
    try:
        job = load_job(args, output_required=output_required, checked=checked)
    except ConfigError as error:
        print_error(str(error))
        return 2
    stopping.output = job.shown_output or None  # "" when validate was given none
    configure_console(quiet=_quiet(job))
    try:
        if job.dry_run:  # the plan prints the notes itself
            from pipeline.cli.dry_run import dry_run

            stopping.what = "the dry run"
            return dry_run(job, command, spec(job))
        for note in job.notes:
            LOG.info("%s", note)
        if job.options.view_as(StandardOptions).streaming:
            return _run_streaming(command, job, stopping)
        # A Prism run: Prism and its workers on loopback only; a DaskRunner run without a
        # scheduler: a local Dask cluster on loopback only.
        with prism_services(job.options), local_cluster(job.options, len(job.shards)):
            return handler(job, stopping)
    except PrismError as error:
        print_error(str(error))
        return 2
    except Exception as error:  # a crash gets its documented status, not a traceback's 1 (logged: BLE001 allows it)
        LOG.exception("the %s pipeline failed", command)
        print_error(f"the {command} pipeline failed: {type(error).__name__}: {error}")
        return failed


def _run_streaming(command: str, job: Job, stopping: Stopping) -> int:
    if command != "run":
        print_error(f"{command} does not stream; drop --streaming")
        return 2
    from pipeline.streaming.driver import run_streaming  # see docs/streaming.md

    stopping.what, stopping.streaming = "the streaming run", True
    return run_streaming(job)
