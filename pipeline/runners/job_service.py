"""A portable job's state, live counters and errors, asked of its job service call by call.

Beam's ``PipelineResult`` for portable runners (Prism, Flink, Spark, any ``--job_endpoint``)
is not made for a job that runs for hours:

- ``wait_until_finish`` reads the job's state stream, which Beam opened at submission with a
  deadline of ``--job_server_timeout`` (300 s): any longer run ends in ``DEADLINE_EXCEEDED``;
- ``metrics()`` asks once and caches its first answer, so live counters never move.

``JobService`` asks the job service directly instead: ``GetState`` and ``GetJobMetrics`` each
time (no deadline spans the run), ``GetMessageStream`` for a failed job's error, with a deadline
of its own. ``--job_server_timeout`` still bounds Beam's calls that prepare and submit the job.
``wait_until_finish(result)`` is how every command waits for its pipeline, batch or streaming.
"""

from __future__ import annotations

import contextlib
import logging
import time

import grpc
from apache_beam.metrics import MetricsFilter
from apache_beam.portability.api import beam_job_api_pb2, beam_job_api_pb2_grpc
from apache_beam.runners.portability.portable_runner import PortableMetrics
from apache_beam.runners.runner import PipelineResult, PipelineState

from pipeline.runners.beam_release import written_for

LOG = logging.getLogger("convnorm")

#: Seconds to collect a finished job's messages (its error) for.
MESSAGES_TIMEOUT_S = 10.0
#: Seconds each call to the job service may take (one call, never the run).
CALL_TIMEOUT_S = 30.0
#: Seconds between two questions about the job's state: short at first (a small job ends in a
#: second or two), then longer (a long job is not asked ten times a second).
FIRST_POLL_S, LAST_POLL_S = 0.05, 1.0

#: The Beam release ``JobService.of`` was written for: it reads the private ``_job_service`` and
#: ``_job_id`` of Beam's portable result, ``PortableMetrics``, and calls its ``_cleanup``
#: (``pipeline.runners.beam_release``).
WRITTEN_FOR = "2.77"

TERMINAL = frozenset(
    {
        PipelineState.DONE,
        PipelineState.FAILED,
        PipelineState.CANCELLED,
        PipelineState.UPDATED,
        PipelineState.DRAINED,
    }
)


def state_name(state: int) -> str:
    return beam_job_api_pb2.JobState.Enum.Name(state)


class JobService:
    """One job of a job service, asked call by call through Beam's own connection to it."""

    def __init__(self, stub: beam_job_api_pb2_grpc.JobServiceStub, job_id: str) -> None:
        self._stub = stub
        self.job_id = job_id

    @classmethod
    def of(cls, result: PipelineResult) -> JobService | None:
        """The job service and job behind a portable run's result; None for other runners
        (FnApiRunner, Dataflow) and for Beam's in-process job service (``--job_endpoint embed``,
        no deadline there), whose results Beam's own ``wait_until_finish`` serves.

        Beam's portable ``PipelineResult`` keeps both as ``_job_service`` (the gRPC stub it
        submitted through) and ``_job_id`` (the id ``Run`` answered) and offers no public way
        to them. On a Beam release this was not written for: None (Beam's own wait)."""
        if not written_for("convnorm's job service client (a portable result's _job_service)", WRITTEN_FOR):
            return None
        stub, job_id = getattr(result, "_job_service", None), getattr(result, "_job_id", None)
        if isinstance(stub, beam_job_api_pb2_grpc.JobServiceStub) and job_id:
            return cls(stub, job_id)
        return None

    def state(self) -> str:
        """The job's state, as ``PipelineState`` names it."""
        response = self._stub.GetState(beam_job_api_pb2.GetJobStateRequest(job_id=self.job_id), timeout=CALL_TIMEOUT_S)
        return getattr(PipelineState, state_name(response.state))

    def counters(self, namespace: str) -> dict[str, int]:
        """The job's counters of ``namespace`` now (committed, else attempted), by name."""
        response = self._stub.GetJobMetrics(
            beam_job_api_pb2.GetJobMetricsRequest(job_id=self.job_id), timeout=CALL_TIMEOUT_S
        )
        found = PortableMetrics(response).query(MetricsFilter().with_namespace(namespace))["counters"]
        values: dict[str, int] = {}
        for counter in found:
            name = counter.key.metric.name
            values[name] = values.get(name, 0) + (counter.committed or counter.attempted or 0)
        return values

    def cancel(self, timeout: float = CALL_TIMEOUT_S) -> None:
        self._stub.Cancel(beam_job_api_pb2.CancelJobRequest(job_id=self.job_id), timeout=timeout)

    def errors(self) -> list[str]:
        """The error messages the job service holds for the job: its message stream read to
        its end (Prism sends a failed job's error after its final state, Beam's job service
        before it; both then end the stream), or for ``MESSAGES_TIMEOUT_S`` at most."""
        found = []
        stream = self._stub.GetMessageStream(
            beam_job_api_pb2.JobMessagesRequest(job_id=self.job_id), timeout=MESSAGES_TIMEOUT_S
        )
        try:
            for message in stream:
                if message.HasField("message_response"):
                    response = message.message_response
                    if response.importance == beam_job_api_pb2.JobMessage.JOB_MESSAGE_ERROR:
                        found.append(response.message_text)
        except grpc.RpcError:
            pass  # the deadline: what came so far is what there is
        return found

    def wait(self) -> str:
        """Ask for the job's state until it ends; its last state. Sleeps between calls, so
        Ctrl-C (``KeyboardInterrupt``) reaches the caller at once."""
        pause = FIRST_POLL_S
        while True:
            state = self.state()
            if state in TERMINAL:
                return state
            time.sleep(pause)
            pause = min(pause * 1.5, LAST_POLL_S)


def wait_until_finish(result: PipelineResult) -> str:
    """Beam's ``result.wait_until_finish()``, without its deadline for a portable job: the job's
    last state; RuntimeError with the job's last error message when it failed.

    Ctrl-C while a portable job runs cancels it (the run is abandoned, its temporary outputs
    are removed: a job left running would write into a directory that is gone)."""
    service = JobService.of(result)
    if service is None:
        return result.wait_until_finish()
    try:
        state = service.wait()
    except KeyboardInterrupt:
        with contextlib.suppress(Exception):
            service.cancel(timeout=5)
        raise
    finally:
        # What Beam's wait does once the job ended: stop the LOOPBACK worker pool it started.
        cleanup = getattr(result, "_cleanup", None)
        if cleanup is not None:
            with contextlib.suppress(Exception):
                cleanup()
    if state == PipelineState.FAILED:
        errors = service.errors()
        raise RuntimeError(
            f"job {service.job_id} failed: {errors[-1] if errors else 'the job service holds no error message'}"
        )
    return state
