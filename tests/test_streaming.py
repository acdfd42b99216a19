"""Streaming mode without a runner: the landing rules and the watcher's state, the record of
processed files (versions, exactly once, crashes), totals from the files on disk, one landed
file cleaned end to end by the plain function the DoFn calls, the live counters, and the
options that refuse what cannot work. The runs on Prism are in test_streaming_prism.py."""

from __future__ import annotations

import gzip
import json
import logging
import os
import time
from pathlib import Path

import pytest

from pipeline.cli.main import main
from pipeline.config.options import load_job, parse_duration
from pipeline.graph.shard_step import ShardWork
from pipeline.io import processed_files as processed
from pipeline.io.planning import landing_root
from pipeline.io.processed_files import plan_version, source_id
from pipeline.io.shard import Stamp
from pipeline.streaming.clean import COMMITS, CleanPlan, clean_landed_file
from pipeline.streaming.driver import counters_line
from pipeline.streaming.landing import (
    IN_FLIGHT,
    Ignored,
    LandingRules,
    LandingWatch,
    Refused,
    examine,
    is_ignored,
    match_landing,
)
from pipeline.streaming.watch import Landed, WatchPlan, should_stop
from transforms.conversations import NORMALIZE
from transforms.record.record_settings import Settings
from transforms.totals import summary as summaries

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "conversations.jsonl"
WINDOW = "20261201T000000Z-20261201T000100Z"


def _plan(**changes) -> WatchPlan:
    fields = dict(
        rules=LandingRules(("landing/*.jsonl",), "/out"),
        output="out",
        poll_interval_s=1.0,
        max_files=10,
        stop_files=(),
        stop_at=None,
    )
    fields.update(changes)
    return WatchPlan(**fields)


@pytest.mark.parametrize("text, seconds", [("90", 90), ("90s", 90), ("1.5m", 90), ("2h", 7200), (" 5M ", 300)])
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "s", "0", "-5s", "ten", "5d", "inf", "nan", "infs"])
def test_parse_duration_refuses_what_is_not_a_positive_duration(text):
    with pytest.raises(ValueError):
        parse_duration(text)


# --------------------------------------------------------------------------------------------
# The landing directory


@pytest.mark.parametrize(
    "path, ignored",
    [
        ("landing/a.jsonl", False),
        ("landing/.a.jsonl", True),
        ("landing/a.jsonl.tmp", True),
        ("landing/a.tmp", True),
        ("landing/sub.d/a.jsonl", False),
    ],
)
def test_dot_files_and_tmp_files_are_never_read(path, ignored):
    assert is_ignored(path) is ignored


def test_the_landing_directory_of_a_pattern_is_the_part_before_its_first_wildcard():
    assert landing_root("/l/in/*.jsonl") == "/l/in"
    assert landing_root("/l/in/**/x-*.jsonl") == "/l/in"
    assert landing_root("/l/in/day-[0-9]/*.jsonl") == "/l/in"
    assert landing_root("/l/in/a.jsonl") == "/l/in"


def test_special_files_are_refused_as_batch_refuses_them_and_links_do_not_lead_out(tmp_path):
    landing, outside, out = tmp_path / "landing", tmp_path / "outside", tmp_path / "out"
    for directory in (landing, outside, out):
        directory.mkdir()
    os.mkfifo(landing / "pipe.jsonl")
    (outside / "secret.jsonl").write_text("{}\n")
    (landing / "real.jsonl").write_text("{}\n")
    os.symlink(outside / "secret.jsonl", landing / "out-link.jsonl")
    os.symlink(landing / "real.jsonl", landing / "in-link.jsonl")
    (out / "mine.jsonl").write_text("{}\n")
    os.symlink(out / "mine.jsonl", landing / "into-output.jsonl")
    (landing / "notes.txt.jsonl.bak").write_text("")
    rules = LandingRules((f"{landing}/*",), str(out))
    found = match_landing(rules)
    assert found[f"{landing}/pipe.jsonl"] == Refused("a FIFO; convnorm reads regular files only")
    assert isinstance(found[f"{landing}/out-link.jsonl"], Refused)
    assert "leads out of the landing directory" in found[f"{landing}/out-link.jsonl"].reason
    assert isinstance(found[f"{landing}/in-link.jsonl"], Stamp)  # stays inside: read
    assert found[f"{landing}/into-output.jsonl"] == Ignored("inside --output")  # never our own outputs
    assert found[f"{landing}/notes.txt.jsonl.bak"] == Ignored("unknown kind")
    followed = LandingRules(rules.patterns, str(out), follow_symlinks=True)
    assert isinstance(examine(f"{landing}/out-link.jsonl", followed), Stamp)


def _watch(**changes) -> tuple[LandingWatch, set]:
    done: set = set()
    fields = dict(handled=lambda path, stamp: (path, stamp) in done, max_files=10)
    fields.update(changes)
    return LandingWatch(**fields), done


def test_a_file_is_read_once_it_kept_its_size_and_time_over_two_polls():
    watch, done = _watch()
    a1, a2 = Stamp(10, 1), Stamp(20, 2)
    assert watch.poll({"/l/a.jsonl": a1}) == []  # seen once: maybe still being written
    assert watch.poll({"/l/a.jsonl": a2}) == []  # growing
    assert watch.poll({"/l/a.jsonl": a2}) == [("/l/a.jsonl", a2)]  # settled
    assert watch.poll({"/l/a.jsonl": a2}) == []  # in flight: not twice
    done.add(("/l/a.jsonl", a2))
    assert watch.poll({"/l/a.jsonl": a2}) == []  # done
    a3 = Stamp(30, 3)
    watch.poll({"/l/a.jsonl": a3})
    assert watch.poll({"/l/a.jsonl": a3}) == [("/l/a.jsonl", a3)]  # changed after it was processed


