"""``convnorm explain OUT_DIR --id ID``: one conversation before and after, each repair marked.

Finds the conversation's line in ``OUT_DIR/drops/`` (its source file and position), reads the
record back from that file, normalizes it again as the run did (the options in the run's
manifest) with the core's trace on (``transforms.repairs.before_after``), and prints the two lists side by
side: every entry that was dropped, moved, re-keyed or healed is marked with its reason. The
report draws the same rows for its examples (``explanation_html``).

It opens only a file the run read, by the run's own record (``run_inputs``): the manifest's
``--input`` matched again (a batch run), or the record of processed files (a streaming
output). A drops/ line naming any other file (drops/ edited, or copied from elsewhere) is
refused, never opened: ``Refused``.

Nothing is written. Exit status: 0 shown; 1 no such id, or the record is no longer in its
source file; 2 bad arguments, a drops/ line naming a file the run did not read, or a batch run
(``convnorm run``, ``validate``) holds the output's lock: it may be replacing the files
(``running_batch``). A streaming run's lock does not stop it: the windows it closed are whole.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import textwrap
from typing import Callable, NamedTuple

import orjson

from pipeline.finished.html_page import escape
from pipeline.finished.output_dir import drop_lines, run_settings
from pipeline.io.output_names import DEAD_LETTER_PATTERNS
from pipeline.io.shard import where_text
from transforms.dataset.redact import Redaction, as_text
from transforms.formats import Conversation
from transforms.record.record_settings import Settings
from transforms.repairs.before_after import Explanation, Row, after_text, before_text, counts_line, cut_text, explain
from transforms.totals.console_text import console_text

#: Dead-letter reasons given to a record after it was read and normalized: the sink refused
#: it, or it was longer than --max-example-tokens. Its conversation can be shown.
AFTER_READING = frozenset({"unwritable", "over_token_limit", "duplicate"})
#: Files listed when an id is not found.
SHOWN_CLOSE_IDS = 3


class Located(NamedTuple):
    """A conversation found in a run's outputs, read back and explained."""

    metrics: dict  # its drops/ line
    explanation: Explanation
    settings: Settings
    #: The 1-based line of its record in the source (JSONL), else ``None``.
    line: int | None
    #: Differences between what the run recorded and what the source gives now ("" if none).
    mismatch: str


class NotFound(LookupError):
    """The id, or its record, cannot be found; the message says what to do."""


class Refused(NotFound):
    """The drops/ (or dead_letter/) line names a source the run did not read: not opened."""


class RunInputs(NamedTuple):
    """The files a run read, by its own record (``run_inputs``): explain opens no other."""

    #: A batch run's input files: its manifest's --input matched again (None: a streaming output).
    files: frozenset[str] | None
    #: What the record is, for the refusal.
    recorded: str
    #: A streaming output, whose record of processed files is asked per source ("": none).
    streaming_output: str = ""


def run_inputs(output: str) -> RunInputs:
    """What the run that wrote ``output`` read: the files its manifest's ``--input`` patterns
    match now (each pattern on its own: a file deleted since leaves the others), without those
    inside ``output`` (a run never reads its own output); a streaming output asks its record of
    processed files instead. No record at all: nothing may be opened."""
    from apache_beam.io.filesystems import FileSystems

    from pipeline.finished.output_dir import read_json
    from pipeline.io.output_names import MANIFEST_FILE, STREAMING_MARKER
    from pipeline.io.ownership import paths_inside
    from pipeline.io.planning import InputError, match_inputs

    manifest = read_json(FileSystems.join(output, MANIFEST_FILE))
    if manifest is None:
        if FileSystems.exists(FileSystems.join(output, STREAMING_MARKER)):
            return RunInputs(None, "its record of processed files (_convnorm_files/)", output)
        return RunInputs(frozenset(), f"no {MANIFEST_FILE} lists the run's inputs")
    patterns = (manifest.get("options") or {}).get("input") if isinstance(manifest.get("options"), dict) else None
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        return RunInputs(frozenset(), f"{MANIFEST_FILE} records no --input")
    found: set[str] = set()
    for pattern in patterns:
        try:
            found.update(match_inputs([pattern], notes=[]))  # the plan's notes were said by the run
        except InputError:
            continue  # matches nothing now: none of its files can be opened either
    found -= paths_inside(found, output)
    shown = " ".join(f"--input {p!r}" for p in patterns)
    return RunInputs(frozenset(found), f"{MANIFEST_FILE}: {shown}")


