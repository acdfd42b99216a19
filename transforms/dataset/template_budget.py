"""A budget for one chat-template rendering: work and size bounded inside the sandbox (no Beam import).

Jinja's sandbox stops a template from reaching Python's internals, not from running long: nested
``range(100000)`` loops hang a record, ``'x' * 10**10`` fills memory. Each rendering gets a
budget of work units, charged as the template runs; a rendering over it, or a value or an output
over the size limit, is refused for that record (``render_limit``) instead of running on. The
units are counted, not timed, so the verdict is the same on any machine:

- every loop iteration, every call (functions, macros) and every filter costs one unit;
- every string made (a call's or a filter's result, a ``~``, an operator, a printed piece)
  costs one unit per ``CHARS_PER_UNIT`` characters, every list or range one per item;
- no single value, and not the whole rendering, may pass ``SIZE_LIMIT`` characters, and
  ``*``, ``**``, ``%`` and ``+`` are refused before they would make one that does.

The loops, ``~`` and printed pieces are charged by rewriting the parsed template
(``instrumented``): each loop's iterable, each ``~`` and each output goes through one of the
filters below.
"""

from __future__ import annotations

import contextvars
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

#: Work units one rendering may use (a few seconds of the worst template on a slow machine; a
#: long conversation under an ordinary template uses a few thousand).
WORK_LIMIT = 2_000_000
#: Characters (or items) one value, or one whole rendering, may hold.
SIZE_LIMIT = 16 * 1024 * 1024
#: Characters of a string made that cost one unit of work.
CHARS_PER_UNIT = 64
#: The largest exponent ``**`` takes (a chat template has no use for big powers).
POWER_LIMIT = 1024
#: A width of eight digits or more in a format string (``%099999999d``, ``{:>99999999}``).
_HUGE_WIDTH = re.compile(r"\d{8,}")

#: The filters the rewritten template calls (names no template of its own would use).
ITER, SIZED, PRINTED, TEXT = (
    "convnorm_budget_iter",
    "convnorm_budget_sized",
    "convnorm_budget_out",
    "convnorm_budget_text",
)


class BudgetExceeded(Exception):
    """The rendering passed its budget: a sentence saying which limit."""


@dataclass
class Budget:
    """What one rendering has used."""

    work: int = 0

    def charge(self, units: int) -> None:
        self.work += units
        if self.work > WORK_LIMIT:
            raise BudgetExceeded(f"the template used more than {WORK_LIMIT:,} steps on this example")


_CURRENT: contextvars.ContextVar[Budget | None] = contextvars.ContextVar("convnorm_template_budget", default=None)


def _size(value: Any) -> int:
    """A value's size: characters of a string, items of a container; 0 for the rest."""
    if isinstance(value, (str, bytes)):
        return len(value)
    if isinstance(value, (list, tuple, dict, set, frozenset, range)):
        return len(value)
    return 0


