"""Loading after a crash: torn tails, corrupt batches, lost indexes and leftover temp files."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest

from storage_engine.cleaner import LogCleaner
from storage_engine.errors import LogError
from storage_engine.files.naming import segment_file
from storage_engine.log.append_validation import ProducerRecord
from storage_engine.log.temp_files import plan_temp_files
from storage_engine.logdir.manager import LogManager
from storage_engine.record import decode_batch, scan_batches
from storage_engine.tools.verify import verify_log
from tests.helpers.crash import crash_env
from tests.helpers.engine import append_each, open_topic, records
from tests.helpers.paths import REPO

CLEAN = ".kafka_cleanshutdown"


def _build(root, n=30, **cfg):
    with open_topic(root, **cfg) as m:
        append_each(m.get_log("t", 0), records(n))
    return root / "t-0"


def _reload(root):
    m = LogManager([root])
    return m, m.get_log("t", 0)


def test_truncation_at_every_byte_of_the_last_two_batches(tmp_path):
    src = tmp_path / "src"
    part = _build(src, n=12, index_interval_bytes=1)
    log_file = segment_file(part, 0, ".log")
    data = log_file.read_bytes()
    batches = list(scan_batches(data))
    second_last = batches[-2].position
    for cut in range(second_last, len(data)):
        root = tmp_path / f"cut{cut}"
        shutil.copytree(src, root)
        os.truncate(segment_file(root / "t-0", 0, ".log"), cut)
        (root / CLEAN).unlink(missing_ok=True)  # the crash: no clean shutdown marker
        (root / "recovery-point-offset-checkpoint").unlink()  # a torn write was never flushed
        m, log = _reload(root)
        try:
            complete = [b for b in batches if b.position + b.header.size_in_bytes <= cut]
            expected_end = complete[-1].header.next_offset
            assert log.log_end_offset == expected_end, cut
            assert [r.offset for r in log.read(0, max_records=100)] == list(range(expected_end))
            assert log.active_segment.size == complete[-1].position + complete[-1].header.size_in_bytes
            assert verify_log(log).ok
            assert log.append(records(1)).first_offset == expected_end
        finally:
            m.close()


def test_a_corrupt_batch_truncates_there_and_drops_later_segments(tmp_path):
    part = _build(tmp_path, n=40, segment_bytes=800)
    segs = sorted(p for p in os.listdir(part) if p.endswith(".log"))
    assert len(segs) >= 3
    victim = part / segs[1]
    data = bytearray(victim.read_bytes())
    third = list(scan_batches(bytes(data)))[2]
    data[third.position + 40] ^= 0xFF  # inside the CRC-covered region
    victim.write_bytes(bytes(data))
    (tmp_path / CLEAN).unlink()
    (tmp_path / "recovery-point-offset-checkpoint").unlink()
    m, log = _reload(tmp_path)
    try:
        assert log.log_end_offset == third.header.base_offset
        assert len(log.segments) == 2
        assert sorted(p for p in os.listdir(part) if p.endswith(".log")) == segs[:2]
        assert verify_log(log).ok
    finally:
        m.close()


def _lookups(log):
    seg_results = []
    for seg in log.segments:
        for off in range(seg.base_offset, log.log_end_offset):
            raw = seg.translate_offset(off)
            seg_results.append((seg.base_offset, off, None if raw is None else raw.position))
    ts = [log.offset_for_timestamp(t) for t in range(900, 1100, 7)]
    return seg_results, ts


@pytest.mark.parametrize("damage", ["delete-index", "delete-timeindex", "garbage-index", "garbage-timeindex"])
def test_missing_or_corrupt_indexes_are_rebuilt_with_the_same_lookups(tmp_path, damage):
    part = _build(tmp_path, n=60, segment_bytes=1500, index_interval_bytes=150)
    m, log = _reload(tmp_path)
    before = _lookups(log)
    entries_before = [(s.offset_index.entries, s.time_index.entries) for s in log.segments]
    m.close()
    for name in os.listdir(part):
        path = part / name
        if damage == "delete-index" and name.endswith(".index"):
            path.unlink()
        elif damage == "delete-timeindex" and name.endswith(".timeindex"):
            path.unlink()
        elif damage == "garbage-index" and name.endswith(".index"):
            path.write_bytes(b"\x01\x02\x03")  # not a multiple of 8
        elif damage == "garbage-timeindex" and name.endswith(".timeindex"):
            path.write_bytes(b"\x00" * 11)
    m, log = _reload(tmp_path)
    try:
        assert _lookups(log) == before
        assert [(s.offset_index.entries, s.time_index.entries) for s in log.segments] == entries_before
        assert verify_log(log).ok
    finally:
        m.close()


def test_leftover_deleted_and_cleaned_files_are_removed(tmp_path):
    part = _build(tmp_path, n=20, segment_bytes=600)
    (part / "00000000000000000000.log.cleaned").write_bytes(b"partial cleaner output")
    (part / "00000000000000000000.index.cleaned").write_bytes(b"")
    (part / "00000000000000000099.log.deleted").write_bytes(b"old")
    m, log = _reload(tmp_path)
    try:
        assert not [n for n in os.listdir(part) if n.endswith((".cleaned", ".deleted"))]
        assert [r.offset for r in log.read(0, max_records=50)] == list(range(20))
    finally:
        m.close()


def _swap_from(part, bases_to_replace, keep_offsets):
    """Write a .swap segment holding only ``keep_offsets`` of the replaced segments, as a cleaner would."""
    from storage_engine.record import decode_batch, encode_batch

    out = bytearray()
    for base in bases_to_replace:
        for raw in scan_batches(segment_file(part, base, ".log").read_bytes()):
            kept = [r for r in decode_batch(raw) if r.offset in keep_offsets]
            if kept:
                out += encode_batch(kept, base_offset=raw.header.base_offset,
                                    last_offset_delta=raw.header.last_offset_delta)
    segment_file(part, bases_to_replace[0], ".log.swap").write_bytes(bytes(out))


def test_a_complete_swap_is_finished_on_load(tmp_path):
    part = _build(tmp_path, n=30, segment_bytes=600, cleanup_policy="compact")
    bases = sorted(int(n.split(".")[0]) for n in os.listdir(part) if n.endswith(".log"))
    replaced = bases[:2]
    keep = {0, 3, bases[1] + 1}
    _swap_from(part, replaced, keep)
    for base in replaced[1:]:  # old files half way through being renamed to .deleted
        segment_file(part, base, ".log").rename(segment_file(part, base, ".log.deleted"))
    m, log = _reload(tmp_path)
    try:
        offsets = [r.offset for r in log.read(0, max_records=100)]
        assert offsets == sorted(keep) + list(range(bases[2], 30))
        assert not [n for n in os.listdir(part) if n.endswith((".swap", ".deleted"))]
        assert verify_log(log).ok
    finally:
        m.close()


def _file_name(base: int, suffix: str) -> str:
    return f"{base:020d}{suffix}"


def test_the_swaps_of_a_split_segment_are_all_completed():
    """Kafka's ``splitOverflowedSegment`` replaces one segment (offsets 0..99) with two, leaving
    swaps at 0 and 50 while the old segment is still there if it is killed. The swap at 50 was
    taken for one starting inside the old segment and removed, losing offsets 50..99."""
    names = [_file_name(0, ".log"), _file_name(0, ".index"), _file_name(0, ".log.swap"), _file_name(0, ".index.swap"),
             _file_name(50, ".log.swap"), _file_name(50, ".index.swap"), _file_name(100, ".log")]
    spans = {_file_name(0, ".log.swap"): (0, 50), _file_name(50, ".log.swap"): (50, 100)}
    plan = plan_temp_files(names, spans, {0: 100, 100: 100}.__getitem__)
    assert plan.remove == [(_file_name(0, ".index"), "replaced by an interrupted swap"),
                           (_file_name(0, ".log"), "replaced by an interrupted swap")]
    assert sorted(new for _, new in plan.rename) == [_file_name(0, ".index"), _file_name(0, ".log"), _file_name(50, ".index"),
                                                     _file_name(50, ".log")]


def test_a_swap_next_to_cleaned_files_is_discarded(tmp_path):
    part = _build(tmp_path, n=30, segment_bytes=600)
    _swap_from(part, [0], {1})
    (part / "00000000000000000000.timeindex.cleaned").write_bytes(b"")
    m, log = _reload(tmp_path)
    try:
        assert [r.offset for r in log.read(0, max_records=100)] == list(range(30))
    finally:
        m.close()


def _kill_a_writer_after(root, damage: str) -> None:
    """A writer appends three records as one batch, runs ``damage`` (Python, with ``seg`` its
    active segment) and is killed."""
    script = textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {str(REPO)!r})
        from tests.helpers.engine import records
        from storage_engine.logdir.manager import LogManager
        m = LogManager([{str(root)!r}])
        log = m.get_log("t", 0)
        log.append(records(3, start=5))
        seg = log.active_segment
        {damage}
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr


def test_a_killed_writer_leaves_no_clean_marker_and_is_recovered(tmp_path):
    _build(tmp_path, n=5)
    # a torn write: half a batch at the tail
    _kill_a_writer_after(tmp_path, r'os.pwrite(seg._fd, b"\x00" * 8 + b"\x00\x00\x01\x00" + b"\x07" * 40, seg.size)')
    assert not (tmp_path / CLEAN).exists()
    m, log = _reload(tmp_path)
    try:
        assert log.log_end_offset == 8
        assert verify_log(log).ok
    finally:
        m.close()
    assert (tmp_path / CLEAN).exists()


def test_a_reader_does_not_make_the_first_writer_after_a_crash_skip_recovery(tmp_path):
    """A read-only process (a consumer, ``verify``) holding the log dir open when the first
    writer arrives after a crash used to make that writer join as a later opener, so it
    skipped recovery and appended after the dead writer's damage."""
    _build(tmp_path, n=5)
    # the last batch's bytes damaged in place: a complete batch failing its CRC
    _kill_a_writer_after(tmp_path, r'os.pwrite(seg._fd, b"\xff" * 8, seg.size - 8)')
    reader = LogManager([tmp_path], read_only=True)
    try:
        m, log = _reload(tmp_path)
        try:
            assert log.log_end_offset == 5  # recovery cut the batch of three that fails its CRC
            assert verify_log(log).ok
        finally:
            m.close()
    finally:
        reader.close()
    assert (tmp_path / CLEAN).exists()


