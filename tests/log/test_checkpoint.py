"""Checkpoint files and the clean-shutdown marker (spec 1.15, 1.16)."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from storage_engine.errors import CheckpointError, InvalidTopicError
from storage_engine.files.durable import atomic_write
from storage_engine.log.checkpoint import (
    CLEAN_SHUTDOWN_FILE,
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    CheckpointFile,
    consume_clean_shutdown_marker,
    format_checkpoint,
    parse_checkpoint,
    read_checkpoint,
    write_checkpoint,
    write_clean_shutdown_marker,
)
from tests.helpers.paths import REAL_KAFKA


def test_names_are_kafkas() -> None:
    assert RECOVERY_POINT_CHECKPOINT == "recovery-point-offset-checkpoint"
    assert LOG_START_OFFSET_CHECKPOINT == "log-start-offset-checkpoint"
    assert CLEANER_OFFSET_CHECKPOINT == "cleaner-offset-checkpoint"
    assert CLEAN_SHUTDOWN_FILE == ".kafka_cleanshutdown"


def test_format_is_byte_exact_and_sorted() -> None:
    entries = {("other", 3): 0, ("my-topic", 10): 7, ("my-topic", 2): 1234}
    assert format_checkpoint(entries) == b"0\n3\nmy-topic 2 1234\nmy-topic 10 7\nother 3 0\n"
    assert format_checkpoint({}) == b"0\n0\n"


def test_format_rejects_offsets_the_parser_would_refuse() -> None:
    with pytest.raises(CheckpointError, match="outside Kafka's ranges"):
        format_checkpoint({("t", 0): 2**63})
    with pytest.raises(CheckpointError, match="outside Kafka's ranges"):
        format_checkpoint({("t", 2**31): 0})


def test_format_rejects_names_that_would_break_the_file() -> None:
    with pytest.raises(InvalidTopicError):
        format_checkpoint({("two words", 0): 1})


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / RECOVERY_POINT_CHECKPOINT
    entries = {("a", 0): 5, ("a", 1): 2**63 - 1, ("__consumer_offsets", 49): 0}
    write_checkpoint(path, entries)
    assert read_checkpoint(path) == entries
    assert path.read_bytes() == format_checkpoint(entries)
    assert not (tmp_path / (RECOVERY_POINT_CHECKPOINT + ".tmp")).exists()


@given(
    st.dictionaries(
        st.tuples(
            st.text(alphabet="abcXYZ019._-", min_size=1, max_size=20).filter(lambda t: t not in (".", "..")),
            st.integers(min_value=0, max_value=2**31 - 1),
        ),
        st.integers(min_value=-(2**63), max_value=2**63 - 1),
        max_size=20,
    )
)
def test_parse_inverts_format(entries: dict[tuple[str, int], int]) -> None:
    assert parse_checkpoint(format_checkpoint(entries)) == entries


def test_missing_and_empty(tmp_path: Path) -> None:
    assert read_checkpoint(tmp_path / "absent") == {}
    (tmp_path / "empty").write_bytes(b"")
    assert read_checkpoint(tmp_path / "empty") == {}
    (tmp_path / "version-only").write_bytes(b"0\n")
    assert read_checkpoint(tmp_path / "version-only") == {}


def test_windows_line_endings(tmp_path: Path) -> None:
    (tmp_path / "crlf").write_bytes(b"0\r\n1\r\nt 0 5\r\n")
    assert read_checkpoint(tmp_path / "crlf") == {("t", 0): 5}


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"1\n0\n", "Unrecognised version:1"),
        (b"x\n0\n", "'x'"),
        (b"0\nmany\n", "'many'"),
        (b"0\n1\nt 0\n", "'t 0'"),
        (b"0\n1\nt 0 5 6\n", "'t 0 5 6'"),
        (b"0\n1\nt zero 5\n", "'t zero 5'"),
        (b"0\n1\nt 0 five\n", "'t 0 five'"),
        (b"0\n1\nt 0 99999999999999999999\n", "99999999999999999999"),
        (b"0\n2\nt 0 5\n", "Expected 2 entries"),
        (b"0\n1\nt 0 5\nt 1 6\n", "Expected 1 entries"),
        (b"0\n1\nt 0 5\n\n", "''"),
        (b"\xff\xfe\n", "not UTF-8"),
    ],
)
def test_malformed_files_name_the_file_and_line(tmp_path: Path, content: bytes, needle: str) -> None:
    path = tmp_path / CLEANER_OFFSET_CHECKPOINT
    path.write_bytes(content)
    with pytest.raises(CheckpointError) as info:
        read_checkpoint(path)
    assert str(path) in str(info.value)
    assert needle in str(info.value)


def test_leftover_tmp_does_not_corrupt(tmp_path: Path) -> None:
    path = tmp_path / CLEANER_OFFSET_CHECKPOINT
    write_checkpoint(path, {("t", 0): 1})
    # a crash mid-write leaves a half-written .tmp; the real file is untouched
    (tmp_path / (CLEANER_OFFSET_CHECKPOINT + ".tmp")).write_bytes(b"0\n5\nt 0 ")
    assert read_checkpoint(path) == {("t", 0): 1}
    write_checkpoint(path, {("t", 0): 2})
    assert read_checkpoint(path) == {("t", 0): 2}
    assert not (tmp_path / (CLEANER_OFFSET_CHECKPOINT + ".tmp")).exists()


def test_atomic_write_replaces_whole_file(tmp_path: Path) -> None:
    path = tmp_path / "f"
    atomic_write(path, b"a much longer first version\n")
    inode_before = path.stat().st_ino
    atomic_write(path, b"short\n")
    assert path.read_bytes() == b"short\n"
    assert path.stat().st_ino != inode_before  # a new file was renamed over the old one


def test_atomic_write_failure_keeps_old_content(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "f"
    atomic_write(path, b"old\n")

    def broken_fsync(fd: int) -> None:
        raise OSError("disk on fire")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError):
        atomic_write(path, b"new\n")
    assert path.read_bytes() == b"old\n"


def test_checkpoint_file_update(tmp_path: Path) -> None:
    cp = CheckpointFile(tmp_path, CLEANER_OFFSET_CHECKPOINT)
    assert cp.path == tmp_path / CLEANER_OFFSET_CHECKPOINT
    assert not cp.path.exists()  # constructing does not create
    assert cp.read() == {} and cp.get(("t", 0)) is None
    assert cp.update({("t", 0): 5, ("t", 1): 6}) == {("t", 0): 5, ("t", 1): 6}
    assert cp.update({("t", 0): 7}, remove=[("t", 1), ("absent", 9)]) == {("t", 0): 7}
    assert cp.get(("t", 0)) == 7
    assert read_checkpoint(cp.path) == {("t", 0): 7}
    assert (tmp_path / ".logplat-checkpoints.lock").exists()


def test_a_read_sees_what_others_wrote_since_and_hands_out_its_own_copy(tmp_path: Path) -> None:
    """Reads reuse the last parse only while the file holds the same bytes."""
    cp = CheckpointFile(tmp_path, RECOVERY_POINT_CHECKPOINT)
    cp.update({("t", 0): 5})
    mine = cp.read()
    mine[("t", 0)] = 99  # the caller's copy
    assert cp.read() == {("t", 0): 5}
    write_checkpoint(cp.path, {("t", 0): 6, ("t", 1): 1})  # another process's rename
    assert cp.read() == {("t", 0): 6, ("t", 1): 1}
    cp.path.write_bytes(b"0\n3\nt 0 1\n")
    with pytest.raises(CheckpointError, match="Expected 3 entries"):
        cp.read()
    cp.path.unlink()
    assert cp.read() == {}


def test_update_refuses_to_overwrite_a_corrupt_file(tmp_path: Path) -> None:
    cp = CheckpointFile(tmp_path, RECOVERY_POINT_CHECKPOINT)
    cp.path.write_bytes(b"0\n3\nt 0 1\n")
    with pytest.raises(CheckpointError):
        cp.update({("t", 1): 2})
    assert cp.path.read_bytes() == b"0\n3\nt 0 1\n"


def _worker(log_dir: str, worker: int, count: int) -> None:
    cp = CheckpointFile(Path(log_dir), RECOVERY_POINT_CHECKPOINT)
    for i in range(count):
        cp.update({(f"topic-{worker}", i): worker * 1000 + i})
        if i % 3 == 2:
            cp.update(remove=[(f"topic-{worker}", i - 1)])


@pytest.mark.slow
def test_concurrent_updates_lose_nothing(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    workers, count = 6, 25
    procs = [ctx.Process(target=_worker, args=(str(tmp_path), w, count)) for w in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    expected = {
        (f"topic-{w}", i): w * 1000 + i
        for w in range(workers)
        for i in range(count)
        if not (i % 3 == 1 and i + 1 < count)
    }
    assert read_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT) == expected


# --------------------------------------------------------------------------- real Kafka files


def _real_checkpoints() -> list[Path]:
    if not REAL_KAFKA.is_dir():
        return []
    names = ("*-offset-checkpoint", "*-offset-checkpoint.tmp")
    return sorted(p for pattern in names for p in REAL_KAFKA.rglob(pattern))


@pytest.mark.skipif(not REAL_KAFKA.is_dir(), reason=f"real Kafka fixtures not present at {REAL_KAFKA}")
def test_real_kafka_checkpoint_files_parse() -> None:
    files = _real_checkpoints()
    kinds = {p.name for p in files}
    assert {
        "recovery-point-offset-checkpoint",
        "cleaner-offset-checkpoint",
        "replication-offset-checkpoint",
        "log-start-offset-checkpoint",
    } <= kinds
    for path in files:
        entries = read_checkpoint(path)
        lines = path.read_text().splitlines()
        if lines:
            assert len(entries) == int(lines[1]) == len(lines) - 2, path
            # our format is Kafka's up to the (unspecified) line order
            ours = format_checkpoint(entries).decode().splitlines()
            assert ours[:2] == lines[:2] and sorted(ours[2:]) == sorted(lines[2:]), path


@pytest.mark.skipif(not REAL_KAFKA.is_dir(), reason=f"real Kafka fixtures not present at {REAL_KAFKA}")
@pytest.mark.parametrize(
    ("relative", "tp", "offset"),
    [
        ("ArthurArutunyan04__Backend_labs/kafka-data/recovery-point-offset-checkpoint", ("oms_order_status_changed", 0), 3298),
        ("ArthurArutunyan04__Backend_labs/kafka-data/cleaner-offset-checkpoint", ("__consumer_offsets", 19), 258527),
        ("JobCollins__daas/kafka/data/replication-offset-checkpoint", ("rappel_conso", 0), 20917),
        ("getachew015__kafka-broker/data/kafka/cleaner-offset-checkpoint", ("__consumer_offsets", 13), 0),
        ("getachew015__kafka-broker/data/kafka/replication-offset-checkpoint", ("__consumer_offsets", 13), 38),
    ],
)
def test_real_kafka_checkpoint_values(relative: str, tp: tuple[str, int], offset: int) -> None:
    path = REAL_KAFKA / relative
    if not path.exists():
        pytest.skip(f"{path} not present")
    assert read_checkpoint(path)[tp] == offset
    assert CheckpointFile(path.parent, path.name).get(tp) == offset


@pytest.mark.skipif(not REAL_KAFKA.is_dir(), reason=f"real Kafka fixtures not present at {REAL_KAFKA}")
def test_real_kafka_log_dir_update_on_a_copy(tmp_path: Path) -> None:
    source = REAL_KAFKA / "getachew015__kafka-broker" / "data" / "kafka"
    if not source.is_dir():
        pytest.skip(f"{source} not present")
    for name in (CLEANER_OFFSET_CHECKPOINT, CLEANER_OFFSET_CHECKPOINT + ".tmp", RECOVERY_POINT_CHECKPOINT):
        shutil.copy(source / name, tmp_path / name)
    before = read_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT)
    cp = CheckpointFile(tmp_path, CLEANER_OFFSET_CHECKPOINT)
    assert cp.update({("__consumer_offsets", 13): 36}) == {("__consumer_offsets", 13): 36}
    assert not (tmp_path / (CLEANER_OFFSET_CHECKPOINT + ".tmp")).exists()
    assert read_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT) == before


# --------------------------------------------------------------------------- clean shutdown


def test_clean_shutdown_marker(tmp_path: Path) -> None:
    assert consume_clean_shutdown_marker(tmp_path) is False
    write_clean_shutdown_marker(tmp_path, broker_epoch=7118)
    marker = tmp_path / CLEAN_SHUTDOWN_FILE
    assert marker.read_bytes() == b'{"version":0,"brokerEpoch":7118}'
    assert json.loads(marker.read_text()) == {"version": 0, "brokerEpoch": 7118}
    assert consume_clean_shutdown_marker(tmp_path) is True
    assert not marker.exists()  # deleted at once: a crash while loading counts as unclean
    assert consume_clean_shutdown_marker(tmp_path) is False


@pytest.mark.skipif(not REAL_KAFKA.is_dir(), reason=f"real Kafka fixtures not present at {REAL_KAFKA}")
def test_real_kafka_markers(tmp_path: Path) -> None:
    markers = sorted(REAL_KAFKA.rglob(CLEAN_SHUTDOWN_FILE))
    assert markers
    for i, marker in enumerate(markers):
        log_dir = tmp_path / str(i)
        log_dir.mkdir()
        shutil.copy(marker, log_dir / CLEAN_SHUTDOWN_FILE)  # JSON (3.x) or empty (older brokers)
        assert consume_clean_shutdown_marker(log_dir) is True
        assert not (log_dir / CLEAN_SHUTDOWN_FILE).exists()
    ours = tmp_path / "ours"
    ours.mkdir()
    write_clean_shutdown_marker(ours, 7118)
    real = REAL_KAFKA / "ArthurArutunyan04__Backend_labs" / "kafka-data" / CLEAN_SHUTDOWN_FILE
    if real.exists():
        assert (ours / CLEAN_SHUTDOWN_FILE).read_bytes() == real.read_bytes()
