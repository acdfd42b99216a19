"""Call logs on the landing-directory stream: the pieces each landed file holds are kept in its
outputs directory; when a window closes, the groups it touched are assembled from every piece
committed so far and written into the window, exactly once across kills.

::

    OUT/<window>/<file>/calls.jsonl        a landed file's pieces (one JSON line each: its
                                           record's source and position, kind, fields; a
                                           call's history after what it shares with its
                                           group's call before it: ``piece_lines``),
                                           committed with its other outputs in one rename
    OUT/<window>/calls_index.json          group -> the window's outputs directories holding
                                           its pieces, and each directory's landed file and
                                           version (derived from their source.json)
    OUT/<window>/assembled/                at the window's close: every group with a piece in
        normalized.jsonl drops.jsonl       the window, assembled from its pieces in this and
        dead_letter.jsonl assembled.json   every earlier window, normalized by the job's step

**The rule.** A window's close emits each group touched in it, whole, with every call so far
(``assembly.pane``: how many earlier windows emitted it; ``reopened`` counts the emissions
after the first): the newest record of an id is the one to keep. The pieces are those of the
windows up to this one (by name, which is time order), so what a window emits depends only on
the files committed, not on when its close ran. A window is assembled once, after its close,
from every piece committed into it, across kills and restarts: its assembly is done once its
``assembled/`` directory is in place (renamed in one step, like a landed file's outputs), and
no file is committed into it after that (``sealed_until``: a start admits none before its
end). A start assembles the windows a dead run left without it whose end has passed, before it
rewrites their summaries; one still open (``still_open``) stays open, and the run's close of
it (``windows.KeepWindowsOpen``) assembles it. The final summary checks that every piece was
read by its window's assembly (``assembled.json``'s ``window_files``).
A landed file read again whole (``rewritten``) replaces its earlier versions' pieces; an
appended version adds to them.
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import json
import logging
import os
import threading
import uuid
from typing import Any, Callable, Iterable, NamedTuple

from apache_beam.io.filesystems import FileSystems

from pipeline.graph.chain_groups import chain_enabled, chained_in_memory
from pipeline.graph.shard_step import ShardWork, process_batches
from pipeline.io import files
from pipeline.io import processed_files as processed
from pipeline.io.processed_files import ASSEMBLED_DIR, ASSEMBLED_FILE, CALLS_FILE
from pipeline.streaming.piece_lines import PieceLines
from pipeline.testhooks import pause_point
from transforms.calllogs.assemble import GroupState, call_traces, group_key
from transforms.calllogs.calls import Call, Fragment
from transforms.calllogs.joins import is_join_key, joined_states
from transforms.calllogs.labels import LABEL_READERS, targets_of
from transforms.calllogs.response_links import merged_by_response
from transforms.core.jsontext import canonical_json, dumps_line
from transforms.record.assembled_calls import assembly_partial, conversations_of, emitted_again, shard_batches
from transforms.record.labelled_calls import joined_in, labelled
from transforms.record.record_steps import CallLogged
from transforms.totals import summary as summaries

LOG = logging.getLogger("convnorm")

CALL_INDEX_FILE = "calls_index.json"
#: The number a window's assembled conversations carry as a shard (never a file name here).
ASSEMBLED_SHARD = -4

#: ``commit(temp, output, relative) -> bool``: rename a finished directory into place (False:
#: the run stopped committing).
Commit = Callable[[str, str, str], bool]


def _key_text(key: tuple[str, str]) -> str:
    return canonical_json(list(key)).decode()


class CallsWritten(NamedTuple):
    """What ``write_calls`` kept of a landed file's pieces, for its ``source.json``."""

    #: records, bytes, sha256 of ``calls.jsonl``
    measure: dict
    #: its groups, sorted ``[format, group]``
    groups: list[list[str]]
    #: the ids its calls offer labels, sorted ``[id, format, group]``
    targets: list[list[str]]
    #: for each of ``groups``, the byte spans of its lines in ``calls.jsonl`` (``[start, end,
    #: start, end...]``): a close parses those lines only
    spans: list[list[int]]
    #: ``calls.jsonl``'s bytes and its pieces as read (``JustWritten``)
    kept: Kept | None = None


