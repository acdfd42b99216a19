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

import difflib
import json
import logging
import shutil
import sys
import tempfile
import textwrap
from typing import Callable

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import StandardOptions
from apache_beam.runners.runner import PipelineState

from pipeline.build import build
from pipeline.options import ConfigError, ConvNormOptions, Job, is_local_runner, load_job
from pipeline.prism import PrismError, prism_services
from pipeline.sinks import OUTPUT_DIRS, SUMMARY_FILE, WriteShards, WriteSummary
from pipeline.sources import ReadConversationLogs
from transforms.conversations import CheckConversations, SummarizeValidation
from transforms.formats import READERS, WRITERS
from transforms.profiles import PROFILES
from transforms.summary import format_table, format_validation_table

LOG = logging.getLogger("convnorm")

VALIDATION_FILE = "validation.json"
RUN_OUTPUTS = (*OUTPUT_DIRS, SUMMARY_FILE)
VALIDATE_OUTPUTS = ("violations", "dead_letter", VALIDATION_FILE)
#: Conversations with violations shown on the console by ``convnorm validate``.
SHOWN_REPORTS = 5


def _configure_logging() -> None:
    # apache_beam installs a root handler on import; force=True replaces it.
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s", force=True)
    for name in ("convnorm", "pipeline", "transforms"):
        logging.getLogger(name).setLevel(logging.INFO)


def _help() -> str:
    import argparse

    parser = argparse.ArgumentParser(
        prog="convnorm",
        usage="convnorm [run] --input GLOB --output DIR [options]\n"
              "       convnorm validate --input GLOB [--output DIR] [options]",
        description="Normalize logged LLM conversations by FlowDrop rule MEM-5 and report every drop.",
        epilog=textwrap.dedent("""\
            readers (--format, default auto: detected per record):
            {readers}
            writers (--sink, default flat):
            {writers}
            profiles (--profile): {profiles}

            Every Apache Beam option passes through, e.g. --runner (default FnApiRunner),
            --direct_num_workers=2 --direct_running_mode=multi_processing, --job_endpoint.
            See README.md and configs/*.yaml.""").format(
            readers="\n".join(f"  {r.name:<18}{r.description}" for r in sorted(READERS.values(), key=lambda r: r.name)),
            writers="\n".join(f"  {w.name:<18}{w.description}" for w in sorted(WRITERS.values(), key=lambda w: w.name)),
            profiles=", ".join(PROFILES),
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ConvNormOptions._add_argparse_args(parser)
    return parser.format_help()


def _load_json_file(path: str) -> dict:
    with FileSystems.open(path) as handle:
        return json.loads(handle.read())


def _run(pipeline: beam.Pipeline) -> bool:
    result = pipeline.run()
    state = result.wait_until_finish()
    if state != PipelineState.DONE:
        LOG.error("the pipeline ended in state %s", state)
        return False
    return True


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
    pipeline = beam.Pipeline(options=job.options)
    build(pipeline, job)
    if not _run(pipeline):
        return 1
    summary = _load_json_file(FileSystems.join(job.output, SUMMARY_FILE))
    print(format_table(summary))
    print(f"outputs: {job.output}/{{normalized,drops,dead_letter}}/ and {job.output}/{SUMMARY_FILE}")
    return 0 if summary["accounted"] else 1


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
        if not _run(pipeline):
            return 3
        summary = _load_json_file(FileSystems.join(output, VALIDATION_FILE))
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
        if command not in COMMANDS:
            close = difflib.get_close_matches(command, COMMANDS, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            print(f"convnorm: error: unknown command {command!r}{hint}; commands: {', '.join(COMMANDS)}",
                  file=sys.stderr)
            return 2
    if any(a in ("-h", "--help") for a in argv):
        print(_help())
        return 0
    _configure_logging()
    handler, output_required, output_names = COMMANDS[command]
    try:
        job = load_job(argv, output_required=output_required, output_names=output_names)
    except ConfigError as error:
        print(f"convnorm: error: {error}", file=sys.stderr)
        return 2
    try:
        if job.options.view_as(StandardOptions).streaming:
            return _run_streaming(command, job)
        with prism_services(job.options):  # a Prism run: Prism and its workers on loopback only
            return handler(job)
    except PrismError as error:
        print(f"convnorm: error: {error}", file=sys.stderr)
        return 2


def _run_streaming(command: str, job: Job) -> int:
    if command != "run":
        print(f"convnorm: error: {command} does not stream; drop --streaming", file=sys.stderr)
        return 2
    from pipeline.streaming import run_streaming  # see docs/streaming.md

    return run_streaming(job)
