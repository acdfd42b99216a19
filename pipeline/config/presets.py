"""``--config`` presets: a YAML mapping of flag names to values, read and checked without Beam.

A preset is bounded before it is parsed (``MAX_PRESET_BYTES``, aliases expanded at most
``MAX_PRESET_VALUES`` values, integers at most ``MAX_PRESET_INTEGER`` digits), and each of its
values must have the shape its flag takes (``our_preset_value``); ``preset_entries`` gives the
flags a preset sets, as command-line words."""

from __future__ import annotations

import argparse
import json
import os

import yaml

from pipeline.config.dask_flags import DASK_FLAGS
from pipeline.config.flags import ConfigError, FlagRecorder, our_flags
from pipeline.io.shard import special_file_kind

#: A preset is a short mapping of options: past these it is refused before it is read into
#: values (a YAML alias bomb, ten lines long, expands to gigabytes when its values are used).
MAX_PRESET_BYTES = 1 << 20


MAX_PRESET_VALUES = 100_000


#: Numbers in a preset: an integer past this is no option's value (and past 4,300 digits
#: Python cannot even show it in an error).
MAX_PRESET_INTEGER = 1 << 63


_YAML_INT = "tag:yaml.org,2002:int"


def _expanded_size(node, sizes: dict, path: str, open_nodes: set, option: str = "") -> int:
    """The number of values ``node`` stands for once every alias in it is expanded, counted on
    the composed graph (an alias is the node it names: nothing is expanded here); ``option`` is
    the top-level key it is under, for the errors."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in open_nodes:
        raise ConfigError(f"--config {path!r}: an alias refers to the value that holds it")
    if node.tag == _YAML_INT and len(str(node.value).lstrip("+-").replace("_", "")) > 19:
        raise ConfigError(
            f"--config {path!r}: {option!r} holds an integer of {len(node.value):,} digits; no option takes one "
            "that large"
        )
    open_nodes.add(key)
    children: list = []
    if isinstance(node, yaml.MappingNode):
        children = [(child, option or str(pair[0].value)) for pair in node.value for child in pair]
    elif isinstance(node, yaml.SequenceNode):
        children = [(child, option) for child in node.value]
    total = 1
    for child, under in children:
        total += _expanded_size(child, sizes, path, open_nodes, under)
        if total > MAX_PRESET_VALUES:
            raise ConfigError(
                f"--config {path!r} expands to more than {MAX_PRESET_VALUES:,} values (YAML aliases repeat "
                "what they name); a preset is a short mapping of options"
            )
    open_nodes.discard(key)
    sizes[key] = total
    return total


def _check_numbers(value, path: str, key) -> None:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, int) and not isinstance(item, bool) and abs(item) >= MAX_PRESET_INTEGER:
            raise ConfigError(
                f"--config {path!r}: {key!r} holds an integer of {item.bit_length():,} bits; no option takes "
                "one that large"
            )
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def read_preset(path: str, open_file=open) -> dict:
    """The mapping a ``--config`` file holds (empty for an empty file). Raises ConfigError.

    ``open_file(path)`` opens one on another filesystem (``pipeline.config.options`` passes Beam's
    ``FileSystems.open``); a local one is read only if it is a regular file. At most ``MAX_PRESET_BYTES``,
    standing for at most ``MAX_PRESET_VALUES`` values with its aliases expanded, integers below
    2**63: checked before the values exist.
    """
    try:
        with _open_regular(path) if "://" not in path else open_file(path) as handle:
            text = handle.read(MAX_PRESET_BYTES + 1)
        if len(text) > MAX_PRESET_BYTES:
            raise ConfigError(
                f"--config {path!r} is larger than {MAX_PRESET_BYTES >> 20} MiB; a preset is a short file"
            )
        loader = yaml.SafeLoader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return {}
            _expanded_size(node, {}, path, set())
            loaded = loader.construct_document(node)
        finally:
            loader.dispose()
    except FileNotFoundError:
        raise ConfigError(f"--config {path!r}: no such file") from None
    except RecursionError:
        raise ConfigError(f"--config {path!r}: nested too deeply") from None
    except (OSError, yaml.YAMLError) as error:
        raise ConfigError(f"--config {path!r}: {' '.join(str(error).split())}") from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"--config {path!r}: expected a mapping of option names to values")
    for key, value in loaded.items():
        _check_numbers(value, path, key)
    return loaded


def preset_entries(path: str, loaded: dict, known: frozenset[str] | None):
    """``(key as written, dest, value)`` of each option a preset sets. Raises ConfigError.

    A key may name a flag (``format``, ``max-tokens``) or its dest (``input_format``);
    ``known`` is every option name (ours and Beam's); ``None`` when Beam's are not known here
    (then a key that is not ours is left for the check after Beam's import). A key whose value
    is empty (``key:``) leaves the option as it was.
    """
    ours = our_flags()
    by_flag = {action.option_strings[0][2:].replace("-", "_"): dest for dest, action in ours.actions.items()}
    by_flag.update({flag[2:]: dest for flag, dest in DASK_FLAGS.items()})  # Beam's Dask flags name no dest
    for raw_key, value in loaded.items():
        key = str(raw_key).replace("-", "_")
        dest = by_flag.get(key, key)
        if dest == "config":
            raise ConfigError(f"--config {path!r}: a preset cannot load another preset")
        if dest not in ours.actions and known is not None and dest not in known:
            raise ConfigError(f"--config {path!r}: unknown option {raw_key!r}")
        if value is not None:
            yield raw_key, dest, value


class WrongShape(Exception):
    """A preset value of the wrong type or shape; the message says what the option expects."""


def _expected(action: argparse.Action, repeatable: bool) -> str:
    """What a preset must give for one of our flags, in words."""
    if isinstance(action, argparse.BooleanOptionalAction):
        return "true or false"
    if action.type is int:
        return "an integer"
    if action.type is float:
        return "a number"
    if action.choices:
        return "one of " + ", ".join(action.choices)
    return "a string or a list of strings" if repeatable else "a string"


def _our_value(action: argparse.Action, repeatable: bool, value):
    """A preset's value for one of our flags, as the flag would set it. Raises WrongShape."""
    if isinstance(value, bool) and action.choices and ("on" if value else "off") in action.choices:
        # YAML reads an unquoted on / off (yes / no) as a boolean: a flag whose choices are
        # those words takes the word it was written as (``call_logs: off``, ``progress: off``).
        value = "on" if value else "off"
    if isinstance(value, bool):
        ok = isinstance(action, argparse.BooleanOptionalAction)
    elif isinstance(action, argparse.BooleanOptionalAction):
        ok = False
    elif action.type in (int, float):
        ok = isinstance(value, int if action.type is int else (int, float))
        value = action.type(value) if ok else value
    else:
        items = value if repeatable and isinstance(value, list) else [value]
        # YAML reads `window: 60` as a number; the flag would have read its text.
        ok = all(isinstance(item, (str, int, float)) and not isinstance(item, bool) for item in items)
        ok = ok and not (action.choices and str(value) not in action.choices)
        value = [str(item) for item in items] if repeatable else str(value)
    if not ok:
        raise WrongShape(f"expects {_expected(action, repeatable)}")
    return value


def shown_value(value) -> str:
    """A preset's value as an error names it: ``the string '500'``, ``a list``, ``true``."""
    if isinstance(value, (list, dict)):
        return "a list" if isinstance(value, list) else "a mapping"
    return f"the string {value!r}" if isinstance(value, str) else json.dumps(value)


def our_preset_value(path: str, raw_key, ours: FlagRecorder, dest: str, value):
    """A preset's value for one of our flags, checked and converted. Raises ConfigError."""
    try:
        return _our_value(ours.actions[dest], dest in ours.repeatable, value)
    except WrongShape as wrong:
        raise ConfigError(f"--config {path!r}: {raw_key!r} {wrong}, not {shown_value(value)}") from None


def argparse_detail(error: Exception) -> str:
    """argparse's message without its ``argument --flag:`` prefix (the caller names the key)."""
    return str(error).split(": ", 1)[-1] if str(error).startswith("argument ") else str(error)


def _open_regular(path: str):
    """A local preset, opened to read its bytes only if it is a regular file: a FIFO would make
    the read wait for a writer for ever, a device never ends. Opened without blocking, then
    looked at (what is opened is what is looked at)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        kind = special_file_kind(os.fstat(fd).st_mode)
        if kind:
            raise ConfigError(f"--config {path!r} is {kind}; a preset is a regular file (YAML)")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