def test_a_reader_waits_at_the_gate_while_a_first_writer_recovers(tmp_path):
    """A first writer holds ``.logplat-recovery.lock`` exclusively until it has recovered: a
    reader arriving then waits, so it never reads a partition half way through recovery."""
    _build(tmp_path, n=5)
    gate = os.open(tmp_path / ".logplat-recovery.lock", os.O_RDWR)
    fcntl.flock(gate, fcntl.LOCK_EX)  # what a first writer holds while it recovers
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(REPO)!r})
        from storage_engine.logdir.manager import LogManager
        with LogManager([{str(tmp_path)!r}], read_only=True) as m:
            print(m.get_log("t", 0).log_end_offset)
    """)
    reader = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            reader.wait(timeout=2)
    finally:
        os.close(gate)  # recovery done: the gate opens
    assert reader.communicate(timeout=60)[0].strip() == "5"


def test_the_last_writer_writes_the_marker_while_a_reader_is_open(tmp_path):
    """Readers are not counted: a writer closing while a consumer reads still knows it is the
    last writer, so the next writer need not recover every partition."""
    _build(tmp_path, n=5)
    with LogManager([tmp_path], read_only=True):
        m, log = _reload(tmp_path)
        assert not (tmp_path / CLEAN).exists()  # consumed by the first writer
        m.close()
        assert (tmp_path / CLEAN).exists()


def test_a_writer_killed_mid_roll_beside_a_live_writer_leaves_the_old_segments_time_index_whole(tmp_path):
    """The roll created the next segment and only then wrote the old one's final time-index
    entry; killed between the two while another writer had the dir open (so the next open is no
    first one and recovers nothing), the old segment was left without it for good: the next
    append checkpointed a recovery point past it, and retention judged it by its mtime."""
    with open_topic(tmp_path, segment_bytes=1024, index_interval_bytes=1 << 20) as m:
        m.get_log("t", 0).append(records(5, value_size=100), now=1_000)
    produce = [sys.executable, "-m", "storage_engine.tools.logctl", "--log-dirs", str(tmp_path), "produce", "t",
               "--partition", "0", "--batch-size", "1"]
    lines = "".join(f'{{"key": "k{i}", "value": "{"v" * 100}"}}\n' for i in range(10))
    with LogManager([tmp_path]):  # a live writer: the later writers are not the first opener
        killed = subprocess.run(produce, input=lines, capture_output=True, text=True, cwd=REPO,
                                env=crash_env("roll.after-new-segment"))
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        after = subprocess.run(produce, input=lines, capture_output=True, text=True, cwd=REPO)
        assert after.returncode == 0, after.stderr
    with LogManager([tmp_path], read_only=True) as m:
        report = verify_log(m.get_log("t", 0))
        assert report.problems == [] and len(report.segments) >= 2


def test_a_topic_whose_stored_config_is_refused_does_not_stop_recovery_of_the_others(tmp_path):
    """After an unclean shutdown, recovery opens every partition of the log dir with its topic's
    config: one topic whose stored config was refused (a hand edit, or a ``segment.index.bytes``
    below 12 an older version took) stopped every writable command of every topic, the alter
    that would correct it included, with a bare "Invalid value 'abc' for configuration
    retention.ms". Its partitions are recovered with the broker's defaults (recovery's rules do
    not depend on a topic's settings); the topic itself is refused where it is used, naming its
    file, until ``topic alter`` corrects it, and then reads as it was."""
    root = tmp_path / "logs"
    meta = root / ".logplat-topics" / "b.json"
    # the last: a sparse index's settings with one refused; recovered with the one that passes and
    # the default index.interval.bytes, its 4 KB index fills, and takes no more entries
    for bad in ({"retention.ms": "abc"}, {"segment.index.bytes": "8"},
                {"segment.index.bytes": "4096", "index.interval.bytes": "abc"}):
        shutil.rmtree(root, ignore_errors=True)
        with LogManager([root]) as m:
            m.admin.create_topic("a", 1)
            m.admin.create_topic("b", 1, {"segment.index.bytes": "4096", "index.interval.bytes": "100000"})
            m.get_log("a", 0).append([ProducerRecord(b"k", b"a", 1_000)], now=1_000)
            for i in range(3000):  # 3 MB in one segment, a batch a record
                m.get_log("b", 0).append([ProducerRecord(b"k", b"v" * 1000, 1_000 + i)], now=1_000)
            m.get_log("b", 0).append([ProducerRecord(b"k", b"b", 9_000)], now=9_000)
        (root / CLEAN).unlink()  # as a kill leaves it
        (root / "b-0" / "00000000000000000000.log").open("ab").write(b"\x00torn")
        body = json.loads(meta.read_text())
        meta.write_text(json.dumps({**body, "configs": bad}))
        with LogManager([root]) as m:
            m.get_log("a", 0).append([ProducerRecord(b"k", b"a2", 2_000)], now=2_000)
            with pytest.raises(LogError, match=f"the config of topic b in {meta} is refused: Invalid value .* for "
                                               "configuration .*logctl topic alter b"):
                m.get_log("b", 0)
            m.admin.alter_topic("b", {}, list(bad))
            assert [r.value for bt in m.get_log("b", 0).iter_batches() for r in decode_batch(bt)][-1] == b"b"
            assert m.get_log("b", 0).log_end_offset == 3001
            assert not verify_log(m.get_log("b", 0)).problems  # the torn tail cut, the indexes whole
        assert (root / CLEAN).exists()


def test_an_index_setting_lowered_under_a_full_active_segment_rolls_it_instead_of_wedging(tmp_path):
    """``segment.index.bytes`` lowered below what the active segment's indexes hold: the next
    open refused to shrink them ("Cannot resize ... it holds 749 entries"), that failure left
    the log dir to be recovered, and recovery, rebuilding the indexes at the new size, failed
    ("Attempt to append to a full time index") for every writable command of every topic, the
    alter that would undo it included. The indexes now keep their entries (full: the segment
    rolls at its next append), and a recovery's index that fills takes no more entries."""
    root = tmp_path / "logs"
    value = b"v" * 1000
    with LogManager([root]) as m:
        m.admin.create_topic("a", 1)
        m.admin.create_topic("t", 1)
        for i in range(3000):  # a batch a record: an index entry every 4 KB, 600 or so in all
            m.get_log("t", 0).append([ProducerRecord(str(i).encode(), value, 1_000 + i)], now=5_000)
        m.admin.alter_topic("t", {"segment.index.bytes": "4096"})
    with LogManager([root]) as m:
        log = m.get_log("t", 0)
        log.append([ProducerRecord(b"after", value, 9_000)], now=9_000)
        assert len(log.segments) == 2 and not verify_log(log).problems  # rolled: the full segment kept whole
        m.get_log("a", 0).append([ProducerRecord(b"k", b"v", 9_000)], now=9_000)
    (root / CLEAN).unlink()  # as a kill leaves it: recovery rebuilds every index at 4096 bytes
    with LogManager([root]) as m:
        log = m.get_log("t", 0)
        assert not verify_log(log).problems and log.log_end_offset == 3001
        assert sum(1 for b in log.iter_batches() for _ in decode_batch(b)) == 3001
        log.append([ProducerRecord(b"later", value, 10_000)], now=10_000)
    assert (root / CLEAN).exists()


