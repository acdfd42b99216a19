"""Waiting for a portable job through its job service (pipeline.runners.job_service), without a network:
a stub answers as Prism and Beam's job service do. The runs on Prism are in tests/test_prism.py."""

from __future__ import annotations

import pytest
from apache_beam.portability.api import beam_job_api_pb2, beam_job_api_pb2_grpc
from apache_beam.runners.runner import PipelineState

from pipeline.runners import job_service
from pipeline.runners.job_service import JobService, wait_until_finish

State = beam_job_api_pb2.JobState


def _state(state: int) -> beam_job_api_pb2.JobMessagesResponse:
    return beam_job_api_pb2.JobMessagesResponse(state_response=beam_job_api_pb2.JobStateEvent(state=state))


def _message(text: str, importance: int = beam_job_api_pb2.JobMessage.JOB_MESSAGE_ERROR):
    return beam_job_api_pb2.JobMessagesResponse(
        message_response=beam_job_api_pb2.JobMessage(message_text=text, importance=importance)
    )


class Stub(beam_job_api_pb2_grpc.JobServiceStub):
    """A job service that answers ``states`` one GetState at a time, then the last one."""

    def __init__(self, states: list[int], messages=()) -> None:  # no channel: nothing is sent
        self.states, self.messages, self.asked, self.cancelled = list(states), list(messages), 0, False

    def GetState(self, request, timeout=None):  # noqa: N802 — the gRPC method's names
        assert timeout is not None  # one call, never the run
        self.asked += 1
        state = self.states.pop(0) if len(self.states) > 1 else self.states[0]
        return beam_job_api_pb2.JobStateEvent(state=state)

    def GetMessageStream(self, request, timeout=None):  # noqa: N802
        return iter(self.messages)

    def Cancel(self, request, timeout=None):  # noqa: N802
        self.cancelled = True


class Result:
    """What Beam's portable PipelineResult holds (``pipeline.runners.job_service.JobService.of``)."""

    def __init__(self, stub: Stub) -> None:
        self._job_service, self._job_id, self.cleaned = stub, "job-001", False

    def _cleanup(self) -> None:
        self.cleaned = True

    def wait_until_finish(self):
        raise AssertionError("Beam's own wait (its state stream has a deadline) was used")


def test_a_portable_job_is_waited_for_call_by_call(monkeypatch):
    monkeypatch.setattr(job_service, "FIRST_POLL_S", 0.001)
    stub = Stub([State.STARTING, State.RUNNING, State.RUNNING, State.DONE])
    result = Result(stub)
    assert wait_until_finish(result) == PipelineState.DONE
    assert stub.asked == 4 and result.cleaned  # Beam's LOOPBACK worker pool, if any, is stopped


def test_a_failed_jobs_error_is_read_after_its_final_state():
    """Prism sends a failed job's error after the job's final state (Beam's job service, before)."""
    stub = Stub(
        [State.FAILED],
        [_message("starting", beam_job_api_pb2.JobMessage.JOB_MESSAGE_BASIC), _state(State.FAILED), _message("boom")],
    )
    with pytest.raises(RuntimeError, match="^job job-001 failed: boom$"):
        wait_until_finish(Result(stub))


def test_ctrl_c_while_waiting_cancels_the_job(monkeypatch):
    stub = Stub([State.RUNNING])

    def interrupted(seconds):
        raise KeyboardInterrupt

    monkeypatch.setattr(job_service.time, "sleep", interrupted)
    result = Result(stub)
    with pytest.raises(KeyboardInterrupt):
        wait_until_finish(result)
    assert stub.cancelled and result.cleaned


def test_other_runners_results_are_waited_for_by_beam():
    class Local:
        def wait_until_finish(self):
            return PipelineState.DONE

    assert JobService.of(Local()) is None
    assert wait_until_finish(Local()) == PipelineState.DONE
