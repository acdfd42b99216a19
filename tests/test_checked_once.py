"""A run checks its options once, parses them once with Beam's parser and reads its preset once:
the command line's check before Beam's import is handed on (``pipeline.config.precheck.CheckedArgs``)."""

from __future__ import annotations

from pathlib import Path

from pipeline.cli.main import main
from pipeline.config import options, precheck, presets

SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "conversations.jsonl"


def _counted(monkeypatch, module, name: str, calls: list) -> None:
    real = getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(name)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)


def test_a_run_checks_parses_and_reads_its_preset_once(tmp_path, monkeypatch, capsys):
    preset = tmp_path / "preset.yaml"
    preset.write_text(f"input: [{SAMPLE}]\nbatch_size: 64\n")
    checks, reads, parses = [], [], []
    _counted(monkeypatch, precheck, "check_args", checks)  # the command line's, and private_network's
    _counted(monkeypatch, options, "check_args", checks)  # load_job's and parse_options' own, when not handed one
    for module in (presets, precheck, options):
        _counted(monkeypatch, module, "read_preset", reads)
    _counted(monkeypatch, options, "parse_known", parses)  # Beam's parser
    assert main(["--config", str(preset), "--output", str(tmp_path / "out"), "--dry-run"]) == 0
    assert "plan" in capsys.readouterr().out.lower()
    assert (len(checks), len(reads), len(parses)) == (1, 1, 1)
