"""The documentation does what it says: every command in README.md, CONTRIBUTING.md and docs/*.md runs.

Command blocks are fenced ```bash (one command a line; ``\\`` continues a line; ``#`` lines are
comments) or ```console (commands after ``$ ``). A command ends in ``# exit N`` when it should
exit N (default 0). Each page runs its blocks in order in a fresh working copy of the
repository, so a later command can read an earlier one's output and pages never collide.

Two lists stay short and visible here:

- ``SKIPPED``: blocks marked ``<!-- doctest: skip (why) -->`` on the line before the fence,
  because they cannot run in a test (a cloud project, the test suite itself);
- ``INSTALL_STEPS``: install lines that the test's own environment already is (CI runs the
  install itself: ``.ci/run``).

The pages also stand on their own: no link into the shared specification folder, every
relative link resolves (but for ``PENDING_PAGES``, written on other branches), and MEM-5's
worked-case table is the one generated from ``tests/data/spec/vectors.jsonl``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest
from doc_vectors import vector_table

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]

#: (page, first command) of each block marked as not runnable in a test.
SKIPPED = {
    ("README.md", "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[test,dask]'"),
    ("docs/operations.md", "convnorm --config configs/dataflow.yaml"),
    # Needs an S3 store; tests/test_object_store.py runs the same against moto's on loopback.
    (
        "docs/operations.md",
        "convnorm --input 's3://logs/sessions/*.jsonl.gz' --output s3://logs/clean    "
        "--s3_endpoint_url https://s3.example.internal --s3_region_name eu-west-1",
    ),
    # The setup, the test tiers, the gates and the git hooks: what .ci/run itself does.
    ("CONTRIBUTING.md", "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[test,dask]'"),
    ("CONTRIBUTING.md", 'python -m pytest -q -n 2 -m "not slow"   # the fast tier: between edits, under 2 minutes'),
    ("CONTRIBUTING.md", "ruff check .              # lint (rules in pyproject.toml)"),
    ("CONTRIBUTING.md", "pip install pre-commit && pre-commit install --hook-type pre-commit --hook-type pre-push"),
    # Cluster engines these machines cannot run (docs/cluster.md says why, block by block).
    (
        "docs/cluster.md",
        '"$FLINK_HOME/bin/jobmanager.sh" start-foreground > jobmanager.log 2>&1 & echo $! > jobmanager.pid',
    ),
    (
        "docs/cluster.md",
        ".ci/fetch-flink     # mvn dependency:copy -Dartifact=org.apache.beam:beam-runners-flink-2.2-job-server:2.77.0",
    ),
    ("docs/cluster.md", "convnorm --config configs/flink.yaml"),
    (
        "docs/cluster.md",
        "mvn -q dependency:copy -Dartifact=org.apache.beam:beam-runners-spark-3-job-server:2.77.0 -DoutputDirectory=build/spark",
    ),
    (
        "docs/cluster.md",
        "pip install -e '.[gcp]'                         # apache-beam[gcp]==2.77.*: Dataflow client, gs:// paths",
    ),
    ("docs/cluster.md", "sudo unshare --net sh -c 'ip link set lo up && exec convnorm --config configs/flink.yaml'"),
    # Dask: the extra may be missing where the docs run (tests/test_dask.py runs DaskRunner,
    # locally and on a real scheduler), and a real cluster needs several machines or certificates.
    (
        "docs/cluster.md",
        "convnorm --config configs/dask.yaml             # a Dask cluster of convnorm's own on this machine",
    ),
    (
        "docs/cluster.md",
        "AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=... DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED=False    "
        "dask worker tls://HEAD:8786 --host WORKER --dashboard-address 127.0.0.1:0 --nworkers auto "
        "--nthreads 1    --preload pipeline.console    --tls-ca-file /etc/dask/dask.pem --tls-cert "
        "/etc/dask/dask.pem --tls-key /etc/dask/dask.key",
    ),
    (
        "docs/cluster.md",
        "openssl req -x509 -newkey rsa:4096 -nodes -days 365 -subj /CN=dask    -keyout /etc/dask/dask.key -out /etc/dask/dask.pem",
    ),
    # Runs until stopped: the streaming tests run it on Prism with a stop condition.
    ("docs/streaming.md", ".ci/build-prism                      # once: builds Prism, Beam's local runner (needs Go)"),
}

#: Install lines: the test runs inside the environment they create.
INSTALL_STEPS = {
    "python3 -m venv .venv && . .venv/bin/activate && pip install -e .",
    "pip install -e '.[tokens]'",
    "pip install -e '.[chat-template]'",
    "pip install -e '.[redact]'",
    "pip install -e '.[dask]'                        # apache-beam[dask]: dask and dask.distributed",
}

#: Pages linked from these docs that other branches add (the links are right once merged).
PENDING_PAGES = {
    "outputs.md",
    "input-limits.md",
    "ledger.md",
    "streaming.md",
    "cluster.md",
    "formats-readers-writers.md",
}

COMMAND_LANGUAGES = {"bash", "sh", "shell", "console"}
SKIP_MARK = re.compile(r"<!--\s*doctest:\s*skip\s*\((?P<why>[^)]+)\)\s*-->")
EXIT = re.compile(r"\s+#\s*exit\s+(?P<status>\d+)\b.*$")


class Command(NamedTuple):
    line: int
    text: str
    status: int


class Block(NamedTuple):
    page: str
    line: int
    commands: list[Command]
    skip: str | None


def _commands(language: str, lines: list[tuple[int, str]]) -> list[Command]:
    commands: list[Command] = []
    pending, start = "", 0
    for number, raw in lines:
        text = raw.rstrip()
        if language == "console":
            if not text.startswith("$ ") and not pending:
                continue  # output shown in the block
            text = text[2:] if text.startswith("$ ") else text
        if not pending:
            start = number
            if not text.strip() or text.lstrip().startswith("#"):
                continue
        if text.endswith("\\"):
            pending += text[:-1] + " "
            continue
        text = pending + text
        pending = ""
        status = 0
        found = EXIT.search(text)
        if found:
            status = int(found["status"])
            text = text[: found.start()]
        commands.append(Command(start, text.strip(), status))
    return commands


def blocks(page: Path) -> list[Block]:
    found: list[Block] = []
    lines = page.read_text().splitlines()
    name = str(page.relative_to(ROOT))
    i = 0
    while i < len(lines):
        opening = re.match(r"^```(\w*)", lines[i])
        if not opening:
            i += 1
            continue
        language, start = opening.group(1), i
        body: list[tuple[int, str]] = []
        i += 1
        while i < len(lines) and not lines[i].startswith("```"):
            body.append((i + 1, lines[i]))
            i += 1
        i += 1
        if language in COMMAND_LANGUAGES:
            before = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
            mark = SKIP_MARK.search(before)
            found.append(Block(name, start + 1, _commands(language, body), mark["why"] if mark else None))
    return found


def _working_copy(destination: Path) -> Path:
    ignore = shutil.ignore_patterns(
        ".git", ".venv*", "out", "out-*", "__pycache__", ".pytest_cache", ".hypothesis", "*.egg-info", "build", "dist"
    )
    shutil.copytree(ROOT, destination, ignore=ignore)
    return destination


def test_every_page_has_runnable_commands_and_the_skips_are_the_listed_ones():
    marked = {(b.page, b.commands[0].text) for page in PAGES for b in blocks(page) if b.skip}
    assert marked == SKIPPED
    for page in PAGES:
        if page.name in ("README.md", "operations.md", "formats.md"):
            assert any(not b.skip and b.commands for b in blocks(page)), page


def _page(page: Path):
    # A page with commands to run is slow: each command is a convnorm process (a second or more).
    runs = any(not b.skip and b.commands for b in blocks(page))
    return pytest.param(page, id=str(page.relative_to(ROOT)), marks=[pytest.mark.slow] if runs else [])


@pytest.mark.parametrize("page", [_page(p) for p in PAGES])
def test_the_commands_of_the_page_run(page, tmp_path):
    runnable = [b for b in blocks(page) if not b.skip]
    commands = [c for b in runnable for c in b.commands if c.text not in INSTALL_STEPS]
    if not commands:
        pytest.skip("no commands on this page")
    work = _working_copy(tmp_path / "work")
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        "PYTHONPATH": str(work),
    }  # the copy's code, also in worker processes
    for command in commands:
        done = subprocess.run(
            ["bash", "-c", command.text],
            cwd=work,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert done.returncode == command.status, (
            f"{page.name}:{command.line}: {command.text!r} exited {done.returncode}, the page says "
            f"{command.status}\n--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
        )


def test_the_docs_stand_on_their_own():
    for page in PAGES:
        text = page.read_text()
        assert "shared/" not in text, f"{page.name} points into the shared specification folder"
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if "://" in target or target.startswith("mailto:"):
                continue
            resolved = (page.parent / target).resolve()
            if resolved.name in PENDING_PAGES and resolved.parent == ROOT / "docs":
                continue
            assert resolved.exists(), f"{page.name}: broken link {target}"


def test_mem5_page_holds_the_worked_cases_of_the_vectors_file():
    assert vector_table() in (ROOT / "docs" / "mem5.md").read_text()


def test_the_readme_shows_the_report_screenshot():
    assert "](docs/images/report.png)" in (ROOT / "README.md").read_text()
    png = ROOT / "docs" / "images" / "report.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_command_parsing():
    text = "```bash\n# a comment\nconvnorm --a \\\n  --b   # exit 2\n\nconvnorm c\n```\n"
    parsed = _commands("bash", [(n + 1, line) for n, line in enumerate(text.splitlines()[1:-1])])
    assert [(c.text, c.status) for c in parsed] == [("convnorm --a    --b", 2), ("convnorm c", 0)]
    console = _commands("console", [(1, "$ convnorm x"), (2, "output line"), (3, "$ convnorm y  # exit 1")])
    assert [(c.text, c.status) for c in console] == [("convnorm x", 0), ("convnorm y", 1)]