def test_a_file_already_processed_is_not_read_again_after_a_restart():
    watch, done = _watch()
    done.add(("/l/a.jsonl", Stamp(1, 1)))
    for _ in range(3):
        assert watch.poll({"/l/a.jsonl": Stamp(1, 1), "/l/b.jsonl": Stamp(2, 2)}) in ([], [("/l/b.jsonl", Stamp(2, 2))])
    assert watch.known["/l/a.jsonl"].state == "done"


def test_admission_is_bounded_per_poll_and_in_flight_oldest_first():
    watch, done = _watch(max_files=2)
    current = {f"/l/{i}.jsonl": Stamp(1, 100 - i) for i in range(5)}  # 4.jsonl is the oldest
    watch.poll(current)
    first = watch.poll(current)
    assert first == [("/l/4.jsonl", Stamp(1, 96)), ("/l/3.jsonl", Stamp(1, 97))]
    assert watch.poll(current) == []  # two in flight: no room
    assert watch.status().files_pending == 5 and watch.status().in_flight == 2 and watch.status().waiting == 3
    done.add(("/l/4.jsonl", Stamp(1, 96)))
    assert watch.poll(current) == [("/l/2.jsonl", Stamp(1, 98))]
    assert watch.poll(current, stopping=True) == []  # a stop admits nothing more


def test_the_watchers_memory_follows_the_landing_directory_not_the_hours():
    watch, done = _watch(max_files=1000)
    for hour in range(50):  # files that land, are processed, and are moved away
        current = {f"/l/{hour}-{i}.jsonl": Stamp(1, i) for i in range(100)}
        watch.poll(current)
        for path, stamp in watch.poll(current):
            done.add((path, stamp))
        watch.poll(current)
        assert len(watch.known) <= 100
    watch.poll({})
    assert watch.known == {}


def test_new_only_leaves_the_files_present_at_start_alone_until_they_change():
    watch, _ = _watch(ignored_at_start={"/l/old.jsonl": Stamp(1, 1)})
    for _ in range(3):
        assert watch.poll({"/l/old.jsonl": Stamp(1, 1)}) == []
    watch.poll({"/l/old.jsonl": Stamp(2, 2)})
    assert watch.poll({"/l/old.jsonl": Stamp(2, 2)}) == [("/l/old.jsonl", Stamp(2, 2))]


def test_a_change_while_in_flight_waits_until_the_content_in_flight_is_handled():
    watch, done = _watch()
    watch.poll({"/l/a.jsonl": Stamp(1, 1)})
    assert watch.poll({"/l/a.jsonl": Stamp(1, 1)})
    assert watch.poll({"/l/a.jsonl": Stamp(2, 2)}) == []
    assert watch.known["/l/a.jsonl"].state == IN_FLIGHT
    done.add(("/l/a.jsonl", Stamp(1, 1)))
    watch.poll({"/l/a.jsonl": Stamp(2, 2)})
    assert watch.poll({"/l/a.jsonl": Stamp(2, 2)}) == [("/l/a.jsonl", Stamp(2, 2))]


def test_a_refused_file_is_warned_about_once_and_counted(caplog):
    watch, _ = _watch()
    with caplog.at_level(logging.WARNING, logger="convnorm"):
        for _ in range(5):
            watch.poll({"/l/pipe.jsonl": Refused("a FIFO; convnorm reads regular files only")})
    assert [r.getMessage() for r in caplog.records].count(
        "watcher: /l/pipe.jsonl is a FIFO; convnorm reads regular files only: not read"
    ) == 1
    assert watch.status().refused == 1 and watch.status().files_pending == 0


def test_status_counts_pending_files_and_the_age_of_the_oldest():
    watch, _ = _watch()
    now = 1_000.0
    watch.poll({"/l/a.jsonl": Stamp(1, int((now - 30) * 1e9)), "/l/b.jsonl": Stamp(1, int((now - 5) * 1e9))})
    status = watch.status(now)
    assert status.files_pending == 2 and status.settling == 2 and status.oldest_pending_age_s == 30.0


def test_a_clock_that_steps_back_never_makes_a_landed_file_late(tmp_path, monkeypatch):
    """Found: after the system clock stepped back (an NTP correction), the watcher stamped the
    files it admitted with the earlier time, behind the watermark it had already set: their
    window had closed, so it got no summary and no line while the run went on (rebuilt only at
    the end)."""
    from apache_beam.io.restriction_trackers import OffsetRange
    from apache_beam.io.watermark_estimators import ManualWatermarkEstimator
    from apache_beam.runners.sdf_utils import RestrictionTrackerView, ThreadsafeRestrictionTracker
    from apache_beam.utils.timestamp import Timestamp

    from pipeline.streaming import watch

    landing, out = tmp_path / "landing", tmp_path / "out"
    landing.mkdir()
    out.mkdir()
    (landing / "a.jsonl").write_bytes(b"{}\n")
    clock = [1_000_000.0]

    class SteppingBack(Timestamp):
        @classmethod
        def now(cls):
            return Timestamp(seconds=clock[0])

    monkeypatch.setattr(watch, "Timestamp", SteppingBack)
    watcher = watch._WatchLanding(_plan(rules=LandingRules((f"{landing}/*.jsonl",), str(out)), output=str(out)))
    watcher.setup()
    watermark = ManualWatermarkEstimator(None)
    emitted = []
    for poll in range(3):  # the file settles over two polls, then is admitted
        tracker = RestrictionTrackerView(ThreadsafeRestrictionTracker(watch._PollTracker(OffsetRange(poll, 100))))
        before = watermark.current_watermark()
        for value in watcher.process(None, tracker, watermark):
            emitted.append(value.timestamp)
            assert before is None or value.timestamp >= before
        clock[0] -= 3600
    assert len(emitted) == 1


