"""The ``convnorm`` console command, and what it answers before importing Apache Beam.

Importing Beam takes seconds, so ``convnorm`` answers what needs no pipeline first:
``--help``, ``--version``, a bare ``convnorm``, an unknown command and every option error that
``pipeline.config.precheck.check_args`` finds; that check is made once per run and handed on
(``check_job``). ``report`` and ``explain`` import Beam only to read files. Only a job to run
imports Beam, with its import-time notice filtered (``quiet_beam_noise``) and pandas hidden
(``import_beam_without_pandas``), and then runs ``pipeline.cli.commands``.

Ctrl-C anywhere ends the command with one line and exit status 130 (``pipeline.execution.interrupts``).
"""

from __future__ import annotations

import difflib
import os
import platform
import sys
import time
from typing import TYPE_CHECKING, Callable

from pipeline.console import escaped_console, print_error, quiet_beam_noise
from pipeline.execution.interrupts import INTERRUPTED, interrupted_line
from pipeline.runners.sdk_worker import import_beam_without_pandas

if TYPE_CHECKING:
    from pipeline.config.precheck import CheckedArgs

#: The commands; ``run`` is the default (``convnorm --input ...``).
JOB_COMMANDS = ("run", "validate")
OTHER_COMMANDS = ("report", "explain")


def version_line() -> str:
    """``convnorm 0.1.0 (apache-beam 2.77.0, Python 3.11.7)``: read from the installed packages."""
    from importlib import metadata

    def version(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "not installed"

    return f"convnorm {version('convnorm')} (apache-beam {version('apache-beam')}, Python {platform.python_version()})"


def _error(message: str) -> int:
    print_error(message)
    return 2


def split_command(argv: list[str]) -> tuple[str, list[str]]:
    """``(command, its arguments)``; ``run`` when the first argument is an option."""
    if argv and not argv[0].startswith("-"):
        return argv[0], argv[1:]
    return "run", argv


def answer_without_beam(argv: list[str]) -> int | None:
    """The exit status of what the command line can answer without Beam; ``None``: a job to run.

    Prints help, the version, usage for a bare ``convnorm`` and an unknown command (exit
    status 2), all in well under half a second (bench/bench_startup.py measures it); a job's
    options are checked next, by ``check_job``, as fast.
    """
    from pipeline.cli.help import help_text, usage_text  # no Beam

    if not argv:
        print(usage_text(), file=sys.stderr)
        return _error(
            "nothing to do: give --input and --output (or --config FILE; the bundled sample: "
            "convnorm --config configs/local.yaml); convnorm --help lists every option"
        )
    command, args = split_command(argv)
    if command in OTHER_COMMANDS:
        return None
    if command not in JOB_COMMANDS:
        known = [*JOB_COMMANDS, *OTHER_COMMANDS]
        close = difflib.get_close_matches(command, known, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        return _error(f"unknown command {command!r}{hint}; commands: {', '.join(known)}")
    if "--version" in args:
        print(version_line())
        return 0
    if any(a in ("-h", "--help", "--help-all") for a in args):
        print(help_text(command, show_all="--help-all" in args))
        return 0
    return None


def check_job(command: str, args: list[str]) -> CheckedArgs | int:
    """A job's command line checked before Beam's import, once for the run (handed on to the
    private network's check and to ``load_job``); or the exit status of its error (2)."""
    from pipeline.config.flags import ConfigError
    from pipeline.config.precheck import check_args  # no Beam

    try:
        return check_args(args, output_required=command == "run")
    except ConfigError as error:
        return _error(str(error))


def run_other_command(command: str, args: list[str]) -> int:
    """``convnorm report`` and ``convnorm explain`` (they import Beam only to read files)."""
    if command == "report":
        from pipeline.cli.output_commands import report_command

        return report_command(args)
    from pipeline.cli.output_commands import explain_command

    return explain_command(args)


def dispatch(argv: list[str], run_job: Callable[[str, list[str], float, CheckedArgs], int]) -> int:
    """Answer what needs no pipeline, run ``report`` and ``explain``, else check the job's
    options and ``run_job(command, args, started, checked)``: ``started`` is when the command
    started (its ``done in`` counts Beam's import and the plan too, as the person waited for
    them), ``checked`` the options as checked (once per run: ``check_job``).

    Everything the command prints is escaped for the terminal (``pipeline.console``)."""
    started = time.monotonic()
    with escaped_console():
        answered = answer_without_beam(argv)
        if answered is not None:
            return answered
        command, args = split_command(argv)
        if command in OTHER_COMMANDS:
            return run_other_command(command, args)
        checked = check_job(command, args)
        if isinstance(checked, int):
            return checked
        return run_job(command, args, started, checked)


def _run_job_with_beam(command: str, args: list[str], started: float, checked: CheckedArgs) -> int:
    from pipeline.runners.private_network import isolate_prism_run

    # While this process has one thread, before Beam starts any: a run that starts Prism
    # moves into a network namespace of its own.
    refused = isolate_prism_run(checked)
    if refused:
        return _error(refused)
    import_beam_without_pandas()
    from pipeline.cli.commands import run_command  # imports apache_beam: after the filter

    return run_command(command, args, started, checked)


class StdoutUntilTheReaderGoes:
    """``sys.stdout`` for a command whose output may be piped into a reader that stops early
    (``convnorm explain ... | head``): once the reader is gone, the rest of the output goes
    nowhere, and the command ends as it would have (a run's outputs are on disk by then), with
    no ``BrokenPipeError`` traceback."""

    def __init__(self, stream) -> None:
        self._stream = stream
        self.reader_gone = False

    def write(self, text: str) -> int:
        if not self.reader_gone:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._to_nowhere()
        return len(text)

    def flush(self) -> None:
        if not self.reader_gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._to_nowhere()

    def _to_nowhere(self) -> None:
        self.reader_gone = True
        # What the stream still holds is flushed at exit: into /dev/null, not into an error.
        nowhere = os.open(os.devnull, os.O_WRONLY)
        os.dup2(nowhere, self._stream.fileno())
        os.close(nowhere)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``convnorm`` and ``python -m pipeline`` (the one: tests call it too);
    returns the exit status.

    Exit status: 0 done (validate: all sendable); 1 the run failed, did not account for
    every record, read an input that changed under it, normalized none of the records it read,
    had more dead letters than
    ``--max-dead-letters``, or a file it wrote is missing (validate: violations or unreadable
    records), or finalizing its outputs failed (the line says which step, what is on disk and the
    command that recovers); 2 bad options, an output directory refused, or another run holds
    its lock (nothing was run or deleted); 3 the validation pipeline failed (crashed); 130
    stopped by Ctrl-C, 143 by SIGTERM (lock and temporary directory removed, the output as it
    was; a streaming run drained by SIGTERM exits 0). See docs/outputs.md.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    quiet_beam_noise()
    if not isinstance(sys.stdout, StdoutUntilTheReaderGoes):
        sys.stdout = StdoutUntilTheReaderGoes(sys.stdout)
    try:
        return dispatch(argv, _run_job_with_beam)
    except KeyboardInterrupt:
        # Before a job started (the job's own handler says what it stopped): nothing was written.
        print(interrupted_line("convnorm", None), file=sys.stderr)
        return INTERRUPTED
