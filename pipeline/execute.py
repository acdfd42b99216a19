"""Running a command's pipeline so that its outputs can be trusted (docs/outputs.md).

``execute(job, spec, build_graph)`` does, in this order, and stops at the first failure:

1. builds the runner and the pipeline (Beam validates its options here) and, for a
   ``--job_endpoint``, checks that a job service answers within ``--job-endpoint-timeout``
   -> exit status 2, nothing touched;
2. takes the output directory's lock (``pipeline.lock``) -> 2 if another run holds it;
3. checks what is already in the output directory (``pipeline.outputs.check_output``) -> 2;
4. runs the pipeline, which writes only into the run's temporary directory -> 1 if it fails
   (the previous outputs are still there);
5. finalizes: replaces the previous run's files, moves the new ones into place, checks every
   one, writes the summary, the manifest, the page (``report.html``, drawn from them and then
   listed in the manifest; a failure there is a warning, never a failed run) and ``_SUCCESS``
   -> 1 when a file is missing.

``_SUCCESS`` says the outputs can be trusted: every file on disk as reported, every record
read accounted for (the summary's ``accounted``) *and* every input read as it was planned (no
``input_changed`` dead letter). A run whose records do not add up finishes
(its summary says so, its exit status is 1) without the marker; a run that exits 1 by policy
(``--max-dead-letters``, nothing normalized) keeps it: its outputs are whole.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import sys
import uuid
from dataclasses import dataclass, field
from typing import Callable

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import DirectOptions, PortableOptions, StandardOptions
from apache_beam.portability import python_urns
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.runners.runner import PipelineState

from pipeline import files, interrupts, job_service, loopback
from pipeline import lock as locks
from pipeline import outputs as owned
from pipeline.dask_cluster import close_client
from pipeline.flags import DEFAULT_RUNNER, our_dests
from pipeline.interrupts import Stopping, shielded
from pipeline.options import ConfigError, Job
from pipeline.sdk_worker import BEAM_WORKER_MODULE, WORKER_MODULE, worker_command
from transforms.summary import changed_inputs

LOG = logging.getLogger("convnorm")

#: Options left out of the manifest: how a run treats its output directory rather than what it
#: writes, and the directory itself (the manifest lies in it; a moved directory stays valid).
#: So the same input and flags give a byte-identical manifest, with or without --overwrite.
RUN_CONTROL_OPTIONS = frozenset(
    {
        "overwrite",
        "break_stale_lock",
        "job_endpoint_timeout",
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


@dataclass(frozen=True)
class Page:
    """A page drawn from the finished outputs (``report.html``): planned and checked with them,
    listed in the manifest with its hash, but never the reason a run fails."""

    name: str
    #: ``render(output)`` -> the page's bytes, read from the outputs on disk.
    render: Callable[[str], bytes]


@dataclass(frozen=True)
class OutputSpec:
    """What a command writes under ``--output``."""

    command: str
    shard_outputs: dict[str, str]  # output directory name -> file extension
    summary_file: str
    #: ``recount(summary, records per output on disk)`` -> the summary written.
    recount: Callable[[dict, dict], dict]
    page: Page | None = None

    @property
    def side_files(self) -> tuple[str, ...]:
        """The files it writes at the top of ``--output`` (besides manifest and marker)."""
        return (self.summary_file, *([self.page.name] if self.page else []))

    @property
    def names(self) -> tuple[str, ...]:
        return (*self.shard_outputs, *self.side_files)


@dataclass
class Outcome:
    status: int | None = None  # an exit status, or None when the run succeeded
    summary: dict = field(default_factory=dict)  # the summary document when the run succeeded
    #: The page's name when it was written.
    page: str | None = None


def _fail(status: int, message: str) -> Outcome:
    print(f"convnorm: error: {message}", file=sys.stderr)
    return Outcome(status)


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class FnApiRunnerLeanWorkers(FnApiRunner):
    """Beam's FnApiRunner whose multi-process workers start as ``python -m pipeline.sdk_worker``
    (Beam's worker, without importing pandas: ``pipeline.sdk_worker``) instead of Beam's
    ``python -m apache_beam.runners.worker.sdk_worker_main``."""

    def run_via_runner_api(self, pipeline_proto, options):
        # FnApiRunner writes its worker command into the pipeline's environments, and its
        # worker handlers start what an environment says.
        beam_command = worker_command(BEAM_WORKER_MODULE).encode()
        for environment in pipeline_proto.components.environments.values():
            if environment.urn == python_urns.SUBPROCESS_SDK and environment.payload == beam_command:
                environment.payload = worker_command(WORKER_MODULE).encode()
        return super().run_via_runner_api(pipeline_proto, options)


def pipeline_runner(options) -> FnApiRunner | None:
    """The runner ``beam.Pipeline`` is given: ``FnApiRunnerLeanWorkers`` for a FnApiRunner run
    in worker processes, None otherwise (Beam makes the one ``--runner`` names)."""
    runner = options.view_as(StandardOptions).runner or DEFAULT_RUNNER
    multi_process = options.view_as(DirectOptions).direct_running_mode == "multi_processing"
    return FnApiRunnerLeanWorkers() if multi_process and runner.lower() == "fnapirunner" else None


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
    deadline of Beam's (``--job_server_timeout``) ends a long run (``pipeline.job_service``)."""
    result = None
    try:
        result = pipeline.run()
        state = job_service.wait_until_finish(result)
    except Exception as error:  # noqa: BLE001 — a failed pipeline, whatever the runner raises
        if interrupts.received():
            raise KeyboardInterrupt from None  # Ctrl-C, which Beam wrapped: the command says so in one line
        LOG.error("the pipeline failed: %s", _one_line(error)[:2000])
        return False
    finally:
        close_client(result)  # DaskRunner's result holds an open dask.distributed client
    if state != PipelineState.DONE:
        LOG.error("the pipeline ended in state %s", state)
        return False
    return True


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
    end (``pipeline.interrupts.shielded``), and ``stopping.written`` says the outputs are whole.
    """
    output = job.output
    run_id = uuid.uuid4().hex
    temp_dir = FileSystems.join(output, owned.TEMP_PREFIX + run_id)
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
            temp_dir=temp_dir,
            break_stale=job.break_stale_lock,
            clean_up=lambda holder: takeover.append(_clean_dead_run(output, holder, spec)),
        )
    except (locks.LockError, owned.OutputError) as error:
        return _fail(2, str(error))

    release = True
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
        if not run(pipeline):
            return _fail(
                1,
                f"the {spec.command} pipeline failed (the error is logged above); the previous "
                "outputs, if any, are untouched",
            )
        # Ctrl-C waits here: the directory gets the whole run, or keeps what it held.
        with shielded():
            release = False  # from here on, an unexpected error leaves the lock (and its record)
            page_name = spec.page.name if spec.page else None
            try:
                result, summary = owned.finalize(
                    output, temp_dir, spec.shard_outputs, spec.summary_file, lock, previous, spec.recount, page_name
                )
            except owned.OutputError as error:
                release = True
                return _fail(1, str(error))
            page = owned.write_manifest(
                output,
                _sealed(result, summary, spec),
                spec.command,
                manifest_options(job),
                lock,
                (spec.page.name, spec.page.render) if spec.page else None,
            )
            release = True
            if stopping is not None:
                stopping.written = True
        if not result.complete:
            return _fail(1, "the run is incomplete, no _SUCCESS written: " + "; ".join(result.problems))
        return Outcome(None, summary, page_name if page is not None else None)
    finally:
        if release:
            owned.remove_temp(temp_dir)
            lock.release()
            if created:
                files.remove_if_empty(output)
        else:
            lock.close()
            print(
                f"convnorm: error: the run stopped while finalizing; the lock {lock.path} records what it "
                "was doing: rerun with --break-stale-lock to clean up",
                file=sys.stderr,
            )


def _sealed(result: owned.Finalized, summary: dict, spec: OutputSpec) -> owned.Finalized:
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