def _opened_as(source: str) -> str:
    """The file opening ``source`` reads: a local path as absolute, the way the manifest records
    the run's ``--input`` (records name their source as the user typed it)."""
    return source if "://" in source else os.path.abspath(source)


def check_source(inputs: RunInputs, source: str, conversation_id: object) -> None:
    """Refused unless the run read ``source`` (a source that is not there is left to the caller:
    there is nothing to open, and 'moved or changed?' says more)."""
    from apache_beam.io.filesystems import FileSystems

    from pipeline.io import processed_files as processed

    if inputs.streaming_output:
        if processed.read_record(inputs.streaming_output, source)["versions"]:
            return
    elif inputs.files is not None and (source in inputs.files or _opened_as(source) in inputs.files):
        return
    try:
        present = os.path.lexists(source) if "://" not in source else FileSystems.exists(source)
    except Exception:  # noqa: BLE001 — a filesystem that cannot be asked: refused below
        present = True
    if not present:
        return
    raise Refused(
        f"the line of {conversation_id!r} names {source!r} as its source, which is not one of the run's inputs "
        f"({inputs.recorded}); convnorm explain opens only files the run read: not opened (was drops/ or "
        "dead_letter/ edited?)"
    )


def find_dead_letter(output: str, conversation_id: str) -> dict | None:
    """The first dead letter whose raw input holds ``conversation_id`` as a JSON string (a
    record's id is in its text; ``locate`` checks it when the record is read back), spelled as
    JSON writers spell it: with non-ASCII characters as they are, or as ``\\u`` escapes."""
    # With --redact a dead letter's raw line holds an id as text: its placeholders without their
    # hash (locate then reads the record back and checks its id).
    spellings = {orjson.dumps(name).decode() for name in (conversation_id, as_text(conversation_id))}
    spellings |= {json.dumps(name) for name in (conversation_id, as_text(conversation_id))}
    # In the dead letter's line the raw text is a JSON string itself: each spelling escaped once
    # more. Cheap first: most lines hold none of them.
    in_line = [orjson.dumps(spelling)[1:-1] for spelling in spellings]
    named = orjson.dumps(conversation_id)
    for line in drop_lines(output, DEAD_LETTER_PATTERNS):
        if not any(needle in line for needle in in_line) and named not in line:
            continue
        letter = orjson.loads(line)
        if letter.get("id") == conversation_id:  # a duplicate (--dedupe) names its conversation
            return letter
        raw = letter.get("raw")
        if isinstance(raw, str) and any(spelling in raw for spelling in spellings):
            return letter
    return None


def find_metrics(output: str, conversation_id: str) -> dict:
    """The drop-metrics line of ``conversation_id``; ``NotFound`` naming close ids otherwise."""
    needle = orjson.dumps(conversation_id)
    ids: list[str] = []
    found: dict | None = None
    for line in drop_lines(output):
        if needle in line:  # cheap first: most lines are not the one
            metrics = orjson.loads(line)
            if metrics.get("id") == conversation_id:
                if "pane" not in (metrics.get("assembly") or {}):
                    return metrics
                # A streaming output emits a re-opened conversation again, whole, in a later
                # window (windows sort by time): the newest emission is the one to explain.
                found = metrics
        if found is None and len(ids) < 200_000:
            ids.append(str(orjson.loads(line).get("id")))
    if found is not None:
        return found
    letter = find_dead_letter(output, conversation_id)
    if letter is not None:
        source, position = str(letter.get("source")), int(letter.get("position", -1))
        dead = {"reason": letter.get("reason"), "detail": letter.get("detail")}
        if dead["reason"] in AFTER_READING:  # read and normalized, then not written
            found = {"id": conversation_id, "source": source, "position": position, "dead_letter": dead}
            if isinstance(letter.get("assembly"), dict):  # assembled from call logs: its calls
                found["assembly"] = letter["assembly"]
            return found
        raise NotFound(
            f"{conversation_id!r} is in the dead letter of {where_text(source, position, None)}: dead-lettered "
            f"({dead['reason']}): {dead['detail']}; it was never read as a conversation, so there is nothing to explain"
        )
    for line in drop_lines(output):
        # --dedupe: a conversation kept under the first id of those collapsed into it lists the others.
        if needle in line and conversation_id in orjson.loads(line).get("duplicates", ()):
            return orjson.loads(line)
    if not ids:
        raise NotFound(f"{output!r} holds no drops/ lines: is it the --output of a finished convnorm run?")
    import difflib

    close = difflib.get_close_matches(conversation_id, ids, n=SHOWN_CLOSE_IDS)
    hint = f"; close ones: {', '.join(close)}" if close else ""
    raise NotFound(
        f"no conversation with id {conversation_id!r} in {output}/drops/ ({len(ids):,} looked at){hint}; "
        "a record that could not be read has no id: see dead_letter/"
    )