def test_an_index_size_of_exactly_its_entries_still_takes_a_rolls_last_entry(tmp_path):
    """``segment.index.bytes`` landing exactly on the time index's entries left no slot for a
    roll's last entry: every produce to the partition failed ("Attempt to append to a full time
    index"), and so did retention, which rolls an expired active segment. A resize always keeps
    that slot."""
    root = tmp_path / "logs"
    with LogManager([root]) as m:
        m.admin.create_topic("t", 1, {"index.interval.bytes": "1500"})
        for i in range(4):  # one time index entry; the largest timestamp comes after it
            m.get_log("t", 0).append([ProducerRecord(b"k", b"v" * 1000, 1_000_000 + i)], now=5_000)
        m.admin.alter_topic("t", {"segment.index.bytes": "12"})
    with LogManager([root]) as m:
        log = m.get_log("t", 0)
        log.append([ProducerRecord(b"a", b"b", 2_000_000)], now=2_000_000)
        assert log.log_end_offset == 5 and not verify_log(log).problems
        assert log.segments[0].time_index.last_entry().timestamp == 1_000_003  # the roll's last entry


def test_compaction_under_a_lowered_index_size_indexes_sparsely_instead_of_failing(tmp_path):
    """A cleaned segment is one per group and cannot roll: under a ``segment.index.bytes``
    lowered since its input was written, its index filled and every compaction of the log
    failed ("Attempt to append to a full time index"). It indexes no further once full."""
    root = tmp_path / "logs"
    with LogManager([root]) as m:
        m.admin.create_topic("t", 1, {"cleanup.policy": "compact"})
        log = m.get_log("t", 0)
        for i in range(800):  # 800 distinct keys: the cleaned segment is nearly as large as its input
            log.append([ProducerRecord(f"k{i}".encode(), b"v" * 1000, 1_000_000 + i)], now=5_000)
        log.roll(now=5_000)
        log.append([ProducerRecord(b"k0", b"new", 2_000_000)], now=5_000)
        m.admin.alter_topic("t", {"segment.index.bytes": "24"})
    with LogManager([root]) as m:
        report = LogCleaner(m).compact("t", 0, now_ms=10**12, force=True)
        log = m.get_log("t", 0)
        assert report.failed is None and not verify_log(log).problems
        values = {r.key: r.offset for b in log.iter_batches() for r in decode_batch(b)}
        assert len(values) == 800 and values[b"k0"] == 800 and log.log_end_offset == 801
