"""What the first records of each input file are, read before the run: ``--dry-run`` shows the
readers they get, and the plan (``--call-logs auto``) builds the call-log assembly only for an
input whose sample holds a call log.

Each file's first records are read exactly as the run reads them
(``transforms.record.record_steps``); nothing is written. A sample says nothing of a file's
later records: what a run does with a call log met past it is the plan's to say
(``pipeline.config.options``).
"""

from __future__ import annotations

import collections
from dataclasses import replace
from typing import Iterable

from pipeline.io.read_shard import read_shard
from pipeline.io.shard import Blank, Shard
from transforms.record.record_settings import Settings
from transforms.record.record_steps import (
    ReaderHint,
    RecordRefused,
    call_log_reader,
    parse_payload,
    read_call_log,
    read_conversation,
)

#: Records read from the start of each input file to tell which reader it gets.
SAMPLE_RECORDS = 20
#: How ``sample_readers`` names a call-log reader.
CALL_LOG_MARK = " (call log)"


def first_shards(shards: Iterable[Shard]) -> list[Shard]:
    """Each input file's first shard, in the plan's order."""
    firsts: dict[str, Shard] = {}
    for shard in shards:
        firsts.setdefault(shard.path, shard)
    return list(firsts.values())


def sample_readers(shard: Shard, settings: Settings, max_record_bytes: int, sample: int = SAMPLE_RECORDS) -> dict:
    """How the first ``sample`` records of a shard are read: reader name (or ``dead letter:
    <reason>``) -> records, in the order first seen."""
    counts: collections.Counter = collections.Counter()
    hint = ReaderHint()
    limit = min(sample, shard.limit) if shard.limit is not None else sample
    for item in read_shard(shard._replace(limit=limit), max_record_bytes):
        if isinstance(item, Blank):
            continue
        try:
            record = parse_payload(item)
            logs = call_log_reader(record, settings)
            if logs is not None:
                # Read as the run reads it: its calls, to be assembled with their conversation's.
                read_call_log(record, replace(settings, calls=True))
                counts[f"{logs.name}{CALL_LOG_MARK}"] += 1
                continue
            read_conversation(record, settings, hint)
        except RecordRefused as refused:
            counts[f"dead letter: {refused.reason.value}"] += 1
            continue
        except Exception as error:  # noqa: BLE001 — the run would make it an internal_error dead letter
            counts[f"dead letter: internal_error ({type(error).__name__})"] += 1
            continue
        counts[hint.reader.name if settings.input_format == "auto" and hint.reader else settings.input_format] += 1
    return dict(counts)


def holds_call_logs(samples: dict[str, dict]) -> bool:
    """Whether a sample (``sample_readers``' counts, by file) read a call-log record."""
    return any(name.endswith(CALL_LOG_MARK) for counts in samples.values() for name in counts)


__all__ = ["CALL_LOG_MARK", "SAMPLE_RECORDS", "first_shards", "holds_call_logs", "sample_readers"]
