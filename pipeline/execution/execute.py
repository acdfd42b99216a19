"""Running a command's pipeline so that its outputs can be trusted (docs/outputs.md).

``execute(job, spec, build_graph)`` does, in this order, and stops at the first failure:

1. builds the runner and the pipeline (Beam validates its options here) and, for a
   ``--job_endpoint``, checks that a job service answers within ``--job-endpoint-timeout``
   -> exit status 2, nothing touched;
2. takes the output directory's lock (``pipeline.execution.lock``) -> 2 if another run holds it;
3. checks what is already in the output directory (``pipeline.io.ownership.check_output``) -> 2;
4. runs the pipeline, which writes only into the run's temporary directory -> 1 if it fails
   (the previous outputs are still there);
5. finalizes: replaces the previous run's files, moves the new ones into place, checks every
   one, writes the summary, the manifest, the page (``report.html``, drawn from them and then
   listed in the manifest; a failure there is a warning, never a failed run) and ``_SUCCESS``
   -> 1 when a file is missing; 1 when a step fails (a full disk ...), in one line naming the
   step, what is on disk (``pipeline.execution.finalize.Progress``) and the command that recovers
   (``recovery_command``).

``_SUCCESS`` says the outputs can be trusted: every file on disk as reported, every record
read accounted for (the summary's ``accounted``) *and* every input read as it was planned (no
``input_changed`` dead letter). A run whose records do not add up finishes
(its summary says so, its exit status is 1) without the marker; a run that exits 1 by policy
(``--max-dead-letters``, nothing normalized) keeps it: its outputs are whole.
"""

from __future__ import annotations

import dataclasses
import errno
import faulthandler
import json
import logging
import os
import re
import shlex
import signal
import uuid
from dataclasses import dataclass, field
from typing import IO, Callable

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PortableOptions
from apache_beam.runners.runner import PipelineState

from pipeline.config.flags import our_dests
from pipeline.config.options import ConfigError, Job
from pipeline.console import print_error
from pipeline.execution import finalize as finalizing
from pipeline.execution import interrupts
from pipeline.execution import lock as locks
from pipeline.execution.interrupts import Stopping, shielded
from pipeline.execution.output_spec import OutputSpec, without_a_users_card
from pipeline.io import files
from pipeline.io import ownership as owned
from pipeline.io.output_names import CRASH_NOTE, TEMP_PREFIX
from pipeline.runners import job_service, loopback
from pipeline.runners.dask_cluster import close_client
from pipeline.runners.lean_workers import WORKER_EXITS, pipeline_runner
from transforms.totals.summary import changed_inputs

LOG = logging.getLogger("convnorm")

#: Options left out of the manifest: how a run treats its output directory rather than what it
#: writes, and the directory itself (the manifest lies in it; a moved directory stays valid).
#: So the same input and flags give a byte-identical manifest, with or without --overwrite.
RUN_CONTROL_OPTIONS = frozenset(
    {
        "overwrite",
        "break_stale_lock",
        "job_endpoint_timeout",
        "host_loopback",
        "config",
        "output",
        # How a DaskRunner run reaches its cluster (Beam's DaskOptions dests): not what it writes,
        # and convnorm's own local cluster has a new address every run.
        "address",
        "scheduler_file",
        "timeout",
        "name",
        "connection_limit",
    }
)


@dataclass
class Outcome:
    status: int | None = None  # an exit status, or None when the run succeeded
    summary: dict = field(default_factory=dict)  # the summary document when the run succeeded
    #: The page's name when it was written.
    page: str | None = None
    #: The dataset card's name when it was written (``--sink hf``).
    card: str | None = None


def _fail(status: int, message: str) -> Outcome:
    print_error(message)
    return Outcome(status)


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def construct_pipeline(job: Job, build_graph: Callable, temp_dir: str) -> beam.Pipeline:
    """The runner and the whole graph, or ConfigError: Beam validates its options in here."""
    loopback.install()
    try:
        pipeline = beam.Pipeline(runner=pipeline_runner(job.options), options=job.options)
        build_graph(pipeline, job, temp_dir)
    except Exception as error:  # noqa: BLE001 — Beam raises ValueError, ImportError, ...
        raise ConfigError(f"Beam refused the options: {_one_line(error)}") from None
    return pipeline


def check_job_endpoint(job: Job) -> None:
    """A ``--job_endpoint`` must answer within ``--job-endpoint-timeout`` (Beam would wait for
    minutes without a word); ConfigError naming it otherwise."""
    endpoint = job.options.view_as(PortableOptions).job_endpoint
    if not endpoint or endpoint == "embed":
        return
    import grpc

    channel = grpc.insecure_channel(endpoint)
    try:
        grpc.channel_ready_future(channel).result(timeout=job.job_endpoint_timeout)
    except grpc.FutureTimeoutError:
        raise ConfigError(
            f"no job service answered at --job_endpoint {endpoint} within {job.job_endpoint_timeout:g} s "
            "(--job-endpoint-timeout); start one (see configs/portable.yaml) or check the address"
        ) from None
    finally:
        channel.close()


