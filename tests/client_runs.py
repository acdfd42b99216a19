"""Runs one scenario of tests/client_exports.py in its own process against fresh loopback fakes,
and gives back what was exported, as a user would have it on disk: the collector's OTLP JSON
documents, the LangSmith SDK's ingestion payloads, and the file the scenario wrote itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from client_exports import scenario_environment, script
from fake_provider import FakeCollector, FakeLangSmith, FakeProvider

HERE = Path(__file__).resolve().parent
SCENARIO_TIMEOUT_S = 180


@dataclass
class Exported:
    otlp: list[dict[str, Any]] = field(default_factory=list)
    payloads: list[dict[str, Any]] = field(default_factory=list)
    written: list[dict[str, Any]] = field(default_factory=list)
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def export(scenario: str, work: Path) -> Exported:
    work.mkdir(parents=True, exist_ok=True)
    written = work / f"{scenario}.written.jsonl"
    with FakeProvider(script()) as provider, FakeCollector() as collector, FakeLangSmith() as langsmith:
        env = {
            **{
                key: value
                for key, value in os.environ.items()
                if not key.startswith(("OTEL_", "LANGSMITH_", "LANGFUSE_"))
            },
            **scenario_environment(scenario),
            "FAKE_PROVIDER": provider.url,
            "FAKE_COLLECTOR": collector.url,
            "FAKE_LANGSMITH": langsmith.url,
            "LANGSMITH_ENDPOINT": langsmith.url,
            "LANGFUSE_HOST": collector.url,
            "LANGFUSE_BASE_URL": collector.url,
            "EXPORT_OUT": str(written),
            "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
        }
        done = subprocess.run(
            [sys.executable, str(HERE / "client_exports.py"), scenario],
            env=env,
            cwd=work,
            capture_output=True,
            timeout=SCENARIO_TIMEOUT_S,
        )
        if done.returncode != 0:
            raise AssertionError(
                f"{scenario} failed ({done.returncode}):\n{done.stderr.decode(errors='replace')[-6000:]}"
            )
        left = provider.script
        assert not left, f"{scenario}: {len(left)} scripted replies never asked for"
        lines = written.read_text(encoding="utf-8").splitlines() if written.exists() else []
        return Exported(
            list(collector.documents),
            list(langsmith.payloads),
            [json.loads(line) for line in lines if line.strip()],
            list(provider.requests),
        )


if __name__ == "__main__":
    got = export(sys.argv[1], Path(sys.argv[2]))
    Path(sys.argv[2], "otlp.jsonl").write_text("".join(json.dumps(d) + "\n" for d in got.otlp))
    Path(sys.argv[2], "payloads.jsonl").write_text("".join(json.dumps(d) + "\n" for d in got.payloads))
    Path(sys.argv[2], "written.jsonl").write_text("".join(json.dumps(d) + "\n" for d in got.written))
    print(len(got.otlp), len(got.payloads), len(got.written), len(got.requests))
