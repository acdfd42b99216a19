"""The job on Beam's portable API: PortableRunner, a job service, an EXTERNAL worker pool.

This is the path Flink, Spark and Dataflow take: the driver (``python -m pipeline``) turns
the graph into a Runner API proto and submits it to a job service over gRPC; the job service
asks a separate worker-pool process to start SDK worker processes, which run the DoFns
(unpickled there, importing ``pipeline`` and ``transforms``) and talk to the runner over the
Fn API. Everything runs in separate processes bound to localhost (see ``portable_services``).

The test writes a small corpus with the defects the spec cares about, runs the job through
the portable path, checks the exit status, the accounting of ``summary.json`` and the counts,
and checks that every output is byte-identical to a run of the same input on the default
in-process FnApiRunner. The job runs as a subprocess with a timeout, so a hang fails the
test (with the services' logs) instead of hanging CI; services that cannot start fail it too.

Deselect with ``-m "not portable"``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from portable_services import (  # noqa: E402
    ServiceError,
    kill_group,
    popen_in_group,
    service_env,
    start_services,
    tail,
)

#: Wall-clock limit for one run of the job (the portable run takes seconds when healthy).
JOB_TIMEOUT_S = 240
#: Limit for each service to start serving.
SERVICE_START_TIMEOUT_S = 60
#: Small batches, so each input shard is several batches and output order is exercised.
BATCH_SIZE = 4

# --------------------------------------------------------------------------------------------
# The corpus: 30 conversations in two files (two shards), one invalid line, one blank line

UNANSWERED, ORPHAN, LEADING, REUSED = 3, 7, 12, 20
N_CONVERSATIONS = 30
SPLIT = 15  # conversations 0..14 in a.jsonl, 15..29 in b.jsonl
INVALID_AFTER = 7  # the invalid JSON line follows conversation 7 (in a.jsonl)
BLANK_AFTER = 22  # a blank line follows conversation 22 (in b.jsonl)


def _call(call_id: str, name: str = "lookup", args=None) -> dict:
    return {"tool_call_id": call_id, "name": name, "args": {"q": call_id} if args is None else args}


def _conversation(i: int) -> dict:
    cid = f"conv-{i:02d}"
    if i == UNANSWERED:  # a call nobody answered: healed with a synthetic result
        messages = [
            {"role": "user", "content": "weather in Zürich?"},
            {"role": "assistant", "content": "", "tool_calls": [_call("u1", "weather")]},
        ]
    elif i == ORPHAN:  # a result for a call never declared: dropped (orphan_result)
        messages = [
            {"role": "user", "content": "hello"},
            {"role": "assistant", "content": "hi"},
            {"role": "tool", "content": "stray", "tool_call_id": "ghost"},
        ]
    elif i == LEADING:  # a result before its call, leading after system: dropped, call healed
        messages = [
            {"role": "system", "content": "be brief"},
            {"role": "tool", "content": "early", "tool_call_id": "l1"},
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": "", "tool_calls": [_call("l1")]},
        ]
    elif i == REUSED:  # an id declared twice and answered twice: redeclared_call + duplicate_result
        messages = [
            {"role": "user", "content": "twice"},
            {"role": "assistant", "content": "", "tool_calls": [_call("r1")]},
            {"role": "tool", "content": "first", "tool_call_id": "r1"},
            {"role": "assistant", "content": "again", "tool_calls": [_call("r1")]},
            {"role": "tool", "content": "second", "tool_call_id": "r1"},
            {"role": "assistant", "content": "done"},
        ]
    elif i % 3 == 0:  # a clean tool round trip, with a system prompt out of place
        messages = [
            {"role": "user", "content": f"question {i}"},
            {"role": "system", "content": "you are a tool user"},
            {"role": "assistant", "content": "", "tool_calls": [_call(f"c{i}", "search", {"n": i, "ok": True})]},
            {"role": "tool", "content": {"hits": [i, i + 1]}, "tool_call_id": f"c{i}"},
            {"role": "assistant", "content": f"found {i} — ✓"},
        ]
    elif i % 3 == 1:  # plain chat, non-ASCII text and a non-string content to cast
        messages = [
            {"role": "user", "content": f"grüß dich {i} 🙂"},
            {"role": "assistant", "content": i * 1.5},
        ]
    else:  # plain chat with extra record fields that must survive in place
        messages = [
            {"role": "user", "content": f"q{i}"},
            {"role": "assistant", "content": f"a{i}"},
            {"role": "user", "content": None},
        ]
    return {"id": cid, "meta": {"n": i, "tags": ["t", i]}, "messages": messages}


CONVERSATIONS = [_conversation(i) for i in range(N_CONVERSATIONS)]


def _write_corpus(directory: Path) -> str:
    directory.mkdir()
    a, b = [], []
    for i, conversation in enumerate(CONVERSATIONS):
        lines = a if i < SPLIT else b
        lines.append(json.dumps(conversation, ensure_ascii=False))
        if i == INVALID_AFTER:
            lines.append('{"id": "broken", "messages": [')
        if i == BLANK_AFTER:
            lines.append("")
    (directory / "a.jsonl").write_text("\n".join(a) + "\n", encoding="utf-8")
    (directory / "b.jsonl").write_text("\n".join(b) + "\n", encoding="utf-8")
    return str(directory / "*.jsonl")


MESSAGES_IN = sum(len(c["messages"]) for c in CONVERSATIONS)
#: id -> (dropped, drops by reason, healed); every other conversation: (0, {}, 0).
EXPECTED_DROPS = {
    f"conv-{UNANSWERED:02d}": (0, {}, 1),
    f"conv-{ORPHAN:02d}": (1, {"orphan_result": 1}, 0),
    f"conv-{LEADING:02d}": (1, {"leading_tool": 1}, 1),
    f"conv-{REUSED:02d}": (2, {"redeclared_call": 1, "duplicate_result": 1}, 0),
}
MESSAGES_DROPPED = 3  # orphan, leading and duplicate results; the redeclared call is a call, not a message
HEALED = 2

# --------------------------------------------------------------------------------------------
# Fixtures and helpers


@pytest.fixture
def services(tmp_path):
    """A job service and a worker pool for the test, stopped by process group in any case."""
    work = tmp_path / "services"
    work.mkdir()
    try:
        # Stops whatever it started before raising.
        running = start_services(work, service_env(), timeout=SERVICE_START_TIMEOUT_S)
    except ServiceError as error:
        message = str(error)
    else:
        message = None
    if message is not None:
        # CI must prove the portable path: services that do not start fail the test (no skip).
        pytest.fail(f"Beam portability services did not start: {message}", pytrace=False)
    try:
        yield running
    finally:
        running.stop()


class JobRun:
    def __init__(self, name: str, returncode: int, stdout: Path, stderr: Path, seconds: float) -> None:
        self.name = name
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.seconds = seconds

    def describe(self, lines: int = 40) -> str:
        return (
            f"--- job {self.name}: exit status {self.returncode} after {self.seconds:.1f} s\n"
            f"stdout (last lines):\n{tail(self.stdout, lines)}\n"
            f"stderr (last lines):\n{tail(self.stderr, lines)}"
        )


def _run_job(name: str, args: list[str], work: Path, env: dict, diagnostics=lambda: "") -> JobRun:
    """``python -m pipeline ARGS`` in its own process group, killed (group) after JOB_TIMEOUT_S."""
    stdout, stderr = work / f"{name}.stdout", work / f"{name}.stderr"
    started = time.monotonic()
    with stdout.open("wb") as out, stderr.open("wb") as err:
        proc = popen_in_group(
            [sys.executable, "-m", "pipeline", *args],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env=env,
            cwd=work,
        )
        timed_out = False
        try:
            proc.wait(timeout=JOB_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            if proc.poll() is None:  # timed out, or interrupted (Ctrl-C) while waiting
                kill_group(proc, timeout=5)
    run = JobRun(name, proc.returncode, stdout, stderr, time.monotonic() - started)
    if timed_out:
        pytest.fail(
            f"job {name} did not finish within {JOB_TIMEOUT_S} s; killed\n{run.describe()}\n{diagnostics()}",
            pytrace=False,
        )
    return run


def _read_lines(directory: Path) -> list[dict]:
    return [
        json.loads(line)
        for path in sorted(directory.glob("part-*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
    ]


def _tree(directory: Path) -> dict[str, bytes]:
    """Relative path -> bytes of every file under ``directory`` (hidden temp dirs included)."""
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


# --------------------------------------------------------------------------------------------
# The test


@pytest.mark.slow
@pytest.mark.portable
def test_job_runs_on_portable_runner_with_external_worker_pool(tmp_path, services):
    env = service_env()
    pattern = _write_corpus(tmp_path / "input")
    portable_out, reference_out = tmp_path / "portable", tmp_path / "reference"
    common = ["--input", pattern, f"--batch-size={BATCH_SIZE}"]
    portable_flags = [
        "--runner=PortableRunner",
        f"--job_endpoint={services.job_service.address}",
        "--environment_type=EXTERNAL",
        f"--environment_config={services.worker_pool.address}",
        "--job_server_timeout=60",
    ]

    try:
        portable = _run_job(
            "portable", [*common, "--output", str(portable_out), *portable_flags], tmp_path, env, services.diagnostics
        )
        assert portable.returncode == 0, f"portable run failed\n{portable.describe()}\n{services.diagnostics()}"
        assert services.workers_started() >= 1, (
            f"the job finished but the external worker pool started no SDK worker\n{services.diagnostics()}"
        )
        print(f"portable run: {portable.seconds:.1f} s, {services.workers_started()} external worker(s)")

        # --- summary.json: accounting and counts
        summary = json.loads((portable_out / "summary.json").read_text())
        assert summary["accounted"] is True
        assert summary["records_in"] == summary["records_out"] + summary["dead_letters"]
        assert summary["records_in"] == N_CONVERSATIONS + 1  # 30 conversations + the invalid line
        assert summary["records_out"] == N_CONVERSATIONS
        assert summary["dead_letters"] == 1
        assert {k: v for k, v in summary["dead_letters_by_reason"].items() if v} == {"invalid_json": 1}
        assert summary["blank_lines"] == 1
        assert summary["messages_in"] == MESSAGES_IN
        assert summary["messages_out"] == MESSAGES_IN - MESSAGES_DROPPED + HEALED
        assert summary["dropped"] == 4
        assert {k: v for k, v in summary["dropped_by_reason"].items() if v} == {
            "redeclared_call": 1,
            "orphan_result": 1,
            "duplicate_result": 1,
            "leading_tool": 1,
        }
        assert summary["healed"] == HEALED
        assert summary["conversations_with_drops"] == 3

        # --- the outputs themselves
        normalized = _read_lines(portable_out / "normalized")
        assert [r["id"] for r in normalized] == [c["id"] for c in CONVERSATIONS]
        assert all(r["meta"] == c["meta"] for r, c in zip(normalized, CONVERSATIONS))
        drops = {d["id"]: (d["dropped"], d["drops"], d["healed"]) for d in _read_lines(portable_out / "drops")}
        assert drops == {c["id"]: EXPECTED_DROPS.get(c["id"], (0, {}, 0)) for c in CONVERSATIONS}
        letters = _read_lines(portable_out / "dead_letter")
        assert [(Path(d["source"]).name, d["reason"]) for d in letters] == [("a.jsonl", "invalid_json")]
        # The two small input files are one output part (pipeline.io.parts).
        assert sorted(p.name for p in (portable_out / "normalized").iterdir()) == ["part-00000.jsonl"]

        # --- byte-identical to the default in-process runner on the same input
        reference = _run_job("reference", [*common, "--output", str(reference_out)], tmp_path, env)
        assert reference.returncode == 0, f"FnApiRunner run failed\n{reference.describe()}"
        print(f"FnApiRunner run: {reference.seconds:.1f} s")
        for name in ("normalized", "drops", "dead_letter"):
            ours, theirs = _tree(portable_out / name), _tree(reference_out / name)
            assert list(ours) == list(theirs), f"{name}/: files differ"
            for path in ours:
                assert ours[path] == theirs[path], f"{name}/{path} differs between PortableRunner and FnApiRunner"
        assert (portable_out / "summary.json").read_bytes() == (reference_out / "summary.json").read_bytes()
    except BaseException:
        print(services.diagnostics(), file=sys.stderr)
        raise
