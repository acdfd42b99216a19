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
- a rendering that passes its budget of work or size (``transforms.template_budget``: nested
  loops, a string repeated past the limit) is refused, ``chat-template: render_limit: ...``.

Only regular files of bounded size are read (a device, a FIFO or an oversize file is refused
before the run, a FIFO never opened for a blocking read), and in a tokenizer folder no file a
symlink leads out of the folder (a Hugging Face cache snapshot's ``blobs/`` excepted).

The optional extra ``chat-template`` (``jinja2``, ``tokenizers``) is imported on first use only.
"""

from __future__ import annotations

import functools
import json
import os
import stat
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
    #: The folder's ``tokenizer.json``, to count tokens; ``None``: no counting.
    tokenizer: str | None = None
    #: Why the template cannot be used (a sentence naming the path); ``None``: it can.
    error: str | None = None


def _token_text(value: Any) -> str:
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else ""


#: The largest template or tokenizer_config.json read (the largest known are well under 1 MiB).
FILE_LIMIT = 16 * 1024 * 1024
#: The largest tokenizer.json taken (the tokenizers library reads it whole).
TOKENIZER_LIMIT = 1024 * 1024 * 1024


def _inside(path: str, folder: str) -> str:
    """``path``, if it resolves inside ``folder`` (or, in a Hugging Face cache snapshot
    ``.../snapshots/<rev>/``, its ``blobs/`` folder); ``ValueError`` if a symlink leads out."""
    real, home = os.path.realpath(path), os.path.realpath(folder)
    roots = [home]
    if os.path.basename(os.path.dirname(home)) == "snapshots":
        roots.append(os.path.join(os.path.dirname(os.path.dirname(home)), "blobs"))
    if not any(os.path.commonpath([real, root]) == root for root in roots):
        raise ValueError(f"{os.path.basename(path)} is a symlink to {real}, outside the tokenizer folder")
    return path


def _regular(path: str, limit: int) -> None:
    """``ValueError`` unless ``path`` is a regular file of at most ``limit`` bytes (a stat, so a
    device or a FIFO is never opened)."""
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"{path} is not a regular file")
    if info.st_size > limit:
        raise ValueError(f"{path} holds {info.st_size:,} bytes, more than {limit:,}")


def _read(path: str) -> str:
    """A regular file's text: opened without blocking and checked on
    the open file, so a FIFO or a device swapped in after a stat is refused too (at most
    ``FILE_LIMIT`` bytes)."""
    limit = FILE_LIMIT
    _regular(path, limit)
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise ValueError(f"{path} is not a regular file")
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{path} holds more than {limit:,} bytes")
    return data.decode("utf-8")


def load_template(path: str) -> TemplateSettings:
    """``--chat-template PATH`` read: a template file, or a tokenizer folder (``error`` says
    what is wrong; nothing raises). Only regular files of bounded size are read, and in a
    folder none a symlink leads out of."""
    try:
        if not os.path.isdir(path):
            return _checked(TemplateSettings(path, _read(path)))
        config: dict[str, Any] = {}
        config_path = os.path.join(path, "tokenizer_config.json")
        if os.path.lexists(config_path):
            config = json.loads(_read(_inside(config_path, path)))
            if not isinstance(config, dict):
                raise ValueError("its tokenizer_config.json is not a JSON object")
        source = config.get("chat_template")
        if isinstance(source, list):  # named templates: the default one
            source = next(
                (t.get("template") for t in source if isinstance(t, dict) and t.get("name") == "default"), None
            )
        jinja_path = os.path.join(path, "chat_template.jinja")
        if not isinstance(source, str) and os.path.lexists(jinja_path):
            source = _read(_inside(jinja_path, path))
        if not isinstance(source, str) or not source:
            return TemplateSettings(
                path, error=f"--chat-template {path}: no chat_template in its tokenizer_config.json"
            )
        tokenizer_path = os.path.join(path, "tokenizer.json")
        tokenizer = tokenizer_path if os.path.lexists(tokenizer_path) else None
        if tokenizer is not None:
            _regular(_inside(tokenizer, path), TOKENIZER_LIMIT)
        return _checked(
            TemplateSettings(
                path,
                source,
                _token_text(config.get("bos_token")),
                _token_text(config.get("eos_token")),
                tokenizer,
            )
        )
    except (OSError, ValueError) as error:
        return TemplateSettings(path, error=f"--chat-template {path}: {error}")


def _checked(settings: TemplateSettings) -> TemplateSettings:
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
def _tokenizer(path: str) -> Any:
    import tokenizers

    return tokenizers.Tokenizer.from_file(path)


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