def locate(
    output: str,
    conversation_id: str,
    settings: Settings | None = None,
    metrics: dict | None = None,
    inputs: RunInputs | None = None,
) -> Located:
    """Find, read back and explain one conversation of a run. Raises ``NotFound`` (``Refused``:
    its line names a file the run did not read).

    ``settings``: instead of the run's (its manifest); ``metrics``: its drops/ line, when the
    caller has it already (the report's examples), instead of searching drops/ for it;
    ``inputs``: ``run_inputs(output)``, when the caller has it already.
    """
    from pipeline.io.reread import line_numbers, record_at
    from transforms.record.record_steps import RecordRefused, parse_payload, read_conversation, record_id

    run, max_record_bytes = run_settings(output)
    settings = settings or run
    if metrics is None:
        # With --redact the outputs hold the id as written: asked as the input spells it, it is found too.
        metrics = find_metrics(output, str(_as_written(run)(conversation_id)))
    source, position = str(metrics.get("source")), int(metrics.get("position", -1))
    check_source(inputs if inputs is not None else run_inputs(output), source, metrics.get("id"))
    raw = record_at(source, position, max_record_bytes)
    if raw is None:
        relative = (
            ""
            if os.path.isabs(source) or "://" in source or os.path.exists(source)
            else (" (the path is relative to where the run started: run convnorm explain from there)")
        )
        raise NotFound(
            f"{source} has no record at position {position:,} any more: was the file moved or changed?{relative}"
        )
    try:
        record = parse_payload(raw)
        if "assembly" in metrics:
            conversation = reassembled(output, metrics, settings, max_record_bytes, inputs or run_inputs(output))
        else:
            conversation = read_conversation(record, settings)
    except RecordRefused as refused:
        raise NotFound(f"the record at {source} @ {position:,} no longer reads: {refused.detail}") from None
    written_id = _as_written(settings)(record_id(record, settings))
    if "dead_letter" in metrics and "assembly" not in metrics and written_id != metrics.get("id"):
        raise NotFound(f"the record at {source} @ {position:,} is not {metrics.get('id')!r} any more")
    messages = conversation.messages
    if settings.redact and isinstance(messages, list):
        # --redact: shown as the run wrote it, both columns: the input's finds never printed.
        messages = redaction_of(settings).messages(messages)
    explanation = explain(messages, settings.profile, settings.drop_roles, settings.map_roles)
    result = explanation.result
    recorded = (metrics.get("drops", {}), metrics.get("healed", 0), metrics.get("messages_out"))
    now = (result.drops, result.healed, len(result.messages))
    mismatch = (
        ""
        if recorded == now or "dead_letter" in metrics  # a dead letter records no drops
        else f"the run recorded {recorded[0]}, healed {recorded[1]}; now {now[0]}, healed {now[1]}"
    )
    line = line_numbers(source, [position]).get(position)
    return Located(metrics, explanation, settings, line, mismatch)


def group_assemblies(output: str, assembly: dict) -> list[dict]:
    """The ``assembly`` entries of every conversation of ``assembly``'s group in ``output`` (its
    drops/ lines, and the dead letters of those the sink refused)."""
    needle = orjson.dumps(assembly.get("group"))
    found = []
    for line in [*drop_lines(output), *drop_lines(output, DEAD_LETTER_PATTERNS)]:
        if needle not in line:  # cheap first
            continue
        other = orjson.loads(line).get("assembly")
        if isinstance(other, dict) and (other.get("format"), other.get("group")) == (
            assembly.get("format"),
            assembly.get("group"),
        ):
            found.append(other)
    return found


