"""``convnorm report OUT_DIR`` and ``convnorm explain OUT_DIR --id ID``: their arguments, errors
and exit statuses. The page is ``pipeline.finished.report``'s, the explanation
``pipeline.finished.explain``'s. Importing this module imports no Beam (``--help`` answers at once)."""

from __future__ import annotations

import os

from pipeline.console import ArgumentParser, print_error, print_line
from pipeline.finished.explain import NotFound, Refused, explain_page, explanation_text, locate
from pipeline.finished.output_dir import DamagedRun, run_settings
from pipeline.finished.report import write_report

#: The command's name, in its usage and errors.
REPORT_PROG = "convnorm report"


def report_command(argv: list[str]) -> int:
    """``convnorm report OUT_DIR``: (re)build report.html of a finished run. Exit 0, 1 or 2."""
    parser = ArgumentParser(
        prog=REPORT_PROG,
        description="Build OUT_DIR/report.html, one self-contained page with charts and examples, from a "
        "finished run's summary.json, drops/, dead_letter/ and _convnorm_manifest.json (a streaming run's "
        "window summaries too): the page the run wrote, rebuilt. Replaces only a report.html the run's "
        "manifest lists as convnorm's (and records the new one there); changes nothing else.",
        epilog="exit status: 0 written; 1 no summary.json in OUT_DIR, a report.html convnorm cannot prove "
        "it wrote is in the way, or the page could not be drawn; 2 bad arguments, a damaged summary.json or "
        "part file (named with its line), or another run using OUT_DIR",
    )
    parser.add_argument("output", metavar="OUT_DIR", help="the --output directory of a finished run")
    args = parser.parse_args(argv)
    from pipeline.execution.lock import LockError, in_use_text, running_holder  # after --help: these import Beam
    from pipeline.io.ownership import OutputError

    output = os.path.expanduser(args.output).rstrip("/") or "/"
    holder = running_holder(output)
    if holder is not None:  # a run finalizing there has no summary.json yet: say what is going on
        print_error(in_use_text(output, holder), REPORT_PROG)
        return 2
    if "://" not in output and not os.path.isfile(os.path.join(output, "summary.json")):
        # Asked before the lock is taken: taking it would make a directory that is not there.
        print_error(f"{output!r} holds no summary.json (is it a convnorm run's --output?)", REPORT_PROG)
        return 1
    try:
        path = write_report(output)
    except (LockError, DamagedRun) as why:
        print_error(str(why), REPORT_PROG)
        return 2
    except (FileNotFoundError, OutputError) as why:
        print_error(str(why), REPORT_PROG)
        return 1
    except Exception as error:  # noqa: BLE001 — one line, as every error of this command
        text = " ".join(str(error).split())[:500]
        print_error(f"the page could not be drawn: {type(error).__name__}: {text}", REPORT_PROG)
        return 1
    print_line(f"report: {path}")
    return 0


#: The command's name, in its usage and errors.
EXPLAIN_PROG = "convnorm explain"


#: The commands whose running lock makes ``explain`` wait: they replace a run's outputs.
BATCH_COMMANDS = frozenset({"run", "validate"})


def running_batch(output: str) -> str | None:
    """Why ``output`` cannot be read now: a batch run holds its lock (it may be moving its files
    into place: drops/ half there); None otherwise."""
    from pipeline.execution.lock import in_use_text, running_holder

    holder = running_holder(output)
    if holder is None or holder.get("command") not in BATCH_COMMANDS:
        return None
    return in_use_text(output, holder)


def explain_command(argv: list[str]) -> int:
    """``convnorm explain OUT_DIR --id ID``. Exit 0, 1 or 2."""
    parser = ArgumentParser(
        prog=EXPLAIN_PROG,
        description="Show one conversation of a finished run before and after normalization, side by side: "
        "every entry dropped, moved, re-keyed or healed is marked with its reason. The record is read back "
        "from its input file (the source and position in OUT_DIR/drops/) and normalized again with the "
        "run's options (its manifest). Writes nothing.",
        epilog="exit status: 0 shown; 1 no conversation with that id, or its record is not in its source "
        "any more; 2 bad arguments, a drops/ line naming a file the run did not read (never opened), or a "
        "running convnorm replacing OUT_DIR's files",
    )
    parser.add_argument("output", metavar="OUT_DIR", help="the --output directory of a finished run")
    parser.add_argument("--id", required=True, dest="conversation_id", help="the conversation's id (drops/ lists them)")
    parser.add_argument("--html", action="store_true", help="print a self-contained HTML page instead of text")
    parser.add_argument("--width", type=int, help="columns of the text (default: the terminal's)")
    parser.add_argument("--profile", help="normalize with this profile instead of the run's")
    args = parser.parse_args(argv)
    from pipeline.console import quiet_beam_noise

    quiet_beam_noise()
    output = os.path.expanduser(args.output).rstrip("/") or "/"
    busy = running_batch(output)
    if busy:
        print_error(busy, EXPLAIN_PROG)
        return 2
    settings = None
    if args.profile:
        from transforms.repairs.profiles import PROFILES

        if args.profile not in PROFILES:
            print_error(f"unknown --profile {args.profile!r}; known: {', '.join(PROFILES)}", EXPLAIN_PROG)
            return 2
        import dataclasses

        settings = dataclasses.replace(run_settings(output)[0], profile=args.profile)
    try:
        located = locate(output, args.conversation_id, settings)
    except NotFound as why:
        busy = running_batch(output)  # a run that began meanwhile: that, not the id, is the reason
        print_error(str(busy or why), EXPLAIN_PROG)
        return 2 if busy or isinstance(why, Refused) else 1
    print(explain_page(located) if args.html else explanation_text(located, args.width))
    return 0
