"""``--chat-template PATH``: every example rendered as a trainer renders it (no Beam import).

PATH is a Jinja chat template (a file), or a local tokenizer folder: its
``tokenizer_config.json`` (``chat_template``: a template, or a list of named ones, ``default``
taken) or ``chat_template.jinja``, its ``bos_token`` / ``eos_token``, and ``tokenizer.json``
when present, to count tokens. Nothing is downloaded: the files are read where they are.

Each example is rendered the way ``transformers``' ``apply_chat_template`` does it: a sandboxed
Jinja environment with ``trim_blocks`` and ``lstrip_blocks``, the ``loopcontrols`` extension,
``raise_exception``, a ``tojson`` that keeps non-ASCII, and ``messages`` (the example in the hf
sink's shape: tool-call arguments as objects, keys without a value left out), ``tools``,
``add_generation_prompt=False`` and the special tokens. Then:

- an example that does not render (an error, or the template's ``raise_exception``) is refused:
  an ``unwritable`` dead letter, ``chat-template: render_failed: ...``;
- every assistant message must show in the rendering (its text, or the names of its calls): a
  template that renders one as nothing would train on nothing, ``chat-template: empty_assistant_span``;
- with a ``tokenizer.json``, the rendering's tokens are counted (``tokenizers``, offline);
- a rendering that passes its budget of work or size (``transforms.dataset.template_budget``: nested
  loops, a string repeated past the limit) is refused, ``chat-template: render_limit: ...``.

The files are read once, on the driver, by ``pipeline.config.chat_template_files`` (only regular
files of bounded size; no symlink out of a tokenizer folder): the template and the tokenizer's
text travel to the workers in ``TemplateSettings``, so nothing here opens a file.

The optional extra ``chat-template`` (``jinja2``, ``tokenizers``) is imported on first use only.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

from transforms.dataset import template_budget as budget

#: How to install what ``--chat-template`` needs.
EXTRA = "pip install -e '.[chat-template]' in convnorm's checkout"


@dataclass(frozen=True)
class TemplateSettings:
    """A chat template as read from ``--chat-template`` (the text travels to the workers)."""

    path: str
    source: str = ""
    bos_token: str = ""
    eos_token: str = ""
    #: The text of the folder's ``tokenizer.json`` (read on the driver with the rest), to count
    #: tokens; ``None``: no counting.
    tokenizer: str | None = None
    #: Why the template cannot be used (a sentence naming the path); ``None``: it can.
    error: str | None = None


def token_text(value: Any) -> str:
    """A special token as a tokenizer config spells it (text, or an object with its content)."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else ""


def checked(settings: TemplateSettings) -> TemplateSettings:
    """``settings``, or with ``error`` when the extra is missing or the template does not compile."""
    try:
        import jinja2

        if settings.tokenizer is not None:
            import tokenizers  # noqa: F401
    except ImportError as error:
        return TemplateSettings(settings.path, error=f"--chat-template needs {error.name}: {EXTRA}")
    try:
        _compiled(settings.source)
    except jinja2.TemplateError as error:
        return TemplateSettings(settings.path, error=f"--chat-template {settings.path}: not a Jinja template: {error}")
    return settings


class TemplateRefused(Exception):
    """The example cannot be rendered as the trainer would: ``reason`` and a sentence."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


def _raise(message: str) -> None:
    raise TemplateRefused("render_failed", f"the template raised: {message}")


def _guarded_filter(name: str, function: Any) -> Any:
    """A filter whose call is checked before it runs and charged after (``template_budget``)."""
    from jinja2.utils import _PassArg

    skip = 1 if _PassArg.from_obj(function) is not None else 0  # the context Jinja passes first

    @functools.wraps(function)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        if name == "join" and len(args) > skip:
            args = (*args[:skip], budget.sized_items(args[skip]), *args[skip + 1 :])
        value = args[skip] if len(args) > skip else None
        budget.check_call(name, value, args[skip + 1 :], kwargs)
        return budget.charge(function(*args, **kwargs))

    return guarded


@functools.lru_cache(maxsize=1)
def _environment_class() -> Any:
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class BudgetedEnvironment(ImmutableSandboxedEnvironment):
        """The sandbox, every call, filter, loop and operator charged to the rendering's budget."""

        intercepted_binops = frozenset(budget.CHECKED_BINOPS)

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            return budget.charge(budget.CHECKED_BINOPS[operator](left, right))

        def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
            name = getattr(__obj, "__name__", "")
            if name == "join" and args:
                args = (budget.sized_items(args[0]), *args[1:])
            budget.check_call(name, getattr(__obj, "__self__", None), args, kwargs)
            return budget.charge(super().call(__context, __obj, *args, **kwargs))

        def wrap_str_format(self, value: Any) -> Any:
            wrapped = super().wrap_str_format(value)
            if wrapped is not None:
                budget.check_arguments([value.__self__])
            return wrapped

    return BudgetedEnvironment


@functools.lru_cache(maxsize=8)
def _compiled(source: str) -> Any:
    from jinja2.ext import loopcontrols

    env = _environment_class()(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = lambda value, indent=None, **_: json.dumps(value, ensure_ascii=False, indent=indent)
    env.filters = {name: _guarded_filter(name, function) for name, function in env.filters.items()}
    env.filters.update(budget.budget_filters())
    env.globals["raise_exception"] = _raise
    # lipsum(n) makes n paragraphs before anything could charge them; no chat template uses it.
    env.globals.pop("lipsum", None)
    return env.from_string(budget.instrumented(env.parse(source)))


@functools.lru_cache(maxsize=4)
def _tokenizer(text: str) -> Any:
    import tokenizers

    return tokenizers.Tokenizer.from_str(text)


def _without_nulls(message: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in message.items() if value is not None}


def render(hf_record: dict[str, Any], settings: TemplateSettings) -> str:
    """The example (a record of the hf sink's shape) rendered; ``TemplateRefused`` if it cannot be."""
    messages = [_without_nulls(m) for m in hf_record["messages"]]
    try:
        return budget.run(
            _compiled(settings.source).generate(
                messages=messages,
                tools=hf_record.get("tools"),
                add_generation_prompt=False,
                bos_token=settings.bos_token,
                eos_token=settings.eos_token,
            )
        )
    except TemplateRefused:
        raise
    except budget.BudgetExceeded as error:
        raise TemplateRefused("render_limit", str(error)) from None
    except Exception as error:  # noqa: BLE001 — a template's own error is the example's refusal
        raise TemplateRefused("render_failed", f"{type(error).__name__}: {error}") from None


def check_rendered(hf_record: dict[str, Any], text: str) -> None:
    """Every assistant message shows in ``text``: its text, else the names of its calls."""
    for position, message in enumerate(hf_record["messages"]):
        if message["role"] != "assistant":
            continue
        shown = [message["content"]] if message["content"].strip() else []
        shown += [call["function"]["name"] for call in message.get("tool_calls") or ()]
        if not shown or any(piece not in text for piece in shown):
            raise TemplateRefused(
                "empty_assistant_span",
                f"assistant message {position} does not show in the rendering: the trainer would learn nothing from it",
            )


def count_tokens(text: str, settings: TemplateSettings) -> int | None:
    """The rendering's tokens with the folder's tokenizer; ``None`` without one."""
    if settings.tokenizer is None:
        return None
    return len(_tokenizer(settings.tokenizer).encode(text, add_special_tokens=False).ids)
