"""Conformance suite: every worked case of the spec's vectors.jsonl.

The vectors are the copy in ``tests/data/spec`` (never ``../shared`` at run time). Each vector
is checked field by field (``messages``, ``dropped``, ``drops``, ``healed``) so that a failure
says which part of the contract broke, plus the invariants every result must satisfy.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # CI installs the project editable; a bare venv may not have it
    sys.path.insert(0, str(ROOT))

from transforms.core.normalize import REASONS, NormalizeResult, normalize_conversation  # noqa: E402

VECTORS_PATH = Path(__file__).parent / "data" / "spec" / "vectors.jsonl"


def _load_vectors() -> list[dict]:
    with VECTORS_PATH.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


VECTORS = _load_vectors()
IDS = [v["name"] for v in VECTORS]


def test_vector_file_is_complete():
    # The spec ships 22 worked cases with unique names and every field filled in.
    assert len(VECTORS) == 22
    assert len(set(IDS)) == len(IDS)
    for vector in VECTORS:
        assert {"name", "input", "expected", "dropped", "drops", "healed"} <= set(vector)


@pytest.fixture(scope="module")
def results() -> dict[str, tuple[NormalizeResult, object]]:
    """Normalize every vector once; remember a deep copy of the input taken beforehand."""
    out = {}
    for vector in VECTORS:
        before = copy.deepcopy(vector["input"])
        out[vector["name"]] = (normalize_conversation(vector["input"]), before)
    return out


@pytest.mark.parametrize("vector", VECTORS, ids=IDS)
def test_messages(vector, results):
    result, _ = results[vector["name"]]
    assert result.messages == vector["expected"]
    # Key order is part of the flat shape: compare it too (== on dicts ignores order).
    assert [list(m) for m in result.messages] == [list(m) for m in vector["expected"]]
    for got, want in zip(result.messages, vector["expected"]):
        for got_call, want_call in zip(got.get("tool_calls", ()), want.get("tool_calls", ())):
            assert list(got_call) == list(want_call)


@pytest.mark.parametrize("vector", VECTORS, ids=IDS)
def test_dropped(vector, results):
    result, _ = results[vector["name"]]
    assert result.dropped == vector["dropped"]


@pytest.mark.parametrize("vector", VECTORS, ids=IDS)
def test_drops(vector, results):
    result, _ = results[vector["name"]]
    assert result.drops == vector["drops"]
    # Canonical reason order, and the tally adds up to the drop count.
    assert list(result.drops) == [r for r in REASONS if r in result.drops]
    assert sum(result.drops.values()) == result.dropped


@pytest.mark.parametrize("vector", VECTORS, ids=IDS)
def test_healed(vector, results):
    result, _ = results[vector["name"]]
    assert result.healed == vector["healed"]


@pytest.mark.parametrize("vector", VECTORS, ids=IDS)
def test_input_not_mutated(vector, results):
    result, before = results[vector["name"]]
    assert vector["input"] == before


@pytest.mark.parametrize("vector", VECTORS, ids=IDS)
def test_expected_output_is_a_fixed_point(vector):
    # Idempotence on every vector: the expected output normalizes to itself, nothing dropped.
    again = normalize_conversation(copy.deepcopy(vector["expected"]))
    assert again.messages == vector["expected"]
    assert (again.dropped, again.drops, again.healed) == (0, {}, 0)
