"""The dataset card (``README.md``) an ``hf`` run writes at the top of its output.

``datasets.load_dataset("json", data_files=<all parts>)`` infers the columns from the first
10 MB of the first part and casts every other part to them: a column that part holds only as
null (no tool call, no tool definitions, no weights), or call arguments whose keys or value
types differ from the first part's, fail the load or come back changed (a key the first part
had added as null, a number as text). docs/formats.md says exactly when a plain load holds.

The card removes the guess. Its YAML header names each split's files (``configs``: ``train``
is ``normalized/``, a ``--split`` its own folder) and the features of every part
(``dataset_info.features``, the writer's schema, arguments and tools as ``json``), so that
``datasets.load_dataset(<output>)`` loads every split as one dataset of that schema, Json
values decoded to objects. Only the split folders are named: ``drops/`` and ``dead_letter/``
are the run's reports, not data. Written by finalize like ``summary.json`` (recorded in the
lock, listed in the manifest, never over a file convnorm did not write).
"""

from __future__ import annotations

import yaml

from transforms.dataset.dataset_keys import TRAIN
from transforms.formats.datasets import yaml_features

_BODY = """
# convnorm output (sink `{sink}`)

Conversations normalized by convnorm (`--sink {sink}`). The header above names each split's
part files and the features every part has (call arguments and tools as `json`), so that

```python
import datasets

ds = datasets.load_dataset("path/to/this/folder")  # {splits}
```

loads each split as one dataset, whatever its parts hold. Load the folder, not the part
files: `datasets.load_dataset("json", data_files=<the parts>)` infers every column from the
first file it reads, so a later part whose calls or tools differ fails to load ("Couldn't cast
... arguments: struct<...> to null") or has its values cast. `summary.json` counts what the
run kept and dropped; `drops/` and `dead_letter/` say why, per conversation.
"""


def dataset_card(sink: str, id_field: str, extension: str, split_dirs: tuple[str, ...], records: dict) -> bytes | None:
    """The card's bytes: ``split_dirs`` are the run's record folders (``normalized`` first),
    ``records`` the records of each output folder on disk. A split without records has no
    files, which a ``data_files`` entry may not name: it is left out. None when no split has
    any (nothing to load)."""
    splits = [(TRAIN if name == "normalized" else name, name) for name in split_dirs if records.get(name)]
    if not splits:
        return None
    header = {
        "configs": [
            {
                "config_name": "default",
                "data_files": [{"split": split, "path": f"{folder}/part-*{extension}"} for split, folder in splits],
            }
        ],
        "dataset_info": {"features": yaml_features(sink, id_field)},
    }
    text = yaml.safe_dump(header, sort_keys=False, allow_unicode=False, width=1000)
    body = _BODY.format(sink=sink, splits=", ".join(split for split, _ in splits))
    return f"---\n{text}---\n{body}".encode()
