"""``transforms.totals.summary.partial`` reads every key a drop-metrics record may carry: the shortcut
for records with nothing optional (most) skips none that one has."""

from __future__ import annotations

import pytest

from transforms.record.output_records import DropMetrics
from transforms.totals import summary as summaries


def _plain(dropped: int = 0, **extra) -> dict:
    metrics = {
        "id": "c",
        "source": "f.jsonl",
        "position": 0,
        "dropped": dropped,
        "drops": {"orphan_result": dropped} if dropped else {},
        "healed": 1,
        "messages_in": 4,
        "messages_out": 5 - dropped,
    }
    assert set(metrics) == DropMetrics.__required_keys__
    return {**metrics, **extra}


#: An optional key of a drop-metrics record -> (its value, what the partial shows of it).
OPTIONAL = {
    "discarded": ({"name": {"fields": 2, "chars": 7}}, {"discarded": {"name": {"fields": 2, "chars": 7}}}),
    "repairs": ({"rename": 3}, {"repairs": {"rename": 3}}),
    "reader_report": ({"kept": 1}, {"reader_report": {"kept": 1}}),
    "writer_report": ({"joined": 2}, {"writer_report": {"joined": 2}}),
    "non_finite_nulled": ({"score": 1}, {"non_finite_nulled": {"score": 1}}),
    "partial_conversation": (True, {"partial_conversations": 1}),
    "violations": ({"orphan_result": 2}, {"violations": {"orphan_result": 2}, "conversations_with_violations": 1}),
}


@pytest.mark.parametrize("key", sorted(OPTIONAL))
def test_an_optional_key_alone_is_counted(key):
    value, shown = OPTIONAL[key]
    part = summaries.partial(1, [_plain(), _plain(**{key: value})])
    for name, expected in shown.items():
        assert part[name] == expected
    assert part["records_out"] == 2 and part["messages_in"] == 8


def test_the_histogram_and_drop_totals_over_records_in_any_order():
    counts = [0, 3, 0, 12, 1, 60, 3, 0, 7]
    part = summaries.partial(len(counts), [_plain(min(n, 5)) | {"dropped": n} for n in counts])
    assert part["drops_histogram"] == {"0": 3, "1": 1, "3": 2, "5-9": 1, "10-49": 1, "50+": 1}
    assert part["dropped"] == sum(counts)
    assert part["conversations_with_drops"] == 6
    assert summaries.finalize(part)["drops_histogram"] == {
        "0": 3, "1": 1, "2": 0, "3": 2, "4": 0, "5-9": 1, "10-49": 1, "50+": 1
    }  # fmt: skip
