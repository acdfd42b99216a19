"""The code's layout: imports between convnorm's modules form no cycle (imports inside functions
counted), packages import only downwards, no module grows past 800 lines, no function past
complexity 30 (radon's count), and the pure core imports no Beam.

transforms/ holds its parts (sub-packages: ``TRANSFORMS_PARTS`` says which may import which)
and the Beam glue beside them; no part imports Beam or the glue.

Read from the source with ``ast`` (nothing is imported), so it is fast and sees every import,
also those inside functions that run only on some paths. Run it alone to see the graph:

    python tests/test_layout.py            # cycles, layer breaks, long modules
    python tests/test_layout.py --imports  # every import between convnorm's modules, file:line
"""

from __future__ import annotations

import ast
import functools
import os
import re
import sys
from pathlib import Path
from typing import Iterator, NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("pipeline", "transforms")
MAX_LINES = 800
#: Packages from the bottom up: a module may import its own package and those before it.
LAYERS = (
    "transforms",
    "pipeline.testhooks",
    "pipeline.console",
    "pipeline.io",
    "pipeline.config",
    "pipeline.runners",
    "pipeline.graph",
    "pipeline.execution",
    "pipeline.finished",
    "pipeline.streaming",
    "pipeline.cli",
    "pipeline",  # pipeline/__init__.py and __main__.py (python -m pipeline)
)
#: The one module of transforms/ that may import Beam (the DoFns and composites).
BEAM_IN_TRANSFORMS = {"transforms.conversations"}
#: transforms/ by part: each sub-package and the other parts its modules may import. A module
#: directly in transforms/ is Beam glue (BEAM_IN_TRANSFORMS), may import every part, and no
#: part imports it. Read from the bottom up: core, then the readers and writers, the repairs
#: around the core, the training-set options, the per-record path, the totals.
TRANSFORMS_PARTS: dict[str, tuple[str, ...]] = {
    "transforms.core": (),
    "transforms.calllogs": ("transforms.core", "transforms.formats"),
    "transforms.formats": ("transforms.core",),
    "transforms.repairs": ("transforms.core",),
    "transforms.dataset": ("transforms.core", "transforms.repairs"),
    "transforms.record": (
        "transforms.core",
        "transforms.formats",
        "transforms.calllogs",
        "transforms.repairs",
        "transforms.dataset",
    ),
    "transforms.totals": ("transforms.core", "transforms.repairs", "transforms.dataset", "transforms.record"),
}
#: Single modules a part may import outside its table, each importing nothing of convnorm (checked),
#: so none can close a cycle: format detection asks the call-log contract which keys mark a call log.
TRANSFORMS_PART_LEAVES = {"transforms.formats": ("transforms.calllogs.calls",)}
#: What the command line runs before it imports Beam (--help, --version, option errors) and what
#: an SDK worker process imports first: none of them may import Beam at import time.
BEAM_FREE_AT_IMPORT = (
    "pipeline.cli.main",
    "pipeline.cli.help",
    "pipeline.config.precheck",
    "pipeline.runners.private_network",
    "pipeline.runners.sdk_worker",
)
#: Beam modules only pipeline/runners/ may import: runner internals, the portability API, Beam's
#: own internals and the clients behind its filesystems. A module and everything under it.
PRIVATE_BEAM = (
    "apache_beam.runners",
    "apache_beam.portability",
    "apache_beam.utils.thread_pool_executor",
    "apache_beam.internal",
    "apache_beam.io.aws.clients",
)
#: What of PRIVATE_BEAM is public API anyone may import (``PipelineResult``, ``PipelineState``).
PUBLIC_BEAM_RUNNER_MODULES = ("apache_beam.runners.runner",)
#: (module, private Beam module) imported outside pipeline/runners/, each saying why.
PRIVATE_BEAM_ALLOWED = {
    ("pipeline.config.dask_flags", "apache_beam.runners.dask.dask_runner"): (
        "Beam declares its Dask flags only in that module: the options cannot be parsed without it"
    ),
}
#: (module, where) of imports whose module the source does not name as a string, each saying
#: why: the layout cannot be checked through them.
DYNAMIC_IMPORTS_ALLOWED = {
    ("pipeline.runners.loopback", "in install"): "Beam's gRPC server modules, PATCHED_MODULES, one by one",
    (
        "transforms.dataset.redact",
        "in parse_kinds",
    ): "the optional detector libraries of KINDS, to say which is missing",
}