class Kept(NamedTuple):
    """A ``calls.jsonl`` as written and the pieces its lines hold, as the reader gave them."""

    data: bytes
    #: each line's first byte in ``data`` and its ``(source, position, piece)``, in order
    starts: list[int]
    pieces: list[tuple[str, int, Any]]

    def within(self, spans: Iterable[int] | None) -> Iterable[tuple[str, int, Any]]:
        """The pieces of the lines in ``spans`` (``read_calls``'), or every one."""
        if spans is None:
            yield from self.pieces
            return
        at = iter(spans)
        for start, end in zip(at, at):
            for index in range(bisect.bisect_left(self.starts, start), bisect.bisect_left(self.starts, end)):
                yield self.pieces[index]


class JustWritten:
    """The pieces of the ``calls.jsonl`` files this process committed, kept until a close
    reads them (at most ``limit`` bytes of lines, the oldest forgotten first): a close in the
    process that cleaned its window's files (a loopback worker's thread, as on Prism) takes
    them as they are, instead of parsing its files' lines again. Only when the file on disk
    holds the very bytes written: the file stays what a close reads (after a restart, in
    another worker process), and each kept file is taken once (a close tried again parses).
    The pieces are the reader's own objects, as a batch run's assembly gets them: the assembly
    and the job's step never change what they are given (``normalize``: the input is never
    mutated), so the reader's look-ups of a group's last history stay true."""

    def __init__(self, limit: int = 32 << 20) -> None:
        self._lock = threading.Lock()
        self._limit = limit
        self._kept: dict[str, Kept] = {}
        self._bytes = 0

    def keep(self, path: str, kept: Kept) -> None:
        with self._lock:
            self._drop(path)
            self._kept[path] = kept
            self._bytes += len(kept.data)
            while self._bytes > self._limit:
                self._drop(next(iter(self._kept)))

    def take(self, path: str, data: bytes) -> Kept | None:
        """The pieces kept for ``path`` if ``data`` (its bytes now) are those written; forgotten."""
        with self._lock:
            kept = self._drop(path)
        return kept if kept is not None and kept.data == data else None

    def _drop(self, path: str) -> Kept | None:
        kept = self._kept.pop(path, None)
        if kept is not None:
            self._bytes -= len(kept.data)
        return kept


JUST_WRITTEN = JustWritten()


def keep_written(path: str, kept: Kept) -> None:
    """A committed ``calls.jsonl`` at ``path``, as written, for its window's close (``JustWritten``)."""
    JUST_WRITTEN.keep(path, kept)


def write_calls(directory: str, logged: Iterable[CallLogged]) -> CallsWritten | None:
    """A landed file's pieces into ``directory/calls.jsonl`` (``CallsWritten``); None when it
    has none. A group's targets are each call's id and its trace's (``labels.targets_of``); a
    fragment is found by its key, and by the group it names (a post's thread), if any."""
    lines: list[bytes] = []
    spans: dict[tuple[str, str], list[int]] = {}
    targets: set[tuple[str, str, str]] = set()
    end = 0
    writer = PieceLines()
    starts: list[int] = []
    pieces: list[tuple[str, int, Any]] = []
    for item in logged:
        for piece in item.pieces:
            line = writer.line(item.source, item.position, piece)
            start, end = end, end + len(line)
            lines.append(line)
            starts.append(start)
            pieces.append((item.source, item.position, piece))
            key = group_key(piece)
            _add_span(spans.setdefault(key, []), start, end)
            if isinstance(piece, Fragment) and piece.group and (piece.format, piece.group) != key:
                _add_span(spans.setdefault((piece.format, piece.group), []), start, end)
            if isinstance(piece, Call):
                targets.update(
                    (join_id, *key) for join_id in (piece.call_id, (piece.context or {}).get("trace_id")) if join_id
                )
    if not lines:
        return None
    data = b"".join(lines)
    write_in_flight(FileSystems.join(directory, CALLS_FILE), data)
    groups = sorted(spans)
    measure = {"records": len(lines), "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    return CallsWritten(
        measure,
        [list(key) for key in groups],
        [list(target) for target in sorted(targets)],
        [spans[k] for k in groups],
        Kept(data, starts, pieces),
    )


