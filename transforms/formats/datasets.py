"""A writer's schema (``transforms.formats.schema``) as the description ``datasets.Features.from_dict``
takes, for loading a whole multi-part output as one dataset::

    import datasets
    from transforms.formats.datasets import datasets_features

    features = datasets.Features.from_dict(datasets_features("openai-finetune"))
    ds = datasets.load_dataset("json", data_files="out/normalized/*.jsonl", split="train", features=features)

Apart from the schemas because it looks the writers up (``transforms.formats.WRITERS``), which
import the schemas: nothing in ``transforms/formats/`` imports this module. No ``datasets``
import: the description is plain dicts.

``yaml_features`` is the same description as a dataset card's ``dataset_info.features`` spells
it (``datasets.Features._to_yaml_list``): the ``README.md`` an ``hf`` run writes
(``pipeline.io.dataset_card``) declares it, so that ``load_dataset(<output>)`` needs nothing else."""

from __future__ import annotations

from typing import Any

from transforms.formats import WRITERS
from transforms.formats.schema import ID, JSON


def _feature(schema: Any) -> Any:
    if schema == JSON:
        return {"_type": "Json"}
    if isinstance(schema, str):
        return {"dtype": schema, "_type": "Value"}
    if isinstance(schema, list):
        (item,) = schema
        return {"feature": _feature(item), "_type": "List"}
    return {key: _feature(value) for key, value in schema.items()}


def _schema(sink: str) -> dict[str, Any]:
    schema = WRITERS[sink].schema
    if schema is None:
        raise ValueError(f"sink {sink!r} declares no schema (its records keep the input's own fields)")
    return schema


def datasets_features(sink: str, id_field: str = "id") -> dict[str, Any]:
    """The ``datasets.Features.from_dict`` description of the records ``sink`` writes."""
    return {(id_field if key == ID else key): _feature(value) for key, value in _schema(sink).items()}


def _yaml_type(schema: Any) -> dict[str, Any]:
    """A field's type as the card's YAML spells it: ``dtype: json``, ``struct: [...]``, ``list: ...``."""
    if schema == JSON:
        return {"dtype": "json"}
    if isinstance(schema, str):
        return {"dtype": schema}
    if isinstance(schema, list):
        (item,) = schema
        inner = _yaml_type(item)
        # datasets' shorthand: a list of a scalar names its dtype, a list of an object its fields.
        if list(inner) == ["dtype"]:
            return {"list": inner["dtype"]}
        if list(inner) == ["struct"]:
            return {"list": inner["struct"]}
        return {"list": inner}
    return {"struct": [{"name": key, **_yaml_type(value)} for key, value in schema.items()]}


def yaml_features(sink: str, id_field: str = "id") -> list[dict[str, Any]]:
    """``dataset_info.features`` of a dataset card for the records ``sink`` writes, in the
    declared order: what ``datasets.Features._from_yaml_list`` reads back as ``datasets_features``."""
    return [{"name": id_field if key == ID else key, **_yaml_type(value)} for key, value in _schema(sink).items()]
