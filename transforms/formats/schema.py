"""The schema of each writer's records, for loading a whole multi-part output as one dataset.

The job writes one part file per shard. A loader that infers its columns from the first part
and casts the others to them (``datasets.load_dataset("json", data_files=<all parts>)``, a
pyarrow table per part) fails when the parts differ: a key one part has and another lacks
(``parallel_tool_calls``), or a free-form object whose keys differ from record to record (a
tool's parameter schema, a call's input, a Batch line's body). So each writer declares the
schema of its records (``Writer.schema``), in the small vocabulary below, and
``transforms.formats.datasets.datasets_features`` turns it into the description
``datasets.Features.from_dict`` takes::

    import datasets
    from transforms.formats.datasets import datasets_features

    features = datasets.Features.from_dict(datasets_features("openai-finetune"))
    ds = datasets.load_dataset("json", data_files="out/normalized/*.jsonl", split="train", features=features)
    table = ds.data.table  # the whole output as one pyarrow table

Vocabulary: ``STRING``, ``BOOL``, ``INT``, ``FLOAT`` (a scalar column of that type), ``JSON`` (any JSON
value, stored as JSON text and decoded back: ``datasets.Json``), a dict (an object of those
keys), a one-element list (a list of that). A key the schema names and a record lacks loads as
null. ``ID`` stands for the record id field (``--id-field``), whose values may be text or
numbers (JSON). No ``datasets`` import: the description is plain dicts.
"""

from __future__ import annotations

STRING = "string"
BOOL = "bool"
INT = "int64"
FLOAT = "float64"
JSON = "json"
#: The placeholder key of the record id field in a schema.
ID = "<id>"


# The pieces the writers' schemas share.

#: A Chat Completions message as the OpenAI writers write it.
OPENAI_MESSAGE = {
    "role": STRING,
    "content": STRING,
    "tool_calls": [
        {
            "id": STRING,
            "type": STRING,
            "function": {"name": STRING, "arguments": STRING},
            "custom": {"name": STRING, "input": STRING},
        }
    ],
    "tool_call_id": STRING,
}
