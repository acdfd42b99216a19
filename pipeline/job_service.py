"""A portable job's state, live counters and errors, asked of its job service call by call.

Beam's ``PipelineResult`` for portable runners (Prism, Flink, Spark) is not made for a job that
runs for hours:

- ``wait_until_finish`` reads the job's state stream, which Beam opened at submission with a
  deadline of ``--job_server_timeout`` (300 s): any longer run ends in ``DEADLINE_EXCEEDED``;
- ``metrics()`` asks once and caches its first answer, so live counters never move.

``JobService`` asks the job service directly instead: ``GetState`` and ``GetJobMetrics`` each
time (no deadline spans the run), ``GetMessageStream`` for a failed job's error, with a deadline
of its own. ``--job_server_timeout`` still bounds Beam's calls that prepare and submit the job.
"""

from __future__ import annotations

import logging

import grpc
from apache_beam.metrics import MetricsFilter
from apache_beam.portability.api import beam_job_api_pb2, beam_job_api_pb2_grpc
from apache_beam.runners.portability.portable_runner import PortableMetrics
from apache_beam.runners.runner import PipelineState

LOG = logging.getLogger("convnorm")

#: Seconds to collect a finished job's messages (its error) for.
MESSAGES_TIMEOUT_S = 10.0

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
    """The one job of a job service convnorm started (``find_job``), asked call by call."""

    def __init__(self, endpoint: str) -> None:
        self._channel = grpc.insecure_channel(endpoint)
        self._stub = beam_job_api_pb2_grpc.JobServiceStub(self._channel)
        self.job_id: str | None = None

    def close(self) -> None:
        self._channel.close()

    def find_job(self) -> str | None:
        """The id of the service's only job (a Prism convnorm started runs one job); None if
        there is not exactly one."""
        jobs = self._stub.GetJobs(beam_job_api_pb2.GetJobsRequest(), timeout=30).job_info
        self.job_id = jobs[0].job_id if len(jobs) == 1 else None
        return self.job_id

    def state(self) -> str:
        """The job's state, as ``PipelineState`` names it."""
        response = self._stub.GetState(beam_job_api_pb2.GetJobStateRequest(job_id=self.job_id), timeout=30)
        return getattr(PipelineState, state_name(response.state))

    def counters(self, namespace: str) -> dict[str, int]:
        """The job's counters of ``namespace`` now (committed, else attempted), by name."""
        response = self._stub.GetJobMetrics(beam_job_api_pb2.GetJobMetricsRequest(job_id=self.job_id), timeout=30)
        found = PortableMetrics(response).query(MetricsFilter().with_namespace(namespace))["counters"]
        values: dict[str, int] = {}
        for counter in found:
            name = counter.key.metric.name
            values[name] = values.get(name, 0) + (counter.committed or counter.attempted or 0)
        return values

    def cancel(self) -> None:
        self._stub.Cancel(beam_job_api_pb2.CancelJobRequest(job_id=self.job_id), timeout=30)

    def errors(self) -> list[str]:
        """The error messages the job service holds for the job (read for a few seconds)."""
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
                elif message.state_response.state in (
                    beam_job_api_pb2.JobState.DONE,
                    beam_job_api_pb2.JobState.FAILED,
                    beam_job_api_pb2.JobState.CANCELLED,
                ):
                    break
        except grpc.RpcError:
            pass  # the deadline: what came so far is what there is
        return found
