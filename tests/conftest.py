"""What every test shares: the fast tier's time limit, one Hypothesis profile, the shared runs.

- **The fast tier** is ``python -m pytest -m "not slow"``. A test whose call takes a second or
  more (measured with ``--durations`` on an idle machine) carries ``@pytest.mark.slow``. An
  unmarked test whose call takes more than ``CONVNORM_FAST_LIMIT`` seconds (2 by default) is
  listed at the end of the run, never failed: a test's verdict must not depend on the machine's
  speed. It is measured in wall time, or in CPU time when the machine is busy (a load average
  above its cores, or other work waiting for a CPU during the test: Linux's CPU pressure), where
  other work stretches wall times. The fast tier's total CPU time is printed too, and
  ``CONVNORM_FAST_TOTAL_LIMIT`` (CPU seconds, set by ``.ci/run``) fails the session past it: one
  generous bound on the whole tier, not a stopwatch on each test.
- **Hypothesis** runs every property test under one profile, registered here before any test
  module that uses Hypothesis is imported (the others never import it): the same examples on
  every run (derandomized, no example database, no deadline), at most
  ``CONVNORM_HYPOTHESIS_EXAMPLES`` of them (100 by default). ``CONVNORM_HYPOTHESIS_PROFILE=explore``
  draws fresh random examples, ten times as many, to explore by hand.
- **Shared runs**: the session-scoped ``sample_run`` is one run of the bundled sample, and every
  test about that run's outputs reads it (``SampleRun``: its directory, exit status and output).
"""

from __future__ import annotations

import io
import os
import resource
import time
from contextlib import redirect_stdout
from pathlib import Path
from typing import NamedTuple

import pytest

#: Runs pytest on a scratch test file (tests/test_suite_rules.py checks the hooks below).
pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "conversations.jsonl"
#: A small input of every fate: a clean conversation, one with drops, a line that is not JSON.
SMALL_LINES = (
    b'{"id":"a","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]}\n'
    b'{"id":"b","messages":[{"role":"tool","content":"orphan","tool_call_id":"t"},{"role":"user","content":"x"}]}\n'
    b"not json\n"
)

# --------------------------------------------------------------------------------------------
# The fast tier's limit

FAST_LIMIT_ENV = "CONVNORM_FAST_LIMIT"
DEFAULT_FAST_LIMIT_S = 2.0
_CPU = pytest.StashKey[float]()
_CONTENDED = pytest.StashKey[bool]()


def fast_limit() -> float:
    """Seconds an unmarked test's call may take (0: no limit)."""
    return max(float(os.environ.get(FAST_LIMIT_ENV, DEFAULT_FAST_LIMIT_S)), 0.0)


#: Linux's CPU pressure (PSI): its first line's ``total`` is the microseconds, since boot, in
#: which some task waited for a CPU.
CPU_PRESSURE = "/proc/pressure/cpu"
#: Share of a test's wall time in which work waited for a CPU past which its wall time says
#: little. The load average alone lags by a minute: a test that started as other work did was
#: held to its wall time and failed at 2.1 s for a 1.3 s call.
BUSY_STALL_SHARE = 0.1


def machine_is_busy() -> bool:
    """More runnable work than cores (the load average): wall times here say little."""
    try:
        return os.getloadavg()[0] > (os.cpu_count() or 1)
    except OSError:  # no load average on this platform
        return False


def _cpu_stall_us() -> int | None:
    """Microseconds since boot in which some task waited for a CPU, or None (no PSI here)."""
    try:
        with open(CPU_PRESSURE, encoding="ascii") as handle:
            return int(handle.readline().rsplit("total=", 1)[1])
    except (OSError, IndexError, ValueError):
        return None