def write_in_flight(path: str, data: bytes) -> None:
    """A new file in a directory in flight (made by this run, renamed into place once whole), as
    the job's writers write theirs beside it (``files.create``: a name never followed, never
    taken twice): no file placed by a rename of its own, as ``files.write_in_place`` does."""
    with files.create(path, mime_type="application/json") as handle:
        handle.write(data)


def compact_document(doc: dict) -> bytes:
    """A document of the driver's own (``source.json``, ``assembled.json``) as one line: Python's
    C encoder, the values as the indented one writes them (a close's and each file's cost:
    indenting took Python's encoder five times as long)."""
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def _add_span(spans: list[int], start: int, end: int) -> None:
    if spans and spans[-1] == start:
        spans[-1] = end  # the line right after the last: one span
    else:
        spans += (start, end)


def read_calls(path: str, spans: Iterable[int] | None = None) -> Iterable[tuple[str, int, Any]]:
    """The pieces of ``calls.jsonl`` at ``path``, in the file's order: every line, or those in
    ``spans`` (``[start, end, ...]``, in order, not overlapping) alone, the others unparsed
    (a group's spans hold every line of its group: a call's line may share its history with
    the group's call before it, ``PieceLines``)."""
    data = files.read_own(path)
    kept = JUST_WRITTEN.take(path, data)
    if kept is not None:
        yield from kept.within(spans)
        return
    reader = PieceLines()
    if spans is None:
        chunks: Iterable[bytes] = (data,)
    else:
        at = iter(spans)
        chunks = (data[start:end] for start, end in zip(at, at))
    for chunk in chunks:
        for line in chunk.splitlines():
            if line:
                yield reader.read(line)


# --------------------------------------------------------------------------------------------
# The index: group -> outputs directories, per window


class WindowIndex(NamedTuple):
    """A window's call index: a group's key (as JSON text) -> the outputs directories holding
    its pieces; and each outputs directory's landed file, version and why (new, appended,
    rewritten), by which a rewritten file's earlier versions are left out."""

    groups: dict[str, list[str]]
    files: dict[str, list[Any]]
    #: A label's join id -> the groups (keys as JSON text) whose calls offer it.
    targets: dict[str, list[str]] = {}
    #: A group's key (as JSON text) -> for each of its ``groups`` directories, the byte spans
    #: of its lines in that directory's ``calls.jsonl`` (``CallsWritten.spans``), or None: not
    #: known (a file of an earlier release), every line is read.
    spans: dict[str, list[list[int] | None]] = {}

    def whole(self) -> dict[Any, int]:
        """Each landed file's latest version here read from its first byte (new, rewritten)."""
        latest: dict[Any, int] = {}
        for source, version, why in self.files.values():
            if why in ("new", "rewritten"):
                latest[source] = max(latest.get(source, 0), version)
        return latest


class HeldIndex(NamedTuple):
    """A window's call index as a process holds it, with what a close looks up in it made once."""

    window: str
    call_index: WindowIndex
    #: ``WindowIndex.whole``
    whole: dict[Any, int]
    #: A label group's join id (a label's group is its join id) -> its keys (as JSON text).
    labels: dict[str, list[str]]


def _held(window: str, index: WindowIndex) -> HeldIndex:
    labels: dict[str, list[str]] = {}
    for text in index.groups:
        fmt, group = json.loads(text)
        if fmt in LABEL_READERS:
            labels.setdefault(group, []).append(text)
    return HeldIndex(window, index, index.whole(), labels)


class SoFar(NamedTuple):
    """The windows up to the one closing, as a close looks them up: each window's index, and
    where each group (or landed file) it asks about is, in those windows alone."""

    #: A window's name -> its index, every window up to the one closing (by name: time order).
    held: dict[str, HeldIndex]
    #: A group's key (as JSON text) -> the windows holding pieces of it, in time order.
    windows_of: Callable[[str], list[str]]
    #: A landed file -> the windows holding a version of it read from its first byte.
    whole_in: Callable[[Any], list[str]]


