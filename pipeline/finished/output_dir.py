"""Opening a finished output directory: its JSON files (``read_json``; ``DamagedRun`` when one
is not what convnorm writes), the lines of its drops/ and dead_letter/ files of a batch or a
streaming run (``matched``, ``json_lines``, ``drop_lines``), a streaming output's windows
(``windows``), and the settings the run used (``run_settings``, from its manifest). The report
and ``convnorm explain`` read an output through here."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import Iterable, Iterator

import orjson

from pipeline.io.output_names import DROPS_PATTERNS, STREAMING_MARKER
from transforms.record.record_settings import Settings


class DamagedRun(ValueError):
    """A file of the run's outputs that cannot be read as convnorm wrote it; says which, where."""


def matched(output: str, patterns: Iterable[str]) -> list[str]:
    from pipeline.io.files import matching  # the output literally: `out[1]` is not `out1`

    paths: list[str] = []
    for pattern in patterns:
        paths += matching(output, *pattern.split("/"))
    return paths


def json_lines(paths: Iterable[str]) -> Iterator[dict]:
    from apache_beam.io.filesystems import FileSystems

    for path in paths:
        with FileSystems.open(path) as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    record = orjson.loads(line)  # one line per conversation: millions in a big run
                except orjson.JSONDecodeError as error:
                    raise DamagedRun(f"{path}:{number}: not a JSON line ({error})") from None
                if not isinstance(record, dict):
                    raise DamagedRun(f"{path}:{number}: not a JSON object")
                yield record


def read_json(path: str) -> dict | None:
    """A JSON document on any Beam filesystem; ``None`` when it is not there."""
    from apache_beam.io.filesystems import FileSystems

    if not FileSystems.exists(path):
        return None
    with FileSystems.open(path) as handle:
        try:
            document = json.loads(handle.read())
        except ValueError as error:
            raise DamagedRun(f"{path}: not a JSON document ({error})") from None
    if not isinstance(document, dict):
        raise DamagedRun(f"{path}: not a JSON object")
    return document


@dataclass
class Window:
    name: str
    summary: dict


def windows(output: str) -> list[Window]:
    """A streaming output's window summaries (``OUT/<window>/summary.json``), by window name."""
    from apache_beam.io.filesystems import FileSystems

    if not FileSystems.exists(FileSystems.join(output, STREAMING_MARKER)):
        return []
    return [
        Window(path.rstrip("/").rsplit("/", 2)[-2], read_json(path) or {})
        for path in matched(output, ["*/summary.json"])
    ]


def drop_lines(output: str, patterns: tuple[str, ...] = DROPS_PATTERNS) -> Iterator[bytes]:
    """Every line of a run's drops/ (or, with ``DEAD_LETTER_PATTERNS``, dead_letter/), batch or
    streaming layout, in file name order."""
    from apache_beam.io.filesystems import FileSystems

    from pipeline.io.files import matching  # the output literally: `out[1]` is not `out1`

    for pattern in patterns:
        for path in matching(output, *pattern.split("/")):
            with FileSystems.open(path) as handle:
                yield from handle


def run_settings(output: str) -> tuple[Settings, int]:
    """The record settings and --max-record-bytes of the run that wrote ``output`` (its manifest)."""
    from apache_beam.io.filesystems import FileSystems

    from pipeline.config.checks import record_settings
    from pipeline.config.flags import our_flags

    pass
    from pipeline.io.output_names import MANIFEST_FILE
    from transforms.record.inputs import DEFAULT_MAX_RECORD_BYTES

    manifest = read_json(FileSystems.join(output, MANIFEST_FILE)) or {}
    options = manifest.get("options")
    options = options if isinstance(options, dict) else {}
    if "options" not in manifest:
        # A streaming output keeps no manifest of its options: its summary names its --redact.
        summary = read_json(FileSystems.join(output, "summary.json")) or {}
        if isinstance(summary.get("redact"), str):
            options = {**options, "redact": summary["redact"]}
    defaults = {dest: action.default for dest, action in our_flags().actions.items()}
    given = {**defaults, **{k: v for k, v in options.items() if v is not None}}
    # The run's own mapping of options to settings (--drop-role and --map-role included); the
    # explanation writes nothing, so the writer's options do not matter here.
    settings = record_settings(argparse.Namespace(**given))
    return settings, int(given.get("max_record_bytes") or DEFAULT_MAX_RECORD_BYTES)