class Import(NamedTuple):
    source: str  # importing module
    target: str  # imported module (one of ours, or an outside one)
    path: str  # file of the import
    line: int
    where: str  # "module level", "in f", "if TYPE_CHECKING", "if __name__ == '__main__'"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))}


def _ours(name: str, known: dict[str, Path]) -> str | None:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def _context(stack: list[ast.AST]) -> str:
    for node in reversed(stack):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return f"in {node.name}"
    for node in stack:
        if isinstance(node, ast.If):
            test = ast.unparse(node.test)
            if "__main__" in test:
                return "if __name__ == '__main__'"
            if "TYPE_CHECKING" in test:
                return "if TYPE_CHECKING"
    return "module level"


def imports(known: dict[str, Path] | None = None) -> Iterator[Import]:
    """Every import of our modules, at any depth, resolved to modules however it is spelled:
    ours when the target is one of them (``from pipeline.io import files`` is
    ``pipeline.io.files``), else the outside module with the name it imports
    (``from apache_beam import runners`` is ``apache_beam.runners``)."""
    known = known or modules()
    for source, path in known.items():
        yield from source_imports(
            path.read_text(), source, str(path.relative_to(ROOT)), known, path.name == "__init__.py"
        )


def source_imports(
    text: str, source: str, path: str, known: dict[str, Path], is_package: bool = False
) -> Iterator[Import]:
    """The imports of one module's source ``text`` (module ``source``; ``is_package`` for an
    ``__init__.py``): statements, relative ones resolved, and ``importlib.import_module`` /
    ``__import__`` calls. A call whose module is not a string (a literal, or a module-level name
    bound to one) yields the target ``DYNAMIC`` + its argument as written."""
    tree = ast.parse(text, path)
    package = source if is_package else source.rpartition(".")[0]
    spelled = _Spellings(tree)
    yield from _walk(tree, [], source, package, path, known, spelled)


#: The target of an import whose module the source does not name (``import_module(name)``).
DYNAMIC = "?"


class _Spellings:
    """How one module may spell a dynamic import (``importlib.import_module``, an alias of it,
    ``__import__``), and its module-level names bound to a string (``MODULE = "x.y"``)."""

    def __init__(self, tree: ast.Module) -> None:
        self.importlib = {"importlib"}
        self.functions = {"__import__"}
        self.strings: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == "importlib" and alias.asname:
                        self.importlib.add(alias.asname)
                    if alias.name == "builtins":
                        self.importlib.add(alias.asname or "builtins")
            elif isinstance(node, ast.ImportFrom) and node.module in ("importlib", "builtins") and not node.level:
                for alias in node.names:
                    if alias.name in ("import_module", "__import__"):
                        self.functions.add(alias.asname or alias.name)
        for node in tree.body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Constant):
                names = node.targets if isinstance(node, ast.Assign) else [node.target]
                for name in names:
                    if isinstance(name, ast.Name) and isinstance(node.value.value, str):
                        self.strings[name.id] = node.value.value

    def is_import_call(self, call: ast.Call) -> bool:
        func = call.func
        if isinstance(func, ast.Name):
            return func.id in self.functions
        return (
            isinstance(func, ast.Attribute)
            and func.attr in ("import_module", "__import__")
            and isinstance(func.value, ast.Name)
            and func.value.id in self.importlib
        )

    def string(self, node: ast.AST | None) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            return self.strings.get(node.id)
        return None


def _absolute(name: str, level: int, package: str) -> str:
    """``name`` of ``from`` + ``level`` dots inside ``package``, as an absolute module name."""
    if not level:
        return name
    parent = package
    for _ in range(level - 1):
        parent = parent.rpartition(".")[0]
    return f"{parent}.{name}" if name else parent


def _from_targets(base: str, names: list[str], known: dict[str, Path]) -> list[str]:
    """``from base import a, b``: ``base.a`` where it is a module of ours or an outside name (it
    may be a module: ``from apache_beam import runners``), else ``base`` (a name in our module)."""
    if base not in known and _ours(base, known) is None:
        return [base if name == "*" else f"{base}.{name}" for name in names]
    return [f"{base}.{name}" if f"{base}.{name}" in known else base for name in names]