class _Indexes:
    """Windows' call indexes read or built once per process (a closed window's never changes:
    no file is committed into a window after it closed), so a close reads only the new ones;
    and, across them, each group's windows and each landed file's, so that a close looks at
    the windows holding its groups, not at every window so far."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[tuple[str, str], HeldIndex] = {}
        self._groups: dict[str, dict[str, set[str]]] = {}  # output -> group -> its windows
        self._whole: dict[str, dict[Any, set[str]]] = {}  # output -> landed file -> its windows
        self._windows: dict[str, set[str]] = {}  # output -> the windows held (directories)

    def of(self, output: str, window: str, fresh: bool = False) -> WindowIndex:
        return self._of(output, window, fresh).call_index

    def upto(self, output: str, window: str) -> SoFar:
        """Every window's up to ``window`` (by name, which is time order)."""
        names = self._window_names(output, window)
        with self._lock:  # once, not once a window
            known = {w: self._held.get((output, w)) for w in names}
        held = {w: known[w] or self._of(output, w, False) for w in names}

        def within(found: dict[Any, set[str]], key: Any) -> list[str]:
            with self._lock:  # another close (a thread of this process) may be adding to it
                windows = list(found.get(key, ()))
            return sorted(w for w in windows if w in held)

        with self._lock:
            groups, whole = self._groups.setdefault(output, {}), self._whole.setdefault(output, {})
        return SoFar(held, lambda key: within(groups, key), lambda source: within(whole, source))

    def _window_names(self, output: str, upto: str) -> list[str]:
        """``processed.window_names`` up to ``upto``, without looking again at the windows held
        (a directory each: else a close looks at every window so far)."""
        if not files.is_local(output):
            return [w for w in processed.window_names(output) if w <= upto]
        try:
            names = os.listdir(output)
        except OSError:
            return []
        with self._lock:
            held = self._windows.get(output, set())
            names = [n for n in names if n <= upto and processed.WINDOW_NAME.match(n)]
            unknown = [n for n in names if n not in held]
        found = {n for n in unknown if os.path.isdir(os.path.join(output, n))}
        return sorted(n for n in names if n in held or n in found)

    def _of(self, output: str, window: str, fresh: bool) -> HeldIndex:
        with self._lock:
            held = None if fresh else self._held.get((output, window))
        if held is None:
            held = _held(window, window_index(output, window, fresh))
            with self._lock:
                before = self._held.get((output, window))
                self._held[(output, window)] = held
                self._windows.setdefault(output, set()).add(window)
                groups, whole = self._groups.setdefault(output, {}), self._whole.setdefault(output, {})
                for found, keys in ((groups, before.call_index.groups), (whole, before.whole)) if before else ():
                    for key in keys:
                        found[key].discard(window)
                for found, keys in ((groups, held.call_index.groups), (whole, held.whole)):
                    for key in keys:
                        found.setdefault(key, set()).add(window)
        return held


INDEXES = _Indexes()


def window_index(output: str, window: str, fresh: bool = False) -> WindowIndex:
    """The window's call index (``WindowIndex``): read from ``calls_index.json``, or built from
    the files' ``source.json`` (and written, when the window holds call logs) when it is
    missing or ``fresh`` is asked."""
    path = FileSystems.join(output, window, CALL_INDEX_FILE)
    if not fresh:
        doc = processed.read_json(path)
        if doc is not None:
            # An index of an earlier release has no spans: every line of its files is read.
            unknown: dict[str, list[list[int] | None]] = {t: [None] * len(names) for t, names in doc["groups"].items()}
            return WindowIndex(doc["groups"], doc["files"], doc.get("targets", {}), doc.get("spans") or unknown)
    groups: dict[str, list[str]] = {}
    spans: dict[str, list[list[int] | None]] = {}
    landed: dict[str, list[Any]] = {}
    targets: dict[str, list[str]] = {}
    for name, source in processed.file_results(output, window):
        landed[name] = [source.get("source"), source.get("version", 1), source.get("why", "new")]
        keys = source.get("call_groups", ())
        # A source.json of an earlier release has no spans: every line of its file is read.
        for key, key_spans in zip(keys, source.get("call_spans") or [None] * len(keys)):
            text = _key_text(tuple(key))
            groups.setdefault(text, []).append(name)
            spans.setdefault(text, []).append(key_spans)
        for join_id, *key in source.get("call_targets", ()):
            held = targets.setdefault(join_id, [])
            if _key_text(tuple(key)) not in held:
                held.append(_key_text(tuple(key)))
    if groups:
        doc = {
            "window": window,
            "groups": groups,
            "files": landed,
            "targets": {k: sorted(v) for k, v in targets.items()},
            "spans": spans,
        }
        # One compact line (each close rebuilds its window's: indented, it cost a third of that).
        data = dumps_line(doc) + b"\n"
        files.write_file(output, f"{window}/{CALL_INDEX_FILE}", data, replace=True, mime_type="application/json")
    return WindowIndex(groups, landed, {k: sorted(v) for k, v in targets.items()}, spans)


