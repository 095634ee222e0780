"""Producer state of a log (``producer_state.py``): snapshots taken at roll and clean shutdown,
loaded on open (latest usable one, then a replay), damaged or stray ones deleted, deleted with
the segments retention removes, bounded in number, and a kill while one is written."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from storage_engine.cleaner import LogCleaner
from storage_engine.log.producer_snapshot import (
    SnapshotEntry,
    list_snapshots,
    read_snapshot,
    snapshot_path,
    write_snapshot,
)
from storage_engine.logdir.manager import LogManager
from tests.helpers.cleaner import data_batch, marker
from tests.helpers.crash import crash_env
from tests.helpers.engine import open_topic
from tests.helpers.paths import REPO

NOW = 1_000_000


def _produce(log, pid: int, epoch: int, seq: int, *pairs) -> None:
    log.append_batch(data_batch(0, list(pairs), pid=pid, epoch=epoch, seq=seq, ts=NOW), now=NOW)


def _snapshots(root) -> list[int]:
    return list(list_snapshots(root / "t-0"))


def test_roll_and_close_take_snapshots_that_the_next_open_loads(tmp_path):
    with open_topic(tmp_path) as m:
        log = m.get_log("t", 0)
        _produce(log, 7, 0, 0, ("a", "1"), ("b", "2"))
        log.roll(now=NOW)
        assert _snapshots(tmp_path) == [2]
        _produce(log, 7, 0, 2, ("c", "3"))
        _produce(log, 8, 3, 0, ("d", "4"))
    assert _snapshots(tmp_path) == [2, 4]  # the clean-shutdown one at the log end offset
    entries = read_snapshot(snapshot_path(tmp_path / "t-0", 4))
    assert entries == [SnapshotEntry(7, 0, 2, 2, 0, NOW, -1, -1), SnapshotEntry(8, 3, 0, 3, 0, NOW, -1, -1)]
    # the next open takes state from the snapshot, not from the log: a producer only the
    # snapshot knows is there
    write_snapshot(tmp_path / "t-0", 4, [*entries, SnapshotEntry(99, 1, 5, 1, 0, NOW, -1, -1)])
    with LogManager([tmp_path]) as m:
        assert m.get_log("t", 0).last_records_of_active_producers() == {7: (2, 0), 8: (3, 3), 99: (1, 1)}


def test_a_marker_with_a_new_epoch_leaves_the_producer_without_a_last_data_batch(tmp_path):
    with open_topic(tmp_path) as m:
        log = m.get_log("t", 0)
        log.append_batch(data_batch(0, [("k", "v")], ts=NOW, pid=3, epoch=0, seq=0, transactional=True), now=NOW)
        assert log.last_records_of_active_producers() == {3: (0, 0)}
    raw = marker(1, 3, 1, commit=False, ts=NOW)
    part = tmp_path / "t-0"
    with open(part / "00000000000000000000.log", "ab") as f:  # a coordinator's abort after an epoch bump
        f.write(raw)
    with LogManager([tmp_path]) as m:
        assert m.get_log("t", 0).last_records_of_active_producers() == {3: (None, 1)}
    assert read_snapshot(snapshot_path(part, 2)) == [SnapshotEntry(3, 1, -1, -1, 0, NOW, 0, -1)]


def test_a_corrupt_snapshot_is_deleted_and_state_rebuilt_from_the_log(tmp_path):
    with open_topic(tmp_path) as m:
        log = m.get_log("t", 0)
        _produce(log, 7, 0, 0, ("a", "1"))
        log.roll(now=NOW)
        _produce(log, 8, 0, 0, ("b", "1"))
    part = tmp_path / "t-0"
    latest = snapshot_path(part, 2)
    data = bytearray(latest.read_bytes())
    data[-1] ^= 0xFF
    latest.write_bytes(bytes(data))
    with LogManager([tmp_path], read_only=True) as m:  # a read-only view reports it and changes nothing
        log = m.get_log("t", 0)
        assert any("00000000000000000002.snapshot is ignored (corrupt" in w for w in log.load_warnings)
    assert latest.read_bytes() == bytes(data)
    with LogManager([tmp_path]) as m:
        log = m.get_log("t", 0)
        assert any("00000000000000000002.snapshot (corrupt" in a for a in log.load_actions)
        assert not latest.exists() or read_snapshot(latest)  # deleted, then rewritten at close
        assert log.last_records_of_active_producers() == {7: (0, 0), 8: (1, 0)}  # snapshot 1 + replay
    assert _snapshots(tmp_path) == [1, 2]


def test_snapshots_that_cannot_apply_are_deleted_on_open(tmp_path):
    with open_topic(tmp_path) as m:
        log = m.get_log("t", 0)
        for i in range(3):
            _produce(log, 7, 0, i, ("a", str(i)))
            log.roll(now=NOW)
    part = tmp_path / "t-0"
    assert _snapshots(tmp_path) == [1, 2, 3]
    for offset in (0, 2_5, 1_000):  # no segment there (0 is the log start: kept), and above the end
        write_snapshot(part, offset, [])
    (part / "00000000000000000003.snapshot.tmp").write_bytes(b"torn")
    with LogManager([tmp_path]) as m:
        log = m.get_log("t", 0)
        assert log.last_records_of_active_producers() == {7: (2, 0)}
    assert _snapshots(tmp_path) == [0, 1, 2, 3]
    assert not (part / "00000000000000000003.snapshot.tmp").exists()


def test_retention_deletes_the_snapshots_of_the_segments_it_deletes_and_their_number_stays_bounded(tmp_path):
    with open_topic(tmp_path, retention_bytes=1, file_delete_delay_ms=0) as m:
        log = m.get_log("t", 0)
        for i in range(20):
            _produce(log, 7, 0, i, ("a", str(i)))
            log.roll(now=NOW)
            assert len(_snapshots(tmp_path)) <= len(log.segments) + 1
        assert _snapshots(tmp_path) == list(range(1, 21))  # one per segment base (segment 0 has none)
        (plan,) = m.retention.plans("t", now_ms=NOW)
        m.retention.apply([plan], now_ms=NOW)
        kept = [s.base_offset for s in log.segments]
        assert kept[0] > 10
        assert _snapshots(tmp_path) == kept
        assert log.last_records_of_active_producers() == {7: (19, 0)}


def test_the_cleaners_swap_keeps_the_snapshots_where_its_replacements_start(tmp_path):
    """Kafka's ``replaceSegments`` deletes the snapshots of the segments it deleted and did not
    replace: a segment cleaned alone keeps its base and the producer state at that offset; a
    group of segments keeps the first one's base, and the others' snapshots go."""
    for name, segment_bytes in (("alone", 1024), ("grouped", 1 << 30)):
        root = tmp_path / name
        with open_topic(root, cleanup_policy="compact", min_cleanable_dirty_ratio="0.01", file_delete_delay_ms=0,
                        segment_bytes=segment_bytes) as m:
            log = m.get_log("t", 0)
            for i in range(12):
                _produce(log, 7, 0, i, ("k", "v" * 300))  # ~370 bytes a batch: two rolled segments never fit 1024
                if i % 2 == 1:
                    log.roll(now=NOW)
            assert _snapshots(root) == [2, 4, 6, 8, 10, 12]
            report = LogCleaner(m).compact("t", 0, now_ms=NOW)
            assert report.segments_recopied == 6
            if name == "alone":
                assert [s.base_offset for s in log.segments] == [0, 2, 4, 6, 8, 10, 12]
                assert _snapshots(root) == [2, 4, 6, 8, 10, 12]
            else:
                assert [s.base_offset for s in log.segments] == [0, 12]
                assert _snapshots(root) == [12]
            assert log.last_records_of_active_producers() == {7: (11, 0)}
        with LogManager([root]) as m:  # the next open keeps them all: a segment starts at each
            assert _snapshots(root) == ([2, 4, 6, 8, 10, 12] if name == "alone" else [12])
            assert m.get_log("t", 0).last_records_of_active_producers() == {7: (11, 0)}


def test_a_kill_while_a_snapshot_is_written_leaves_a_loadable_log(tmp_path):
    with open_topic(tmp_path) as m:
        log = m.get_log("t", 0)
        _produce(log, 7, 0, 0, ("a", "1"))
        log.roll(now=NOW)
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(REPO)!r})
        from storage_engine.logdir.manager import LogManager
        from tests.helpers.cleaner import data_batch
        log = LogManager([{str(tmp_path)!r}]).get_log("t", 0)
        log.append_batch(data_batch(0, [("b", "2")], pid=8, epoch=0, seq=0, ts={NOW}), now={NOW})
        log.roll(now={NOW})  # killed between writing 2.snapshot.tmp and renaming it
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True,
                          env=crash_env("producer-snapshot.before-rename", {"PATH": "/usr/bin:/bin"}))
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    part = tmp_path / "t-0"
    assert (part / "00000000000000000002.snapshot.tmp").exists()
    assert _snapshots(tmp_path) == [1]
    with LogManager([tmp_path]) as m:
        log = m.get_log("t", 0)
        assert log.log_end_offset == 2
        assert log.last_records_of_active_producers() == {7: (0, 0), 8: (1, 0)}
        assert [r.value for r in log.read(0, max_records=10)] == [b"1", b"2"]
    assert not (part / "00000000000000000002.snapshot.tmp").exists()
    assert _snapshots(tmp_path) == [1, 2]



def test_a_snapshot_that_does_not_fit_fails_neither_the_roll_nor_the_close_and_leaves_no_temp_file(tmp_path):
    """A real write failure: the roll and the close run in a child whose RLIMIT_FSIZE (40 bytes,
    SIGXFSZ ignored) lets its small index and checkpoint writes through but not the 56-byte
    snapshot. Only the next open's replay is longer."""
    with open_topic(tmp_path, segment_index_bytes=36) as m:
        _produce(m.get_log("t", 0), 7, 0, 0, ("a", "1"))
    for p in (tmp_path / "t-0").glob("*.snapshot"):
        p.unlink()
    script = textwrap.dedent(f"""
        import resource, signal, sys
        sys.path.insert(0, {str(REPO)!r})
        from storage_engine.logdir.manager import LogManager
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        m = LogManager([{str(tmp_path)!r}])
        log = m.get_log("t", 0)
        resource.setrlimit(resource.RLIMIT_FSIZE, (40, 40))
        log.roll(now={NOW})
        print([s.base_offset for s in log.segments], log.load_warnings)
        m.close()
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "[0, 1]" in proc.stdout and "producer snapshot at offset 1 not written" in proc.stdout
    assert not [p.name for p in (tmp_path / "t-0").iterdir() if "snapshot" in p.name]
    with LogManager([tmp_path]) as m:
        assert m.get_log("t", 0).last_records_of_active_producers() == {7: (0, 0)}  # rebuilt by replay
    assert _snapshots(tmp_path) == [1]


def test_a_full_filesystem_leaves_the_old_snapshot_and_no_temp_file(tmp_path):
    """A real full filesystem: a tmpfs of one page, filled."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8k", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root and mount rights) to fill a filesystem for real")
    try:
        old = write_snapshot(disk, 3, [SnapshotEntry(7, 0, 0, 0, 0, NOW, -1, -1)])
        fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while os.write(fd, b"\0" * 4096):
                pass
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
        finally:
            os.close(fd)
        with pytest.raises(OSError) as err:
            write_snapshot(disk, 3, [SnapshotEntry(8, 0, 0, 0, 0, NOW, -1, -1)])
        assert err.value.errno == errno.ENOSPC
        assert sorted(p.name for p in disk.iterdir()) == [old.name, "filler"]
        assert read_snapshot(old) == [SnapshotEntry(7, 0, 0, 0, 0, NOW, -1, -1)]
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=True)
