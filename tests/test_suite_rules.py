"""The suite's own rules (tests/conftest.py) hold: an unmarked test over the fast tier's limit
is listed at the end (never failed: its verdict must not depend on the machine's speed), the
fast tier's total past ``CONVNORM_FAST_TOTAL_LIMIT`` fails the session, and no property test
runs more examples than the suite's Hypothesis profile allows."""

from __future__ import annotations

from pathlib import Path

import pytest

CONFTEST = Path(__file__).resolve().parent / "conftest.py"

SCRATCH_TESTS = """
import time

import pytest
from hypothesis import given, settings, strategies as st


def test_unmarked_and_waiting():
    time.sleep(0.5)


def test_unmarked_and_busy():
    end = time.process_time() + 0.5
    while time.process_time() < end:
        pass


@pytest.mark.slow
def test_marked_and_slow():
    time.sleep(0.5)


def test_quick():
    pass


EXAMPLES = []


# The property tests are about the example bound: exempt from the time limit.
@pytest.mark.slow
@given(st.integers())
def test_property_under_the_profile(n):
    EXAMPLES.append(n)


def test_the_profile_bounded_the_examples():
    assert 0 < len(EXAMPLES) <= 7


@pytest.mark.slow
@settings(max_examples=50)
@given(st.integers())
def test_property_asking_for_more_examples(n):
    pass


@pytest.mark.slow
@settings(max_examples=3)
@given(st.integers())
def test_property_asking_for_fewer_examples(n):
    pass
"""


#: The CPU pressure each case sees: none (a constant total), or a second of waiting between
#: any two readings (work waiting for a CPU all through every test).
NO_PRESSURE = "_cpu_stall_us = lambda: 0"
PRESSURE = "_stalls = iter(range(0, 10**15, 10**6))\n_cpu_stall_us = lambda: next(_stalls)"


@pytest.mark.slow
@pytest.mark.parametrize(
    "load, pressure",
    [(0.0, NO_PRESSURE), (100.0, NO_PRESSURE), (0.0, PRESSURE)],
    ids=["idle machine", "busy machine", "busy since the test started (CPU pressure, load average not yet up)"],
)
def test_the_fast_tier_limit_lists_slow_tests_and_the_hypothesis_bound_fails_the_tests_that_break_it(
    load, pressure, pytester, monkeypatch
):
    # The suite's conftest, with the load average and the CPU pressure this case says (the limit
    # is held to wall time on an idle machine, to CPU time on a busy one).
    pytester.makeconftest(CONFTEST.read_text() + f"\n\nos.getloadavg = lambda: ({load}, {load}, {load})\n{pressure}\n")
    pytester.makepyfile(test_scratch=SCRATCH_TESTS)
    pytester.makeini("[pytest]\nmarkers =\n    slow: slow\n")
    monkeypatch.setenv("CONVNORM_FAST_LIMIT", "0.2")
    monkeypatch.setenv("CONVNORM_HYPOTHESIS_EXAMPLES", "7")
    monkeypatch.delenv("CONVNORM_HYPOTHESIS_PROFILE", raising=False)
    monkeypatch.delenv("CONVNORM_FAST_TOTAL_LIMIT", raising=False)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v")
    busy = load > 0 or pressure == PRESSURE
    # Every test over the limit passes; the ones over it are listed at the end.
    result.assert_outcomes(passed=7, failed=0, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*test_unmarked_and_waiting PASSED*",
            "*test_unmarked_and_busy PASSED*",
            "*test_marked_and_slow PASSED*",
            "*test_property_under_the_profile PASSED*",
            "*test_the_profile_bounded_the_examples PASSED*",
            "*test_property_asking_for_more_examples ERROR*",
            "*test_property_asking_for_fewer_examples PASSED*",
        ]
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the Hypothesis bound's error, alone
    measure = " of CPU (the machine is busy)" if busy else ""
    result.stdout.fnmatch_lines(
        [
            "*unmarked tests over the fast tier's limit*",
            f"*test_unmarked_and_busy took *{measure}, over 0.2 s (CONVNORM_FAST_LIMIT)*",
            "convnorm: the fast tier's * tests took * s of CPU",
        ]
    )
    # A test that waits takes no CPU: on a busy machine its wall time says nothing, so it is
    # listed only on an idle one.
    listed_waiting = [line for line in result.outlines if "test_unmarked_and_waiting took" in line]
    assert bool(listed_waiting) is not busy
    result.stdout.fnmatch_lines(["*asks for 50 Hypothesis examples, more than the suite's profile allows (7*"])


QUICK_TESTS = """
import time


def test_busy():
    end = time.process_time() + 0.3
    while time.process_time() < end:
        pass


def test_quick():
    pass
"""


@pytest.mark.slow
@pytest.mark.parametrize("limit, fails", [("0.1", True), ("100", False)], ids=["over", "under"])
def test_the_fast_tier_total_past_its_limit_fails_the_session(limit, fails, pytester, monkeypatch):
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makepyfile(test_quick=QUICK_TESTS)
    pytester.makeini("[pytest]\nmarkers =\n    slow: slow\n")
    monkeypatch.setenv("CONVNORM_FAST_TOTAL_LIMIT", limit)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([f"convnorm: the fast tier's 2 tests took * s of CPU (limit {limit} s*"])
    assert result.ret == (pytest.ExitCode.TESTS_FAILED if fails else pytest.ExitCode.OK)
    if fails:
        result.stdout.fnmatch_lines([f"convnorm: the fast tier took * s of CPU, over {limit} s*"])
