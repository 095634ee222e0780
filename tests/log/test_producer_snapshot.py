"""Kafka's producer snapshot file format (``producer_snapshot.py``): broker-written files read and
written back byte for byte, a replay of the broker's log reproduces its snapshots, and every
kind of damage is refused by name."""

from __future__ import annotations

import struct

import pytest

from storage_engine.log.producer_snapshot import (
    CorruptSnapshotError,
    SnapshotEntry,
    decode_snapshot,
    encode_snapshot,
    list_snapshots,
    read_snapshot,
    write_snapshot,
)
from storage_engine.log.producer_state import ProducerStateManager
from storage_engine.record import scan_batches
from tests.helpers.paths import REAL_KAFKA, SKIP_REASON

BROKER_SNAPSHOTS = sorted(REAL_KAFKA.rglob("*.snapshot")) if REAL_KAFKA.is_dir() else []

ENTRY = SnapshotEntry(producer_id=2000, producer_epoch=3, last_sequence=4, last_offset=23, offset_delta=1,
                      timestamp=1754533975912, coordinator_epoch=-1, current_txn_first_offset=-1)


@pytest.mark.skipif(not BROKER_SNAPSHOTS, reason=SKIP_REASON)
def test_every_broker_snapshot_reads_and_writes_back_byte_for_byte():
    with_producers = 0
    for path in BROKER_SNAPSHOTS:
        data = path.read_bytes()
        entries = decode_snapshot(data, path)
        with_producers += bool(entries)
        assert encode_snapshot(entries) == data, path
    assert with_producers >= 3  # not only empty snapshots: idempotent and transactional producers too


@pytest.mark.skipif(not BROKER_SNAPSHOTS, reason=SKIP_REASON)
def test_replaying_a_broker_log_reproduces_the_brokers_snapshots():
    """Kafka's ``ProducerAppendInfo`` rules: sequence, offsets, timestamps and the coordinator
    epoch of a transaction marker, as the broker computed them."""
    dirs = sorted({p.parent for p in BROKER_SNAPSHOTS if decode_snapshot(p.read_bytes(), p)})
    checked = 0
    for d in dirs:
        batches = [b for log in sorted(d.glob("*.log")) for b in scan_batches(log.read_bytes())]
        for offset, path in list_snapshots(d).items():
            state = ProducerStateManager(d)
            state.replay(batches, offset)
            assert state.producers == {e.producer_id: e for e in read_snapshot(path)}, path
            checked += 1
    assert checked >= 3


def test_round_trip_keeps_the_entry_order(tmp_path):
    entries = [ENTRY, SnapshotEntry(7, 0, -1, -1, 0, 5, 12, 40), SnapshotEntry(1, 1, 0, 0, 0, 9, -1, -1)]
    path = write_snapshot(tmp_path, 41, entries)
    assert path.name == "00000000000000000041.snapshot"
    assert read_snapshot(path) == entries
    assert list_snapshots(tmp_path) == {41: path}
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda d: d[:5], "shorter than its 10-byte header"),
        (lambda d: struct.pack(">h", 2) + d[2:], "unknown file version 2"),
        (lambda d: d[:-1], "do not hold a header and 1 producer entries"),
        (lambda d: d[:6] + struct.pack(">i", -1) + d[10:], "do not hold a header and -1 producer entries"),
        (lambda d: d[:20] + bytes([d[20] ^ 1]) + d[21:], "CRC is no longer valid"),
    ],
)
def test_damaged_snapshots_are_refused_naming_the_file(tmp_path, damage, message):
    path = tmp_path / "00000000000000000005.snapshot"
    path.write_bytes(damage(encode_snapshot([ENTRY])))
    with pytest.raises(CorruptSnapshotError, match=message) as err:
        read_snapshot(path)
    assert str(path) in str(err.value)


def test_a_symlinked_snapshot_is_not_followed(tmp_path):
    outside = tmp_path / "outside"
    outside.write_bytes(encode_snapshot([ENTRY]))
    part = tmp_path / "t-0"
    part.mkdir()
    (part / "00000000000000000005.snapshot").symlink_to(outside)
    assert list_snapshots(part) == {}
    with pytest.raises(CorruptSnapshotError, match="cannot be read"):
        read_snapshot(part / "00000000000000000005.snapshot")


def test_only_ascii_digits_name_a_snapshot_or_a_staged_file(tmp_path):
    """``str.isdigit`` took twenty Arabic-Indic zeros for an offset (``int`` reads them), so a
    user's file of that name was listed as a snapshot, and one starting with such a digit and
    ending ``.cleaning`` was removed as a cleaner's leftover."""
    from storage_engine.log.staging import STAGING_SUFFIX, remove_stale_staging

    foreign = "\u0660" * 20 + ".snapshot"
    (tmp_path / foreign).write_bytes(b"not a snapshot")
    (tmp_path / ("\u0663x" + STAGING_SUFFIX)).write_bytes(b"a user's file")
    (tmp_path / ("00000000000000000005.log" + STAGING_SUFFIX)).write_bytes(b"a cleaner's leftover")
    assert list_snapshots(tmp_path) == {}
    assert remove_stale_staging(tmp_path) == ["00000000000000000005.log" + STAGING_SUFFIX]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([foreign, "\u0663x" + STAGING_SUFFIX])
