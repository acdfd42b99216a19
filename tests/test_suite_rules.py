"""The suite's own rules (tests/conftest.py) hold: an unmarked test over the fast tier's limit
fails, and no property test runs more examples than the suite's Hypothesis profile allows."""

from __future__ import annotations

from pathlib import Path

import pytest

CONFTEST = Path(__file__).resolve().parent / "conftest.py"

SCRATCH_TESTS = """
import time

import pytest
from hypothesis import given, settings, strategies as st


def test_unmarked_and_slow():
    time.sleep(0.5)


@pytest.mark.slow
def test_marked_and_slow():
    time.sleep(0.5)


def test_quick():
    pass


EXAMPLES = []


@given(st.integers())
def test_property_under_the_profile(n):
    EXAMPLES.append(n)


def test_the_profile_bounded_the_examples():
    assert 0 < len(EXAMPLES) <= 7


@settings(max_examples=50)
@given(st.integers())
def test_property_asking_for_more_examples(n):
    pass


@settings(max_examples=3)
@given(st.integers())
def test_property_asking_for_fewer_examples(n):
    pass
"""


@pytest.mark.slow
def test_the_fast_tier_limit_and_the_hypothesis_bound_fail_the_tests_that_break_them(pytester, monkeypatch):
    # The suite's conftest, on an idle machine whatever this one's load (the limit stretches
    # with the load average, which would hide a 0.5 s sleep on a busy machine).
    pytester.makeconftest(CONFTEST.read_text() + "\n\nos.getloadavg = lambda: (0.0, 0.0, 0.0)\n")
    pytester.makepyfile(test_scratch=SCRATCH_TESTS)
    pytester.makeini("[pytest]\nmarkers =\n    slow: slow\n")
    monkeypatch.setenv("CONVNORM_FAST_LIMIT", "0.2")
    monkeypatch.setenv("CONVNORM_HYPOTHESIS_EXAMPLES", "7")
    monkeypatch.delenv("CONVNORM_HYPOTHESIS_PROFILE", raising=False)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=5, failed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*test_unmarked_and_slow FAILED*",
            "*test_marked_and_slow PASSED*",
            "*test_property_under_the_profile PASSED*",
            "*test_the_profile_bounded_the_examples PASSED*",
            "*test_property_asking_for_more_examples ERROR*",
            "*test_property_asking_for_fewer_examples PASSED*",
        ]
    )
    result.stdout.fnmatch_lines(["*over the fast tier's 0.2 s*mark it @pytest.mark.slow*"])
    result.stdout.fnmatch_lines(["*asks for 50 Hypothesis examples, more than the suite's profile allows (7*"])