def charge(value: Any, units: int = 1) -> Any:
    """``value``, its making charged to the current rendering (none outside one: compile time)."""
    budget = _CURRENT.get()
    if budget is None:
        return value
    size = _size(value)
    if size > SIZE_LIMIT:
        raise BudgetExceeded(f"the template made a value of more than {SIZE_LIMIT:,} characters or items")
    per_unit = CHARS_PER_UNIT if isinstance(value, (str, bytes)) else 1
    budget.charge(units + size // per_unit)
    return value


def check_arguments(args: Iterable[Any]) -> None:
    """Refuse, before the call, a number or a format width that would make a value over the limit."""
    for arg in args:
        if isinstance(arg, int) and not isinstance(arg, bool) and abs(arg) > SIZE_LIMIT:
            raise BudgetExceeded(f"the template passed {arg:,}, more than {SIZE_LIMIT:,}, to a call")
        if isinstance(arg, str) and ("%" in arg or "{" in arg) and _HUGE_WIDTH.search(arg):
            raise BudgetExceeded("the template formats with a width of eight digits or more")


def _counted(iterable: Iterable[Any]) -> Iterator[Any]:
    for item in iterable:
        charge(None)
        yield item


def budget_filters() -> dict[str, Any]:
    """The filters the rewritten template calls (``instrumented``), context-passing so Jinja never
    folds them into constants at compile time."""
    from jinja2 import pass_context

    @pass_context
    def each(_: Any, iterable: Any) -> Any:
        return _counted(iterable)

    @pass_context
    def sized(_: Any, value: Any) -> Any:
        return charge(value)

    @pass_context
    def printed(_: Any, value: Any) -> Any:
        charge(value if isinstance(value, str) else str(value))
        return value

    @pass_context
    def text(_: Any, characters: int) -> str:
        budget = _CURRENT.get()
        if budget is not None:
            budget.charge(1 + characters // CHARS_PER_UNIT)
        return ""

    return {ITER: each, SIZED: sized, PRINTED: printed, TEXT: text}


def instrumented(tree: Any) -> Any:
    """The parsed template with its loops, ``~`` and outputs charged (``budget_filters``)."""
    from jinja2 import nodes

    def wrapped(node: Any, name: str) -> Any:
        return nodes.Filter(node, name, [], [], None, None, lineno=node.lineno)

    for loop in tree.find_all(nodes.For):
        loop.iter = wrapped(loop.iter, ITER)
    # Every ``~``, one inside another too (the parents are listed before any is rewritten).
    for parent in list(tree.find_all(nodes.Node)):
        for field in parent.fields:
            child = getattr(parent, field, None)
            if isinstance(child, nodes.Concat):
                setattr(parent, field, wrapped(child, SIZED))
            elif isinstance(child, list):
                setattr(parent, field, [wrapped(c, SIZED) if isinstance(c, nodes.Concat) else c for c in child])
    for output in tree.find_all(nodes.Output):
        constant = sum(len(child.data) for child in output.nodes if isinstance(child, nodes.TemplateData))
        output.nodes = [
            child if isinstance(child, nodes.TemplateData) else wrapped(child, PRINTED) for child in output.nodes
        ] + [wrapped(nodes.Const(constant, lineno=output.lineno), TEXT)]
    return tree


def _times(left: Any, right: Any) -> Any:
    for sequence, count in ((left, right), (right, left)):
        if _size(sequence) and isinstance(count, int) and _size(sequence) * max(count, 0) > SIZE_LIMIT:
            raise BudgetExceeded(f"the template repeats a value past {SIZE_LIMIT:,} characters or items")
    return left * right


def _power(left: Any, right: Any) -> Any:
    if isinstance(right, (int, float)) and abs(right) > POWER_LIMIT:
        raise BudgetExceeded(f"the template raises to a power over {POWER_LIMIT:,}")
    return left**right


def _plus(left: Any, right: Any) -> Any:
    if _size(left) + _size(right) > SIZE_LIMIT:
        raise BudgetExceeded(f"the template joins values past {SIZE_LIMIT:,} characters or items")
    return left + right


def _modulo(left: Any, right: Any) -> Any:
    if isinstance(left, str):
        check_arguments([left])
    return left % right


def _width(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else len(str(value))


def _count(value: Any, piece: Any) -> int:
    return str(value).count(str(piece)) + 1 if piece != "" else len(str(value)) + 1


def _items(value: Any) -> int:
    return _size(value) or 1


#: What the filters and string methods that make big values from small arguments would make, at
#: most, in characters or items: (value, arguments) -> size. The rest are bounded by their inputs.
_ESTIMATES: dict[str, Any] = {
    "center": lambda value, a: _width(a[0]),
    "indent": lambda value, a: _width(a[0]) * _count(value, "\n"),
    "batch": lambda value, a: _width(a[0]) * 2,
    "slice": lambda value, a: _width(a[0]) * 2,
    "replace": lambda value, a: _count(value, a[0]) * _width(a[1]) if len(a) > 1 else 0,
    "join": lambda value, a: _items(value) * _width(a[0]),
    "wordwrap": lambda value, a: _count(value, " ") * _width(a[2]) if len(a) > 2 else 0,
    "tojson": lambda value, a: _items(value) * _width(a[0]) if a and a[0] is not None else 0,
    "expandtabs": lambda value, a: _count(value, "\t") * _width(a[0]),
}
#: The keyword names of the arguments above, in their order.
_KEYWORDS = {
    "center": ("width",),
    "indent": ("width",),
    "batch": ("linecount",),
    "slice": ("slices",),
    "replace": ("old", "new"),
    "join": ("d",),
    "wordwrap": ("width", "break_long_words", "wrapstring"),
    "tojson": ("indent",),
    "expandtabs": ("tabsize",),
}


def sized_items(items: Any) -> Any:
    """A join's items as a list when they come as an iterator, so its size is known before it runs."""
    if isinstance(items, (str, bytes, list, tuple, dict, set, frozenset, range)):
        return items
    try:
        return charge(list(items))
    except TypeError:  # not iterable: the join's own error says so
        return items


def check_call(name: str, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Refuse, before it runs, a filter or a string method (``name`` on ``value``) that would
    make a value over the limit: a huge number or width, or one of ``_ESTIMATES`` over it."""
    check_arguments([*args, *kwargs.values()])
    if name in ("format", "format_map"):
        check_arguments([value])
    estimate = _ESTIMATES.get(name)
    if estimate is None:
        return
    given = [args[i] if i < len(args) else kwargs.get(k) for i, k in enumerate(_KEYWORDS[name])]
    if name == "join" and isinstance(value, str):  # str.join(items): the separator is the value
        value, given = given[0] if given[0] is not None else (), [value]
    if given and estimate(value, given) > SIZE_LIMIT:
        raise BudgetExceeded(f"the template's {name} would make more than {SIZE_LIMIT:,} characters")


#: The operators checked before they run (``*`` and ``**`` make big values from small ones).
CHECKED_BINOPS = {"*": _times, "**": _power, "+": _plus, "%": _modulo}


def run(generate: Iterable[str]) -> str:
    """The rendering that ``generate`` yields, within a fresh budget and the size limit."""
    budget = Budget()
    token = _CURRENT.set(budget)
    try:
        pieces: list[str] = []
        size = 0
        for piece in generate:
            size += len(piece)
            if size > SIZE_LIMIT:
                raise BudgetExceeded(f"the rendering passed {SIZE_LIMIT:,} characters")
            pieces.append(piece)
        return "".join(pieces)
    finally:
        _CURRENT.reset(token)
