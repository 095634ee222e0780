"""Read-only views (``verify``, ``consume``, ``topic describe``) of damaged partitions show what
the next writable open makes of the files, or refuse naming the problem; ``verify`` exits 1 and
says what that open would do. Each test damages a real log on disk the way a crash, a lost file
or a stray file would, looks at it through the CLI, checks that nothing changed, and then
compares with what a writable open (recovery) really produces.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from storage_engine.cleaner import LogCleaner
from storage_engine.errors import LogError
from storage_engine.files.naming import segment_file
from storage_engine.logdir.manager import LogManager
from storage_engine.record import decode_batch, encode_batch, scan_batches
from tests.helpers.engine import append_each, flip_last_byte, open_topic, records
from tests.helpers.paths import REPO

CLEAN = ".kafka_cleanshutdown"


def _build(root: Path, n: int = 10, **cfg) -> Path:
    """``n`` records, one batch each, every batch indexed."""
    with open_topic(root, index_interval_bytes=1, **cfg) as m:
        append_each(m.get_log("t", 0), records(n))
    return root / "t-0"


def _unflushed(root: Path) -> None:
    """A crash tears or loses only what was not flushed, so the recovery point lies below the
    damage: without this, damage to flushed offsets keeps the log end offset at the recovery
    point (``LogLoader._log_end_offset``)."""
    (root / "recovery-point-offset-checkpoint").write_text("0\n1\nt 0 0\n")


def _bases(part: Path) -> list[int]:
    return sorted(int(n[:20]) for n in os.listdir(part) if n.endswith(".log"))


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _one_line_error(code: int, err: str) -> str:
    assert code == 1
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def _read_all(log) -> tuple[list[tuple[int, bytes | None]], str | None]:
    """Records from the log start as (offset, value), and the error that stopped the read, if any."""
    out: list[tuple[int, bytes | None]] = []
    offset = log.log_start_offset
    try:
        while offset < log.log_end_offset:
            got = log.read(offset, max_records=1)
            if not got:
                break
            out += [(r.offset, r.value) for r in got]
            offset = got[-1].offset + 1
    except LogError as exc:
        return out, str(exc)
    return out, None


class Views:
    """The three read-only views of partition t-0, taken before any writable open."""

    def __init__(self, logctl) -> None:
        root = logctl.root
        before = _files(root)
        self.verify = logctl("verify", "--json")
        self.consume = logctl("consume", "t", "--partition", "0")
        self.describe = logctl("topic", "describe", "t", "--json")
        assert _files(root) == before, "a read-only view changed files"

    @property
    def verify_problems(self) -> list[str]:
        code, out, err = self.verify
        assert code == 1, (out, err)
        return json.loads(out)["partitions"][0]["problems"]

    def consumed(self) -> list[tuple[int, bytes | None]]:
        _, out, _ = self.consume
        return [(r["offset"], None if r["value"] is None else r["value"].encode()) for r in map(json.loads, out.splitlines())]

    def agree_with_recovery(self, root: Path) -> tuple[list[tuple[int, bytes | None]], str | None]:
        """Open for writing (recovery) and check the views showed the same, or refused."""
        with LogManager([root]) as m:
            log = m.get_log("t", 0)
            recovered, error = _read_all(log)
            start, end, segments = log.log_start_offset, log.log_end_offset, len(log.segments)
        code, _, err = self.consume
        if code == 0:
            assert error is None and self.consumed() == recovered
        else:
            _one_line_error(code, err)
            assert self.consumed() == recovered[: len(self.consumed())]
        code, out, err = self.describe
        if code == 0:
            p = json.loads(out)["partitions"][0]
            assert (p["log_start_offset"], p["log_end_offset"], p["segments"]) == (start, end, segments)
        else:
            _one_line_error(code, err)
        return recovered, error


@pytest.mark.parametrize("cut", ["inside", "at the start of"])
def test_a_torn_tail_right_after_an_index_entry(logctl, cut):
    part = _build(logctl.root, n=11)
    log_file = segment_file(part, 0, ".log")
    last = list(scan_batches(log_file.read_bytes()))[-1]
    os.truncate(log_file, last.position + (last.header.size_in_bytes // 2 if cut == "inside" else 0))
    _unflushed(logctl.root)
    views = Views(logctl)
    assert [o for o, _ in views.consumed()] == list(range(10))
    problems = views.verify_problems if cut == "inside" else []
    if cut == "inside":
        assert any("truncat" in p or "torn" in p or "partial" in p for p in problems), problems
    recovered, error = views.agree_with_recovery(logctl.root)
    assert error is None and len(recovered) == 10
    assert views.consume[0] == 0


def test_a_log_start_checkpoint_beyond_the_log_end_is_reported_and_costs_no_records(logctl):
    _build(logctl.root)
    (logctl.root / "log-start-offset-checkpoint").write_text("0\n1\nt 0 50\n")
    views = Views(logctl)
    problems = views.verify_problems
    assert any("log start offset checkpoint 50 is beyond the log end offset 10" in p for p in problems), problems
    assert [o for o, _ in views.consumed()] == list(range(10))
    recovered, error = views.agree_with_recovery(logctl.root)
    assert error is None and [o for o, _ in recovered] == list(range(10))
    # the bad checkpoint was replaced, and the log goes on
    assert "t 0 0" in (logctl.root / "log-start-offset-checkpoint").read_text()
    assert logctl("produce", "t", "--partition", "0", stdin='{"value": "x"}\n')[0] == 0


@pytest.mark.parametrize("how", ["deleted", "renamed .deleted"])
def test_a_missing_middle_segment_is_a_gap_that_readers_refuse_to_step_over(logctl, how):
    part = _build(logctl.root, n=30, segment_bytes=600)
    bases = _bases(part)
    assert len(bases) >= 3
    lost = bases[1]
    for suffix in (".log", ".index", ".timeindex"):
        f = segment_file(part, lost, suffix)
        if how == "deleted":
            f.unlink()
        else:
            f.rename(f.with_name(f.name + ".deleted"))
    views = Views(logctl)
    problems = views.verify_problems
    assert any(f"offsets {lost} to {bases[2] - 1} are missing" in p for p in problems), problems
    code, _, err = views.consume
    assert f"offsets {lost} to {bases[2] - 1} are missing" in _one_line_error(code, err)
    assert [o for o, _ in views.consumed()] == list(range(lost))  # everything before the gap
    recovered, error = views.agree_with_recovery(logctl.root)
    assert [o for o, _ in recovered] == list(range(lost)) and "are missing" in error


def test_a_gap_the_cleaner_made_is_not_a_lost_segment(tmp_path):
    """Compaction leaves offset gaps; after a policy change to delete they are still legitimate."""
    from storage_engine.tools.verify import verify_log

    with open_topic(tmp_path, cleanup_policy="compact", segment_bytes=400, min_cleanable_dirty_ratio=0) as m:
        log = m.get_log("t", 0)
        append_each(log, records(40, keys=3))
        LogCleaner(m).compact("t", 0, now_ms=10**12)
        m.admin.alter_topic("t", {"cleanup.policy": "delete"})
    with LogManager([tmp_path]) as m:
        log = m.get_log("t", 0)
        assert verify_log(log).ok, verify_log(log).problems
        recovered, error = _read_all(log)
        assert error is None and recovered


@pytest.mark.parametrize("stray", ["garbage .log.swap", ".swap beyond the log end"])
def test_a_stray_swap_file_is_removed_not_swapped_in(logctl, stray):
    part = _build(logctl.root)
    if stray == "garbage .log.swap":
        name = segment_file(part, 0, ".log.swap")
        name.write_bytes(os.urandom(300))
    else:  # well-formed batches whose offsets lie past the log end
        first = next(iter(scan_batches(segment_file(part, 0, ".log").read_bytes())))
        name = segment_file(part, 1000, ".log.swap")
        moved = [dataclasses.replace(r, offset=1000 + i) for i, r in enumerate(decode_batch(first))]
        name.write_bytes(encode_batch(moved, base_offset=1000))
    views = Views(logctl)
    problems = views.verify_problems
    assert any(name.name in p and "a writable open would remove it" in p for p in problems), problems
    assert [o for o, _ in views.consumed()] == list(range(10))
    views.agree_with_recovery(logctl.root)
    assert not name.exists()
    code, out, _ = logctl("produce", "t", "--partition", "0", stdin='{"value": "x"}\n')
    assert code == 0 and "offsets 10..10" in out


@pytest.mark.parametrize("stray", ["named past the active segment", "batches below its name", "inside the previous segment"])
def test_a_swap_the_cleaner_cannot_have_written_is_removed_not_swapped_in(logctl, stray):
    """A well-formed ``.log.swap`` of earlier batches named past the active segment was renamed
    in, moving the log end offset forward by the gap; one named inside the previous segment
    replaced the next one and then failed the load (segments overlap) after it had changed the
    directory. Neither can come from the cleaner, whose swap starts where its first segment did."""
    part = _build(logctl.root, segment_bytes=200)
    bases = _bases(part)
    assert len(bases) >= 4, bases
    source, name_base, why = {
        "named past the active segment": (bases[1], 90, "swap reaching past the active segment"),
        "batches below its name": (bases[1], bases[1] + 1, "swap whose batches start below the offset in its name"),
        "inside the previous segment": (bases[2], bases[1] + 1, f"swap starting inside the segment at {bases[1]}"),
    }[stray]
    name = segment_file(part, name_base, ".log.swap")
    name.write_bytes(segment_file(part, source, ".log").read_bytes())
    views = Views(logctl)
    problems = views.verify_problems
    assert any(name.name in p and why in p and "a writable open would remove it" in p for p in problems), problems
    assert [o for o, _ in views.consumed()] == list(range(10))
    views.agree_with_recovery(logctl.root)
    assert not name.exists() and _bases(part) == bases
    code, out, _ = logctl("produce", "t", "--partition", "0", stdin='{"value": "x"}\n')
    assert code == 0 and "offsets 10..10" in out


def test_verify_names_the_producer_snapshots_a_writable_open_removes(logctl):
    """verify took its list of pending repairs before the producer snapshots were read, so a
    half-written snapshot and one past the log end passed while the next writable open removed
    them. A stray a writer's close leaves (Kafka's removeStraySnapshots removes it) is no problem."""
    part = _build(logctl.root, segment_bytes=200)
    (part / "00000000000000000099.snapshot").write_bytes((part / "00000000000000000010.snapshot").read_bytes())
    (part / "00000000000000000003.snapshot.tmp").write_bytes(b"\x00garbage")  # a crash while writing it
    problems = Views(logctl).verify_problems
    for name in ("00000000000000000099.snapshot", "00000000000000000003.snapshot.tmp"):
        assert any(f"producer snapshot {name} is ignored" in p and "a writable open removes it" in p
                   for p in problems), problems
    assert logctl("produce", "t", "--partition", "0", stdin='{"value": "x"}\n')[0] == 0
    assert not (part / "00000000000000000099.snapshot").exists() and not (part / "00000000000000000003.snapshot.tmp").exists()
    assert logctl("verify")[0] == 0


def test_a_stray_empty_segment_inside_the_active_segment_is_removed_and_offsets_are_not_reused(logctl):
    part = _build(logctl.root)
    segment_file(part, 5, ".log").write_bytes(b"")
    views = Views(logctl)
    problems = views.verify_problems
    assert any("00000000000000000005.log" in p and "a writable open would remove it" in p for p in problems), problems
    assert [o for o, _ in views.consumed()] == list(range(10))
    views.agree_with_recovery(logctl.root)
    assert not segment_file(part, 5, ".log").exists()
    code, out, _ = logctl("produce", "t", "--partition", "0", stdin='{"value": "x"}\n')
    assert code == 0 and "offsets 10..10" in out


def test_a_corrupted_base_offset_never_makes_offsets_go_backwards(logctl):
    """After a clean shutdown nothing recovers the batch: reads stop before it."""
    part = _build(logctl.root)
    log_file = segment_file(part, 0, ".log")
    fifth = list(scan_batches(log_file.read_bytes()))[5]
    with open(log_file, "r+b") as f:  # the base offset is outside the CRC
        f.seek(fifth.position)
        f.write(struct.pack(">q", 2))
    views = Views(logctl)
    problems = views.verify_problems
    assert problems
    code, _, err = views.consume
    assert "offsets go backwards" in _one_line_error(code, err) or "offsets 5 to 5 are missing" in err
    assert [o for o, _ in views.consumed()] == list(range(5))
    recovered, error = views.agree_with_recovery(logctl.root)
    assert [o for o, _ in recovered] == list(range(5)) and error


def test_a_partition_whose_segments_are_all_deleted_reads_as_an_empty_log(logctl):
    part = _build(logctl.root)
    (logctl.root / "recovery-point-offset-checkpoint").write_text("0\n1\nt 0 10\n")
    for name in os.listdir(part):
        if name[:20].isdigit():
            os.rename(part / name, part / (name + ".deleted"))
    before = _files(logctl.root)
    code, out, err = logctl("verify", "--json")
    assert code == 0, (out, err)
    assert logctl("consume", "t", "--partition", "0")[:2] == (0, "")
    code, out, _ = logctl("topic", "describe", "t", "--json")
    assert code == 0 and json.loads(out)["partitions"][0]["log_end_offset"] == 10
    assert _files(logctl.root) == before
    # recovery restarts the log where it ended (the recovery point), not at 0
    code, out, _ = logctl("produce", "t", "--partition", "0", stdin='{"value": "x"}\n')
    assert code == 0 and "offsets 10..10" in out


@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
def test_a_missing_index_is_named_as_the_rebuild_a_writable_open_does(logctl, suffix):
    """A missing index was read as an empty one and passed ``verify``, while a writable open
    rebuilds both indexes from the log (step 5 of the load); a missing time index read as empty
    also understated the segment's largest timestamp. The view now reads the segment as the
    rebuilt indexes will, names the rebuild, and the rebuild restores the same files."""
    part = _build(logctl.root, n=30, segment_bytes=600)
    first = segment_file(part, _bases(part)[0], suffix)
    original = first.read_bytes()
    first.unlink()
    views = Views(logctl)
    assert views.verify_problems == [f"{first}: missing; a writable open rebuilds the indexes of "
                                     f"{first.with_suffix('.log').name} from it"]
    recovered, error = views.agree_with_recovery(logctl.root)
    assert error is None and [o for o, _ in recovered] == list(range(30))
    assert first.read_bytes() == original
    assert logctl("verify")[0] == 0


def test_a_time_index_that_understates_the_largest_timestamp_is_reported(logctl):
    """Retention judges a segment by its time index's last entry and the batches after the last
    offset index entry (Kafka's ``maxTimestampSoFar``). A time index whose last entry is below a
    batch it covers passed ``verify``, and time retention would delete the segment early."""
    recs = records(30, ts=1_000)
    recs[4] = dataclasses.replace(recs[4], timestamp=500_000)  # the segment's largest, early on
    with open_topic(logctl.root, index_interval_bytes=1, segment_bytes=600) as m:
        append_each(m.get_log("t", 0), recs)
    part = logctl.root / "t-0"
    time_index = segment_file(part, 0, ".timeindex")
    assert len(time_index.read_bytes()) == 4 * 12  # offsets 1 to 4: later batches are not above 500000
    os.truncate(time_index, 3 * 12)  # only the entries before the largest timestamp's batch
    judged = struct.unpack(">q", time_index.read_bytes()[-12:-4])[0]  # what retention plans read: the last entry
    assert judged < 500_000
    views = Views(logctl)
    assert views.verify_problems == [
        f"{time_index}: understates the segment's largest timestamp: retention reads timestamp {judged} from it, but "
        "the batches it covers reach 500000, so time retention would delete the segment early (delete the "
        ".timeindex file and a writable open rebuilds it from the log)"]
    time_index.unlink()  # what the message says to do
    assert logctl("produce", "t", "--partition", "0", stdin='{"value": "x"}\n')[0] == 0
    assert logctl("verify")[0] == 0
    with LogManager([logctl.root], read_only=True) as m:
        assert m.get_log("t", 0).segments[0].largest_timestamp == 500_000


@pytest.mark.parametrize("where", ["the active segment", "a middle segment", "under a log start beyond the cut"])
def test_after_an_unclean_shutdown_the_views_show_the_cut_recovery_makes(logctl, where):
    """No writer has the log dir open and the last one did not close cleanly: the next writable
    open recovers from the recovery point and truncates at the first batch failing its CRC,
    dropping the intact batches after it (whose offsets new records then take). The views
    used to show those batches and the old log end offset. A committed log start offset above
    the cut stays: the log restarts there, empty, as Kafka's does (it was ignored, and the
    deleted records below it came back)."""
    part = _build(logctl.root, n=12, segment_bytes=300)
    bases = _bases(part)
    assert len(bases) >= 3
    (logctl.root / CLEAN).unlink()  # the last writer was killed
    (logctl.root / "recovery-point-offset-checkpoint").write_text("0\n1\nt 0 0\n")  # before its first flush
    damaged = segment_file(part, bases[1] if where == "a middle segment" else bases[-1], ".log")
    cut = flip_last_byte(damaged, 1)
    if where == "under a log start beyond the cut":
        (logctl.root / "log-start-offset-checkpoint").write_text(f"0\n1\nt 0 {cut + 1}\n")
    views = Views(logctl)
    problems = views.verify_problems
    assert any("computed crc" in p and f"not shut down cleanly, so a writable open truncates {damaged.name}" in p
               for p in problems), problems
    kept = [] if where == "under a log start beyond the cut" else list(range(cut))
    assert views.consume[0] == 0 and [o for o, _ in views.consumed()] == kept
    recovered, error = views.agree_with_recovery(logctl.root)
    assert error is None and [o for o, _ in recovered] == kept
    if not kept:
        assert json.loads(views.describe[1])["partitions"][0]["log_end_offset"] == cut + 1


def test_after_an_unclean_shutdown_the_dry_runs_plan_from_the_cut_recovery_makes(logctl):
    """The dry runs plan from the partition's file metadata, which still held the segments
    recovery deletes: ``retention --dry-run`` planned to delete them (by retention.bytes) and
    ``compact --dry-run`` counted their offsets, unlike the real runs after recovery."""
    part = _build(logctl.root, n=12, segment_bytes=300, retention_bytes=90, cleanup_policy="compact,delete")
    bases = _bases(part)
    assert len(bases) >= 4
    (logctl.root / CLEAN).unlink()  # the last writer was killed
    (logctl.root / "recovery-point-offset-checkpoint").write_text("0\n1\nt 0 0\n")
    cut = flip_last_byte(segment_file(part, bases[1], ".log"), 1)  # recovery keeps segment 0 and a batch of segment 1
    before = _files(logctl.root)
    code, out, err = logctl("retention", "--dry-run", "--json", "--now-ms", "2000")  # nothing is old yet
    assert code == 0, err
    planned = [s["base_offset"] for s in json.loads(out)["partitions"][0]["segments_to_delete"]]
    code, out, err = logctl("compact", "--dry-run", "--json")
    assert code == 0, err
    candidate = json.loads(out)["partitions"][0]
    assert _files(logctl.root) == before
    assert planned == bases[:1]  # the cut log; its files alone would give bases[:3]
    with LogManager([logctl.root]) as m:  # recovery
        assert candidate["log_end_offset"] == m.get_log("t", 0).log_end_offset == cut
    code, out, err = logctl("retention", "--json", "--now-ms", "2000")
    assert code == 0, err
    assert json.loads(out)["partitions"][0]["deleted_segments"] == planned


def test_while_a_writer_has_the_log_dir_open_the_views_cut_nothing(logctl):
    """A writer that has the dir open has recovered it already, so the next writable open
    recovers nothing: a batch damaged since is shown where it is, and reads stop there."""
    part = _build(logctl.root, n=5)
    with LogManager([logctl.root]):
        assert not (logctl.root / CLEAN).exists()  # consumed by this writer
        flip_last_byte(segment_file(part, 0, ".log"), 2)
        views = Views(logctl)
        problems = views.verify_problems
        assert any("computed crc" in p for p in problems) and not any("truncates" in p for p in problems), problems
        code, _, err = views.consume
        assert "computed crc" in _one_line_error(code, err)
        assert [o for o, _ in views.consumed()] == [0, 1]
        assert json.loads(views.describe[1])["partitions"][0]["log_end_offset"] == 5


def test_after_a_clean_shutdown_a_damaged_batch_is_named_not_cut(logctl):
    part = _build(logctl.root, n=5)
    flip_last_byte(segment_file(part, 0, ".log"), 2)
    views = Views(logctl)
    problems = views.verify_problems
    assert any("computed crc" in p for p in problems) and not any("truncates" in p for p in problems), problems
    assert json.loads(views.describe[1])["partitions"][0]["log_end_offset"] == 5
    with LogManager([logctl.root]) as m:
        assert m.get_log("t", 0).log_end_offset == 5  # a writable open after a clean shutdown cuts nothing


def test_a_dir_without_the_recovery_gate_is_judged_from_its_files(logctl):
    """A log dir no writer of this engine opened since the gate existed (a broker's, or an
    older engine's): no writer can be live, so the marker and session files alone decide, and
    the session lock is left alone (a writer arriving must find it free to know it is first)."""
    part = _build(logctl.root, n=5)
    (logctl.root / CLEAN).unlink()
    _unflushed(logctl.root)
    (logctl.root / ".logplat-recovery.lock").unlink()
    cut = flip_last_byte(segment_file(part, 0, ".log"), 2)
    views = Views(logctl)
    assert any("not shut down cleanly, so a writable open truncates" in p for p in views.verify_problems)
    recovered, error = views.agree_with_recovery(logctl.root)
    assert error is None and [o for o, _ in recovered] == list(range(cut))


def test_a_long_lived_reader_asks_again_whether_recovery_is_pending(tmp_path):
    """A reader that opened while recovery was pending, and reloads after a writer came (and
    recovered), reads the log as it is, not as a recovery that will no longer happen."""
    part = _build(tmp_path, n=5, segment_bytes=300)
    (tmp_path / CLEAN).unlink()
    with LogManager([tmp_path], read_only=True) as reader:
        view = reader.get_log("t", 0)
        assert view.log_end_offset == 5
        with LogManager([tmp_path]) as writer:
            log = writer.get_log("t", 0)
            log.roll()  # a new segment at the recovery point: the reader reloads
            append_each(log, records(2, start=5))
            flip_last_byte(segment_file(part, 5, ".log"), 0)  # damaged while the writer is live
            view.refresh()
            assert view.log_end_offset == 7
            assert not any("truncates" in p for p in view.pending_repairs), view.pending_repairs


@pytest.mark.parametrize("clean", [True, False])
def test_a_segment_whose_index_is_rebuilt_is_also_cut_where_that_rebuild_truncates_it(logctl, clean):
    """Rebuilding a missing index is recovery of that segment, after any shutdown: it truncates
    at a batch failing its CRC and keeps the later segments, leaving a gap that reads stop at."""
    part = _build(logctl.root, n=12, segment_bytes=300)
    bases = _bases(part)
    if not clean:
        (logctl.root / CLEAN).unlink()
        (logctl.root / "recovery-point-offset-checkpoint").write_text("0\n1\nt 0 0\n")
    segment_file(part, bases[1], ".index").unlink()
    cut = flip_last_byte(segment_file(part, bases[1], ".log"), 1)
    views = Views(logctl)
    assert any("truncates it to" in p and "keeping the later segments" in p for p in views.verify_problems)
    recovered, error = views.agree_with_recovery(logctl.root)
    assert [o for o, _ in recovered] == list(range(cut)) and "missing" in error
    assert views.consume[0] == 1 and [o for o, _ in views.consumed()] == list(range(cut))


def test_after_a_clean_shutdown_a_torn_tail_behind_a_damaged_batch_is_cut_where_recovery_cuts(logctl):
    """A torn tail makes a writable open recover the active segment even after a clean
    shutdown, and recovery cuts at the first batch failing its CRC, not at the tear."""
    part = _build(logctl.root, n=6)
    _unflushed(logctl.root)
    log_file = segment_file(part, 0, ".log")
    cut = flip_last_byte(log_file, 2)
    with open(log_file, "ab") as f:
        f.write(b"\x00" * 30)  # zeros a crash left after the last batch
    views = Views(logctl)
    assert any("computed crc" in p and "ends in a header no batch can have" in p and "so a writable open truncates "
               f"{log_file.name} to" in p for p in views.verify_problems), views.verify_problems
    recovered, error = views.agree_with_recovery(logctl.root)
    assert error is None and [o for o, _ in recovered] == list(range(cut))


_READ_LEO = """
import sys
from storage_engine.logdir.manager import LogManager
ends = set()
for _ in range(300):
    with LogManager([sys.argv[1]], read_only=True) as m:
        ends.add(m.get_log("t", 0).log_end_offset)
print(sorted(ends))
"""


def test_readers_asking_at_once_all_see_the_cut(tmp_path):
    """Readers ask the session lock one at a time (at the gate, exclusively): two asking at
    once used to take each other's probe for a live writer and show the log uncut."""
    part = _build(tmp_path, n=6)
    (tmp_path / CLEAN).unlink()
    _unflushed(tmp_path)
    cut = flip_last_byte(segment_file(part, 0, ".log"), 2)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    readers = [subprocess.Popen([sys.executable, "-c", _READ_LEO, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                                env=env) for _ in range(4)]
    for reader in readers:
        out, _ = reader.communicate(timeout=120)
        assert reader.returncode == 0 and out.strip() == f"[{cut}]", out


def test_a_reader_reloading_waits_while_a_first_writer_recovers(tmp_path):
    """A reload asks again whether recovery is pending, waiting at the gate before it takes the
    partition lock: it does not read a log a recovering writer is about to cut."""
    _build(tmp_path, n=6)
    with LogManager([tmp_path], read_only=True) as reader:
        view = reader.get_log("t", 0)
        with LogManager([tmp_path]) as writer:
            writer.get_log("t", 0).roll()  # a change the reader reloads for
        gate = os.open(tmp_path / ".logplat-recovery.lock", os.O_RDWR)
        fcntl.flock(gate, fcntl.LOCK_EX)  # what a first writer holds while it recovers
        try:
            reload = threading.Thread(target=view.refresh)
            reload.start()
            reload.join(1.0)
            assert reload.is_alive()
        finally:
            os.close(gate)
        reload.join(60)
        assert not reload.is_alive() and len(view.segments) == 2


def test_after_an_unclean_shutdown_a_corrupted_base_offset_ends_the_valid_batches(logctl):
    """Recovery cuts at a batch whose base offset (outside the CRC) goes backwards: rebuilding
    the index through it failed every writable open of the log dir (Kafka's index refuses the
    offset too), while the views showed a log that opened."""
    part = _build(logctl.root)
    (logctl.root / CLEAN).unlink()
    _unflushed(logctl.root)
    log_file = segment_file(part, 0, ".log")
    fifth = list(scan_batches(log_file.read_bytes()))[5]
    with open(log_file, "r+b") as f:
        f.seek(fifth.position)
        f.write(struct.pack(">q", 2))
    views = Views(logctl)
    assert any("starts at offset 2, below the end of the batch before it (5)" in p for p in views.verify_problems)
    recovered, error = views.agree_with_recovery(logctl.root)
    assert error is None and [o for o, _ in recovered] == list(range(5))


@pytest.mark.parametrize("clean", [True, False])
def test_an_index_entry_off_by_a_few_bytes_is_read_as_recovery_rebuilds_it(logctl, clean):
    """An entry that passes the index's sanity check but points a few bytes off: recovery
    rebuilds the indexes of every segment it revalidates (after a clean shutdown the active
    one, whose tail then reads as torn), and the view reads those segments without them."""
    part = _build(logctl.root, n=5)
    index = segment_file(part, 0, ".index")
    entries = index.read_bytes()
    last = len(entries.rstrip(b"\0")) // 8 * 8 - 8
    relative, position = struct.unpack_from(">ii", entries, last)
    with open(index, "r+b") as f:
        f.seek(last)
        f.write(struct.pack(">ii", relative, position + 50))
    if not clean:
        (logctl.root / CLEAN).unlink()
    views = Views(logctl)
    recovered, error = views.agree_with_recovery(logctl.root)
    assert error is None and [o for o, _ in recovered] == list(range(5))


def test_segments_wholly_below_the_log_start_are_left_out_of_the_view(logctl):
    """What ``delete-records`` leaves for the next retention (or a retention killed after its
    checkpoint): no longer part of the log, and no problem; ``verify`` exited 1 right after a
    successful ``delete-records``."""
    part = _build(logctl.root, n=12, segment_bytes=300)
    bases = _bases(part)
    (logctl.root / "log-start-offset-checkpoint").write_text(f"0\n1\nt 0 {bases[2]}\n")
    views = Views(logctl)
    assert views.verify[0] == 0, views.verify
    recovered, error = views.agree_with_recovery(logctl.root)
    assert error is None and recovered[0][0] == bases[2]


def test_a_read_returns_the_records_before_a_damaged_batch_then_names_it(logctl):
    """A read up to a batch failing its CRC returns the records before it, and the next read,
    starting there, raises. It used to raise at once, dropping what it had decoded, so
    ``consume`` fell back to one batch per read and decoded the rest of the log again for each:
    quadratic (8,000 records: 9.8 s, now 0.3 s)."""
    part = _build(logctl.root, n=20)
    flip_last_byte(segment_file(part, 0, ".log"), 15)
    with LogManager([logctl.root], read_only=True) as m:
        log = m.get_log("t", 0)
        assert [r.offset for r in log.read(0, max_records=100)] == list(range(15))
        with pytest.raises(LogError, match="computed crc"):
            log.read(15, max_records=100)
    code, out, err = logctl("consume", "t", "--partition", "0")
    assert "computed crc" in _one_line_error(code, err) and len(out.splitlines()) == 15


def test_planning_after_an_unclean_shutdown_holds_no_partition_open(tmp_path):
    """Each partition's view, opened to plan from while recovery is pending, stayed open in the
    manager: over many partitions the dry runs and the sensors ran out of file descriptors
    ("Too many open files") where the same dir after a clean shutdown planned fine."""
    with open_topic(tmp_path, partitions=20, segment_bytes=300) as m:
        for p in range(20):
            append_each(m.get_log("t", p), records(10))
    (tmp_path / CLEAN).unlink()
    fds = len(os.listdir("/proc/self/fd"))
    with LogManager([tmp_path], read_only=True) as m:
        assert m.log_dirs[0].recovery_pending
        plans = m.retention.plans(now_ms=1_000)
        assert len(plans) == 20 and len(os.listdir("/proc/self/fd")) <= fds + 5


def test_verify_passes_right_after_delete_records(logctl):
    part = _build(logctl.root, n=12, segment_bytes=300)
    bases = _bases(part)
    assert logctl("delete-records", "t", "--partition", "0", "--before-offset", str(bases[2] + 1))[0] == 0
    assert _bases(part) == bases  # the segments below go with the next retention
    code, out, err = logctl("verify")
    assert code == 0, out + err


def test_damage_in_a_segment_below_the_log_start_costs_no_later_segment(logctl):
    """A kill after ``delete-records`` committed its log start offset, before the segments below
    it went: recovery revalidated them, and a damaged batch there truncated the log and deleted
    every later, intact segment; the log then restarted at offset 0, below the committed start.
    Segments wholly below the log start are committed deletions: they go first, unread."""
    part = _build(logctl.root, n=12, segment_bytes=300)
    bases = _bases(part)
    assert len(bases) >= 4
    (logctl.root / CLEAN).unlink()
    _unflushed(logctl.root)
    (logctl.root / "log-start-offset-checkpoint").write_text(f"0\n1\nt 0 {bases[1] + 1}\n")
    flip_last_byte(segment_file(part, 0, ".log"), 0)
    views = Views(logctl)
    assert [o for o, _ in views.consumed()] == list(range(bases[1] + 1, 12))
    recovered, error = views.agree_with_recovery(logctl.root)
    assert error is None and [o for o, _ in recovered] == list(range(bases[1] + 1, 12))
    assert _bases(part) == bases[1:]


@pytest.mark.parametrize("lost", ["the last segment removed", "flushed bytes damaged"])
def test_offsets_below_the_recovery_point_are_never_given_again(logctl, lost):
    """Offsets below the recovery point were flushed; a log ending below it lost them to damage.
    Appends took those offsets again and ``verify`` said OK. The log end offset stays at the
    recovery point: the views say so, reads stop at the gap naming it, and appends go on after it."""
    part = _build(logctl.root, n=12, segment_bytes=300)
    bases = _bases(part)
    if lost == "the last segment removed":
        for suffix in (".log", ".index", ".timeindex"):
            segment_file(part, bases[-1], suffix).unlink()
        end = bases[-1]
    else:
        (logctl.root / CLEAN).unlink()  # recovery revalidates the segment holding the recovery point, 12
        end = flip_last_byte(segment_file(part, bases[-1], ".log"), 0)
    views = Views(logctl)
    assert any(f"offsets {end}..11 were flushed and are lost" in p for p in views.verify_problems)
    code, _, err = views.consume
    assert f"offsets {end} to 11 are missing" in _one_line_error(code, err)
    assert [o for o, _ in views.consumed()] == list(range(end))
    recovered, error = views.agree_with_recovery(logctl.root)
    assert [o for o, _ in recovered] == list(range(end)) and f"offsets {end} to 11 are missing" in error
    code, out, _ = logctl("produce", "t", "--partition", "0", stdin='{"value": "after"}\n')
    assert code == 0 and "at offsets 12..12" in out
    code, out, _ = logctl("consume", "t", "--partition", "0", "--from-offset", "12")
    assert code == 0 and [json.loads(line)["value"] for line in out.splitlines()] == ["after"]


def test_the_dry_runs_refuse_an_interrupted_swap_as_verify_does(logctl):
    """A ``.swap`` left with a clean-shutdown marker (a broker's copy, a swap placed by hand):
    ``verify`` and ``consume`` refused the partition, naming what a writable open does, while
    ``retention --dry-run`` planned from the files that open replaces (deleting more bytes than
    the real run then did). The dry runs plan from what the open leaves, so they refuse too."""
    part = _build(logctl.root, n=12, segment_bytes=300)
    bases = _bases(part)
    swap = segment_file(part, 0, ".log").with_name(segment_file(part, 0, ".log").name + ".swap")
    swap.write_bytes(segment_file(part, 0, ".log").read_bytes() + segment_file(part, bases[1], ".log").read_bytes())
    before = _files(logctl.root)
    for args in (("verify",), ("retention", "--dry-run", "--now-ms", str(2**40)), ("compact", "--dry-run")):
        code, out, err = logctl(*args)
        assert "interrupted swap: a writable open would" in (out if args == ("verify",) else _one_line_error(code, err))
        assert code == 1
    assert _files(logctl.root) == before


def test_a_log_cut_below_its_log_start_restarts_at_its_recovery_point_in_every_view(logctl):
    """``delete-records`` to 15 of a log flushed to 20, then an unclean shutdown and a bad CRC
    at offset 12: the view showed an empty log at 20, while the open restarted it at 15 and
    kept the end at 20, leaving offsets 15 to 19 as a gap no reader could pass. Both restart
    it at 20."""
    part = _build(logctl.root, n=20)
    assert logctl("delete-records", "t", "--partition", "0", "--before-offset", "15")[0] == 0
    (logctl.root / CLEAN).unlink()
    assert flip_last_byte(segment_file(part, 0, ".log"), 12) == 12
    views = Views(logctl)
    assert any("so the log restarts empty at 20" in p for p in views.verify_problems)
    recovered, error = views.agree_with_recovery(logctl.root)
    assert recovered == [] and error is None
    described = json.loads(logctl("topic", "describe", "t", "--json")[1])["partitions"][0]
    assert (described["log_start_offset"], described["log_end_offset"], described["segments"]) == (20, 20, 1)
    assert logctl("verify")[0] == 0 and _bases(part) == [20]