def _cpu_seconds() -> float:
    """CPU time of this process and of the subprocesses it has waited for."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    before, stall_before, start = _cpu_seconds(), _cpu_stall_us(), time.perf_counter()
    yield
    item.stash[_CPU] = _cpu_seconds() - before
    stall_after = _cpu_stall_us()
    if stall_before is not None and stall_after is not None:
        wall_us = (time.perf_counter() - start) * 1e6
        item.stash[_CONTENDED] = stall_after - stall_before > BUSY_STALL_SHARE * wall_us


#: Names of the user properties a test's report carries to the controller (xdist included).
_CPU_PROPERTY, _OVER_PROPERTY = "convnorm_cpu_s", "convnorm_over_fast_limit"
FAST_TOTAL_LIMIT_ENV = "CONVNORM_FAST_TOTAL_LIMIT"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or item.get_closest_marker("slow") is not None:
        return
    cpu = item.stash.get(_CPU, 0.0)
    report.user_properties.append((_CPU_PROPERTY, cpu))
    limit = fast_limit()
    if not limit or not report.passed:
        return
    # On a busy machine a test's wall time grows with everything else running: its CPU time
    # (its own and its subprocesses') hardly does, so that is what is held to the limit there.
    busy = machine_is_busy() or item.stash.get(_CONTENDED, False)
    took, measure = (cpu, " of CPU (the machine is busy)") if busy else (report.duration, "")
    if took > limit:
        report.user_properties.append((_OVER_PROPERTY, f"{took:.1f} s{measure}"))


class _FastTier:
    """What the unmarked tests took, gathered where the reports arrive (xdist's controller)."""

    cpu_s = 0.0
    count = 0
    over: list[tuple[str, str]] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for name, value in report.user_properties:
        if name == _CPU_PROPERTY:
            _FastTier.cpu_s += float(value)  # type: ignore[arg-type]
            _FastTier.count += 1
        elif name == _OVER_PROPERTY:
            _FastTier.over.append((report.nodeid, str(value)))


def _fast_total_limit() -> float | None:
    value = os.environ.get(FAST_TOTAL_LIMIT_ENV)
    return float(value) if value else None


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if not _FastTier.count:
        return
    write = terminalreporter.write_line
    if _FastTier.over:
        terminalreporter.section("unmarked tests over the fast tier's limit")
        for nodeid, took in sorted(_FastTier.over):
            write(f"{nodeid} took {took}, over {fast_limit():g} s ({FAST_LIMIT_ENV}): mark it slow or make it faster")
    line = f"convnorm: the fast tier's {_FastTier.count} tests took {_FastTier.cpu_s:.0f} s of CPU"
    limit = _fast_total_limit()
    if limit is not None:
        line += f" (limit {limit:g} s, {FAST_TOTAL_LIMIT_ENV})"
    write(line)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    limit = _fast_total_limit()
    if limit is None or hasattr(session.config, "workerinput") or _FastTier.cpu_s <= limit:
        return
    # One bound on the whole tier, far above what it takes (see CONTRIBUTING.md): the tier grew
    # past what a between-edits loop can be, not one test had a slow moment.
    print(f"\nconvnorm: the fast tier took {_FastTier.cpu_s:.0f} s of CPU, over {limit:g} s ({FAST_TOTAL_LIMIT_ENV})")
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


# --------------------------------------------------------------------------------------------
# Hypothesis: one profile, registered before the first module that uses it is imported

HYPOTHESIS_EXAMPLES_ENV = "CONVNORM_HYPOTHESIS_EXAMPLES"
HYPOTHESIS_PROFILE_ENV = "CONVNORM_HYPOTHESIS_PROFILE"
DEFAULT_EXAMPLES = 100
_profile_loaded = False


def _load_hypothesis_profile() -> None:
    global _profile_loaded
    if _profile_loaded:
        return
    from hypothesis import HealthCheck, settings

    examples = int(os.environ.get(HYPOTHESIS_EXAMPLES_ENV, DEFAULT_EXAMPLES))
    settings.register_profile(
        "convnorm",
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,  # a long generated list can take longer on a loaded machine: not a bug
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    settings.register_profile(
        "explore",
        parent=settings.get_profile("convnorm"),
        max_examples=int(os.environ.get(HYPOTHESIS_EXAMPLES_ENV, DEFAULT_EXAMPLES * 10)),
        derandomize=False,
    )
    settings.load_profile(os.environ.get(HYPOTHESIS_PROFILE_ENV, "convnorm"))
    _profile_loaded = True


def pytest_report_header() -> str:
    # Hypothesis' own header line names the profile loaded when the session starts ('default'):
    # ours is loaded later, when the first module that uses Hypothesis is collected.
    profile = os.environ.get(HYPOTHESIS_PROFILE_ENV, "convnorm")
    return f"convnorm: Hypothesis profile {profile!r} for property tests (tests/conftest.py)"


def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> None:
    # Before the module is imported: its @given / @settings read the loaded profile.
    if not _profile_loaded and "hypothesis" in module_path.read_text(encoding="utf-8"):
        _load_hypothesis_profile()


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A property test may ask for fewer examples than the profile (a whole run per example),
    never for more: the profile's bound holds everywhere."""
    own = getattr(getattr(item, "obj", None), "_hypothesis_internal_use_settings", None)
    if own is None:
        return
    from hypothesis import settings

    if own.max_examples > settings.default.max_examples:
        pytest.fail(
            f"{item.nodeid} asks for {own.max_examples} Hypothesis examples, more than the suite's "
            f"profile allows ({settings.default.max_examples}, {HYPOTHESIS_EXAMPLES_ENV}): drop its "
            "max_examples, or bound it with min(n, settings.default.max_examples)",
            pytrace=False,
        )


# --------------------------------------------------------------------------------------------
# Shared runs


class SampleRun(NamedTuple):
    """``convnorm --input samples/conversations.jsonl --output OUT``, run once per session."""

    out: Path
    status: int
    #: What the run printed on stdout (the summary table and the outputs line).
    stdout: str


@pytest.fixture(scope="session")
def sample_run(tmp_path_factory: pytest.TempPathFactory) -> SampleRun:
    from pipeline.cli.main import main

    out = tmp_path_factory.mktemp("sample") / "out"
    printed = io.StringIO()
    with redirect_stdout(printed):
        status = main(["--input", str(SAMPLE), "--output", str(out)])
    return SampleRun(out, status, printed.getvalue())


@pytest.fixture
def small(tmp_path: Path) -> Path:
    """``SMALL_LINES`` as ``in.jsonl`` in the test's directory."""
    path = tmp_path / "in.jsonl"
    path.write_bytes(SMALL_LINES)
    return path