# --------------------------------------------------------------------------------------------
# A window's close


def flat_work(work: ShardWork) -> ShardWork:
    """The job's step for assembled conversations: flat records, whatever --format said."""
    return dataclasses.replace(work, settings=dataclasses.replace(work.settings, input_format="flat", calls=False))


def _gather(output: str, so_far: SoFar, own: Iterable[str]) -> tuple[dict[str, GroupState], set[str], dict]:
    """The states of the keys ``own`` names (groups, and keys of fragments to join) from every
    piece of the windows ``so_far``; the keys of the fragments that name one of those groups (a
    LangSmith post names its thread: its patch may be anywhere); the outputs directories read,
    each with its landed file, version and why.

    A landed file read again whole (rewritten) replaces what its earlier versions held: their
    pieces are left out (an appended version adds to them)."""
    states = {key: GroupState() for key in own}
    directories: dict[str, list[Any]] = {}
    wanted: dict[str, list[list[int] | None]] = {}  # a directory -> the spans of its lines to read
    for key in states:
        for earlier in so_far.windows_of(key):
            index = so_far.held[earlier].call_index
            for name, spans in zip(index.groups[key], index.spans[key]):
                directory = f"{earlier}/{name}"
                directories[directory] = index.files[name]
                wanted.setdefault(directory, []).append(spans)
    # A landed file -> its latest version read from its first byte, of the files read only.
    whole = dict.fromkeys({source for source, _, _ in directories.values()}, 0)
    for source in whole:
        for earlier in so_far.whole_in(source):
            whole[source] = max(whole[source], so_far.held[earlier].whole[source])
    named: set[str] = set()
    texts: dict[tuple[str, str], str] = {}  # a key -> its JSON text, made once
    read = sorted(d for d, (source, version, _) in directories.items() if version >= whole[source])
    for directory in read:  # in time order: the same states whatever ran when
        path = FileSystems.join(output, *directory.split("/"), CALLS_FILE)
        for source, position, piece in read_calls(path, _merged(wanted[directory])):
            key_tuple = group_key(piece)
            key = texts.get(key_tuple) or texts.setdefault(key_tuple, _key_text(key_tuple))
            state = states.get(key)
            if state is not None:
                state.add(source, position, piece)
            if isinstance(piece, Fragment) and piece.group and _key_text((piece.format, piece.group)) in states:
                named.add(key)
    return states, named, {d: directories[d] for d in read}


def _merged(spans: list[list[int] | None]) -> list[int] | None:
    """Byte spans of several groups' lines in one file, in order and merged; None (every line)
    if one group's are not known."""
    if any(held is None for held in spans):
        return None
    pairs = sorted((held[i], held[i + 1]) for held in spans if held is not None for i in range(0, len(held), 2))
    merged: list[int] = []
    for start, end in pairs:
        if merged and start <= merged[-1]:
            merged[-1] = max(merged[-1], end)  # lines of two groups (a fragment naming one)
        else:
            merged += (start, end)
    return merged