def _call_targets(call: ast.Call, package: str, known: dict[str, Path], spelled: _Spellings) -> list[str]:
    args = {i: arg for i, arg in enumerate(call.args)}
    keywords = {k.arg: k.value for k in call.keywords if k.arg}
    name_node = args.get(0, keywords.get("name"))
    name = spelled.string(name_node)
    if name is None:
        return [DYNAMIC + (ast.unparse(name_node) if name_node is not None else "")]
    func = call.func
    if (isinstance(func, ast.Name) and func.id != "__import__") or getattr(func, "attr", "") == "import_module":
        # import_module(name, package): a relative name counts its dots in package
        level = len(name) - len(name.lstrip("."))
        anchor = spelled.string(args.get(1, keywords.get("package"))) or package
        return [_absolute(name.lstrip("."), level, anchor)]
    # __import__(name, globals, locals, fromlist, level)
    fromlist = args.get(3, keywords.get("fromlist"))
    level_node = args.get(4, keywords.get("level"))
    level = level_node.value if isinstance(level_node, ast.Constant) and isinstance(level_node.value, int) else 0
    base = _absolute(name, level, package)
    names = [spelled.string(e) for e in fromlist.elts] if isinstance(fromlist, (ast.List, ast.Tuple)) else []
    return _from_targets(base, [n for n in names if n], known) if names else [base]


def _walk(
    node: ast.AST,
    stack: list[ast.AST],
    source: str,
    package: str,
    path: str,
    known: dict[str, Path],
    spelled: _Spellings,
) -> Iterator[Import]:
    for child in ast.iter_child_nodes(node):
        targets: list[str] = []
        if isinstance(child, ast.Import):
            targets = [alias.name for alias in child.names]
        elif isinstance(child, ast.ImportFrom):
            base = _absolute(child.module or "", child.level, package)
            targets = _from_targets(base, [alias.name for alias in child.names], known)
        elif isinstance(child, ast.Call) and spelled.is_import_call(child):
            targets = _call_targets(child, package, known, spelled)
        for target in dict.fromkeys(targets):
            resolved = target if target.startswith(DYNAMIC) else _ours(target, known) or target
            yield Import(source, resolved, path, child.lineno, _context(stack))
        yield from _walk(child, [*stack, child], source, package, path, known, spelled)


@functools.lru_cache(maxsize=1)
def parsed() -> tuple[dict[str, Path], list[Import]]:
    """Our modules and their imports, read once for all the tests of this file."""
    known = modules()
    return known, list(imports(known))


def graph(found: list[Import], known: dict[str, Path]) -> dict[str, dict[str, list[Import]]]:
    edges: dict[str, dict[str, list[Import]]] = {}
    for imp in found:
        if imp.target in known and imp.target != imp.source:
            edges.setdefault(imp.source, {}).setdefault(imp.target, []).append(imp)
    return edges


def cycles(edges: dict[str, dict[str, list[Import]]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, {})):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def describe(component: list[str], edges: dict[str, dict[str, list[Import]]]) -> str:
    inside = set(component)
    lines = [" <-> ".join(component)]
    for source in component:
        for target, found in sorted(edges.get(source, {}).items()):
            if target in inside:
                for imp in found:
                    lines.append(f"  {imp.path}:{imp.line} ({imp.where}): {source} -> {target}")
    return "\n".join(lines)


def layer(module: str) -> int:
    best = max((name for name in LAYERS if module == name or module.startswith(name + ".")), key=len)
    return LAYERS.index(best)


def layer_breaks(found: list[Import], known: dict[str, Path]) -> list[Import]:
    return [
        imp
        for imp in found
        if imp.target in known and imp.target != imp.source and layer(imp.target) > layer(imp.source)
    ]


def long_modules(known: dict[str, Path]) -> list[str]:
    """Modules over MAX_LINES: none is exempt (split one along its own steps)."""
    found = []
    for path in known.values():
        lines = len(path.read_text().splitlines())
        if lines > MAX_LINES:
            found.append(f"{path.relative_to(ROOT)}: {lines} lines (at most {MAX_LINES})")
    return found


