"""A produce that fails part way changes nothing, with real faults: a full filesystem (a small
tmpfs mounted for the test), a file size limit (``RLIMIT_FSIZE`` in a child process) and a
partition directory nobody can create files in (``chattr +i``: root ignores permission bits, not
the immutable flag). Each asserts exit status 1, one error line naming the partition and the
file, a log dir byte-identical to before the call, and every earlier record still readable.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import resource
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from storage_engine.errors import AppendFailedError, CleanShutdownMarkerError, UndoFailedError
from storage_engine.logdir.log_dir import SESSION_FILE, SESSION_LOCK
from storage_engine.logdir.manager import LogManager
from tests.helpers.engine import open_topic, records
from tests.helpers.paths import REPO

#: coordination files whose bytes change on any writable open (lock generation, sessions)
COORDINATION = (".logplat.lock", ".logplat-session", ".logplat-topics.lock", ".kafka_cleanshutdown",
                ".logplat-cleaner.lock")


def log_files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.name.startswith(COORDINATION)}


def lines(n: int, *, start: int = 0, size: int = 100) -> str:
    return "".join(json.dumps({"key": f"k{i}", "value": "v" * size}) + "\n" for i in range(start, start + n))


def logctl(root: Path, *args: str, stdin: str = "", preexec_fn=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "storage_engine.tools.logctl", "--log-dirs", str(root), *args], input=stdin,
                          capture_output=True, text=True, cwd=REPO, preexec_fn=preexec_fn, timeout=120)


def assert_one_line_error(result: subprocess.CompletedProcess, *needles: str) -> None:
    assert result.returncode == 1, result
    assert result.stdout == "", result.stdout  # no success line before the failure
    err = result.stderr
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, err


def offsets(root: Path) -> list[int]:
    with LogManager([root], read_only=True) as m:
        log = m.get_log("t", 0)
        return [r.offset for r in log.read(log.log_start_offset, max_records=10**6, max_bytes=1 << 26)]


def create(root: Path, *configs: str) -> None:
    result = logctl(root, "topic", "create", "t", "--partitions", "1",
                    *[x for c in configs for x in ("--config", c)])
    assert result.returncode == 0, result.stderr


@pytest.fixture
def small_fs(tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip()}): the full-disk test needs one")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_produce_that_fills_the_disk_appends_nothing(small_fs):
    root = small_fs / "logs"
    create(root, "segment.bytes=65536", "segment.index.bytes=4096")
    assert logctl(root, "produce", "t", "--partition", "0", "--batch-size", "50", stdin=lines(300)).returncode == 0
    free = os.statvfs(small_fs).f_bavail * os.statvfs(small_fs).f_frsize
    (small_fs / "filler").write_bytes(b"\0" * (free - 96 * 1024))  # room for about a third of the next call
    before = log_files(root)

    result = logctl(root, "produce", "t", "--partition", "0", "--batch-size", "50", stdin=lines(2000, start=300))

    assert_one_line_error(result, "t-0", "No space left on device", "none of its records was appended")
    assert log_files(root) == before
    assert not [p for p in root.rglob("*.tmp")]
    assert offsets(root) == list(range(300))
    (small_fs / "filler").unlink()
    assert logctl(root, "produce", "t", "--partition", "0", stdin=lines(10, start=300)).returncode == 0
    assert offsets(root) == list(range(310))  # a retry neither duplicates nor skips


def _file_size_limit(limit: int):
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a kill
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def test_a_produce_past_the_file_size_limit_appends_nothing(tmp_path):
    root = tmp_path / "logs"
    create(root, "segment.bytes=1048576", "segment.index.bytes=4096", "index.interval.bytes=1024")
    assert logctl(root, "produce", "t", "--partition", "0", stdin=lines(100)).returncode == 0
    before = log_files(root)

    result = logctl(root, "produce", "t", "--partition", "0", "--batch-size", "20", stdin=lines(1000, start=100),
                    preexec_fn=_file_size_limit(64 * 1024))

    assert_one_line_error(result, "t-0", "00000000000000000000.log", "File too large")
    assert log_files(root) == before
    assert offsets(root) == list(range(100))


def test_a_file_size_limit_below_the_index_preallocation_is_named(tmp_path):
    """A writable open preallocates the active segment's indexes to segment.index.bytes (10 MiB
    by default); under a smaller file size limit every writable command failed with a bare
    "[Errno 27] File too large" naming no file."""
    root = tmp_path / "logs"
    create(root)
    assert logctl(root, "produce", "t", "--partition", "0", stdin=lines(10)).returncode == 0
    before = log_files(root)
    result = logctl(root, "produce", "t", "--partition", "0", stdin=lines(10, start=10),
                    preexec_fn=_file_size_limit(5000 * 1024))
    assert_one_line_error(result, "cannot make index", str(root / "t-0" / "00000000000000000000.index"),
                          "10485760 bytes long (an active segment's indexes are preallocated to "
                          "segment.index.bytes): File too large")
    assert log_files(root) == before and offsets(root) == list(range(10))


def test_a_produce_into_a_partition_dir_that_takes_no_new_file_changes_nothing(tmp_path):
    """The produce must roll (segment.bytes) but no segment can be created: the old active
    segment's time index used to be finalised and the first batches committed anyway."""
    root = tmp_path / "logs"
    create(root, "segment.bytes=4096", "index.interval.bytes=256")
    assert logctl(root, "produce", "t", "--partition", "0", "--batch-size", "5", stdin=lines(20, size=60)).returncode == 0
    part = root / "t-0"
    if subprocess.run(["chattr", "+i", str(part)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not supported on this filesystem: the test needs an immutable directory")
    try:
        before = log_files(root)
        result = logctl(root, "produce", "t", "--partition", "0", "--batch-size", "5", stdin=lines(100, start=20, size=60))
        after = log_files(root)
    finally:
        subprocess.run(["chattr", "-i", str(part)], check=True)
    assert_one_line_error(result, "t-0", "Operation not permitted")
    assert after == before
    assert offsets(root) == list(range(20))


def test_a_retention_whose_roll_is_refused_changes_nothing(tmp_path):
    """Everything expired, so retention rolls the active segment first, in a partition dir that
    takes no new file: the roll had written the old segment's final time-index entry before it
    failed, and left it (and, refused after the trim, indexes every later append found full)."""
    root = tmp_path / "logs"
    create(root, "retention.ms=1000")
    assert logctl(root, "produce", "t", "--partition", "0", "--now-ms", "2000", stdin=lines(2)).returncode == 0
    part = root / "t-0"
    if subprocess.run(["chattr", "+i", str(part)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not supported on this filesystem: the test needs an immutable directory")
    try:
        before = log_files(root)
        result = logctl(root, "retention", "--now-ms", str(10**12))
        after = log_files(root)
    finally:
        subprocess.run(["chattr", "-i", str(part)], check=True)
    assert_one_line_error(result, "Operation not permitted")
    assert after == before
    assert logctl(root, "retention", "--now-ms", str(10**12)).returncode == 0
    assert offsets(root) == []


def test_topic_create_on_a_full_disk_never_prints_success_before_failing(small_fs):
    """The topic's files fit, the checkpoints written when the log dirs close do not: the
    error (never a success line first) names the file and says the topic was created."""
    root = small_fs / "logs"
    create(root, "segment.bytes=65536")
    (small_fs / "filler").write_bytes(b"\0" * (os.statvfs(small_fs).f_bavail * os.statvfs(small_fs).f_frsize))

    result = logctl(root, "topic", "create", "u", "--partitions", "3")

    assert_one_line_error(result, "No space left on device")
    assert str(root) in result.stderr  # the file that could not be written
    if "after the command had completed: Created topic u." in result.stderr:
        assert logctl(root, "topic", "describe", "u").returncode == 0
    assert not [p for p in root.rglob("*.tmp")]


def test_an_append_a_damaged_index_refuses_is_undone(tmp_path):
    """A time index entry past the segment's end makes the index refuse the produce's entry after
    the batch was written: the produce exited 1 but kept its record, so a retry duplicated it."""
    import struct

    root = tmp_path / "logs"
    create(root, "index.interval.bytes=1")
    assert logctl(root, "produce", "t", "--partition", "0", stdin=lines(10)).returncode == 0
    time_index = root / "t-0" / "00000000000000000000.timeindex"
    time_index.write_bytes(struct.pack(">qi", 2**40, 64))  # offset 64, past the log end of 10
    before = log_files(root)
    result = logctl(root, "produce", "t", "--partition", "0", stdin=lines(1, start=10))
    assert result.returncode == 1
    assert offsets(root) == list(range(10)) and log_files(root) == before


def test_a_roll_that_cannot_create_its_indexes_leaves_no_segment_behind(tmp_path):
    """A roll creates the new segment's ``.log`` and then its two indexes (so readers never see
    it without them). With the filesystem out of inodes after the ``.log``, the refused produce
    used to leave that empty ``.log`` behind, outside the segments its undo knew of."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m,nr_inodes=256", "tmpfs", str(mnt)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip()}): the test needs one with few inodes")
    try:
        root = mnt / "logs"
        create(root, "segment.bytes=4096")
        assert logctl(root, "produce", "t", "--partition", "0", stdin=lines(10)).returncode == 0
        filler = mnt / "filler"
        filler.mkdir()
        while os.statvfs(mnt).f_ffree > 1:  # room for the new segment's .log, not for its index
            (filler / str(os.statvfs(mnt).f_ffree)).touch()
        before = log_files(root)

        result = logctl(root, "produce", "t", "--partition", "0", "--batch-size", "10", stdin=lines(40, start=10))

        assert_one_line_error(result, "t-0", "No space left on device")
        assert log_files(root) == before
        assert offsets(root) == list(range(10))
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_produce_failing_on_a_full_disk_is_the_error_reported_when_the_close_fails_too(small_fs):
    """With no space left at all, closing the log dirs after the failed produce cannot write
    the clean-shutdown marker either: that error used to replace the produce's own, so the
    user read about a marker file and not that none of the records was appended. The marker
    cannot be written because a directory stands where its temporary file goes (the command's
    own open frees the old marker's block, which the full disk would give back to it)."""
    root = small_fs / "logs"
    create(root)
    assert logctl(root, "produce", "t", "--partition", "0", stdin=lines(10)).returncode == 0
    (root / ".kafka_cleanshutdown.tmp").mkdir()
    before = log_files(root)
    _fill(small_fs / "filler")

    result = logctl(root, "produce", "t", "--partition", "0", "--batch-size", "10", stdin=lines(40, start=10))

    assert_one_line_error(result, "t-0", "No space left on device", "none of its records was appended (log end "
                          "offset still 10); closing the log dirs then failed too", ".kafka_cleanshutdown.tmp")
    assert log_files(root) == before
    (small_fs / "filler").unlink()
    (root / ".kafka_cleanshutdown.tmp").rmdir()
    assert logctl(root, "produce", "t", "--partition", "0", stdin=lines(5, start=10)).returncode == 0
    assert offsets(root) == list(range(15))


def test_a_roll_refused_by_a_full_disk_leaves_no_segment_behind(small_fs):
    """The roll creates the new segment, then finishes the old one (its last time index entry,
    a flush); when that failed, the new segment was not in the log's list yet, so the append's
    undo left its files behind, and the next open ended the log at its base offset: 20 offsets
    that were never written."""
    root = small_fs / "logs"
    with open_topic(root, segment_bytes=4096) as m:
        m.get_log("t", 0).append(records(10, value_size=100), now=1000)
    with LogManager([root]) as m:
        log = m.get_log("t", 0)
        before = sorted(os.listdir(log.dir))
        _fill(small_fs / "filler")
        with pytest.raises(AppendFailedError, match="none of its records was appended"):
            log.append_all([records(10, start=10, value_size=100)] * 4, now=1000)
        assert sorted(os.listdir(log.dir)) == before and [s.base_offset for s in log.segments] == [0]
        (small_fs / "filler").unlink()
    with LogManager([root]) as m:
        assert m.get_log("t", 0).log_end_offset == 10


def _fill(filler: Path) -> None:
    """Take every byte the filesystem has left."""
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError:
            pass


def test_a_close_that_fails_in_one_log_dir_still_closes_the_others(small_fs, tmp_path):
    """The first log dir's clean-shutdown marker does not fit on its full disk: the close raised
    there and never left the other dir's session (no marker, its session file left, so its next
    open recovered every partition), and kept the full dir's session lock, which in a
    long-lived process made every reader take a writer for live."""
    full, other = small_fs / "logs", tmp_path / "other"
    manager = LogManager([full, other])
    manager.admin.create_topic("t", 2, {})
    _fill(small_fs / "filler")
    with pytest.raises(CleanShutdownMarkerError, match="No space left on device"):
        manager.close()
    assert (other / ".kafka_cleanshutdown").exists()
    assert not [p for p in other.iterdir() if SESSION_FILE.fullmatch(p.name)]
    fd = os.open(full / SESSION_LOCK, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises while this process still holds it
    finally:
        os.close(fd)


def test_a_roll_refused_by_a_file_size_limit_is_undone_in_full(tmp_path):
    """Under a file size limit below segment.index.bytes, beside a writer that keeps the active
    segment's indexes preallocated, the roll cannot create the next segment's indexes. Taking
    its final time-index entry back used to cut the file and grow it again, which the limit
    refused too: the live writer's preallocated .timeindex was left short, and a bare "[Errno
    27] File too large" replaced the roll's error naming the file. Zeroing the slot in place
    needs no room under the limit: the files are as they were and the roll's error is the one."""
    root = tmp_path / "logs"
    with open_topic(root, segment_bytes=4096) as m:
        m.get_log("t", 0).append(records(10, value_size=100), now=1000)
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import time
        from storage_engine.logdir.manager import LogManager
        from tests.helpers.engine import records
        m = LogManager([{str(root)!r}])
        m.get_log("t", 0).append(records(1, start=10, value_size=100), now=1000)
        print("up", flush=True)
        time.sleep(120)""")], stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert holder.stdout.readline().strip() == "up"
        before = log_files(root)
        roller = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
            import resource, signal
            from storage_engine.logdir.manager import LogManager
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            m = LogManager([{str(root)!r}])
            log = m.get_log("t", 0)
            resource.setrlimit(resource.RLIMIT_FSIZE, (5000 * 1024, 5000 * 1024))
            try:
                log.roll(2000)
            except Exception as exc:
                print(type(exc).__name__, exc, *getattr(exc, "__notes__", ()), sep=" | ")""")],
            capture_output=True, text=True, cwd=REPO, timeout=120)
        after = log_files(root)
    finally:
        holder.kill()
        holder.wait()
    assert roller.stdout.startswith("IndexSizeError | cannot make index"), roller.stdout + roller.stderr
    assert "00000000000000000011.index" in roller.stdout and "undoing" not in roller.stdout
    assert after == before


def test_a_produce_whose_undo_fails_too_stops_the_writer_and_leaves_the_dir_to_recovery(small_fs, monkeypatch):
    """The full disk refuses the produce, and the undo's cut of the ``.log`` back to its old
    length fails too (an I/O error, injected in ``os.ftruncate``: no real device fails on cue).
    The undo used to stop half way, leaving this process's log end offset past the files'
    end: its next append went on from there, a gap in the offsets, and its close wrote the
    clean-shutdown marker, so no recovery ever looked. Now the error says the undo failed, the
    log takes no more writes in this process, the close leaves the dir unclean, and the next
    open recovers the whole batches that were written, and appends right after them."""
    root = small_fs / "logs"
    with open_topic(root, segment_bytes=1 << 20) as m:
        m.get_log("t", 0).append(records(10, value_size=100), now=1000)
    manager = LogManager([root])
    log = manager.get_log("t", 0)
    real_ftruncate = os.ftruncate

    def failing_ftruncate(fd: int, length: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".log"):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real_ftruncate(fd, length)

    _fill(small_fs / "filler")
    monkeypatch.setattr(os, "ftruncate", failing_ftruncate)
    with pytest.raises(UndoFailedError, match=r"No space left on device\); undoing it failed too \(\[Errno 5\] "
                                              r"Input/output error\), so some of its batches may be in the log; "
                                              r"it takes no more writes in this process"):
        log.append_all([records(50, start=10, value_size=100)] * 4, now=1000)
    monkeypatch.setattr(os, "ftruncate", real_ftruncate)
    (small_fs / "filler").unlink()
    with pytest.raises(UndoFailedError, match="an earlier write here failed and undoing it failed too"):
        log.append(records(1, start=12, value_size=100), now=1000)
    manager.close()
    assert not (root / ".kafka_cleanshutdown").exists()

    with LogManager([root]) as m:
        log = m.get_log("t", 0)
        end = log.log_end_offset
        assert end in (10, 60, 110, 160, 210)  # whole batches of the refused call, or none of them
        assert log.append(records(1, start=end, value_size=100), now=1000).first_offset == end
    assert offsets(root) == list(range(end + 1))


def test_a_roll_whose_undo_fails_too_stops_the_writer(tmp_path, monkeypatch):
    """A roll refused by a partition dir that takes no new file (``chattr +i``), whose undo
    cannot zero the final time-index entry it wrote (an I/O error, injected in ``os.pwrite``):
    the roll's error is the one raised, with the undo's noted, and the log takes no more writes
    in this process (it used to append on beside an entry it meant to remove)."""
    root = tmp_path / "logs"
    with open_topic(root) as m:
        m.get_log("t", 0).append(records(10, value_size=100), now=1000)
    part = root / "t-0"
    with LogManager([root]) as manager:
        log = manager.get_log("t", 0)
        log.append(records(2, start=10, value_size=100), now=1000)  # past the close's final entry: the roll writes one
        real_pwrite = os.pwrite

        def failing_pwrite(fd: int, data: bytes, offset: int) -> int:
            if os.readlink(f"/proc/self/fd/{fd}").endswith(".timeindex") and not any(data):
                raise OSError(errno.EIO, os.strerror(errno.EIO))
            return real_pwrite(fd, data, offset)

        if subprocess.run(["chattr", "+i", str(part)], capture_output=True).returncode != 0:
            pytest.skip("chattr +i is not supported on this filesystem: the test needs an immutable directory")
        try:
            monkeypatch.setattr(os, "pwrite", failing_pwrite)
            with pytest.raises(PermissionError) as refused:
                log.roll(2000)
            monkeypatch.setattr(os, "pwrite", real_pwrite)
        finally:
            subprocess.run(["chattr", "-i", str(part)], check=True)
        assert refused.value.__notes__ == ["undoing the roll failed too: [Errno 5] Input/output error: "
                                           f"'{part / '00000000000000000000.timeindex'}'"]
        with pytest.raises(UndoFailedError, match=r"an earlier write here failed and undoing its roll failed too"):
            log.append(records(1, start=12, value_size=100), now=1000)
    assert offsets(root) == list(range(12))


def test_a_topic_create_refused_after_its_metadata_leaves_nothing_behind(tmp_path):
    """The create writes the topic's metadata, then makes and opens each partition, whose open
    preallocates its indexes to segment.index.bytes: under a smaller file size limit that is
    refused. The metadata and the first partition's directory used to stay, a topic every
    later command failed on (a value of segment.index.bytes below one time index entry, which
    Kafka's validator takes, did the same to every writable command of the log dir)."""
    root = tmp_path / "logs"
    create(root)
    before = log_files(root)
    result = logctl(root, "topic", "create", "y", "--partitions", "2", preexec_fn=_file_size_limit(5000 * 1024))
    assert_one_line_error(result, "cannot make index", "File too large")
    assert log_files(root) == before
    assert not list(root.glob("y-*")) and not list(root.rglob("y.json"))
    # nor left for a full recovery: the marker written, no session file left behind
    assert (root / ".kafka_cleanshutdown").exists() and not [p for p in root.iterdir() if SESSION_FILE.fullmatch(p.name)]
    assert logctl(root, "topic", "create", "y", "--partitions", "2").returncode == 0
    assert logctl(root, "produce", "t", "--partition", "0", stdin=lines(3)).returncode == 0
    assert offsets(root) == [0, 1, 2]


def test_a_roll_whose_new_segment_cannot_be_removed_stops_the_writer(tmp_path, monkeypatch):
    """The roll is refused after it made the new segment (its flush fails: an I/O error from
    ``os.fsync``), and removing the new segment's files fails too (``os.unlink``, likewise
    injected). That failure replaced the roll's error and let the log write on. The roll's
    error is raised now with the undo's noted, and the log takes no more writes in this
    process; the old segment keeps its final time-index entry, as a segment that is no longer
    the last one must (recovery, starting at the new one, would never add it back)."""
    root = tmp_path / "logs"
    with open_topic(root) as m:
        m.get_log("t", 0).append(records(10, value_size=100), now=1000)
    time_index = root / "t-0" / "00000000000000000000.timeindex"
    with LogManager([root]) as manager:
        log = manager.get_log("t", 0)
        log.append(records(2, start=10, value_size=100), now=1000)  # past the close's final entry: the roll writes one
        before = time_index.read_bytes()

        real_fsync = os.fsync

        def failing_fsync(fd: int) -> None:  # the old segment's flush, once the new segment is made
            if os.readlink(f"/proc/self/fd/{fd}").endswith("00000000000000000000.log"):
                raise OSError(errno.EIO, os.strerror(errno.EIO))
            real_fsync(fd)

        real_unlink = os.unlink

        def failing_unlink(path, *args, **kwargs) -> None:  # the new segment's files (strays are absent)
            if os.path.lexists(path):
                raise OSError(errno.EIO, os.strerror(errno.EIO), str(path))
            real_unlink(path, *args, **kwargs)

        monkeypatch.setattr(os, "fsync", failing_fsync)
        monkeypatch.setattr(os, "unlink", failing_unlink)
        with pytest.raises(OSError, match="Input/output error") as refused:
            log.roll(2000)
        monkeypatch.undo()
        assert refused.value.__notes__[0].startswith("undoing the roll failed too: [Errno 5]")
        assert len(time_index.read_bytes().rstrip(b"\0")) > len(before.rstrip(b"\0"))  # the final entry stays
        with pytest.raises(UndoFailedError, match="undoing its roll failed too"):
            log.append(records(1, start=12, value_size=100), now=1000)
    assert logctl(root, "verify").returncode == 0  # recovered at the next open, nothing understated
    assert offsets(root) == list(range(12))


def test_recovery_on_a_full_disk_names_the_index_it_could_not_write(small_fs):
    """After an unclean shutdown the first writable open recovers the active segment and
    rebuilds its indexes; on a full disk that failed with a bare "[Errno 28] No space left on
    device", naming no file."""
    root = small_fs / "logs"
    create(root)
    assert logctl(root, "produce", "t", "--partition", "0", stdin=lines(10)).returncode == 0
    (root / ".kafka_cleanshutdown").unlink()
    for index in (root / "t-0").glob("*index"):  # lost with the crash: recovery writes them anew
        index.unlink()
    _fill(small_fs / "filler")
    result = logctl(root, "produce", "t", "--partition", "0", stdin=lines(1, start=10))
    assert_one_line_error(result, "No space left on device", str(root / "t-0" / "00000000000000000000."))
    (small_fs / "filler").unlink()
    assert logctl(root, "produce", "t", "--partition", "0", stdin=lines(1, start=10)).returncode == 0
    assert offsets(root) == list(range(11))


def _compactable(root: Path) -> None:
    """A compacted topic whose cleaned log is about 120 KB: 1,000 keys, each written 3 times."""
    create(root, "cleanup.policy=compact", "segment.bytes=65536", "segment.index.bytes=4096")
    keyed = "".join(json.dumps({"key": f"k{i % 1000}", "value": "v" * 100}) + "\n" for i in range(3000))
    assert logctl(root, "produce", "t", "--partition", "0", "--batch-size", "50", stdin=keyed).returncode == 0


def test_a_compaction_past_the_file_size_limit_names_the_partition_and_file(tmp_path):
    root = tmp_path / "logs"
    _compactable(root)
    before = log_files(root)

    result = logctl(root, "compact", "--topic", "t", "--partition", "0", preexec_fn=_file_size_limit(20_000))

    assert_one_line_error(result, "t-0: writing ", f"{root / 't-0'}/", ".log.cleaning failed (File too large)",
                          "nothing was swapped")
    assert log_files(root) == before


def test_a_compaction_that_fills_the_disk_names_the_partition_and_file(small_fs):
    root = small_fs / "logs"
    _compactable(root)
    free = os.statvfs(small_fs).f_bavail * os.statvfs(small_fs).f_frsize
    (small_fs / "filler").write_bytes(b"\0" * (free - 32 * 1024))
    before = log_files(root)

    result = logctl(root, "compact", "--topic", "t", "--partition", "0")

    assert_one_line_error(result, "t-0: writing ", ".log.cleaning failed (No space left on device)",
                          "nothing was swapped")
    assert log_files(root) == before
    (small_fs / "filler").unlink()
    assert logctl(root, "compact", "--topic", "t", "--partition", "0").returncode == 0


def test_a_committed_change_whose_clean_shutdown_marker_cannot_be_written_exits_0(tmp_path):
    """A directory where the marker's ``.tmp`` goes refuses only the marker: ``topic create`` and
    ``delete-records`` had committed, so each says so and warns in one line, with exit status 0
    (a script retrying on exit 1 failed: the topic existed). The next open recovers the dir."""
    root = tmp_path / "logs"
    create(root)
    (root / ".kafka_cleanshutdown.tmp").mkdir()

    created = logctl(root, "topic", "create", "u", "--partitions", "1")
    produced = logctl(root, "produce", "t", "--partition", "0", stdin=lines(3))
    deleted = logctl(root, "delete-records", "t", "--partition", "0", "--before-offset", "2")

    for result, done in ((created, "Created topic u.\n"), (produced, "Produced 3 records"),
                         (deleted, "low_watermark: 2")):
        assert result.returncode == 0 and done in result.stdout, result
        assert result.stderr.startswith("warning: could not write the clean-shutdown marker in ")
        assert result.stderr.count("\n") == 1 and "Is a directory" in result.stderr, result.stderr
    (root / ".kafka_cleanshutdown.tmp").rmdir()
    assert offsets(root) == [2]
    assert logctl(root, "topic", "describe", "u").returncode == 0