def run_pipeline(pipeline: beam.Pipeline) -> bool:
    """Run to the end; False (logged in one line) when the pipeline failed.

    A portable job (Prism, ``--job_endpoint``) is waited for through its job service, so no
    deadline of Beam's (``--job_server_timeout``) ends a long run (``pipeline.runners.job_service``)."""
    result = None
    try:
        result = pipeline.run()
        state = job_service.wait_until_finish(result)
    except Exception as error:  # noqa: BLE001 — a failed pipeline, whatever the runner raises
        if interrupts.received():
            raise interrupts.as_stopped() from None  # Ctrl-C or SIGTERM, which Beam wrapped: said in one line
        LOG.error("the pipeline failed: %s", failure_text(error, WORKER_EXITS))
        return False
    finally:
        close_client(result)  # DaskRunner's result holds an open dask.distributed client
    if state != PipelineState.DONE:
        LOG.error("the pipeline ended in state %s", state)
        return False
    return True


#: What a run out of memory can do about it (a worker killed by the kernel, a MemoryError).
MEMORY_HINT = (
    "give it more memory (ulimit -v, the container's limit) or make it need less: "
    "fewer worker processes (--direct_num_workers), smaller batches (--batch-size, --batch-bytes), "
    "a smaller --max-record-bytes, or the input in several runs"
)


def failure_text(error: BaseException, worker_exits: list[int]) -> str:
    """Why the pipeline failed, in one line: a worker process killed by a signal (its exit
    status: Beam says only that a channel closed), out of memory, else the error itself."""
    killed = [_signal_of(status) for status in worker_exits]
    names = [name for name in killed if name]
    if names:
        more = f" (and {len(names) - 1} more)" if len(names) > 1 else ""
        return (
            f"a worker process was killed by {names[0]}{more} (the kernel's out-of-memory killer sends SIGKILL; "
            f"a failed allocation under a memory limit often ends in SIGSEGV or SIGABRT): if it ran out of memory, "
            f"{MEMORY_HINT}"
        )
    said = _one_line(error)[:2000]
    if _out_of_memory(error):
        return f"out of memory ({said[:500]}); {MEMORY_HINT}"
    return said


def _signal_of(status: int) -> str | None:
    """The signal's name of an exit status (-N from Python, 128+N from the shell Beam starts
    workers through), or None."""
    number = -status if status < 0 else status - 128 if 128 < status < 128 + 65 else 0
    try:
        return signal.Signals(number).name if number else None
    except ValueError:
        return f"signal {number}"


def _out_of_memory(error: BaseException | None) -> bool:
    """A MemoryError anywhere in the chain, or named in the text of an error Beam rewraps
    (a worker's failure comes back as a RuntimeError holding its traceback)."""
    seen = 0
    while error is not None and seen < 20:
        if isinstance(error, MemoryError) or "MemoryError" in str(error)[:20000]:
            return True
        error, seen = error.__cause__ or error.__context__, seen + 1
    return False


#: Beam's options whose value is a credential (s3_secret_access_key, s3_session_token,
#: azure_connection_string, ...): the manifest travels with the outputs, so it says such an
#: option was given, never its value. convnorm's own options hold none (``--tokens`` is an
#: encoding, ``--max-tokens`` a number): they are kept, for the report and ``convnorm explain``.
SECRET_OPTION = re.compile(r"secret|token|password|passwd|credential|connection_string|access_key")


def manifest_options(job: Job) -> dict:
    options = job.options.get_all_options(drop_default=True)
    ours = our_dests()
    kept = {
        k: "<redacted>" if SECRET_OPTION.search(k) and k not in ours else v
        for k, v in sorted(options.items())
        if k not in RUN_CONTROL_OPTIONS
    }
    return json.loads(json.dumps(kept, default=str))


