"""The code's layout: imports between convnorm's modules form no cycle (imports inside functions
counted), packages import only downwards, no module grows past 800 lines, no function past
complexity 30 (radon's count), and the pure core imports no Beam.

Read from the source with ``ast`` (nothing is imported), so it is fast and sees every import,
also those inside functions that run only on some paths. Run it alone to see the graph:

    python tests/test_layout.py            # cycles, layer breaks, long modules
    python tests/test_layout.py --imports  # every import between convnorm's modules, file:line
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Iterator, NamedTuple

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("pipeline", "transforms")
MAX_LINES = 800
#: Modules allowed past MAX_LINES, at most this long: each one says why.
LONG_MODULES = {
    "transforms/normalize.py": 820,  # the MEM-5 core, one pass; split it in a change of its own
}
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
BEAM_IN_TRANSFORMS = {"transforms.conversations", "transforms.call_assembly"}
#: What the command line runs before it imports Beam (--help, --version, option errors) and what
#: an SDK worker process imports first: none of them may import Beam at import time.
BEAM_FREE_AT_IMPORT = (
    "pipeline.cli.main",
    "pipeline.cli.help",
    "pipeline.config.precheck",
    "pipeline.runners.private_network",
    "pipeline.runners.sdk_worker",
)
#: Beam modules only pipeline/runners/ may import: runner internals and the portability API.
PRIVATE_BEAM = ("apache_beam.runners.", "apache_beam.portability", "apache_beam.utils.thread_pool_executor")
PUBLIC_BEAM_RUNNER_MODULES = ("apache_beam.runners.runner",)


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
    """Every import statement of our modules, at any depth, resolved to modules: ours when the
    target is one of them (``from pipeline.io import files`` is ``pipeline.io.files``), else the
    outside module as written (``apache_beam.io.filesystems``)."""
    known = known or modules()
    for source, path in known.items():
        tree = ast.parse(path.read_text(), str(path))
        package = source if path.name == "__init__.py" else source.rpartition(".")[0]
        yield from _walk(tree, [], source, package, str(path.relative_to(ROOT)), known)


def _walk(
    node: ast.AST, stack: list[ast.AST], source: str, package: str, path: str, known: dict[str, Path]
) -> Iterator[Import]:
    for child in ast.iter_child_nodes(node):
        targets: list[str] = []
        if isinstance(child, ast.Import):
            targets = [alias.name for alias in child.names]
        elif isinstance(child, ast.ImportFrom):
            base = child.module or ""
            if child.level:
                parent = package
                for _ in range(child.level - 1):
                    parent = parent.rpartition(".")[0]
                base = f"{parent}.{base}" if base else parent
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in child.names]
        for target in dict.fromkeys(targets):
            yield Import(source, _ours(target, known) or target, path, child.lineno, _context(stack))
        yield from _walk(child, [*stack, child], source, package, path, known)


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
    found = []
    for path in known.values():
        relative = str(path.relative_to(ROOT))
        lines = len(path.read_text().splitlines())
        if lines > LONG_MODULES.get(relative, MAX_LINES):
            found.append(f"{relative}: {lines} lines (at most {LONG_MODULES.get(relative, MAX_LINES)})")
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


# --------------------------------------------------------------------------------------------
# Complexity: radon's McCabe count, with ast alone

#: No function's complexity above this: a function past it is more than a reader holds in mind.
MAX_COMPLEXITY = 30
#: Functions allowed past it, by module file name and function: each one says why.
COMPLEX_FUNCTIONS = {
    ("normalize.py", "_walk"): "MEM-5's walk: one pass over the messages, step for step as the spec has it",
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
    known = modules()
    edges = graph(list(imports(known)), known)
    found = cycles(edges)
    assert not found, "import cycles (imports inside functions count):\n" + "\n".join(describe(c, edges) for c in found)


def test_packages_import_only_downwards():
    known = modules()
    breaks = layer_breaks(list(imports(known)), known)
    assert not breaks, "imports from a lower package to a higher one (LAYERS):\n" + "\n".join(
        f"  {i.path}:{i.line} ({i.where}): {i.source} -> {i.target}" for i in breaks
    )


def test_no_module_over_800_lines():
    assert not long_modules(modules())


def test_the_core_imports_no_beam():
    """transforms/ but its DoFns module imports no Beam, not even through another module, and
    nothing of pipeline/ (the same rule tests/test_core_purity.py checks by importing)."""
    known = modules()
    found = list(imports(known))
    edges = graph(found, known)
    for module in (m for m in known if m.startswith("transforms") and m not in BEAM_IN_TRANSFORMS):
        reach = _closure(module, edges, module_level_only=False)
        assert not reach & BEAM_IN_TRANSFORMS, (module, "reaches", reach & BEAM_IN_TRANSFORMS)
        assert not {m for m in reach if m.startswith("pipeline")}, (module, "reaches pipeline/")
        assert not _beam_imports(found, reach, module_level_only=False), (module, _beam_imports(found, reach, False))


def test_the_command_line_and_the_sdk_worker_import_no_beam_at_import_time():
    known = modules()
    found = list(imports(known))
    edges = graph(found, known)
    for module in BEAM_FREE_AT_IMPORT:
        beam = _beam_imports(found, _closure(module, edges, module_level_only=True), module_level_only=True)
        assert not beam, (module, [f"{i.path}:{i.line}" for i in beam])


def test_private_beam_modules_are_imported_in_pipeline_runners_only():
    outside = [
        i
        for i in imports()
        if i.target.startswith(PRIVATE_BEAM)
        and not i.target.startswith(PUBLIC_BEAM_RUNNER_MODULES)
        and not i.source.startswith("pipeline.runners")
    ]
    assert not outside, [f"{i.path}:{i.line}: {i.target}" for i in outside]


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