def reassembled(
    output: str, metrics: dict, settings: Settings, max_record_bytes: int, inputs: RunInputs
) -> Conversation:
    """A conversation assembled from call logs, made again: every record its group's
    conversations list (``output``'s drops/ lines and dead letters) read back, their pieces of
    its group assembled as the run did, the conversation of its id."""
    from pipeline.io.reread import record_at
    from transforms.calllogs.assemble import GroupState, NoCalls, group_key
    from transforms.calllogs.chains import assemble_chained
    from transforms.calllogs.joins import is_join_key, joined_states
    from transforms.calllogs.response_links import merged_by_response
    from transforms.record.record_steps import parse_payload, read_call_log

    assembly = metrics["assembly"]
    key = (assembly["format"], assembly["group"])  # as written: redacted with --redact
    as_written = _as_written(settings)
    # The whole group's records: a branch is one only beside the group's other conversations.
    listed = [
        entry
        for other in group_assemblies(output, assembly) or [assembly]
        for name in ("calls", "tool_results_filled", "tool_results_unused")
        for entry in other.get(name, ())
    ]
    # A call read in parts (a LangSmith post and its patch ...) lists its other records too.
    listed += [part for entry in listed for part in entry.get("parts", ())]
    calls = dataclasses.replace(settings, input_format=assembly["format"], calls=True)
    # Every group its records hold: groups linked by response id were one (``response_links``).
    states: dict[tuple[str, str], GroupState] = {}
    fragments: dict[tuple[str, str], GroupState] = {}
    for source, position in sorted({(str(c["source"]), int(c["position"])) for c in listed}):
        check_source(inputs, source, metrics.get("id"))
        raw = record_at(source, position, max_record_bytes)
        if raw is None:
            raise NotFound(f"{source} has no record at position {position:,} any more: was the file moved or changed?")
        for piece in getattr(read_call_log(parse_payload(raw), calls), "pieces", ()):
            fmt, group = group_key(piece)
            if is_join_key((fmt, group)):
                fragments.setdefault((fmt, group), GroupState()).add(source, position, piece)
            elif fmt == key[0]:
                states.setdefault((fmt, str(as_written(group))), GroupState()).add(source, position, piece)
    for join_key, parts in sorted(fragments.items()):
        for (fmt, group), joined in joined_states(join_key, parts):
            if fmt == key[0]:
                states.setdefault((fmt, str(as_written(group))), GroupState()).merge(joined)
    if settings.chain_groups:
        states = merged_by_response(states)
    state = states.get(key, GroupState())
    made = assemble_chained(
        *key,
        state,
        id_field=settings.id_field,
        messages_field=settings.messages_field,
        tools_field=settings.tools_field,
    )
    wanted = metrics.get("id")
    found = [] if isinstance(made, NoCalls) else [c for c in made if as_written(c.record[settings.id_field]) == wanted]
    if not found:
        raise NotFound(f"the calls of {metrics.get('id')!r} no longer assemble into it: were its files changed?")
    return Conversation(found[0].record[settings.messages_field], found[0].record)


def redaction_of(settings: Settings) -> Redaction:
    """The run's ``--redact``, to show what it read as it wrote it (finds not counted)."""
    return Redaction(settings.redact, settings.redact_region, {})


def _as_written(settings: Settings) -> Callable[[object], object]:
    """An id as the run wrote it: with ``--redact``, its finds by ``redact.id_placeholder``."""
    return redaction_of(settings).id if settings.redact else lambda value: value


def _where(entry: dict) -> str:
    return where_text(str(entry.get("source")), int(entry.get("position", -1)), None)


