"""Benchmark: where the bundled sample run's time goes, start to finish (issue 11: < 2 s idle).

A report, not a test: it prints figures and exits 0 (unless the run itself fails).

    python bench/bench_startup.py               # 3 runs of `convnorm --config configs/local.yaml`
    python bench/bench_startup.py --repeat 5    # more runs; the table shows the median

Each run is a fresh subprocess (``--_child``) that runs ``pipeline.cli.main`` on the config
with its phases wrapped in timers: imports (``pipeline.main`` and so Apache Beam), options
and planning, the graph build (``execute.construct_pipeline``), the lock and output checks,
the pipeline itself (FnApiRunner, in-process, with the progress display), finalize (renames,
checks, manifest) and report.html (matplotlib's import, then the page); the run is --quiet, so
no summary table is printed.
Wall and CPU seconds of each phase (CPU: this process; FnApiRunner runs in it), and the
whole subprocess's wall time from ``exec`` to exit as the user sees it, beside a bare
``python -c pass`` for the interpreter's own start. The output goes to a temporary
directory; the config's ``out/`` is not touched.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TARGET_SECONDS = 2.0
CONFIG = "configs/local.yaml"

#: Phase names in the order they happen.
PHASES = (
    "import",
    "options",
    "graph build",
    "lock + checks",
    "pipeline run",
    "finalize",
    "report: matplotlib import",
    "report: page",
    "other",
)


def _loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


class _Clock:
    """Wall and CPU seconds per phase; nested phases are taken out of the enclosing one."""

    def __init__(self) -> None:
        self.spent = {name: [0.0, 0.0] for name in PHASES}
        self._stack: list[str] = []

    def wrap(self, name: str, fn):
        def timed(*args, **kwargs):
            wall, cpu = time.perf_counter(), time.process_time()
            self._stack.append(name)
            try:
                return fn(*args, **kwargs)
            finally:
                self._stack.pop()
                dw, dc = time.perf_counter() - wall, time.process_time() - cpu
                self.spent[name][0] += dw
                self.spent[name][1] += dc
                if self._stack:  # the enclosing phase did not spend this
                    self.spent[self._stack[-1]][0] -= dw
                    self.spent[self._stack[-1]][1] -= dc

        return timed


def child(config: str, out_dir: str, result_path: str) -> int:
    wall0, cpu0 = time.perf_counter(), time.process_time()
    clock = _Clock()

    def imports():
        from pipeline import cli  # what the console command does before it runs main

        cli.quiet_beam_noise()
        cli.import_beam_without_pandas()
        import pipeline.main  # noqa: F401 — Apache Beam and the whole job

    clock.wrap("import", imports)()
    import pipeline.execute as execute
    import pipeline.main as main
    import pipeline.outputs as owned
    import pipeline.report as report

    pandas = "pandas" in sys.modules

    main.load_job = clock.wrap("options", main.load_job)
    execute.construct_pipeline = clock.wrap("graph build", execute.construct_pipeline)
    execute.locks.acquire = clock.wrap("lock + checks", execute.locks.acquire)
    owned.check_output = clock.wrap("lock + checks", owned.check_output)
    main.run_pipeline = clock.wrap("pipeline run", main.run_pipeline)
    owned.finalize = clock.wrap("finalize", owned.finalize)
    owned.write_manifest = clock.wrap("finalize", owned.write_manifest)
    report._pyplot = clock.wrap("report: matplotlib import", report._pyplot)
    owned.write_page = clock.wrap("report: page", owned.write_page)
    argv = ["--config", config, "--output", out_dir, "--quiet"]
    status = main.main(argv)
    total_wall, total_cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    accounted = [sum(v[i] for v in clock.spent.values()) for i in (0, 1)]
    clock.spent["other"] = [total_wall - accounted[0], total_cpu - accounted[1]]
    with open(result_path, "w") as handle:
        json.dump(
            {
                "status": status,
                "phases": clock.spent,
                "in_python": [total_wall, total_cpu],
                "report": os.path.exists(os.path.join(out_dir, "report.html")),
                "pandas": pandas,
            },
            handle,
        )
    return status


def _run(argv: list[str], env: dict) -> tuple[float, float, int]:
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=str(REPO), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    if code:
        sys.stderr.write(err[-3000:])
    return wall, usage.ru_utime + usage.ru_stime, code


def run_bench(args) -> int:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    print(
        f"sample run start-up: `convnorm --config {args.config}` ({args.repeat} runs, median); "
        f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}; load average before: {_loadavg()}",
        flush=True,
    )
    bare = [_run([sys.executable, "-c", "pass"], env)[:2] for _ in range(args.repeat)]
    runs = []
    with tempfile.TemporaryDirectory(prefix="convnorm-startup-") as work:
        for i in range(args.repeat):
            result = os.path.join(work, f"phases-{i}.json")
            wall, cpu, code = _run(
                [
                    sys.executable,
                    str(Path(__file__).resolve()),
                    "--_child",
                    args.config,
                    os.path.join(work, f"out-{i}"),
                    result,
                ],
                env,
            )
            if code:
                print(f"run {i + 1} exited with status {code}")
                return 1
            data = json.loads(Path(result).read_text())
            runs.append((wall, cpu, data))
            print(f"  run {i + 1}: {wall:.2f} s wall, {cpu:.2f} s CPU (load {_loadavg()})", flush=True)

    def med(values):
        return statistics.median(values)

    print()
    print(f"{'phase':<28}{'wall s':>8}{'CPU s':>8}")
    print("-" * 44)
    print(f"{'interpreter start (bare)':<28}{med(w for w, _ in bare):>8.2f}{med(c for _, c in bare):>8.2f}")
    for name in PHASES:
        print(
            f"{name:<28}{med(d['phases'][name][0] for _, _, d in runs):>8.2f}"
            f"{med(d['phases'][name][1] for _, _, d in runs):>8.2f}"
        )
    print("-" * 44)
    wall = med(w for w, _, _ in runs)
    cpu = med(c for _, c, _ in runs)
    print(f"{'whole run (subprocess)':<28}{wall:>8.2f}{cpu:>8.2f}")
    print(
        f"\ntarget: start to finish < {TARGET_SECONDS:g} s on an idle machine: {wall:.2f} s wall "
        f"({'PASS' if wall < TARGET_SECONDS else 'MISS'}), {cpu:.2f} s CPU "
        f"({'under' if cpu < TARGET_SECONDS else 'over'} the target even without other load); "
        f"report.html written: {all(d['report'] for _, _, d in runs)}; pandas imported with Beam: "
        f"{any(d['pandas'] for _, _, d in runs)}; load average after: {_loadavg()}"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "--_child":
        return child(*argv[1:4])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs (the table shows medians)")
    parser.add_argument("--config", default=CONFIG, help="the run's config (default: the bundled sample)")
    return run_bench(parser.parse_args(argv))


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