def _closure(start: str, edges: dict[str, dict[str, list[Import]]], module_level_only: bool) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        for target, found in edges.get(todo.pop(), {}).items():
            if target not in seen and (not module_level_only or any(i.where == "module level" for i in found)):
                seen.add(target)
                todo.append(target)
    return seen


def _beam_imports(found: list[Import], within: set[str], module_level_only: bool) -> list[Import]:
    return [
        imp
        for imp in found
        if imp.source in within
        and (imp.target == "apache_beam" or imp.target.startswith("apache_beam."))
        and (not module_level_only or imp.where == "module level")
    ]


def within(module: str, prefixes: tuple[str, ...]) -> bool:
    """``module`` is one of ``prefixes`` or inside one (``a.b`` is within ``a``, ``a.bc`` is not)."""
    return any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes)


def private_beam_imports(found: list[Import]) -> list[Import]:
    """Imports of PRIVATE_BEAM outside pipeline/runners/, but for the public and allowed ones."""
    return [
        i
        for i in found
        if within(i.target, PRIVATE_BEAM)
        and not within(i.target, PUBLIC_BEAM_RUNNER_MODULES)
        and not within(i.source, ("pipeline.runners",))
        and not any(i.source == s and within(i.target, (t,)) for s, t in PRIVATE_BEAM_ALLOWED)
    ]


def dynamic_imports(found: list[Import]) -> list[Import]:
    """Imports whose module is not written as a string, but for the allowed ones."""
    return [i for i in found if i.target.startswith(DYNAMIC) and (i.source, i.where) not in DYNAMIC_IMPORTS_ALLOWED]


# --------------------------------------------------------------------------------------------
# Complexity: radon's McCabe count, with ast alone

#: No function's complexity above this: a function past it is more than a reader holds in mind.
MAX_COMPLEXITY = 30
#: Functions allowed past it, by module file name and function: each one says why.
COMPLEX_FUNCTIONS = {
    ("normalize_walk.py", "walk"): "MEM-5's walk: one pass over the messages, step for step as the spec has it",
}


class Complexity(NamedTuple):
    path: str
    line: int
    name: str
    complexity: int


def _decisions(node: ast.AST) -> int:
    """The paths ``node`` adds, as radon counts them (``radon cc``): each if, elif, ternary,
    loop (and its else), except clause (and a try's else), and/or operand past the first,
    comprehension (and its ifs), assert, and match case but a catch-all one."""
    if isinstance(node, (ast.If, ast.IfExp, ast.Assert)):
        return 1
    if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
        return 1 + bool(node.orelse)
    if isinstance(node, ast.Try):
        return len(node.handlers) + bool(node.orelse)
    if isinstance(node, ast.BoolOp):
        return len(node.values) - 1
    if isinstance(node, ast.comprehension):
        return 1 + len(node.ifs)
    if isinstance(node, ast.Match):
        catch_all = any(isinstance(c.pattern, ast.MatchAs) and c.pattern.pattern is None for c in node.cases)
        return max(0, len(node.cases) - catch_all)
    return 0