def assembly_lines(assembly: dict) -> list[str]:
    """What made an assembled conversation: its calls (where each was read), and its branch."""
    calls = assembly.get("calls", [])
    head = f"assembled from {len(calls)} {assembly.get('format')} call(s) of group {assembly.get('group')!r}"
    head += f"; {assembly.get('collapsed', 0)} collapsed into it"
    if "branch" in assembly:
        head += (
            f"; branch {assembly['branch']} of {assembly['branches']}"
            if assembly["branch"]
            else f"; {assembly['branches']} branch(es) split out"
        )
    restored = assembly.get("answer_texts_restored")
    if restored:  # answers' texts a history's copy lost (docs/call-logs.md), put back
        head += f"; {restored} answer text(s) put back where the next history's copy lost them"
    chained = assembly.get("chained", [])
    if chained:  # conversations of other groups whose messages start this one's
        head += f"; {len(chained)} conversation(s) of other groups chained into it: " + ", ".join(map(repr, chained))
    lines = [head]
    lines += [f"  call {c.get('call')} at {c.get('start')}: {_where(c)}" for c in calls]
    for name, label in (
        ("tool_results_filled", "tool result filled in"),
        ("tool_results_unused", "tool result already held"),
    ):
        lines += [f"  {label}: {c.get('call')}: {_where(c)}" for c in assembly.get(name, ())]
    return lines


# --------------------------------------------------------------------------------------------
# Text


def label_lines(metrics: dict) -> list[str]:
    """A conversation's scores and its labels (docs/call-logs.md), one line each."""
    scores = metrics.get("scores") or {}
    lines = ["scores: " + ", ".join(f"{name} {_value(value)}" for name, value in scores.items())] if scores else []
    for label in metrics.get("labels") or ():
        if not isinstance(label, dict):
            continue
        on = f"message {label['message']}" if "message" in label else "the whole conversation"
        line = f"  label {label.get('name')} = {_value(label.get('value'))} ({label.get('source')}), on {on}"
        if label.get("comment"):
            line += f"; comment: {label['comment']}"
        if label.get("correction"):
            line += f"; a correction of {label['correction']} message(s)"
        if label.get("rejected"):
            line += f"; a rejected output of {label['rejected']} message(s)"
        lines.append(line)
    return lines


