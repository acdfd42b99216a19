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
- with a ``tokenizer.json``, the rendering's tokens are counted (``tokenizers``, offline).

The optional extra ``chat-template`` (``jinja2``, ``tokenizers``) is imported on first use only.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass
from typing import Any

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


def load_template(path: str) -> TemplateSettings:
    """``--chat-template PATH`` read: a template file, or a tokenizer folder (``error`` says
    what is wrong; nothing raises)."""
    try:
        if not os.path.isdir(path):
            with open(path, encoding="utf-8") as handle:
                return _checked(TemplateSettings(path, handle.read()))
        config: dict[str, Any] = {}
        config_path = os.path.join(path, "tokenizer_config.json")
        if os.path.exists(config_path):
            with open(config_path, encoding="utf-8") as handle:
                config = json.load(handle)
        source = config.get("chat_template")
        if isinstance(source, list):  # named templates: the default one
            source = next(
                (t.get("template") for t in source if isinstance(t, dict) and t.get("name") == "default"), None
            )
        jinja_path = os.path.join(path, "chat_template.jinja")
        if not isinstance(source, str) and os.path.exists(jinja_path):
            with open(jinja_path, encoding="utf-8") as handle:
                source = handle.read()
        if not isinstance(source, str) or not source:
            return TemplateSettings(
                path, error=f"--chat-template {path}: no chat_template in its tokenizer_config.json"
            )
        tokenizer = os.path.join(path, "tokenizer.json")
        return _checked(
            TemplateSettings(
                path,
                source,
                _token_text(config.get("bos_token")),
                _token_text(config.get("eos_token")),
                tokenizer if os.path.exists(tokenizer) else None,
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


@functools.lru_cache(maxsize=8)
def _compiled(source: str) -> Any:
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = lambda value, indent=None, **_: json.dumps(value, ensure_ascii=False, indent=indent)
    env.globals["raise_exception"] = _raise
    return env.from_string(source)


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
        return str(
            _compiled(settings.source).render(
                messages=messages,
                tools=hf_record.get("tools"),
                add_generation_prompt=False,
                bos_token=settings.bos_token,
                eos_token=settings.eos_token,
            )
        )
    except TemplateRefused:
        raise
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