def _joined_groups(
    output: str, window: str, so_far: SoFar, own: dict[str, list[str]]
) -> tuple[dict, dict[str, int], list[str]]:
    """The states of the groups the keys ``own`` names reach, with every piece of the windows
    ``so_far`` (those up to ``window``): a key of fragments reaches the groups its joined
    pieces go to, a group the fragments that name it (and so theirs); how many earlier windows
    emitted each (touched it, or a key that reaches it), and the outputs directories read."""
    states: dict[str, GroupState] = {}
    reaches: dict[str, set[str]] = {}  # a key of fragments -> the groups its pieces go to
    read: dict[str, Any] = {}
    pending = set(own)
    while pending:
        got, named, directories = _gather(output, so_far, pending)
        states.update(got)
        read.update(directories)
        found = set(named)
        for text in pending:
            key = tuple(json.loads(text))
            if is_join_key(key):
                reaches[text] = {_key_text(group) for group, _ in joined_states(key, got[text])}
                found |= reaches[text]
        pending = found - states.keys()
    groups = {text: states[text] for text in states if text not in reaches}
    for text in sorted(reaches):
        for group, joined in joined_states(tuple(json.loads(text)), states[text]):
            groups[_key_text(group)].merge(joined)
    panes = {}
    for text in groups:
        closure = {text} | {key for key, reached in reaches.items() if text in reached}
        panes[text] = len({w for key in closure for w in so_far.windows_of(key) if w < window})
    return groups, panes, sorted(read)


def _label_ids(keys: Iterable[str]) -> set[str]:
    """The join ids of the label groups among ``keys`` (a label's group is its join id)."""
    ids = set()
    for text in keys:
        fmt, group = json.loads(text)
        if fmt in LABEL_READERS:
            ids.add(group)
    return ids


def _judged_groups(so_far: SoFar, own: dict[str, list[str]]) -> dict[str, list[str]]:
    """The groups of the windows ``so_far`` that the labels committed into the window closing
    judge (by their calls' and traces' ids), beside those it touched: emitted again with their
    labels."""
    ids = _label_ids(own)
    found: dict[str, list[str]] = {}
    if not ids:
        return found
    for earlier in so_far.held.values():
        targets = earlier.call_index.targets
        for join_id in ids & targets.keys():
            found.update((text, []) for text in targets[join_id] if text not in own)
    return found


def _earlier_labels(so_far: SoFar, gathered: dict[str, Any], states: dict) -> dict[str, list[str]]:
    """The label groups of the windows ``so_far`` that judge a group being assembled
    (by its calls' and traces' ids) and were not gathered yet."""
    ids = {
        join_id
        for text, state in states.items()
        if state.calls
        for join_id, _ in targets_of(tuple(json.loads(text)), call_traces(state))
    }
    found: dict[str, list[str]] = {}
    for earlier in so_far.held.values():
        for join_id in ids & earlier.labels.keys():
            found.update((text, []) for text in earlier.labels[join_id] if text not in gathered)
    return found


def _linked_by_response(states: dict[str, GroupState]) -> dict[str, GroupState]:
    """The window's group states (by their key's JSON text) with those linked by response id
    merged under their root's key (``response_links.merged_by_response``)."""
    merged = merged_by_response({tuple(json.loads(text)): state for text, state in states.items()})
    return {_key_text(key): state for key, state in merged.items()}


