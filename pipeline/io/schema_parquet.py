"""A sink's records as Parquet rows of the schema its writer declares (``Writer.schema``).

Every part of a multi-part output then has the same Arrow schema, so ``datasets.load_dataset(
"parquet", data_files=parts)`` and ``pyarrow.parquet.ParquetDataset(parts)`` load it as one
table with nothing else given. The schema's vocabulary (``transforms.formats.schema``) maps to
Arrow: ``STRING`` string, ``INT`` int64, ``FLOAT`` float64, ``BOOL`` bool, a dict a struct, a list a list, and
``JSON`` (a free-form value: call arguments, a tool's schema) Arrow's canonical JSON extension
type (``pyarrow.json_()``, stored as its JSON text). The file also carries the ``datasets``
features (``transforms.formats.datasets``) under the ``huggingface`` schema metadata key, as
``datasets`` writes it, so that ``datasets`` decodes the JSON columns back to objects.

A record's key the schema does not name cannot be written: ``MissingFromSchema`` (the writers
that declare a schema write no other key; ``tests/test_sinks_load_as_one_dataset.py`` checks it).
"""

from __future__ import annotations

import json
from typing import Any

from transforms.core.jsontext import dumps_line
from transforms.formats import WRITERS
from transforms.formats.datasets import datasets_features
from transforms.formats.schema import BOOL, FLOAT, ID, INT, JSON, STRING


class MissingFromSchema(ValueError):
    """A record key the sink's declared schema has no column for."""


def _arrow_type(pa: Any, schema: Any, json_type: Any) -> Any:
    if schema == JSON:
        return json_type
    if schema == STRING:
        return pa.string()
    if schema == INT:
        return pa.int64()
    if schema == BOOL:
        return pa.bool_()
    if schema == FLOAT:
        return pa.float64()
    if isinstance(schema, list):
        return pa.list_(_arrow_type(pa, schema[0], json_type))
    return pa.struct([(key, _arrow_type(pa, value, json_type)) for key, value in schema.items()])


def _named(schema: dict[str, Any], id_field: str) -> dict[str, Any]:
    return {(id_field if key == ID else key): value for key, value in schema.items()}


def sink_schema(pa: Any, sink: str, id_field: str = "id") -> tuple[Any, Any]:
    """``(storage schema, file schema)`` of ``sink``'s rows: JSON values as text, then as the
    JSON extension type, with the ``datasets`` features in the metadata."""
    declared = WRITERS[sink].schema
    if declared is None:
        raise ValueError(f"sink {sink!r} declares no schema")
    declared = _named(declared, id_field)
    storage = pa.schema([(key, _arrow_type(pa, value, pa.string())) for key, value in declared.items()])
    features = {"info": {"features": datasets_features(sink, id_field)}}
    typed = pa.schema(
        [(key, _arrow_type(pa, value, pa.json_())) for key, value in declared.items()],
        metadata={"huggingface": json.dumps(features)},
    )
    return storage, typed


def _storage_value(value: Any, schema: Any, where: str) -> Any:
    if value is None:
        return None
    if schema == JSON:
        return dumps_line(value).decode()  # compact JSON text, key order kept, as the JSON Lines hold it
    if isinstance(schema, list):
        return [_storage_value(item, schema[0], where) for item in value]
    if isinstance(schema, dict):
        unknown = [key for key in value if key not in schema]
        if unknown:
            raise MissingFromSchema(f"{where}: no column for {', '.join(map(repr, unknown))}")
        return {key: _storage_value(value.get(key), sub, f"{where}.{key}") for key, sub in schema.items()}
    return value


def storage_row(record: dict[str, Any], sink: str, id_field: str = "id") -> dict[str, Any]:
    """One of ``sink``'s records as a row of its storage schema (``sink_schema``)."""
    declared = WRITERS[sink].schema
    assert declared is not None  # the options allow Parquet only for sinks with a schema
    return _storage_value(record, _named(declared, id_field), sink)
