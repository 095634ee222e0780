"""Commands over a log dir whose partitions cannot all be loaded: the clean-shutdown marker,
damaged tails recovery must cut, and segment file names outside Kafka's offsets."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from storage_engine.errors import LogError
from storage_engine.files.naming import segment_file
from storage_engine.logdir.manager import LogManager

CLEAN = ".kafka_cleanshutdown"
BATCH = 97  # bytes of one batch of three records as _build produces them


def _build(logctl) -> Path:
    """The reported layout: t (2 partitions) and compacted c, 400-byte segments, 30 records in
    each partition as batches of 3 (segments at offsets 0, 12 and 24)."""
    assert logctl("topic", "create", "t", "--partitions", "2", "--config", "segment.bytes=400")[0] == 0
    assert logctl("topic", "create", "c", "--partitions", "1", "--config", "cleanup.policy=compact",
                  "--config", "segment.bytes=400")[0] == 0
    lines = "".join(json.dumps({"key": f"k{i % 5}", "value": f"v{i}"}) + "\n" for i in range(30))
    for topic, partition in (("t", "0"), ("t", "1"), ("c", "0")):
        code, _, err = logctl("produce", topic, "--partition", partition, "--now-ms", "1000", "--batch-size", "3",
                              stdin=lines)
        assert code == 0, err
    return logctl.root


def _corrupt_tail(part: Path) -> Path:
    """A copy of the active segment's last batch with one byte flipped in its middle (CRC fails)."""
    log_file = segment_file(part, 24, ".log")
    data = bytearray(log_file.read_bytes()[-BATCH:])
    data[BATCH // 2] ^= 0xFF
    with open(log_file, "ab") as f:
        f.write(data)
    return log_file


def _consumed(logctl, topic: str, partition: int) -> list[int]:
    code, out, err = logctl("consume", topic, "--partition", str(partition))
    assert code == 0, err
    return [json.loads(line)["offset"] for line in out.splitlines()]


def test_a_recovery_scan_stopped_by_a_symlink_writes_no_clean_shutdown_marker(logctl, tmp_path):
    root = _build(logctl)
    t1_log = _corrupt_tail(root / "t-1")
    shutil.copytree(root / "c-0", tmp_path / "elsewhere")
    (root / "a-0").symlink_to(tmp_path / "elsewhere")  # scanned first: the scan stops there
    (root / CLEAN).unlink()
    code, _, err = logctl("consume", "t", "--partition", "0")
    assert code == 0, err  # a read-only command recovers nothing
    code, _, err = logctl("delete-records", "c", "--partition", "0", "--before-offset", "1")
    assert code == 1 and "symbolic link" in err, err
    assert not (root / CLEAN).exists()
    (root / "a-0").unlink()
    assert logctl("delete-records", "c", "--partition", "0", "--before-offset", "1")[0] == 0
    assert t1_log.stat().st_size == 2 * BATCH  # the next open recovered t-1


def test_a_command_that_could_not_load_every_partition_writes_no_clean_shutdown_marker(logctl):
    root = _build(logctl)
    t1_log = _corrupt_tail(root / "t-1")
    # t-0 cannot load: a second non-empty segment claims offsets 12.. (refused, never repaired)
    shutil.copy(segment_file(root / "t-0", 12, ".log"), segment_file(root / "t-0", 13, ".log"))
    (root / CLEAN).unlink()  # an unclean shutdown: every partition needs recovery
    code, _, err = logctl("delete-records", "c", "--partition", "0", "--before-offset", "1")
    assert code == 1 and "segments overlap" in err and len(err.strip().splitlines()) == 1, err
    assert not (root / CLEAN).exists()  # t-1 was never recovered
    for path in (root / "t-0").glob("00000000000000000013.*"):
        path.unlink()
    assert logctl("delete-records", "c", "--partition", "0", "--before-offset", "1")[0] == 0
    assert t1_log.stat().st_size == 2 * BATCH  # the next open recovered t-1: corrupt tail cut
    assert (root / CLEAN).exists()
    assert _consumed(logctl, "t", 1) == list(range(30))


def test_a_reload_that_fails_after_a_repair_writes_no_clean_shutdown_marker(logctl):
    """An open log reloads when another process changed it. A reload that removed a leftover and
    then failed (overlapping segments) still let the process write the marker on close, so the
    next opener would have skipped recovering what the reload never reached."""
    root = _build(logctl)
    part = root / "t-0"
    with LogManager([root]) as manager:
        log = manager.get_log("t", 0)
        shutil.copy(segment_file(part, 12, ".log"), segment_file(part, 13, ".log"))
        leftover = segment_file(part, 0, ".log.cleaned")  # a dead cleaner's output: a load removes it
        leftover.write_bytes(b"")
        with log.lock.hold():
            log.lock.bump_generation()  # as another process's change to the segment list does
        with pytest.raises(LogError, match="segments overlap"):
            log.read(0, max_records=1)
        assert not leftover.exists()  # the reload had repaired something before it failed
    assert not (root / CLEAN).exists()
    for path in part.glob("00000000000000000013.*"):
        path.unlink()
    assert _consumed(logctl, "t", 0) == list(range(30))
    assert logctl("delete-records", "t", "--partition", "0", "--before-offset", "1")[0] == 0
    assert (root / CLEAN).exists()


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _zeros(part: Path) -> None:
    with open(segment_file(part, 24, ".log"), "ab") as f:
        f.write(b"\0" * 4096)


def _short_size_field(part: Path) -> None:
    """A complete v2 batch header whose size field (30) is below the 49 every v2 batch needs."""
    log_file = segment_file(part, 24, ".log")
    header = bytearray(log_file.read_bytes()[-BATCH:])
    header[8:12] = (30).to_bytes(4, "big")
    with open(log_file, "ab") as f:
        f.write(bytes(header))


@pytest.mark.parametrize("clean", [False, True])
@pytest.mark.parametrize("damage", [_zeros, _short_size_field])
def test_an_invalid_batch_header_at_the_tail_is_reported_read_only_and_truncated_by_recovery(logctl, damage, clean):
    """Not a batch at all, so not the complete batch with a bad CRC that a clean shutdown keeps:
    a writable open cuts it after any shutdown (before, every command failed on it)."""
    root = _build(logctl)
    damage(root / "t-0")
    if not clean:
        (root / CLEAN).unlink()
    before = _tree(root)
    code, out, err = logctl("verify", "--topic", "t")
    assert code == 1 and "Traceback" not in err
    assert f"a writable open truncates 00000000000000000024.log to {2 * BATCH} bytes" in out, out
    assert _consumed(logctl, "t", 0) == list(range(30))
    assert _tree(root) == before  # read-only views changed nothing
    code, _, err = logctl("delete-records", "t", "--partition", "0", "--before-offset", "0")  # a writable open
    assert code == 0, err
    assert segment_file(root / "t-0", 24, ".log").stat().st_size == 2 * BATCH
    assert logctl("verify")[0] == 0
    assert logctl("produce", "t", "--partition", "0", stdin='{"key": "a", "value": "b"}\n')[0] == 0
    assert _consumed(logctl, "t", 0) == list(range(31))


@pytest.mark.parametrize("name, why", [
    ("99999999999999999999.log", "above 9223372036854775807"),
    ("99999999999999999999.index", "above 9223372036854775807"),
    ("9223372036854775808.log", "exactly 20 digits"),  # 19 digits: not a segment's name at all
    ("9" * 200 + ".snapshot", "exactly 20 digits"),
])
@pytest.mark.parametrize("clean", [False, True])
def test_a_segment_file_name_beyond_a_long_is_refused_before_anything_is_written(logctl, name, why, clean):
    """Kafka's LogLoader parses the offset as a Long and fails; nothing is created for it."""
    root = _build(logctl)
    (root / "t-0" / name).touch()
    if not clean:
        (root / CLEAN).unlink()
    partition, checkpoint = _tree(root / "t-0"), (root / "recovery-point-offset-checkpoint").read_bytes()
    for command in (["produce", "t", "--partition", "0"], ["consume", "t", "--partition", "0"],
                    ["delete-records", "t", "--partition", "0", "--before-offset", "0"]):
        code, _, err = logctl(*command, stdin='{"key": "a", "value": "b"}\n')
        assert code == 1 and err.count("\n") == 1 and str(root / "t-0" / name) in err, err
        assert why in err
    code, out, _ = logctl("verify", "--topic", "t")
    assert code == 1 and str(root / "t-0" / name) in out
    assert _tree(root / "t-0") == partition
    assert (root / "recovery-point-offset-checkpoint").read_bytes() == checkpoint


def test_an_append_past_the_largest_offset_is_refused_before_anything_is_written(logctl):
    """A stray segment at Long.MAX_VALUE makes that the log end offset; one more record would
    need offset 2^63 - 1 and a log end offset (and recovery point) of 2^63, which no checkpoint
    reader accepts: the whole log dir would no longer open."""
    root = _build(logctl)
    (root / "t-0" / "09223372036854775807.log").touch()
    assert logctl("topic", "describe", "t")[0] == 0  # loads (read-only), as Kafka's loader would
    before = _tree(root / "t-0")
    code, _, err = logctl("produce", "t", "--partition", "0", stdin='{"key": "a", "value": "b"}\n')
    assert code == 1 and err.count("\n") == 1 and "9223372036854775807" in err and "nothing was appended" in err, err
    after = _tree(root / "t-0")
    assert after["09223372036854775807.log"] == b"" and after["00000000000000000024.log"] == before["00000000000000000024.log"]
    assert logctl("verify", "--topic", "c")[0] == 0  # the log dir still opens
    assert logctl("produce", "t", "--partition", "1", stdin='{"key": "a", "value": "b"}\n')[0] == 0


def test_a_load_refused_for_overlapping_segments_leaves_no_file_open(logctl):
    """The refused open closes the segments it had opened (found by the compaction fuzzer: a
    process refusing such logs over and over ran out of descriptors)."""
    root = _build(logctl)
    part = root / "t-0"
    shutil.copy(segment_file(part, 12, ".log"), segment_file(part, 13, ".log"))
    fds = Path("/proc/self/fd")
    before = len(list(fds.iterdir()))
    for _ in range(3):
        with LogManager([root], read_only=True) as manager, pytest.raises(LogError, match="segments overlap"):
            manager.get_log("t", 0)
    opened = [p.resolve() for p in fds.iterdir() if p.resolve().parent == part]
    assert opened == [] and len(list(fds.iterdir())) <= before
