"""Offline validation of written request bodies with the providers' own SDK types.

The SDKs are the optional ``replay-check`` extra (pyproject.toml): a test that uses one calls
``needs(<module>)`` first and is skipped, saying why, where it is not installed. No network.

- anthropic / openai: the request params are TypedDicts; ``pydantic.TypeAdapter`` validates
  them, but ``Iterable[...]`` fields lazily: the result is drained so every item is checked.
- google-genai: its types are pydantic models with ``extra="forbid"``; the REST body is
  assembled from them (the SDK has no model of the body itself) and validated from JSON (so
  base64 fields such as ``thoughtSignature`` are decoded as on the wire).
- botocore: its service-model validator on the Converse input shape.
"""

from __future__ import annotations

import importlib.util
import json
from typing import Any, Optional

import pytest


def needs(module: str) -> None:
    """Skip the calling test unless the SDK ``module`` is installed."""
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (pip install -e '.[replay-check]')")


def _drain(value: Any, iterator_type: type) -> Any:
    if isinstance(value, iterator_type):
        return [_drain(v, iterator_type) for v in value]
    if isinstance(value, dict):
        return {k: _drain(v, iterator_type) for k, v in value.items()}
    if isinstance(value, list):
        return [_drain(v, iterator_type) for v in value]
    return value


def _typed_dict_errors(params_type: Any, body: Any) -> list[str]:
    from typing import Iterable

    import pydantic

    adapter = pydantic.TypeAdapter(params_type)
    iterator_type = type(pydantic.TypeAdapter(Iterable[int]).validate_python([]))
    try:
        _drain(adapter.validate_python(body), iterator_type)
    except pydantic.ValidationError as error:
        return [f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors()]
    return []


def anthropic_errors(body: Any) -> list[str]:
    from anthropic.types.message_create_params import MessageCreateParamsNonStreaming

    return _typed_dict_errors(MessageCreateParamsNonStreaming, body)


def openai_chat_errors(body: Any) -> list[str]:
    from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming

    return _typed_dict_errors(CompletionCreateParamsNonStreaming, body)


def openai_messages_errors(messages: Any) -> list[str]:
    """A fine-tuning line has no SDK type: its messages as chat messages."""
    from openai.types.chat import ChatCompletionMessageParam

    return _typed_dict_errors(list[ChatCompletionMessageParam], messages)


def responses_errors(body: Any) -> list[str]:
    from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming

    return _typed_dict_errors(ResponseCreateParamsNonStreaming, body)


_GEMINI_BODY = None


def _gemini_body() -> Any:
    global _GEMINI_BODY
    if _GEMINI_BODY is None:
        import pydantic
        from google.genai import types
        from pydantic.alias_generators import to_camel

        class GenerateContentBody(pydantic.BaseModel):
            model_config = pydantic.ConfigDict(
                alias_generator=to_camel, populate_by_name=True, extra="forbid", val_json_bytes="base64"
            )
            contents: list[types.Content]
            system_instruction: Optional[types.Content] = None
            tools: Optional[list[types.Tool]] = None
            tool_config: Optional[types.ToolConfig] = None
            generation_config: Optional[types.GenerationConfig] = None

        _GEMINI_BODY = GenerateContentBody
    return _GEMINI_BODY


def gemini_errors(body: Any) -> list[str]:
    import pydantic

    try:
        _gemini_body().model_validate_json(json.dumps(body))
    except pydantic.ValidationError as error:
        return [f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors()]
    return []


def bedrock_errors(body: Any) -> list[str]:
    from botocore.session import get_session
    from botocore.validate import ParamValidator

    shape = get_session().get_service_model("bedrock-runtime").operation_model("Converse").input_shape
    report = ParamValidator().validate(body, shape)
    return [report.generate_report()] if report.has_errors() else []
