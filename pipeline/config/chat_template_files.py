"""``--chat-template PATH`` read on the driver: the template file, or a tokenizer folder's
``tokenizer_config.json`` / ``chat_template.jinja`` and ``tokenizer.json``, into the
``TemplateSettings`` that travel to the workers (``transforms.dataset.chat_template`` renders and
counts with them and opens no file).

Only regular files of bounded size are read (a device, a FIFO or an oversize file is refused
before the run, a FIFO never opened for a blocking read), and in a tokenizer folder no file a
symlink leads out of the folder (a Hugging Face cache snapshot's ``blobs/`` excepted).
"""

from __future__ import annotations

import json
import os
import stat
from typing import Any

from transforms.dataset.chat_template import TemplateSettings, checked, token_text

#: The largest template or tokenizer_config.json read (the largest known are well under 1 MiB).
FILE_LIMIT = 16 * 1024 * 1024
#: The largest tokenizer.json taken: it travels to every worker with the settings (the largest
#: known, Gemma's, is about 34 MiB).
TOKENIZER_LIMIT = 256 * 1024 * 1024


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


def _read(path: str, limit: int | None = None) -> str:
    """A regular file's text: opened without blocking and checked on the open file, so a FIFO
    or a device swapped in after a stat is refused too (at most ``limit``, else ``FILE_LIMIT``,
    bytes)."""
    limit = FILE_LIMIT if limit is None else limit
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
            return checked(TemplateSettings(path, _read(path)))
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
        tokenizer = None
        if os.path.lexists(tokenizer_path):
            tokenizer = _read(_inside(tokenizer_path, path), TOKENIZER_LIMIT)
        return checked(
            TemplateSettings(
                path,
                source,
                token_text(config.get("bos_token")),
                token_text(config.get("eos_token")),
                tokenizer,
            )
        )
    except (OSError, ValueError) as error:
        return TemplateSettings(path, error=f"--chat-template {path}: {error}")