def _value(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _cell(text: str, limit: int) -> str:
    """A cell's text escaped for the terminal, then cut to its column (an escape is longer than
    the character it shows)."""
    return cut_text(console_text(text), limit)


def _cells(explanation: Explanation, row: Row, width: int) -> tuple[str, str]:
    left = _cell(before_text(explanation, row, width - 5), width - 5)
    if row.call is not None:
        left = f"     {left}"
    elif row.before is not None:
        left = f"{row.before:>4} {left}"
    right = (
        f"{row.after:>4} {_cell(after_text(explanation, row, width - 5), width - 5)}" if row.after is not None else ""
    )
    return left[:width], right[:width]


def explanation_text(located: Located, width: int | None = None) -> str:
    """The side-by-side text ``convnorm explain`` prints, every value from the data escaped for
    the terminal (``transforms.totals.console_text``): ids, call ids, tool names and paths stay on
    their lines and in their columns."""
    total = width or shutil.get_terminal_size((140, 20)).columns
    column = max((total - 3) // 2, 30)
    ex, metrics = located.explanation, located.metrics
    where = where_text(str(metrics.get("source")), int(metrics.get("position", -1)), located.line)
    head = [
        f"conversation {metrics.get('id')}: {where}",
        f"profile {located.settings.profile}; {counts_line(ex.before, ex.result)}",
    ]
    if ex.result.drops:
        head.append("dropped by reason: " + ", ".join(f"{r} {n}" for r, n in ex.result.drops.items()))
    if "assembly" in metrics:
        head += assembly_lines(metrics["assembly"])
    if metrics.get("labels") or metrics.get("scores"):
        head += label_lines(metrics)
    if metrics.get("duplicates"):
        # --dedupe: the conversations collapsed into this one (each a duplicate dead letter).
        head.append("--dedupe: kept under this id; collapsed into it: " + ", ".join(map(str, metrics["duplicates"])))
    if metrics.get("pair") or (metrics.get("writer_report") or {}).get("pairs_from"):
        head.append(pair_text(metrics))
    if metrics.get("redacted"):
        # --redact: what the written record holds in place of the text shown below.
        head.append("redacted (--redact): " + ", ".join(f"{kind} {n}" for kind, n in metrics["redacted"].items()))
    if metrics.get("training"):
        # What shaping the training set did after the core (transforms.dataset.training): not in the rows.
        head.append("training: " + ", ".join(f"{name} {n}" for name, n in metrics["training"].items()))
    if "dead_letter" in metrics:
        head.append(_dead_letter_text(metrics["dead_letter"]))
    if located.mismatch:
        head.append(f"NOTE: {located.mismatch}: the source or the options changed since the run")
    lines = [*map(console_text, head), ""]
    before = (
        "before (as read from the input, redacted)" if located.settings.redact else "before (as read from the input)"
    )
    lines.append(f"{before:<{column}} | after (as written)")
    lines.append(f"{'-' * column}-+-{'-' * column}")
    for row in ex.rows:
        left, right = _cells(ex, row, column)
        # A mark is wrapped in its column, never cut: its last words say why.
        marks = [console_text(mark.text()) for mark in row.marks]
        more: list[str] = []
        if not right and marks:
            right, *more = textwrap.wrap(marks.pop(0), column, subsequent_indent="  ")
        for mark in marks:
            more += textwrap.wrap(mark, column, initial_indent=" " * 5, subsequent_indent=" " * 7)
        lines.append(f"{left:<{column}} | {right}".rstrip())
        lines += [f"{'':<{column}} | {chunk}".rstrip() for chunk in more]
    return "\n".join(lines)


def pair_text(metrics: dict) -> str:
    """The ``trl-dpo`` pair a conversation went into (``transforms.record.pairs``, or its own labels)."""
    pair = metrics.get("pair")
    if pair:
        return (
            f"trl-dpo pair ({pair.get('kind')}, by label {pair.get('label')}): its answer is the rejected side; "
            f"the chosen one is the answer of {pair.get('chosen')}"
        )
    how = ", ".join(sorted(metrics["writer_report"]["pairs_from"]))
    return f"trl-dpo pair from its own labels ({how}): the logged answer against the other output its label carries"


def _dead_letter_text(dead: dict) -> str:
    return (
        f"dead-lettered ({dead.get('reason')}): {dead.get('detail')}; not written to normalized/ "
        "(below: what normalization made of it)"
    )


# --------------------------------------------------------------------------------------------
# HTML (the command's --html, and the report's examples)


def explanation_html(explanation: Explanation, cell_chars: int = 160) -> str:
    """The rows as an HTML table (classes ``explain``, ``dropped``, ``moved``, ``rekeyed``,
    ``healed`` for styling); every value escaped."""
    rows = []
    for row in explanation.rows:
        kinds = " ".join(sorted({mark.kind for mark in row.marks}))
        before = escape(before_text(explanation, row, cell_chars))
        number = "" if row.before is None or row.call is not None else row.before
        left = f'<td class="n">{number}</td><td class="mono{" call" if row.call is not None else ""}">{before}</td>'
        after = escape(after_text(explanation, row, cell_chars))
        right = f'<td class="n">{"" if row.after is None else row.after}</td><td class="mono">{after}</td>'
        marks = "".join(
            f'<span class="mark {escape(m.kind)}" title="{escape(m.text())}">{escape(m.kind)}: {escape(m.reason)}'
            f"{' ' + escape(m.detail) if m.detail else ''}</span>"
            for m in row.marks
        )
        rows.append(f'<tr class="{escape(kinds)}">{left}{right}<td>{marks}</td></tr>')
    return (
        '<table class="explain"><tr><th class="n">#</th><th>before (as read)</th><th class="n">#</th>'
        "<th>after (as written)</th><th>what happened</th></tr>" + "".join(rows) + "</table>"
    )


def explain_page(located: Located) -> str:
    """A standalone page for ``convnorm explain --html``."""
    from pipeline.finished.html_page import page_html

    metrics = located.metrics
    title = f"convnorm explain: {metrics.get('id')}"
    where = where_text(str(metrics.get("source")), int(metrics.get("position", -1)), located.line)
    counts = counts_line(located.explanation.before, located.explanation.result)
    body = (
        f'<h1>{escape(title)}</h1><div class="sub">{escape(where)} · profile {escape(located.settings.profile)} · '
        f"{escape(counts)}</div>"
        + (f'<p class="banner">{escape(located.mismatch)}</p>' if located.mismatch else "")
        + (
            f'<p class="banner">{escape(_dead_letter_text(metrics["dead_letter"]))}</p>'
            if "dead_letter" in metrics
            else ""
        )
        + f'<div class="scroll">{explanation_html(located.explanation)}</div>'
    )
    return page_html(title, body)


__all__ = [
    "Located",
    "NotFound",
    "Refused",
    "RunInputs",
    "check_source",
    "explanation_html",
    "explanation_text",
    "locate",
    "run_inputs",
]