def complexity(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """1 + the decisions of the function's body; a function or class defined inside it counts
    on its own (a lambda's decisions are the function's)."""
    count, todo = 1, list(function.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        count += _decisions(node)
        todo.extend(ast.iter_child_nodes(node))
    return count


def complexities(known: dict[str, Path]) -> Iterator[Complexity]:
    """Every function and method of our modules, nested ones too, with its complexity."""
    for path in known.values():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield Complexity(str(path.relative_to(ROOT)), node.lineno, node.name, complexity(node))


def too_complex(known: dict[str, Path]) -> list[Complexity]:
    return [
        c
        for c in complexities(known)
        if c.complexity > MAX_COMPLEXITY and (Path(c.path).name, c.name) not in COMPLEX_FUNCTIONS
    ]


# --------------------------------------------------------------------------------------------
# The tests


def test_no_import_cycles():
    known, found = parsed()
    edges = graph(found, known)
    found = cycles(edges)
    assert not found, "import cycles (imports inside functions count):\n" + "\n".join(describe(c, edges) for c in found)


def test_packages_import_only_downwards():
    known, found = parsed()
    breaks = layer_breaks(found, known)
    assert not breaks, "imports from a lower package to a higher one (LAYERS):\n" + "\n".join(
        f"  {i.path}:{i.line} ({i.where}): {i.source} -> {i.target}" for i in breaks
    )


def test_no_module_over_800_lines():
    assert not long_modules(modules())


def test_the_core_imports_no_beam():
    """transforms/ but its DoFns module imports no Beam, not even through another module, and
    nothing of pipeline/ (the same rule tests/test_core_purity.py checks by importing)."""
    known, found = parsed()
    edges = graph(found, known)
    for module in (m for m in known if m.startswith("transforms") and m not in BEAM_IN_TRANSFORMS):
        reach = _closure(module, edges, module_level_only=False)
        assert not reach & BEAM_IN_TRANSFORMS, (module, "reaches", reach & BEAM_IN_TRANSFORMS)
        assert not {m for m in reach if m.startswith("pipeline")}, (module, "reaches pipeline/")
        assert not _beam_imports(found, reach, module_level_only=False), (module, _beam_imports(found, reach, False))


def transforms_part(module: str) -> str | None:
    """The part of transforms/ a module belongs to (its sub-package), None for the glue."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "transforms" and (ROOT / "transforms" / parts[1]).is_dir() else None


def part_breaks(found: list[Import], known: dict[str, Path]) -> list[Import]:
    """Imports from one part of transforms/ to another that TRANSFORMS_PARTS does not allow."""
    breaks = []
    for imp in found:
        source, target = transforms_part(imp.source), imp.target
        if source is None or target not in known or not target.startswith("transforms"):
            continue
        if transforms_part(target) in (source, *TRANSFORMS_PARTS.get(source, ())):
            continue
        if target in TRANSFORMS_PART_LEAVES.get(source, ()):
            continue
        breaks.append(imp)
    return breaks


def test_transforms_is_its_parts_and_the_beam_glue():
    """Every sub-package of transforms/ is a part in TRANSFORMS_PARTS; the modules directly in
    transforms/ are the Beam glue and nothing else (a pure module goes into its part)."""
    packages = {f"transforms.{p.name}" for p in (ROOT / "transforms").iterdir() if (p / "__init__.py").is_file()}
    assert packages == set(TRANSFORMS_PARTS)
    own = {f"transforms.{p.stem}" for p in (ROOT / "transforms").glob("*.py") if p.name != "__init__.py"}
    assert own == BEAM_IN_TRANSFORMS


def test_transforms_parts_import_only_the_parts_below_them():
    known = modules()
    breaks = part_breaks(list(imports(known)), known)
    assert not breaks, "imports between parts of transforms/ that TRANSFORMS_PARTS does not allow:\n" + "\n".join(
        f"  {i.path}:{i.line} ({i.where}): {i.source} -> {i.target}" for i in breaks
    )


def test_transforms_parts_form_no_cycle():
    """The table itself is a ladder (no part reaches itself through others), and each module a
    part may import beside it imports nothing of convnorm, so it cannot close a cycle."""
    table = {part: {below: [] for below in allowed} for part, allowed in TRANSFORMS_PARTS.items()}
    assert not cycles(table)
    known = modules()
    edges = graph(list(imports(known)), known)
    for leaf in (leaf for leaves in TRANSFORMS_PART_LEAVES.values() for leaf in leaves):
        assert leaf in known and not edges.get(leaf), (leaf, sorted(edges.get(leaf, {})))


def test_the_command_line_and_the_sdk_worker_import_no_beam_at_import_time():
    known, found = parsed()
    edges = graph(found, known)
    for module in BEAM_FREE_AT_IMPORT:
        beam = _beam_imports(found, _closure(module, edges, module_level_only=True), module_level_only=True)
        assert not beam, (module, [f"{i.path}:{i.line}" for i in beam])


def test_private_beam_modules_are_imported_in_pipeline_runners_only():
    outside = private_beam_imports(parsed()[1])
    assert not outside, [f"{i.path}:{i.line}: {i.target}" for i in outside]


def test_every_dynamic_import_names_its_module():
    unnamed = dynamic_imports(parsed()[1])
    assert not unnamed, [f"{i.path}:{i.line} ({i.where}): import of {i.target[len(DYNAMIC) :]}" for i in unnamed]


def test_module_names_are_unique():
    """One ``settings.py``, one ``explain.py``: a file's name says which it is."""
    seen: dict[str, str] = {}
    twice = []
    for module, path in modules().items():
        if path.name in ("__init__.py", "__main__.py"):
            continue
        if path.name in seen:
            twice.append(f"{seen[path.name]} and {module}")
        seen.setdefault(path.name, module)
    assert not twice


def test_no_function_is_too_complex_to_hold_in_mind():
    found = too_complex(modules())
    assert not found, (
        f"functions over complexity {MAX_COMPLEXITY} (split them into steps named for what they do):\n"
        + ("\n".join(f"  {c.path}:{c.line} {c.name}: {c.complexity}" for c in found))
    )


#: A function with one of each thing the count knows; radon cc gives it 19.
COUNTED = """
def sample(items, flag):
    if flag and items or not items:
        return [i for i in items if i if i > 1]
    elif flag:
        pass
    for item in items:
        try:
            x = 1 if item else 2
        except ValueError:
            pass
        except KeyError:
            pass
        else:
            pass
    else:
        pass
    while flag:
        assert items
        break
    match flag:
        case 1:
            pass
        case [_, *_]:
            pass
        case _:
            pass
    key = lambda v: v if v else 0

    def inner(y):
        if y:
            return y
        return 0

    class Inner:
        def method(self):
            if self:
                return 1
    return key, inner, Inner
"""


def test_the_complexity_count_is_radons():
    functions = [n for n in ast.walk(ast.parse(COUNTED)) if isinstance(n, ast.FunctionDef)]
    assert {f.name: complexity(f) for f in functions} == {"sample": 19, "inner": 2, "method": 2}


#: A reference to an issue or ticket by number ("issue N", "Issue #N's", "ticket N" with N a
#: number): say what the thing is instead, not which ticket made it.
TICKET_NUMBER = re.compile(r"\b(?:issue|ticket)s?\b[ \t]*(?:#[ \t]*)?\d", re.IGNORECASE)
#: What the ticket rule reads: our code, tests, docs and configuration (not the data samples).
WRITTEN_SUFFIXES = (".py", ".md", ".toml", ".yaml", ".yml", ".cfg", ".ini", ".sh", ".txt", ".html", ".css")
#: Directories that are not ours (tools, builds, caches).
NOT_OURS = {".git", ".venv", ".venv-ci", "venv", "build", "dist", "out", "__pycache__", ".pytest_cache", ".hypothesis"}


def written_files() -> Iterator[Path]:
    """Our text files: WRITTEN_SUFFIXES, and the scripts without a suffix in .ci/ (a venv or a
    cache inside the checkout is not walked)."""
    for directory, subdirectories, names in os.walk(ROOT):
        subdirectories[:] = sorted(
            d for d in subdirectories if d not in NOT_OURS and not d.endswith((".egg-info", "_cache"))
        )
        inside = Path(directory).relative_to(ROOT).parts
        for name in sorted(names):
            path = Path(directory, name)
            if path.suffix in WRITTEN_SUFFIXES or (inside[:1] == (".ci",) and not path.suffix):
                yield path


def ticket_numbers(text: str) -> list[tuple[int, str]]:
    """(line, the words) of each reference to an issue or ticket by number in ``text``."""
    return [(text.count("\n", 0, m.start()) + 1, m.group()) for m in TICKET_NUMBER.finditer(text)]


def test_nothing_names_an_issue_or_ticket_by_number():
    found = [
        f"{path.relative_to(ROOT)}:{line}: {words}"
        for path in written_files()
        for line, words in ticket_numbers(path.read_text(errors="replace"))
    ]
    assert not found, found


#: Written with N for the number, so that this file names no ticket itself.
@pytest.mark.parametrize("words", ["issue N's fields", "(Issue #N)", "ticket N", "issues N and 4", "see ISSUE  N"])
def test_a_ticket_number_is_found_however_written(words):
    words = words.replace("N", "3")
    assert ticket_numbers("first line\n" + words) == [(2, TICKET_NUMBER.search(words).group())]


@pytest.mark.parametrize("words", ["the issue is", "issued 3 times", "tickets", "reissue 3", "an issue: 3 ways"])
def test_words_that_name_no_ticket_pass(words):
    assert not ticket_numbers(words)


# --------------------------------------------------------------------------------------------
# The checker itself: each spelling of an import, fed as a module's source


def _imports_of(text: str, source: str = "pipeline.graph.scratch") -> list[Import]:
    return list(source_imports(text, source, source.replace(".", "/") + ".py", modules()))


@pytest.mark.parametrize(
    "text",
    [
        "from apache_beam.runners import DirectRunner",
        "from apache_beam import runners",
        "import apache_beam.runners",
        "import apache_beam.runners.direct.direct_runner as direct",
        "from apache_beam.runners.direct import direct_runner",
        "from apache_beam.io.aws.clients.s3 import boto3_client",
        "from apache_beam.io.aws import clients",
        "from apache_beam import internal",
        "from apache_beam.internal import pickler",
        "from apache_beam.portability.api import beam_runner_api_pb2",
        "from apache_beam.utils import thread_pool_executor",
        "def f():\n    from apache_beam.runners import DirectRunner",
        "import importlib\nimportlib.import_module('apache_beam.runners.direct')",
        "import importlib as il\nil.import_module('.runners', 'apache_beam')",
        "from importlib import import_module as load\nload('apache_beam.internal.pickler')",
        "import importlib\nMODULE = 'apache_beam.internal'\ndef f():\n    importlib.import_module(MODULE)",
        "__import__('apache_beam.runners.direct')",
        "__import__('apache_beam', fromlist=['runners'])",
        "import builtins\nbuiltins.__import__('apache_beam.io.aws.clients.s3')",
    ],
)
def test_a_private_beam_import_is_caught_however_spelled(text):
    assert private_beam_imports(_imports_of(text)), text
    assert not private_beam_imports(_imports_of(text, "pipeline.runners.scratch")), "pipeline/runners/ may"


@pytest.mark.parametrize(
    "text",
    [
        "import apache_beam as beam",
        "from apache_beam.runners.runner import PipelineState",
        "from apache_beam.runners import runner",
        "from apache_beam.io.filesystems import FileSystems",
        "from apache_beam.io import aws",  # the package, not its clients
        "from apache_beam.options.pipeline_options import PipelineOptions",
    ],
)
def test_public_beam_imports_pass(text):
    assert not private_beam_imports(_imports_of(text)), text


def test_a_dynamic_import_without_its_module_named_is_caught():
    found = _imports_of("import importlib\ndef f(name):\n    return importlib.import_module(name)")
    assert [(i.target, i.where) for i in dynamic_imports(found)] == [(DYNAMIC + "name", "in f")]
    assert not dynamic_imports(_imports_of("import importlib\nimportlib.import_module('json')"))


@pytest.mark.parametrize(
    ("text", "target"),
    [
        ("from ..cli import main", "pipeline.cli.main"),
        ("from .. import cli", "pipeline.cli"),
        ("from ..cli.main import main", "pipeline.cli.main"),
        ("import importlib\nimportlib.import_module('..cli.main', 'pipeline.graph')", "pipeline.cli.main"),
        ("__import__('cli.main', globals(), None, [], 2)", "pipeline.cli.main"),
    ],
)
def test_relative_imports_are_resolved(text, target):
    known = modules()
    found = _imports_of(text)
    assert [i.target for i in found if i.target in known] == [target]
    assert layer_breaks(found, known), "pipeline.graph importing pipeline.cli goes upwards"


if __name__ == "__main__":
    known = modules()
    found = list(imports(known))
    edges = graph(found, known)
    if "--imports" in sys.argv:
        for imp in sorted(found):
            if imp.target in known:
                print(f"{imp.path}:{imp.line}\t{imp.source} -> {imp.target}\t({imp.where})")
    for component in cycles(edges):
        print("cycle:", describe(component, edges))
    for imp in layer_breaks(found, known):
        print(f"upward: {imp.path}:{imp.line} ({imp.where}): {imp.source} -> {imp.target}")
    for line in long_modules(known):
        print("long:", line)
    for imp in part_breaks(found, known):
        print(f"between parts of transforms/: {imp.path}:{imp.line} ({imp.where}): {imp.source} -> {imp.target}")