def assemble_window(output: str, window: str, work: ShardWork, run_temp: str, commit: Commit) -> str:
    """Assemble, normalize and commit the conversations of the groups ``window`` touched:
    "done" (committed now), "already" (committed before), "none" (no call logs) or "refused"
    (the run stopped committing: the next start does it)."""
    if processed.assembled_result(output, window) is not None:
        return "already"
    own = INDEXES.of(output, window, fresh=True).groups
    if not own:
        return "none"
    so_far = INDEXES.upto(output, window)
    judged = _judged_groups(so_far, own)
    states, panes, read = _joined_groups(output, window, so_far, {**judged, **own})
    labels = _earlier_labels(so_far, {**judged, **own}, states)
    if labels:
        more, _, read_more = _joined_groups(output, window, so_far, labels)
        states.update(more)
        read = sorted({*read, *read_more})
    made: list[Any] = []
    assembling = states
    if chain_enabled(work.settings):
        # Groups linked by response id (a Responses call continuing another group's) are one.
        assembling = _linked_by_response(states)
    for text in sorted(assembling):  # a label's group makes no conversation
        key = tuple(json.loads(text))
        for _, conversation in conversations_of((key, assembling[text]), work.settings, 1):
            made.append(emitted_again(conversation, panes.get(text, 0)))
    assembled = made
    if chain_enabled(work.settings):
        # Among the groups this window assembles: one emitted by an earlier window stays out.
        made = chained_in_memory(made, work.settings.id_field, work.settings.messages_field)
    # Labels join the conversations of the groups this window assembles (a label whose
    # conversation is not among them is counted unmatched).
    made, label_partial = labelled(made + joined_in({tuple(json.loads(t)): s for t, s in states.items()}))
    temp = FileSystems.join(run_temp, "in-flight", f"assembled-{window}-{uuid.uuid4().hex[:8]}")
    processed.make_dirs(temp)
    try:
        flat = flat_work(work)
        batches = shard_batches((0, made), ASSEMBLED_SHARD, flat.batch_size)
        place = lambda name: FileSystems.join(temp, name + flat.extension(name))  # noqa: E731
        result = process_batches(batches, ASSEMBLED_SHARD, 0, flat, place, read=False, empty_files=True)
        part = summaries.merge(result.partial, assembly_partial((0, made), assembled))
        part = summaries.merge(part, label_partial)
        doc = {
            "window": window,
            "groups": len(own),
            "reopened_groups": sum(1 for n in panes.values() if n),
            "read_from": read,
            # The window's own files whose pieces this read (superseded ones included): the
            # final summary's check that every piece committed into the window was assembled.
            "window_files": sorted({name for names in own.values() for name in names}),
            "files": {
                name: {"records": f.records, "bytes": f.size, "sha256": f.sha256} for name, f in result.files.items()
            },
            "totals": summaries.finalize_run(part, work.settings),
            "partial": part,
        }
        write_in_flight(FileSystems.join(temp, ASSEMBLED_FILE), compact_document(doc))
        pause_point("streaming-assemble")  # tests kill a run here, in the window's close
        if not commit(temp, output, f"{window}/{ASSEMBLED_DIR}"):
            files.delete(temp, tree=True)
            return "refused"
    except FileExistsError:
        files.delete(temp, tree=True)  # another attempt of this close committed it first
        return "already"
    except BaseException:
        files.delete(temp, tree=True)
        raise
    LOG.info("%s: %d conversation(s) assembled from call logs of %d group(s)", window, len(made), len(own))
    return "done"


def move_committing(temp: str, output: str, relative: str) -> bool:
    """The driver's commit, once the job has ended (its gate shut): a plain rename into place."""
    files.make_directories(output, relative.rsplit("/", 1)[0])
    files.move_into(temp, output, relative)
    return True


def left_windows(output: str) -> list[str]:
    """The windows holding call-log pieces and no assembly (in time order)."""
    return [
        window
        for window in processed.window_names(output)
        if processed.assembled_result(output, window) is None and _has_calls(output, window)
    ]


def still_open(window: str, now: float, window_s: float) -> bool:
    """Whether a window left without its assembly is still open to a run of ``window_s``
    windows started at ``now``: its end not reached, and it is one of this run's windows (one
    of another length or alignment never gets a file of this run: it has nothing to wait for)."""
    start, end = processed.parse_window(window)
    ours = end - start == window_s and start % window_s == 0
    return ours and now < end


def assemble_left_windows(output: str, work: ShardWork, run_temp: str, keep_open: Iterable[str] = ()) -> list[str]:
    """Assemble every window a dead or cancelled run left unassembled (in time order) but those
    ``keep_open`` names (still open: this run's close assembles them); the windows assembled
    now, whose summaries must be rewritten."""
    done = []
    kept = set(keep_open)
    for window in left_windows(output):
        if window in kept:
            continue
        if assemble_window(output, window, work, run_temp, move_committing) == "done":
            done.append(window)
    return done


def sealed_until(output: str) -> float:
    """The end of the latest window already assembled (seconds since the epoch; 0: none): no
    file may be committed into an assembled window, so a run admits none before it."""
    windows = processed.window_names(output)
    ends = [processed.parse_window(w)[1] for w in windows if processed.assembled_result(output, w) is not None]
    return max(ends, default=0.0)


def _has_calls(output: str, window: str) -> bool:
    if files.is_local(output):
        return bool(processed.local_directories_holding(output, window, CALLS_FILE))
    return bool(window_index(output, window).groups)