def execute(
    job: Job,
    spec: OutputSpec,
    build_graph: Callable,
    run: Callable[[beam.Pipeline], bool] = run_pipeline,
    stopping: Stopping | None = None,
) -> Outcome:
    """Steps 1-5 above; ``build_graph(pipeline, job, temp_dir)`` applies the command's graph and
    ``run`` is step 4 (the command line wraps ``run_pipeline`` in its progress display).

    Ctrl-C (``KeyboardInterrupt``) before step 5 leaves the directory as it was (the temporary
    directory and the lock are removed on the way out); during step 5 it waits for the step to
    end (``pipeline.execution.interrupts.shielded``), and ``stopping.written`` says the outputs are whole.
    """
    output = job.output
    spec, card_note = without_a_users_card(spec, output)
    if card_note:
        LOG.warning("%s", card_note)
    run_id = uuid.uuid4().hex
    temp_dir = FileSystems.join(output, TEMP_PREFIX + run_id)
    proof, proof_entry = owned.new_temp_proof(run_id)
    try:
        pipeline = construct_pipeline(job, build_graph, temp_dir)
        check_job_endpoint(job)
    except ConfigError as error:
        return _fail(2, str(error))

    created = files.is_local(output) and not os.path.exists(output)
    takeover: list[owned.Takeover] = []
    try:
        lock = locks.acquire(
            output,
            run_id=run_id,
            command=spec.command,
            temp_dir=TEMP_PREFIX + run_id,  # by its name: the lock lies beside it
            break_stale=job.break_stale_lock,
            clean_up=lambda holder: takeover.append(_clean_dead_run(output, holder, spec)),
            temp_proof=proof_entry,
        )
    except (locks.LockError, owned.OutputError) as error:
        return _fail(2, str(error))
    except OSError as error:  # an unwritable directory, a full disk: said as it is
        return _fail(2, f"--output {output!r}: its lock could not be taken: {_one_line(error)[:500]}; nothing was run")

    release = True
    crash_note = None
    reported = False  # a failed finalize said what it left on disk
    failure = ""  # what made it fail, for the lock it keeps: the next run says so, not "died"
    progress = finalizing.Progress()
    try:
        try:
            previous = owned.check_output(
                output,
                tuple(spec.shard_outputs),
                spec.side_files,
                job.overwrite,
                spec.command,
                inherited=bool(takeover and takeover[0].inherited),
            )
        except owned.OutputError as error:
            return _fail(2, str(error))
        try:
            owned.claim_temp(temp_dir, proof)  # before the pipeline writes there: it proves the folder ours
        except OSError as error:
            return _fail(
                2,
                f"--output {output!r}: the run's temporary directory could not be made: {_one_line(error)[:500]}; "
                "nothing was run",
            )
        crash_note = _note_crashes(temp_dir)
        if not run(pipeline):
            return _fail(
                1,
                f"the {spec.command} pipeline failed (the error is logged above); the previous "
                "outputs, if any, are untouched",
            )
        # Ctrl-C and SIGTERM wait here: the directory gets the whole run, or keeps what it held.
        with shielded():
            release = False  # from here on, an unexpected stop leaves the lock (and its record)
            page_name = spec.page.name if spec.page else None
            try:
                result, summary = finalizing.finalize(
                    output,
                    temp_dir,
                    spec.shard_outputs,
                    spec.summary_file,
                    lock,
                    previous,
                    spec.recount,
                    page_name,
                    progress,
                    (spec.card.name, spec.card.render) if spec.card else None,
                    spec.one_file,
                )
                page = finalizing.write_manifest(
                    output,
                    _sealed(result, summary, spec),
                    spec.command,
                    manifest_options(job),
                    lock,
                    (spec.page.name, spec.page.render) if spec.page else None,
                    progress,
                )
            except Exception as error:  # noqa: BLE001 — a full disk, a read-only folder ...: said with what is on disk
                LOG.debug("finalize failed", exc_info=True)
                release, reported = not progress.changed, True  # nothing changed yet: nothing to recover
                failure = f"{_one_line(error)[:300]} while {progress.step}"
                if release and isinstance(error, owned.OutputError):
                    return _fail(1, str(error))  # refused before anything moved: says so itself
                return _fail(1, finalize_failed(job, spec.command, lock.path, progress, error))
            release = True
            if stopping is not None:
                stopping.written = True
        if not result.complete:
            return _fail(1, "the run is incomplete, no _SUCCESS written: " + "; ".join(result.problems))
        card = spec.card.name if spec.card and spec.card.name in progress.written else None
        return Outcome(None, summary, page_name if page is not None else None, card)
    finally:
        _stop_noting(crash_note)
        if release:
            _clean_up(job, spec.command, temp_dir, lock, created)
        else:
            if failure:
                record_failure(lock, failure)
            lock.close()
            if not reported:
                print_error(
                    f"the run stopped while finalizing; the lock {lock.path} records what it "
                    f"was doing: rerun with --break-stale-lock to clean up: {recovery_command(job, spec.command)}",
                )


def _note_crashes(temp_dir: str) -> IO[str] | None:
    """Have Python's fatal-error handler write into the run's temporary directory
    (``CRASH_NOTE``): a run that crashes (a segmentation fault, an abort: often a failed
    allocation under a memory limit) can print nothing itself, and its lock stays; the next
    run reads the note and says how it died. None on an object store, or when the handler is
    someone else's already (``python -X faulthandler``, a test runner)."""
    if not files.is_local(temp_dir) or faulthandler.is_enabled():
        return None
    try:
        note = open(os.path.join(temp_dir, CRASH_NOTE), "x", encoding="utf-8")  # noqa: SIM115 — open for the run
    except OSError:
        return None
    faulthandler.enable(file=note, all_threads=True)
    return note


