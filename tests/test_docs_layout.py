"""docs/operations.md's layout listing is the tree: every package and module of ``pipeline/``
and ``transforms/`` is listed, and nothing listed is missing from the tree.

Driven by the tree (found on disk, as tests/test_layout.py finds the modules), so a module
added, moved into a sub-package or removed fails this test until the listing says so.

The listing's form, which the test reads: a line names one entry or several
(``__init__.py, __main__.py``), a package ending in ``/``, a module in ``.py``, indented two
spaces a level under its package; its description follows after at least one space, and
continues on lines indented to DESCRIPTION_COLUMN or beyond.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "operations.md"
#: The packages whose every module the listing must name.
PACKAGES = ("pipeline", "transforms")
#: Where a listing line's description starts: a line indented this far continues the one above.
DESCRIPTION_COLUMN = 23

_ENTRIES = re.compile(r"^((?:[\w.-]+(?:/|\.py))(?:, [\w.-]+(?:/|\.py))*)(?:\s+.*)?$")


def listing_block(text: str) -> list[str]:
    """The lines of the fenced block under ``## Layout``."""
    section = text.split("\n## Layout\n", 1)[1]
    return section.split("```", 2)[1].strip("\n").splitlines()


def listed(lines: list[str]) -> list[str]:
    """The paths the listing names (``pipeline/io/``, ``pipeline/io/files.py``), in order."""
    paths: list[str] = []
    parents: list[str] = []  # the package of each level above the line
    for number, line in enumerate(lines, 1):
        indent = len(line) - len(line.lstrip(" "))
        if not line.strip() or indent >= DESCRIPTION_COLUMN:
            continue  # a description's next line
        match = _ENTRIES.match(line.strip())
        assert match and indent % 2 == 0, f"layout line {number} names no module or package: {line!r}"
        level = indent // 2
        assert level <= len(parents), f"layout line {number} is indented under no package: {line!r}"
        del parents[level:]
        for name in match.group(1).split(", "):
            paths.append("".join(parents) + name)
        if match.group(1).endswith("/"):
            parents.append(match.group(1))
    return paths


def tree() -> set[str]:
    """Every package (``pipeline/io/``) and module (``pipeline/io/files.py``) of PACKAGES, but
    the ``__init__.py`` files (a package's line stands for its own)."""
    found: set[str] = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            relative = path.relative_to(ROOT)
            if "__pycache__" in relative.parts:
                continue
            if path.name == "__init__.py":
                found.add(relative.parent.as_posix() + "/")
            else:
                found.add(relative.as_posix())
    return found


def test_the_layout_listing_names_every_module_of_the_tree():
    names = listed(listing_block(PAGE.read_text()))
    missing = sorted(tree() - set(names))
    assert not missing, f"docs/operations.md's layout does not list: {missing}"


def test_the_layout_listing_names_nothing_the_tree_lacks():
    names = listed(listing_block(PAGE.read_text()))
    assert not [name for name in names if not (ROOT / name).exists()]
    twice = sorted({name for name in names if names.count(name) > 1})
    assert not twice, f"listed twice: {twice}"


LISTING = """\
transforms/            the pure logic
  normalize.py         the core
  formats/             readers and writers
    base.py            the contract
    __init__.py, flat.py   two on one line
pipeline/              by stage
  io/                  files:
    files.py           one path; a description
                       that goes on, naming other.py
  cli.py
docs/                  these pages
"""


def test_the_listing_is_read_by_its_indentation():
    assert listed(LISTING.splitlines()) == [
        "transforms/",
        "transforms/normalize.py",
        "transforms/formats/",
        "transforms/formats/base.py",
        "transforms/formats/__init__.py",
        "transforms/formats/flat.py",
        "pipeline/",
        "pipeline/io/",
        "pipeline/io/files.py",
        "pipeline/cli.py",
        "docs/",
    ]


@pytest.mark.parametrize(
    "line",
    ["  normalize           the core, no .py", "   odd.py             three spaces", "    deep.py  under no package"],
)
def test_a_listing_line_that_is_not_an_entry_is_refused(line):
    with pytest.raises(AssertionError):
        listed(["transforms/             the pure logic", line])


def test_the_data_flow_names_temporary_files_as_they_are_named():
    from pipeline.io.written_files import temp_name

    flow = (ROOT / "docs" / "operations.md").read_text()
    assert "_convnorm_temp-…/<kind>/<shard>-<offset>-<uuid>" in flow
    assert re.fullmatch(r"\d{5}-\d{15}-[0-9a-f]{32}", temp_name(3, 65536, "0" * 32))


#: Where code and docs may name a module of ours by path (``transforms/record/records.py``) or
#: by dotted name (``transforms.record.records``); not a call (``pipeline.run()`` is Beam's).
_NAMED = re.compile(r"(?<![\w./-])(pipeline|transforms)[./]([A-Za-z_]\w*)(?![\w(])")


def _children(package: str) -> set[str]:
    folder = ROOT / package
    return {p.stem for p in folder.glob("*.py")} | {p.name for p in folder.iterdir() if (p / "__init__.py").exists()}


def test_every_module_named_in_code_and_docs_is_where_it_is_named():
    # A module moved into a sub-package leaves its old name in docstrings and pages unless
    # something looks: the first step of every name of ours must be there.
    children = {package: _children(package) for package in PACKAGES}
    assert _NAMED.findall("see transforms/records.py and transforms.core.normalize") == [
        ("transforms", "records"),
        ("transforms", "core"),
    ]
    assert _NAMED.findall("result = pipeline.run()") == []
    here = Path(__file__).resolve()
    sources = [p for p in ROOT.rglob("*") if p.suffix in (".py", ".md") and not _ignored(p) and p != here]
    stale = sorted(
        f"{path.relative_to(ROOT)}:{n}: {package}.{name}"
        for path in sources
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        for package, name in _NAMED.findall(line)
        if name not in children[package]
    )
    assert stale == []


def _ignored(path: Path) -> bool:
    parts = path.relative_to(ROOT).parts
    return bool({".git", ".venv", ".venv-ci", "build", "node_modules"} & set(parts)) or parts[0].startswith(".")