def test_stop_conditions(tmp_path):
    stop_file = tmp_path / "stop"
    plan = _plan(stop_files=(str(stop_file),), stop_at=time.time() + 60)
    assert not should_stop(plan, time.time())
    assert should_stop(plan, time.time() + 61)
    stop_file.write_text("")
    assert should_stop(plan, time.time())


# --------------------------------------------------------------------------------------------
# The record of processed files


def test_an_outputs_directory_name_fits_any_file_system_whatever_the_landed_name():
    long = "/l/" + "x" * 250 + ".jsonl"
    odd = os.fsdecode(b"/l/caf\xe9.jsonl")  # not UTF-8: Python carries it as a lone surrogate
    for path in (long, odd):
        for version in (1, 12345):
            name = source_id(path, version)
            assert len(name.encode("utf-8")) <= 120  # room for temporary prefixes (limit: 255)
            name.encode("utf-8")  # valid UTF-8
    assert source_id(odd).startswith("caf_xe9-")  # the escaped byte, without a backslash
    a, b = source_id("/landing/one/s.jsonl.gz"), source_id("/landing/two/s.jsonl.gz")
    assert a.startswith("s-") and b.startswith("s-") and a != b and len(a) == len("s-") + 16
    assert source_id("/l/s.jsonl", 2) == source_id("/l/s.jsonl") + "-v2"


def _done(output: Path, path: Path, version: dict) -> None:
    """Record ``version`` of ``path`` as processed (its outputs directory with source.json)."""
    record = processed.read_record(str(output), str(path))
    record["versions"].append(version)
    processed.write_record(str(output), str(path), record)
    directory = output / version["dir"]
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "source.json").write_text(json.dumps({"partial": summaries.partial(0)}))


def _version(path: Path, n: int = 1, start: int = 0, **changes) -> dict:
    data = path.read_bytes()
    info = path.stat()
    import hashlib

    entry = {
        "version": n,
        "size": info.st_size,
        "mtime_ns": info.st_mtime_ns,
        "sha256": hashlib.sha256(data).hexdigest(),
        "start": start,
        "end": len(data),
        "dir": f"{WINDOW}/{source_id(str(path), n)}",
        "run": "r1",
    }
    entry.update(changes)
    return entry


def test_a_changed_file_is_appended_rewritten_or_unchanged(tmp_path):
    out, f = tmp_path / "out", tmp_path / "a.jsonl"
    out.mkdir()
    f.write_bytes(b'{"id": 1}\n')
    record = processed.read_record(str(out), str(f))
    assert plan_version(str(out), str(f), record).why == "new"
    _done(out, f, _version(f))
    record = processed.read_record(str(out), str(f))
    os.utime(f, ns=(1, 1))  # touched, same bytes
    assert plan_version(str(out), str(f), record).action == "unchanged"
    with f.open("ab") as handle:
        handle.write(b'{"id": 2}\n')
    plan = plan_version(str(out), str(f), record)
    assert (plan.action, plan.why, plan.version, plan.start) == ("read", "appended", 2, 10)
    f.write_bytes(b'{"id": 9}\n{"id": 2}\n')  # same size, other bytes
    assert plan_version(str(out), str(f), record)[:3] == ("read", "rewritten", 2)
    assert plan_version(str(out), str(f), record, "report").action == "report"