def _stop_noting(note: IO[str] | None) -> None:
    if note is not None:
        faulthandler.disable()
        note.close()


def record_failure(lock: locks.OutputLock, failure: str) -> None:
    """Note in the lock a run keeps why it ended (``failed``), so that the next run calls the
    lock stale because its run failed, not because it died. Best effort: on a full disk the
    note may not fit, and the lock stays as it was."""
    try:
        lock.record(failed=failure)
    except OSError:
        LOG.debug("could not note the failure in the lock", exc_info=True)


def recovery_command(job: Job, command: str, *, break_stale: bool = True) -> str:
    """The command line that recovers the run: its own arguments (and ``--break-stale-lock``,
    which deletes what a stopped run provably wrote and takes its lock over)."""
    argv = list(job.argv)
    if break_stale and "--break-stale-lock" not in argv:
        argv.append("--break-stale-lock")
    if not job.argv:  # called without a command line (a test, a library user)
        return "the same command" + (" with --break-stale-lock" if break_stale else "")
    return shlex.join(["convnorm", *([] if command == "run" else [command]), *argv])


def _fix(error: BaseException, output: str) -> str:
    """What to do about ``error`` before the recovery command."""
    code = getattr(error, "errno", None)
    if code in (errno.ENOSPC, errno.EDQUOT):
        return f"free some space on the filesystem of {output}"
    if code in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"make {output} (and the folders in it) writable"
    return "fix what the error says"


def finalize_failed(job: Job, command: str, lock_path: str, progress: finalizing.Progress, error: BaseException) -> str:
    """The line for a finalize step that failed after the pipeline finished: which step, what is
    on disk now, and the command that recovers."""
    said = (
        f"the {command} pipeline finished, but finalizing its outputs failed while {progress.step}: "
        f"{_one_line(error)[:500]}; now {progress.on_disk(job.output)}"
    )
    if not progress.changed:
        again = recovery_command(job, command, break_stale=False)
        return f"{said}. To recover, {_fix(error, job.output)}, then run the same command again: {again}"
    return (
        f"{said}. The lock {lock_path} is kept: it records what this run created and deleted. To recover, "
        f"{_fix(error, job.output)}, then run: {recovery_command(job, command)} (it deletes what this run "
        "provably wrote, then runs again)"
    )


def _clean_up(job: Job, command: str, temp_dir: str, lock: locks.OutputLock, created: bool) -> None:
    """Remove the run's temporary directory, then its lock. A temporary directory that cannot be
    removed (a folder made read-only) keeps the lock, which names it, so the next run with
    ``--break-stale-lock`` removes it: said in one line, with that command."""
    try:
        owned.remove_temp(temp_dir)
    except OSError as error:
        record_failure(lock, f"its temporary directory could not be removed: {_one_line(error)[:300]}")
        lock.close()
        print_error(
            f"the run's temporary directory {temp_dir} could not be removed "
            f"({_one_line(error)[:500]}); the lock {lock.path} is kept so that the next run removes it. To "
            f"recover, {_fix(error, job.output)}, then run: {recovery_command(job, command)}",
        )
        return
    try:
        lock.release()
    except OSError as error:
        print_error(
            f"the lock {lock.path} could not be deleted ({_one_line(error)[:500]}); no run holds "
            f"it any more. To recover, {_fix(error, job.output)}, then run: {recovery_command(job, command)}",
        )
        return
    if created:
        files.remove_if_empty(job.output)


def _sealed(result: finalizing.Finalized, summary: dict, spec: OutputSpec) -> finalizing.Finalized:
    """What the manifest records: records not accounted for, or inputs that changed while they
    were read, make the run incomplete like a missing file (no ``_SUCCESS``); the command still
    reports its summary and exits 1 (its verdict)."""
    problems = list(result.problems)
    if not summary["accounted"]:
        problems.append(f"some records are not accounted for ({spec.summary_file}: accounted is false)")
    if changed_inputs(summary):
        problems.append(
            f"an input changed while it was read ({spec.summary_file}: {changed_inputs(summary):,} "
            "input_changed dead letter(s))"
        )
    return result if problems == result.problems else dataclasses.replace(result, problems=problems)


def _clean_dead_run(output: str, holder: dict, spec: OutputSpec) -> owned.Takeover:
    done = owned.clean_dead_run(output, holder, tuple(spec.shard_outputs))
    done.inherited = done.inherited and holder.get("command") == spec.command  # its outputs were this command's
    LOG.warning("took over the stale lock of a dead run (%s): %s", locks.describe(holder), done.describe(output))
    return done
