"""Call logs as the real client libraries write them: each library (installed from PyPI in the
test extra) drives two conversations against a fake provider on loopback (tests/fake_provider.py:
an agent loop with tool calls and their results and a second user turn, then a plain two-turn
chat), its telemetry is exported as a user would keep it (an OTLP collector's JSON documents, the
LangSmith SDK's ingestion payloads or its ``list_runs`` rows, LiteLLM's logging payloads),
``convnorm run`` reads the export, and each assembled conversation must be the one driven,
message by message, with no other record and no dead letter.

The scenarios are in tests/client_exports.py; each runs in a process of its own (the libraries
keep global state), which takes seconds: every test here is slow.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from client_exports import CONVERSATIONS, expected_messages
from client_runs import Exported, export

from pipeline.cli.main import main

pytestmark = pytest.mark.slow

_EXPORTS: dict[str, Exported] = {}


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    work = tmp_path_factory.mktemp("client-exports")

    def get(scenario: str) -> Exported:
        if scenario not in _EXPORTS:
            _EXPORTS[scenario] = export(scenario, work / scenario)
        return _EXPORTS[scenario]

    return get


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(row, sort_keys=True) + "\n" for row in rows), encoding="utf-8")


def export_files(exported: Exported, view: str, directory: Path) -> list[Path]:
    """The export as files on disk, the way each tool leaves it: a collector's file exporter
    writes spans and logs to two files, one document per line."""
    directory.mkdir(parents=True)
    files: dict[str, list[dict[str, Any]]] = {}
    if view == "otlp":
        files["traces.jsonl"] = [doc for doc in exported.otlp if "resourceSpans" in doc]
        files["logs.jsonl"] = [doc for doc in exported.otlp if "resourceLogs" in doc]
    elif view == "payloads":
        files["payloads.jsonl"] = exported.payloads
    else:
        files["rows.jsonl"] = exported.written
    paths = []
    for name, rows in files.items():
        if rows:
            _write(directory / name, rows)
            paths.append(directory / name)
    assert paths, f"nothing was exported for {view}"
    return paths


def run_convnorm(inputs: list[Path], out: Path, *extra: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    arguments = [arg for path in inputs for arg in ("--input", str(path))]
    assert main([*arguments, "--output", str(out), "--quiet", "--no-report", *extra]) in (0, 1)
    records = [
        json.loads(line)
        for part in sorted((out / "normalized").glob("part-*"))
        for line in part.read_text().splitlines()
    ]
    return records, json.loads((out / "summary.json").read_text())


def test_the_weather_conversation_answers_with_text_beside_a_tool_call():
    """What the legacy cases are about: an answer with text and a tool call, driven."""
    weather = next(c for c in CONVERSATIONS if c.name == "weather")
    assert any(reply.text and reply.calls for reply in weather.replies)


def assert_conversations_driven(records: list[dict[str, Any]], summary: dict[str, Any], args_as_text: bool) -> None:
    """Every conversation driven comes out once, exact, and nothing else comes out."""
    letters = {reason: n for reason, n in summary["dead_letters_by_reason"].items() if n}
    assert summary["accounted"] and not letters, letters
    got = sorted((record["messages"] for record in records), key=json.dumps)
    expected = sorted((expected_messages(conversation, args_as_text) for conversation in CONVERSATIONS), key=json.dumps)
    assert got == expected
    assert [record["id"] for record in records if "#branch" in record["id"]] == []


# (scenario, export view, arguments as JSON text). Views: "otlp" (an OTLP collector's documents),
# "payloads" (LangSmith ingestion payloads), "rows" (the file the client wrote: LangSmith list_runs
# rows, LiteLLM payloads). Call arguments are kept as the client recorded them: JSON text where the
# provider sends text (OpenAI), an object where the record holds one (OTel GenAI parts, Anthropic).
CASES = [
    ("otel-v2-span-only-parent", "otlp", False),
    ("otel-v2-span-only-parent-stream", "otlp", False),
    ("otel-v2-span-and-event-parent", "otlp", False),
    ("otel-v2-event-only-parent", "otlp", False),
    # The legacy conventions (GenAI events as log records): the history's copy of an answer with
    # text beside its tool call has lost the text; the answer's own record keeps it.
    ("otel-v2-legacy-parent", "otlp", True),
    ("otel-v2-legacy-parent-stream", "otlp", True),
    ("openinference-parent", "otlp", True),
    ("openinference-session", "otlp", True),
    ("agents-responses", "otlp", True),
    ("agents-chat", "otlp", True),
    ("langsmith-wrap-openai", "rows", True),
    ("langsmith-wrap-openai-stream", "rows", True),
    ("langsmith-wrap-openai-thread", "rows", True),
    ("langsmith-traceable", "rows", True),
    ("langsmith-wrap-anthropic", "rows", False),
    ("langfuse-trace", "otlp", True),
    ("langfuse-session", "otlp", True),
    ("langfuse-session-stream", "otlp", True),
    ("litellm-session", "rows", True),
    ("litellm-session-stream", "rows", True),
    ("litellm-anthropic-session", "rows", True),
    ("litellm-anthropic-session-stream", "rows", True),
]


@pytest.mark.parametrize(("scenario", "view", "args_as_text"), CASES, ids=[f"{s}-{v}" for s, v, _ in CASES])
def test_a_client_export_gives_the_conversations_driven(exports, tmp_path, scenario, view, args_as_text):
    exported = exports(scenario)
    records, summary = run_convnorm(export_files(exported, view, tmp_path / "input"), tmp_path / "out")
    assert_conversations_driven(records, summary, args_as_text)


# --------------------------------------------------------------------------------------------
# The same export on the other runners: two processes, DaskRunner (convnorm's own cluster on
# loopback) and the landing-directory stream on Prism give the conversations the in-process run
# gives, byte for byte.

# The legacy events too: the text a history's copy lost is put back by the same rule everywhere.
# (scenario, arguments as JSON text), as in CASES.
RUNNERS_SCENARIOS = [("otel-v2-span-and-event-parent", False), ("otel-v2-legacy-parent", True)]
RUNNERS_VIEW = "otlp"


def _assembled_lines(out: Path) -> dict[str, bytes]:
    lines = [
        line for part in sorted((out / "normalized").glob("part-*")) for line in part.read_bytes().splitlines(True)
    ]
    return {json.loads(line)["id"]: line for line in lines}


@pytest.mark.timeout(900)
@pytest.mark.parametrize(("scenario", "args_as_text"), RUNNERS_SCENARIOS, ids=[s for s, _ in RUNNERS_SCENARIOS])
def test_a_client_export_gives_the_same_conversations_on_every_runner(exports, tmp_path, scenario, args_as_text):
    import subprocess
    import sys

    from engine_outputs import assert_same_outputs

    inputs = export_files(exports(scenario), RUNNERS_VIEW, tmp_path / "input")
    records, summary = run_convnorm(inputs, tmp_path / "one")
    assert_conversations_driven(records, summary, args_as_text)
    reference = _assembled_lines(tmp_path / "one")

    run_convnorm(inputs, tmp_path / "two", "--direct_num_workers=2", "--direct_running_mode=multi_processing")
    assert_same_outputs(tmp_path / "two", tmp_path / "one", "two processes on a client export")

    pytest.importorskip("dask.distributed", reason="the dask extra is not installed (pip install -e '.[dask]')")
    argv = [arg for path in inputs for arg in ("--input", str(path))]
    dask = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipeline",
            *argv,
            "--output",
            str(tmp_path / "dask"),
            "--quiet",
            "--no-report",
            "--runner",
            "DaskRunner",
        ],
        capture_output=True,
        timeout=600,
    )
    assert dask.returncode in (0, 1), dask.stderr.decode(errors="replace")[-4000:]
    assert_same_outputs(tmp_path / "dask", tmp_path / "one", "DaskRunner on a client export")

    from streaming_runs import START_TIMEOUT_S, Streaming, land

    from pipeline.io import processed_files as processed

    landing, out = tmp_path / "landing", tmp_path / "stream"
    landing.mkdir()

    def assembled() -> list[Path]:
        return sorted(out.glob(f"*/{processed.ASSEMBLED_DIR}/{processed.ASSEMBLED_FILE}"))

    for path in inputs:  # landed before the start: one window holds them all
        land(landing, path.name, path.read_bytes())
    with Streaming(tmp_path, landing, out, "clients") as run:
        run.wait_started()
        run.wait_for(lambda: len(assembled()) >= 1, START_TIMEOUT_S, "the window's assembly")
        assert run.stop() == 0, run.text
    streamed: dict[str, bytes] = {}
    for path in assembled():
        for line in (path.parent / "normalized.jsonl").read_bytes().splitlines(True):
            streamed[json.loads(line)["id"]] = line
    assert streamed == reference


# --------------------------------------------------------------------------------------------
# Setups real applications use by default that need more than one group or record per
# conversation: calls chained across groups, parts of a call joined by key, responses chained.
# The same assertion, the whole conversation driven and nothing else.

DEFAULT_SETUPS = [
    # No parent span / no session id: each call is a trace of its own, so a group of its own;
    # a call whose history extends another's output is the same conversation all the same.
    ("otel-v2-span-only-no-parent", "otlp", False),
    ("otel-v2-span-and-event-no-parent", "otlp", False),
    # The legacy events: the text the history's copy lost comes back across groups too.
    ("otel-v2-legacy-no-parent", "otlp", True),
    ("litellm-no-session", "rows", True),
    # Each user turn a trace of its own (the session id on the application's span only).
    ("otel-v2-span-only-turn-traces", "otlp", False),
    ("otel-v2-legacy-turn-traces", "otlp", True),
    # The SDK sends a run's patch in a later payload than its post (timing: most runs).
    ("langsmith-wrap-openai", "payloads", True),
    ("langsmith-traceable", "payloads", True),
    ("langsmith-wrap-anthropic", "payloads", False),
    # Responses with previous_response_id: each call holds only the new items.
    ("openinference-responses-previous-id", "otlp", True),
    # The same without a parent span: each call a trace of its own, chained by response id
    # across groups.
    ("openinference-responses-previous-id-no-parent", "otlp", True),
]


@pytest.mark.parametrize(
    ("scenario", "view", "args_as_text"), DEFAULT_SETUPS, ids=[f"{s}-{v}" for s, v, _ in DEFAULT_SETUPS]
)
def test_a_default_setup_export_gives_the_conversations_driven(exports, tmp_path, scenario, view, args_as_text):
    exported = exports(scenario)
    records, summary = run_convnorm(export_files(exported, view, tmp_path / "input"), tmp_path / "out")
    assert_conversations_driven(records, summary, args_as_text)