def test_only_an_uncompressed_jsonl_ending_at_a_line_end_is_continued(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(b'{"id": 1}\n{"id": ')  # processed while its last line was incomplete
    _done(out, cut, _version(cut))
    with cut.open("ab") as handle:
        handle.write(b"2}\n")
    assert plan_version(str(out), str(cut), processed.read_record(str(out), str(cut))).why == "rewritten"
    packed = tmp_path / "p.jsonl.gz"
    packed.write_bytes(gzip.compress(b'{"id": 1}\n', mtime=0))
    _done(out, packed, _version(packed))
    with packed.open("ab") as handle:
        handle.write(gzip.compress(b'{"id": 2}\n', mtime=0))
    assert plan_version(str(out), str(packed), processed.read_record(str(out), str(packed))).why == "rewritten"


@pytest.mark.parametrize("encoding, bom", [("utf-16-be", b"\xfe\xff"), ("utf-16-le", b"\xff\xfe")])
def test_a_utf16_file_appended_to_is_continued_in_its_encoding(tmp_path, encoding, bom):
    # Found: the appended records of a UTF-16 big-endian file were read from their offset as
    # UTF-8, every one an invalid_json dead letter; a little-endian one (its LF is "0A 00", so
    # its processed bytes never "ended with a line end") was read again whole, its first
    # records out twice.
    records = [{"id": f"r{i}", "messages": [{"role": "user", "content": f"héllo {i}"}]} for i in range(4)]
    lines = [(json.dumps(r, ensure_ascii=False) + "\n").encode(encoding) for r in records]
    out, f = tmp_path / "out", tmp_path / "u16.jsonl"
    f.write_bytes(bom + b"".join(lines[:2]))
    plan = _clean_plan(out)
    clean_landed_file(_landed(f), WINDOW, plan)
    with f.open("ab") as handle:
        handle.write(b"".join(lines[2:]))
    name = clean_landed_file(_landed(f), WINDOW, plan)
    source = json.loads((out / WINDOW / str(name) / "source.json").read_text())
    assert (source["why"], source["start"], source["totals"]["records_out"]) == (
        "appended",
        len(bom) + len(lines[0] + lines[1]),
        2,
    )
    normalized = [json.loads(line) for line in (out / WINDOW / str(name) / "normalized.jsonl").read_text().splitlines()]
    assert [r["id"] for r in normalized] == ["r2", "r3"] and normalized[0]["messages"][0]["content"] == "héllo 2"


def test_a_version_counts_as_processed_only_once_its_outputs_are_in_place(tmp_path):
    out, f = tmp_path / "out", tmp_path / "a.jsonl"
    out.mkdir()
    f.write_bytes(b"{}\n")
    version = _version(f)
    record = {"path": str(f), "versions": [version]}  # recorded, outputs never renamed into place
    stamp = Stamp(version["size"], version["mtime_ns"])
    assert not processed.handled(str(out), record, stamp)
    assert processed.in_flight_elsewhere(str(out), record, "r1")  # this run: another worker has it
    assert not processed.in_flight_elsewhere(str(out), record, "r2")  # a dead run's: read again
    (out / version["dir"]).mkdir(parents=True)
    (out / version["dir"] / "source.json").write_text("{}")
    assert processed.handled(str(out), record, stamp)


# --------------------------------------------------------------------------------------------
# One landed file, cleaned by the function the DoFn calls


def _clean_plan(out: Path, run_id: str = "run-1", **changes) -> CleanPlan:
    temp = out / f"_convnorm_temp-{run_id}"
    temp.mkdir(parents=True, exist_ok=True)
    fields = dict(
        output=str(out),
        run_id=run_id,
        run_temp=str(temp),
        work=ShardWork(NORMALIZE, Settings(), batch_size=50),
    )
    fields.update(changes)
    return CleanPlan(**fields)


def _stamp(path: Path) -> Stamp:
    info = path.stat()
    return Stamp(info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def _landed(path: Path) -> Landed:
    info = path.stat()
    return Landed(str(path), info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def test_a_landed_file_is_cleaned_once_its_outputs_renamed_into_place_with_its_totals(tmp_path):
    out, f = tmp_path / "out", tmp_path / "a.jsonl"
    f.write_bytes(SAMPLE.read_bytes())
    plan = _clean_plan(out)
    name = clean_landed_file(_landed(f), WINDOW, plan)
    assert name == source_id(str(f))
    directory = out / WINDOW / name
    assert sorted(p.name for p in directory.iterdir()) == [
        "dead_letter.jsonl",
        "drops.jsonl",
        "normalized.jsonl",
        "source.json",
    ]
    source = json.loads((directory / "source.json").read_text())
    assert source["source"] == str(f) and source["window"] == WINDOW and source["version"] == 1
    assert (source["totals"]["records_in"], source["totals"]["dead_letters"]) == (307, 6)
    assert source["partial"]["discarded"]  # the ledger of discarded fields, as partials add it up
    assert list(Path(plan.run_temp, "in-flight").iterdir()) == []  # nothing left in flight
    assert clean_landed_file(_landed(f), "another-window", plan) is None  # the same content: once
    assert len(list(out.glob("*/*/source.json"))) == 1


def test_two_files_of_one_name_never_share_an_outputs_directory(tmp_path):
    """Found: the outputs directory took 8 hex digits (32 bits) of a hash of the path, so among
    some 77,000 files of one name (``landing/<session>/events.jsonl``) two collide; two such
    files in one window (an hour's window on a busy landing directory) failed the job."""
    import hashlib

    prefix, seen = os.fsencode(tmp_path / "s"), {}
    for n in range(4_000_000):  # a pair turns up after some 80,000 (birthday bound of 32 bits)
        short = hashlib.sha1(b"%s%d/events.jsonl" % (prefix, n)).digest()[:4]
        if short in seen:
            break
        seen[short] = n
    first, second = (tmp_path / f"s{k}" / "events.jsonl" for k in (seen[short], n))
    out = tmp_path / "out"
    plan = _clean_plan(out)
    names = []
    for landed in (first, second):
        landed.parent.mkdir()
        landed.write_bytes(SAMPLE.read_bytes())
        names.append(clean_landed_file(_landed(landed), WINDOW, plan))
    assert None not in names and names[0] != names[1]
    sources = [json.loads((out / WINDOW / str(name) / "source.json").read_text())["source"] for name in names]
    assert sources == [str(first), str(second)]


def test_a_file_rewritten_with_its_size_and_time_kept_is_read_again(tmp_path):
    """Found: a file replaced by another of the same size and modification time (``cp -p``,
    ``touch -r``, a tool that restores times) was taken for the file processed and never read:
    a change ignored silently. The status-change time (``ctime``), which no tool can set back,
    tells them apart."""
    from pipeline.streaming.watch import handled_now

    out, f = tmp_path / "out", tmp_path / "landing" / "a.jsonl"
    f.parent.mkdir()
    first = b'{"id": "a", "messages": [{"role": "user", "content": "one"}]}\n'
    second = first.replace(b"one", b"two")
    f.write_bytes(first)
    plan = _clean_plan(out)
    assert clean_landed_file(_landed(f), WINDOW, plan) == source_id(str(f))
    kept = f.stat()
    rules = LandingRules((f"{f.parent}/*.jsonl",), str(out))
    for rewrite in ("renamed over", "in place"):  # one with the other's bytes, then back
        if rewrite == "renamed over":
            (f.parent / ".next").write_bytes(second)
            os.utime(f.parent / ".next", ns=(kept.st_atime_ns, kept.st_mtime_ns))
            os.rename(f.parent / ".next", f)
        else:
            with f.open("r+b") as handle:
                handle.write(second)
            os.utime(f, ns=(kept.st_atime_ns, kept.st_mtime_ns))
        assert (f.stat().st_size, f.stat().st_mtime_ns) == (kept.st_size, kept.st_mtime_ns)
        stamp = examine(str(f), rules)
        assert not handled_now(str(out), str(f), stamp), rewrite
        name = clean_landed_file(_landed(f), WINDOW, plan)
        assert name is not None, rewrite
        normalized = (out / WINDOW / name / "normalized.jsonl").read_bytes()
        assert json.loads(normalized)["messages"][0]["content"] == json.loads(second)["messages"][0]["content"]
        first, second = second, first
    f.chmod(0o600)  # a new status-change time over the same bytes: recognised by the hash, not read
    assert clean_landed_file(_landed(f), WINDOW, plan) is None
    assert handled_now(str(out), str(f), examine(str(f), rules))


@pytest.mark.slow
def test_totals_from_the_files_on_disk_keep_the_ledger_and_equal_the_batch_summary(tmp_path):
    out, f = tmp_path / "out[1]", tmp_path / "a.jsonl"  # glob characters in the output path
    decoy = tmp_path / "out1" / WINDOW
    decoy.mkdir(parents=True)
    (decoy / "summary.json").write_text(json.dumps({"records_in": 999}))
    lines = SAMPLE.read_bytes().splitlines(keepends=True)
    f.write_bytes(b"".join(lines[:150]))
    g = tmp_path / "b.jsonl"
    g.write_bytes(b"".join(lines[150:]))
    plan = _clean_plan(out)
    assert clean_landed_file(_landed(f), WINDOW, plan) and clean_landed_file(_landed(g), WINDOW, plan)
    assert processed.window_names(str(out)) == [WINDOW]
    window = processed.write_window_summary(str(out), WINDOW, Settings(), None)
    total = processed.final_summary(str(out), Settings())
    batch = tmp_path / "batch"
    assert main(["--input", str(SAMPLE), "--output", str(batch), "--quiet", "--no-report"]) == 0
    reference = json.loads((batch / "summary.json").read_text())
    assert total == reference  # every field, the ledger of discarded fields included
    assert {k: v for k, v in window.items() if k not in ("window", "progress")} == reference
    assert window["progress"] == {
        "rows_per_s": round(307 / 60, 3),
        "files_done": 2,
        "files_pending": 0,
        "oldest_pending_age_s": 0.0,
    }


#: --tokens with every figure in play: a limit some examples pass (dropped as dead letters), a price.
TOKEN_FLAGS = [
    "--sink=openai-finetune",
    "--tokens=o200k_base",
    "--max-example-tokens=900",
    "--over-limit=drop",
    "--price-per-mtok=3",
]


def _batch_run(out: Path, files: list[Path], *extra: str) -> dict:
    """A batch run (FnApiRunner) over ``files``: its summary.json."""
    argv = [*(f"--input={f}" for f in files), f"--output={out}", "--quiet", "--no-report", *extra]
    assert main(argv) == 0
    return json.loads((out / "summary.json").read_text())


def _record_tokens(paths) -> dict[tuple[str, int], int]:
    """Each counted example's ``tokens``, by (source, position): drop metrics and dead letters."""
    found = {}
    for path in paths:
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if "tokens" in record:
                found[(record["source"], record["position"])] = record["tokens"]
    return found


@pytest.mark.slow
def test_token_figures_per_window_and_in_all_equal_batch_runs_over_the_same_files(tmp_path):
    """--tokens with --streaming: each file's partial (source.json) carries its token tally, so
    a window's tokens section is a batch run's over the window's files, and summary.json's a
    batch run's over every file, field by field; each example's count is the batch run's."""
    lines = SAMPLE.read_bytes().splitlines(keepends=True)
    a, b, c = (tmp_path / name for name in ("a.jsonl", "b.jsonl", "c.jsonl"))
    a.write_bytes(b"".join(lines[:100]))
    b.write_bytes(b"".join(lines[100:200]))
    c.write_bytes(b"".join(lines[200:]))
    settings = load_job([f"--input={a}", f"--output={tmp_path / 'unused'}", *TOKEN_FLAGS]).settings
    out, later = tmp_path / "out", "20261201T000100Z-20261201T000200Z"
    plan = _clean_plan(out, work=ShardWork(NORMALIZE, settings, batch_size=50))
    for path, window in ((a, WINDOW), (b, WINDOW), (c, later)):
        assert clean_landed_file(_landed(path), window, plan)
    windows = {window: processed.write_window_summary(str(out), window, settings, None) for window in (WINDOW, later)}
    total = processed.final_summary(str(out), settings)

    references = {
        "summary.json": _batch_run(tmp_path / "batch", [a, b, c], *TOKEN_FLAGS),
        WINDOW: _batch_run(tmp_path / "batch-first", [a, b], *TOKEN_FLAGS),
        later: _batch_run(tmp_path / "batch-later", [c], *TOKEN_FLAGS),
    }
    for name, streamed in (("summary.json", total), *windows.items()):
        reference = references[name]
        assert "tokens" in streamed, f"{name}: no tokens section"
        differ = {
            key: (streamed["tokens"].get(key), value)
            for key, value in reference["tokens"].items()
            if streamed["tokens"].get(key) != value
        }
        assert not differ and streamed["tokens"].keys() == reference["tokens"].keys(), f"{name}: {differ}"
        assert {k: v for k, v in streamed.items() if k not in ("window", "progress")} == reference
    assert references["summary.json"]["tokens"]["over_limit_dropped"] > 0  # the limit was in play
    assert json.loads((out / WINDOW / "summary.json").read_text())["tokens"] == references[WINDOW]["tokens"]

    batch = tmp_path / "batch"
    reference_counts = _record_tokens([*batch.glob("drops/*.jsonl"), *batch.glob("dead_letter/*.jsonl")])
    assert len(reference_counts) == references["summary.json"]["tokens"]["examples"]
    assert _record_tokens([*out.glob("*/*/drops.jsonl"), *out.glob("*/*/dead_letter.jsonl")]) == reference_counts


def test_a_window_left_without_its_summary_by_a_crash_is_rebuilt(tmp_path):
    out, f = tmp_path / "out", tmp_path / "a.jsonl"
    f.write_bytes(SAMPLE.read_bytes())
    clean_landed_file(_landed(f), WINDOW, _clean_plan(out))
    assert not (out / WINDOW / "summary.json").exists()  # the run died before the window closed
    assert processed.rebuild_windows(str(out), Settings()) == [WINDOW]
    doc = json.loads((out / WINDOW / "summary.json").read_text())
    assert doc["records_in"] == 307 and doc["progress"]["files_done"] == 1 and doc["progress"]["rebuilt"]
    assert processed.rebuild_windows(str(out), Settings()) == []  # whole: left alone


def test_a_dead_runs_file_in_flight_is_read_again_under_the_same_version(tmp_path):
    out, f = tmp_path / "out", tmp_path / "a.jsonl"
    f.write_bytes(SAMPLE.read_bytes())
    dead = _version(f, dir=f"{WINDOW}/{source_id(str(f))}", run="dead")
    processed.write_record(str(out), str(f), {"path": str(f), "versions": [dead]})
    name = clean_landed_file(_landed(f), "20261201T000100Z-20261201T000200Z", _clean_plan(out))
    assert name == source_id(str(f))
    versions = processed.read_record(str(out), str(f))["versions"]
    assert [(v["version"], v["run"]) for v in versions] == [(1, "run-1")]


def test_a_file_that_changes_while_it_is_read_is_not_committed(tmp_path, monkeypatch):
    out, f = tmp_path / "out", tmp_path / "a.jsonl"
    f.write_bytes(SAMPLE.read_bytes())
    landed = _landed(f)
    monkeypatch.setattr("pipeline.streaming.clean.stamp_of", lambda path: Stamp(1, 1))
    plan = _clean_plan(out)
    assert clean_landed_file(landed, WINDOW, plan) is None
    assert not list(out.glob("*/*/source.json")) and list(Path(plan.run_temp, "in-flight").iterdir()) == []
    record = processed.read_record(str(out), str(f))
    assert record["versions"] == [] and record["seen"] == {
        "size": landed.size,
        "mtime_ns": landed.mtime_ns,
        "ctime_ns": landed.ctime_ns,
    }


def test_no_file_lands_in_the_outputs_once_the_commits_are_closed(tmp_path):
    out, f = tmp_path / "out", tmp_path / "a.jsonl"
    f.write_bytes(b'{"id": "a", "messages": []}\n')
    COMMITS.close()
    try:
        assert clean_landed_file(_landed(f), WINDOW, _clean_plan(out)) is None
    finally:
        COMMITS.open()
    assert not list(out.glob("*/*/source.json"))
    # Found: the file refused its commit (a drain that outlasted --drain-timeout) was recorded
    # as seen with the stamp it still has, so every later start took it for handled and never
    # read it, nor listed it as left pending.
    from pipeline.streaming.watch import handled_now

    assert not handled_now(str(out), str(f), _stamp(f))
    assert clean_landed_file(_landed(f), WINDOW, _clean_plan(out, "run-2")) == source_id(str(f))


def test_a_file_removed_while_it_is_read_is_said_so(tmp_path, monkeypatch, caplog):
    # Found: its records were read and thrown away with an INFO line saying it would be read
    # again later, which cannot happen: it is gone.
    out, f = tmp_path / "out", tmp_path / "a.jsonl"
    f.write_bytes(SAMPLE.read_bytes())
    landed = _landed(f)
    monkeypatch.setattr("pipeline.streaming.clean.stamp_of", lambda path: None)
    with caplog.at_level(logging.WARNING, logger="convnorm"):
        assert clean_landed_file(landed, WINDOW, _clean_plan(out)) is None
    assert "was removed (or moved away) while it was read" in caplog.text and str(f) in caplog.text


# --------------------------------------------------------------------------------------------
# Live counters


def _metrics_response(records_in: int):
    from apache_beam.metrics import monitoring_infos
    from apache_beam.portability.api import beam_job_api_pb2

    info = monitoring_infos.int64_user_counter("convnorm", "records_in", records_in, ptransform="t")
    return beam_job_api_pb2.GetJobMetricsResponse(
        metrics=beam_job_api_pb2.MetricResults(attempted=[info], committed=[info])
    )


def test_the_live_counters_are_asked_afresh_each_time():
    """Beam's PipelineResult.metrics() caches its first answer: the counters line froze."""
    from pipeline.runners.job_service import JobService

    class Stub:
        answers = iter([_metrics_response(10), _metrics_response(25)])

        def GetJobMetrics(self, request, timeout=None):  # noqa: N802 — the gRPC method's name
            return next(self.answers)

    service = JobService(Stub(), "job-1")  # type: ignore[arg-type]  # a job service without a network
    first, second = service.counters("convnorm"), service.counters("convnorm")
    assert (first["records_in"], second["records_in"]) == (10, 25)
    assert counters_line(second).startswith("counters: records_in 25, records_out 0")


# --------------------------------------------------------------------------------------------
# Options


def test_streaming_on_fnapirunner_is_refused_naming_the_runners_that_can(tmp_path, capsys):
    status = main(["--streaming", f"--input={tmp_path}/*.jsonl", f"--output={tmp_path / 'out'}"])
    assert status == 2
    err = capsys.readouterr().err
    assert "--streaming runs on PrismRunner only" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "flags, problem",
    [
        (["--runner=FlinkRunner"], "--streaming runs on PrismRunner only"),
        (["--runner=DataflowRunner"], "--streaming runs on PrismRunner only"),
        (["--runner=PortableRunner"], "--streaming runs on PrismRunner only"),
        (["--runner=PrismRunner", "--job_endpoint=localhost:8073"], "drop --job_endpoint"),
        (["--runner=PrismRunner", "--environment_type=PROCESS"], "drop --environment_type PROCESS"),
        (["--runner=PrismRunner", "--environment_type=EXTERNAL"], "drop --environment_type EXTERNAL"),
    ],
)
def test_streaming_is_refused_where_the_commit_gate_cannot_reach_the_workers(flags, problem, tmp_path, capsys):
    # Found: the gate that stops files landing after the totals is a module global that reaches
    # only workers that are threads of the driver, yet --streaming was accepted on Flink and
    # Dataflow (workers elsewhere) and with workers in other processes.
    argv = ["--streaming", *flags, f"--input={tmp_path}/*.jsonl", f"--output={tmp_path / 'out'}"]
    argv.append("--host-loopback")  # in this test's own process, which cannot enter a namespace
    assert main(argv) == 2
    assert problem in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_streaming_checks_its_flags_before_starting(tmp_path, capsys):
    (tmp_path / "stop").write_text("")
    status = main(
        [
            "--streaming",
            "--runner=PrismRunner",
            f"--input={tmp_path}/*.jsonl",
            f"--output={tmp_path / 'out'}",
            "--window=soon",
            "--drain-timeout=never",
            "--max-files-per-poll=0",
            f"--stop-file={tmp_path / 'stop'}",
            "--output-format=parquet",
        ]
    )
    assert status == 2
    err = capsys.readouterr().err
    for problem in (
        "--window 'soon'",
        "--drain-timeout 'never'",
        "--max-files-per-poll must be at least 1",
        "exists already",
        "JSON Lines only",
    ):
        assert problem in err


@pytest.mark.parametrize("landing", ["out/landing", "out"])
def test_a_landing_directory_inside_the_output_is_refused(landing, tmp_path, capsys):
    # Found: started with an empty output, the run watched for ever and read nothing, every
    # landed file ignored without a word as "inside --output" (batch refuses such an input).
    (tmp_path / landing).mkdir(parents=True)
    argv = ["--streaming", "--runner=PrismRunner", f"--input={tmp_path / landing}/*.jsonl", "--host-loopback"]
    assert main([*argv, f"--output={tmp_path / 'out'}", "--stop-after=1s"]) == 2
    assert "inside --output" in capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == (["landing"] if landing != "out" else [])


def test_validate_does_not_stream(tmp_path, capsys):
    status = main(["validate", "--streaming", "--runner=PrismRunner", f"--input={tmp_path}/*.jsonl", "--host-loopback"])
    assert status == 2
    assert "does not stream" in capsys.readouterr().err


def test_a_signal_asks_the_watcher_to_stop_through_the_runs_marker(tmp_path):
    import signal

    from pipeline.streaming.driver import _StopOnSignal

    marker = tmp_path / "stop"
    before = signal.getsignal(signal.SIGTERM)
    with _StopOnSignal(str(marker)) as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        deadline = time.monotonic() + 5
        while not stop.signalled.is_set() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert stop.signalled.is_set()
        assert should_stop(_plan(stop_files=(str(marker),)), time.time())
    assert signal.getsignal(signal.SIGTERM) is before  # handlers restored after the run


# --------------------------------------------------------------------------------------------
# The output directory: streaming writes only where it can prove it may, under the lock


def _stream(tmp_path, out) -> int:
    return main(
        [
            "--streaming",
            "--runner=PrismRunner",
            f"--input={tmp_path}/in/*.jsonl",
            f"--output={out}",
            "--stop-after=1s",
            "--host-loopback",  # in this test's own process, which cannot enter a namespace
        ]
    )


def test_streaming_refuses_a_directory_holding_files_it_did_not_write(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").write_text("mine")
    assert _stream(tmp_path, out) == 2
    assert "already holds summary.json" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["summary.json"]  # untouched, lock released
    assert (out / "summary.json").read_text() == "mine"


@pytest.mark.slow
def test_streaming_refuses_a_batch_runs_output(tmp_path, capsys):
    out = tmp_path / "out"
    (tmp_path / "in.jsonl").write_text('{"id": "a", "messages": [{"role": "user", "content": "hi"}]}\n')
    assert main(["--input", str(tmp_path / "in.jsonl"), "--output", str(out), "--quiet"]) == 0
    before = sorted(p.name for p in out.iterdir())
    assert _stream(tmp_path, out) == 2
    assert "batch convnorm run" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == before


def test_streaming_refuses_an_output_another_run_holds(tmp_path, capsys):
    from pipeline.execution import lock as locks

    out = tmp_path / "out"
    held = locks.acquire(
        str(out), run_id="other", command="run", temp_dir="", break_stale=False, clean_up=lambda holder: None
    )
    try:
        assert _stream(tmp_path, out) == 2
        assert "in use by another convnorm run" in capsys.readouterr().err
    finally:
        held.release()


def test_a_streaming_start_never_takes_over_a_dead_batch_runs_lock(tmp_path, capsys):
    """Found: streaming took over a batch run's stale lock without a flag ("a streaming run
    that died"), deleted the part file that run recorded, and claimed the batch directory as
    its own; the batch run's documented recovery had nothing left to recover."""
    import hashlib
    import socket

    import paused_runs

    from pipeline.io.output_names import LOCK_FILE

    out = tmp_path / "out"
    (out / "normalized").mkdir(parents=True)
    part = out / "normalized" / "part-00000.jsonl"
    part.write_bytes(b"{}\n")
    holder = {
        "run_id": "dead",
        "pid": paused_runs.dead_pid(),
        "host": socket.gethostname(),
        "started": "2026-01-01T00:00:00+00:00",
        "command": "run",
        "temp_dir": str(out / "_convnorm_temp-dead"),
        "creating": [
            {"path": "normalized/part-00000.jsonl", "bytes": 3, "sha256": hashlib.sha256(b"{}\n").hexdigest()}
        ],
        "dirs": ["normalized"],
    }
    (out / LOCK_FILE).write_text(json.dumps(holder))
    before = sorted(p.name for p in out.rglob("*"))
    assert _stream(tmp_path, out) == 2
    err = capsys.readouterr().err
    assert "stale lock of a dead `convnorm run`" in err and "nothing was deleted" in err
    assert sorted(p.name for p in out.rglob("*")) == before  # the part file, the stale lock: kept
    assert json.loads((out / LOCK_FILE).read_text()) == holder


def test_a_streaming_output_and_a_batch_output_never_share_a_directory(tmp_path, capsys):
    """Found: a batch run wrote its outputs into a streaming output whose run had not yet
    written summary.json (a crashed one); the next streaming start then rewrote the batch run's
    summary.json and page, which its manifest lists."""
    from pipeline.io.output_names import MANIFEST_FILE, STREAMING_MARKER
    from pipeline.io.ownership import claim_streaming_output

    out = tmp_path / "out"
    out.mkdir()
    claim_streaming_output(str(out))
    (out / WINDOW / "a-12345678").mkdir(parents=True)
    (out / WINDOW / "a-12345678" / "source.json").write_text("{}")
    (tmp_path / "in.jsonl").write_bytes(SAMPLE.read_bytes())
    before = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    assert main(["--input", str(tmp_path / "in.jsonl"), "--output", str(out), "--quiet"]) == 2
    assert STREAMING_MARKER in capsys.readouterr().err
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == before
    (out / MANIFEST_FILE).write_text("{}")  # both: left by an older convnorm; streaming refuses it too
    assert _stream(tmp_path, out) == 2
    assert "batch convnorm run" in capsys.readouterr().err


def test_a_streaming_directory_is_marked_once_and_claimed_again(tmp_path):
    from pipeline.io.output_names import STREAMING_MARKER
    from pipeline.io.ownership import claim_streaming_output

    out = tmp_path / "out"
    out.mkdir()
    claim_streaming_output(str(out))
    assert (out / STREAMING_MARKER).is_file()
    (out / WINDOW).mkdir()  # a window an earlier run wrote
    (out / "summary.json").write_text("{}")
    claim_streaming_output(str(out))  # marked: the next run goes on into it


def test_the_record_limits_of_the_command_line_reach_the_per_file_step(tmp_path):
    """Streaming ignored --max-record-bytes and --batch-bytes (it read with the defaults)."""
    from pipeline.config.options import load_job
    from pipeline.streaming.driver import plan_clean

    out, f = tmp_path / "out", tmp_path / "a.jsonl"
    small = b'{"id": "s", "messages": [{"role": "user", "content": "hi"}]}\n'
    big = json.dumps({"id": "b", "messages": [{"role": "user", "content": "x" * 3000}]}).encode() + b"\n"
    f.write_bytes(small * 40 + big + small * 40)
    argv = ["--streaming", "--runner=PrismRunner", f"--input={tmp_path}/*.jsonl", f"--output={out}"]
    job = load_job([*argv, "--batch-bytes=1024", "--max-record-bytes=2048"])
    (out / "_convnorm_temp-r").mkdir(parents=True)
    plan = plan_clean(job, str(out), "r", str(out / "_convnorm_temp-r"))
    batches: list[int] = []
    name = clean_landed_file(_landed(f), WINDOW, plan, lambda batch, result: batches.append(len(batch.items)))
    assert len(batches) > 3 and max(batches) <= 20  # closed at about 1 KiB (the default: one batch of 81)
    letters = (out / WINDOW / str(name) / "dead_letter.jsonl").read_text().splitlines()
    assert [json.loads(line)["reason"] for line in letters] == ["record_too_large"]


def test_a_file_that_cannot_be_read_becomes_a_dead_letter_and_the_job_goes_on(tmp_path, monkeypatch):
    out, f = tmp_path / "out", tmp_path / "a.jsonl"
    f.write_bytes(b'{"id": "a", "messages": []}\n')
    landed = _landed(f)

    def refuse(path, prefix):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(processed, "content_digest", refuse)
    monkeypatch.setattr("pipeline.io.read_shard.iter_batches", _unreadable_batches)
    name = clean_landed_file(landed, WINDOW, _clean_plan(out))
    letters = [json.loads(line) for line in (out / WINDOW / str(name) / "dead_letter.jsonl").read_text().splitlines()]
    assert [letter["reason"] for letter in letters] == ["unreadable_file"]
    assert json.loads((out / WINDOW / str(name) / "source.json").read_text())["why"] == "unreadable"
    gone = tmp_path / "gone.jsonl"
    gone.write_bytes(b"{}\n")
    vanished = _landed(gone)
    gone.unlink()
    monkeypatch.undo()
    assert clean_landed_file(vanished, WINDOW, _clean_plan(out)) is None  # removed before it was read


def _unreadable_batches(shard, batch_size, stats, max_record_bytes, batch_bytes):
    # What the reader gives for a file it cannot open (pipeline.io.read_shard).
    from transforms.record.inputs import Batch, RawRecord, Unreadable

    stats["records"] += 1
    yield Batch(shard.number, 0, [RawRecord(shard.name, 0, Unreadable("unreadable_file", "Permission denied"))])


def test_the_window_line_says_which_drops_are_messages():
    """Found: the window's line said "166 messages dropped" for the bundled sample, which drops
    134 messages and 32 calls from turns that stayed (166 is MEM-5's count of both)."""
    from pipeline.streaming.windows import window_line

    doc = {
        "window": "w1",
        "records_in": 307,
        "records_out": 301,
        "dead_letters": 6,
        "dropped": 166,
        "dropped_by_reason": {"orphan_result": 134, "unusable_call": 14, "redeclared_call": 18},
        "progress": {"rows_per_s": 61.4, "files_done": 1, "files_pending": 0, "oldest_pending_age_s": 0.0},
    }
    total = {"records_in": 307, "records_out": 301, "dead_letters": 6, "dropped": 166}
    line = window_line(doc, total)
    assert "166 messages dropped" not in line
    assert "166 dropped (134 messages, 32 calls)" in line and line.endswith("166 dropped")
