"""Bad input never crashes a call-log reader: every sample, with any one of its values (also
inside the JSON strings that exports nest) replaced by a value of another type, is read or
refused with a FormatError, nothing else."""

from __future__ import annotations

import copy
import json
from typing import Any, Iterator

import pytest
from test_calllogs_detect import all_samples

from transforms.calllogs.readers import CALL_LOG_READERS
from transforms.formats import FormatError

#: A step into a JSON string: decode it, go on inside, encode it again.
JSON = object()
WEIRD: list[Any] = [None, 1, 1.5, True, "x", "", [], {}, [1], {"a": 1}, [{}], '{"a": [1]}', "[1, 2]"]


def _json(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return None


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every place in ``value``: keys, the first three entries of lists, inside JSON strings."""
    yield prefix
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from paths(inner, (*prefix, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value[:3]):
            yield from paths(inner, (*prefix, index))
    else:
        inner = _json(value)
        if isinstance(inner, (dict, list)):
            yield from (p for p in paths(inner, (*prefix, JSON)) if len(p) > len(prefix) + 1)


def replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    step, rest = path[0], path[1:]
    if step is JSON:
        return json.dumps(replaced(json.loads(value), rest, new))
    copied = copy.copy(value)
    copied[step] = replaced(value[step], rest, new)
    return copied


@pytest.mark.slow
@pytest.mark.parametrize(("reader", "record"), all_samples(), ids=lambda v: v if isinstance(v, str) else "")
def test_any_value_replaced_is_read_or_refused(reader, record):
    read = CALL_LOG_READERS[reader].read
    crashes = []
    for path in paths(record):
        for new in WEIRD:
            try:
                read(replaced(record, path, new))
            except FormatError:
                pass
            except Exception as error:  # noqa: BLE001 — the test lists every crash
                crashes.append(f"{path} = {new!r}: {type(error).__name__}: {error}")
    assert crashes == []
