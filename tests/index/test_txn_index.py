"""``.txnindex``: the file format (Kafka's ``TransactionIndex``/``AbortedTxn``), and the entries
the appender, recovery and the cleaner write, which must be exactly Kafka's."""

from __future__ import annotations

import os
import struct

import pytest

from storage_engine.errors import (
    InvalidProducerEpochError,
    LogError,
    NotRegularFileError,
    TransactionCoordinatorFencedError,
)
from storage_engine.files.naming import segment_file
from storage_engine.index import AbortedTxn, CorruptTxnIndexError, TransactionIndex
from storage_engine.log import appender
from storage_engine.log.checkpoint import RECOVERY_POINT_CHECKPOINT, write_checkpoint
from storage_engine.logdir.manager import LogManager
from storage_engine.record import Record, encode_batch
from storage_engine.tools.verify import verify_log
from tests.helpers.cleaner import compact, compacted, content
from tests.helpers.engine import open_topic
from tests.helpers.transactions import NOW, TxnWriter

ENTRY = struct.Struct(">hqqqq")


def _bytes(*entries: tuple[int, int, int, int], version: int = 0) -> bytes:
    return b"".join(ENTRY.pack(version, *e) for e in entries)


def test_entries_round_trip_in_kafkas_34_byte_layout(tmp_path):
    path = tmp_path / "00000000000000000100.txnindex"
    index = TransactionIndex(path, 100)
    assert not path.exists() and index.entries == []
    index.append(AbortedTxn(7, 100, 104, 102))
    index.append(AbortedTxn(8, 103, 110, 111))
    assert path.read_bytes() == _bytes((7, 100, 104, 102), (8, 103, 110, 111))
    again = TransactionIndex(path, 100)
    assert again.entries == [AbortedTxn(7, 100, 104, 102), AbortedTxn(8, 103, 110, 111)]
    assert again.overlapping(105, 120) == [AbortedTxn(8, 103, 110, 111)]
    assert again.overlapping(0, 100) == []


def test_truncate_reset_and_rollback(tmp_path):
    path = tmp_path / "00000000000000000000.txnindex"
    index = TransactionIndex(path, 0)
    mark = index.mark()
    for n in range(3):
        index.append(AbortedTxn(1, 10 * n, 10 * n + 5, 10 * n + 6))
    index.truncate_to(15)  # Kafka's truncateTo: the entry whose marker is at 15 goes, and every later one
    assert [e.last_offset for e in TransactionIndex(path, 0).entries] == [5]
    index.rollback(mark)  # created since the mark: the file goes
    assert not path.exists()
    index.append(AbortedTxn(1, 0, 5, 6))
    index.reset()  # kept, empty, as Kafka's reset leaves it
    assert path.exists() and path.read_bytes() == b""


def test_an_append_whose_marker_does_not_follow_the_last_is_refused(tmp_path):
    index = TransactionIndex(tmp_path / "00000000000000000000.txnindex", 0)
    index.append(AbortedTxn(1, 0, 5, 6))
    with pytest.raises(LogError, match="must increase sequentially"):
        index.append(AbortedTxn(2, 3, 5, 6))


@pytest.mark.parametrize("data, why", [
    (_bytes((1, 10, 15, 16))[:-1], "33 bytes is not a whole number of 34-byte entries"),
    (_bytes((1, 10, 15, 16), version=1), "has version 1, expected 0"),
    (_bytes((1, 10, 15, 16), (2, 11, 15, 16)), "has last offset 15, not above the previous entry's 15"),
    (_bytes((1, 19, 15, 16)), "has first offset 19 after its last offset 15"),
    (_bytes((1, 0, 5, 6)), "below the segment's base offset 10"),
], ids=["torn", "version", "order", "first-after-last", "below-base"])
def test_a_damaged_file_is_one_line_naming_it(tmp_path, data, why):
    path = tmp_path / "00000000000000000010.txnindex"
    path.write_bytes(data)
    with pytest.raises(CorruptTxnIndexError) as err:
        TransactionIndex(path, 10).sanity_check()
    assert why in str(err.value) and str(path) in str(err.value) and "\n" not in str(err.value)


def _txn_log(root, **configs):
    """Two producers interleaved, an empty abort, a roll inside an open transaction."""
    m = open_topic(root, **configs)
    log = m.get_log("t", 0)
    w = TxnWriter(log)
    w.data(1, ("a", "1"))          # 0: producer 1 opens a transaction
    w.data(2, ("b", "1"))          # 1: producer 2 opens one
    w.abort(1)                     # 2: aborted while 2's is open: LSO 1
    w.data(1, ("a", "2"))          # 3
    w.commit(2)                    # 4
    w.abort(1)                     # 5: nothing else open: LSO 6
    w.abort(3)                     # 6: an empty transaction: no entry (ProducerAppendInfo.appendEndTxnMarker)
    w.data(2, ("b", "2"))          # 7
    log.roll(now=NOW)
    w.data(1, ("a", "3"))          # 8
    w.abort(2)                     # 9: producer 1's is open since 8: LSO 8, first offset 7 from the last segment
    w.commit(1)                    # 10
    return m, log


def _entries(log):
    return {seg.base_offset: seg.txn_index.entries for seg in log.segments}


def test_the_appender_writes_kafkas_entries(tmp_path):
    m, log = _txn_log(tmp_path)
    try:
        assert _entries(log) == {0: [AbortedTxn(1, 0, 2, 1), AbortedTxn(1, 3, 5, 6)], 8: [AbortedTxn(2, 7, 9, 8)]}
        assert verify_log(log).ok, verify_log(log).problems
    finally:
        m.close()


def _txn_files(part) -> dict[str, bytes]:
    return {n: (part / n).read_bytes() for n in sorted(os.listdir(part)) if n.endswith(".txnindex")}


@pytest.mark.parametrize("recover_from", [0, 8])
def test_recovery_rebuilds_the_same_bytes(tmp_path, recover_from):
    """An unclean shutdown: from the recovery point on, the transaction indexes are rebuilt from
    the batches, starting from the transactions open there (a producer snapshot at 8 and the
    batches before it): byte for byte what the appender wrote."""
    m, _ = _txn_log(tmp_path)
    m.close()
    part = tmp_path / "t-0"
    written = _txn_files(part)
    assert set(written) == {"00000000000000000000.txnindex", "00000000000000000008.txnindex"}
    for name in written:
        if int(name.split(".")[0]) >= recover_from:
            (part / name).unlink()
    (tmp_path / ".kafka_cleanshutdown").unlink()
    write_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT, {("t", 0): recover_from})
    with LogManager([tmp_path]) as again:
        log = again.get_log("t", 0)
        assert _txn_files(part) == written
        assert verify_log(log).ok


def test_a_damaged_txnindex_is_rebuilt_at_load_and_named_by_verify(tmp_path):
    m, _ = _txn_log(tmp_path)
    m.close()
    path = segment_file(tmp_path / "t-0", 0, ".txnindex")
    good = path.read_bytes()
    path.write_bytes(good[:-3])
    with LogManager([tmp_path], read_only=True) as view:
        problems = verify_log(view.get_log("t", 0)).problems
    assert [p for p in problems if "not a whole number of 34-byte entries" in p] == [
        f"Corrupt transaction index {path}: {len(good) - 3} bytes is not a whole number of 34-byte entries; a writable open "
        "rebuilds the indexes of 00000000000000000000.log from it"], problems  # named once, with the rebuild
    with LogManager([tmp_path]) as again:
        assert any("Corrupt transaction index" in a for a in again.get_log("t", 0).load_actions)
        assert path.read_bytes() == good


def test_verify_names_a_missing_and_a_stray_entry(tmp_path):
    m, log = _txn_log(tmp_path)
    try:
        seg = log.segments[0]
        seg.txn_index.truncate_to(5)  # the entry of producer 1's abort at 5 is lost
        seg.txn_index.append(AbortedTxn(9, 6, 7, 8))  # and one stands where no ABORT marker is
        problems = verify_log(log).problems
        assert any("no entry for the transaction of producer 1 aborted at offset 5" in p for p in problems), problems
        assert any("an entry for producer 9 at offset 7" in p for p in problems), problems
    finally:
        m.close()


def test_the_cleaned_segment_keeps_the_entries_of_the_markers_it_keeps(tmp_path):
    """Kafka's cleaner re-appends the AbortedTxn of every ABORT marker it keeps because it
    removed batches of that transaction in the pass; a pass that finds no batch of it left
    keeps the marker until its horizon without an entry."""
    m = compacted(tmp_path)
    try:
        log = m.get_log("t", 0)
        w = TxnWriter(log)
        w.data(1, ("k", "aborted"))   # 0
        w.data(2, ("k", "kept"))      # 1
        w.abort(1)                    # 2: LSO 1
        w.commit(2)                   # 3
        w.data(1, ("j", "aborted"))   # 4
        w.abort(1)                    # 5: LSO 6
        log.roll(now=NOW)
        compact(m)
        assert content(log) == [(1, "k", "kept")]
        assert log.segments[0].txn_index.entries == [AbortedTxn(1, 0, 2, 1), AbortedTxn(1, 4, 5, 6)]
        assert verify_log(log).ok, verify_log(log).problems
        w.data(3, ("x", "1"))
        w.commit(3)
        log.roll(now=NOW)
        compact(m)
        # the first transaction has no batch left: its marker stays (until its horizon) without
        # an entry; the second keeps the empty header of producer 1's last batch (Kafka keeps an
        # active producer's last batch), which this pass removes again, so its entry stays
        assert log.segments[0].txn_index.entries == [AbortedTxn(1, 4, 5, 6)]
        assert verify_log(log).ok, verify_log(log).problems
    finally:
        m.close()


def test_a_marker_whose_entry_cannot_be_written_is_undone(tmp_path):
    """The marker and its entry go in together: an entry refused (here the index's name is taken
    by a directory) takes the marker back out, so no ABORT stands in the log without its entry."""
    m = open_topic(tmp_path)
    try:
        log = m.get_log("t", 0)
        w = TxnWriter(log)
        w.data(1, ("a", "1"))
        assert log.segments[0].txn_index.entries == []  # read before the name is taken
        blocker = segment_file(tmp_path / "t-0", 0, ".txnindex")
        blocker.mkdir()
        with pytest.raises(NotRegularFileError):
            w.abort(1)
        blocker.rmdir()
        assert log.log_end_offset == 1 and [h.is_control for h in (b.header for b in log.iter_batches())] == [False]
        w.abort(1)
        assert log.segments[0].txn_index.entries == [AbortedTxn(1, 0, 1, 2)]
    finally:
        m.close()


def _files(part) -> dict[str, bytes]:
    return {n: (part / n).read_bytes() for n in sorted(os.listdir(part))}


@pytest.mark.parametrize(("epoch", "coordinator_epoch", "error", "words"), [
    (1, 5, InvalidProducerEpochError,
     "Epoch of producer 7 at offset 3 in t-0 is 1, which is smaller than the last seen epoch 3"),
    (3, 4, TransactionCoordinatorFencedError,
     "Invalid coordinator epoch for producerId 7 at offset 3 in partition t-0: 4 (zombie), 5 (current)"),
])
def test_a_fenced_marker_is_refused_in_kafkas_words_and_nothing_is_written(tmp_path, epoch, coordinator_epoch,
                                                                          error, words):
    """Kafka's ``ProducerAppendInfo.appendEndTxnMarker``: a producer epoch below the last seen one
    (``checkProducerEpoch``), or a coordinator epoch below the producer's current one
    (``checkCoordinatorEpoch``), is refused: no marker, no ``.txnindex`` entry, the producer's
    epoch and open transaction as they were."""
    m = open_topic(tmp_path)
    try:
        log = m.get_log("t", 0)

        def data(seq: int) -> None:
            log.append_batch(encode_batch([Record(0, NOW, b"k", b"v")], base_offset=0, producer_id=7, producer_epoch=3,
                                          base_sequence=seq, is_transactional=True), now=NOW)

        data(0)
        log.append_end_txn_marker(7, 3, commit=True, coordinator_epoch=5, now=NOW)
        data(1)
        part = tmp_path / "t-0"
        before = _files(part)
        with pytest.raises(error) as refused:
            log.append_end_txn_marker(7, epoch, commit=False, coordinator_epoch=coordinator_epoch, now=NOW)
        assert str(refused.value) == words
        assert _files(part) == before and log.log_end_offset == 3
        assert log.last_records_of_active_producers() == {7: (2, 3)}
        assert log.last_stable_offset() == 2  # the transaction at 2 is still open
        log.append_end_txn_marker(7, 3, commit=False, coordinator_epoch=5, now=NOW)  # the current ones end it
        assert log.segments[0].txn_index.entries == [AbortedTxn(7, 2, 3, 4)]
    finally:
        m.close()


def test_the_recovery_point_stays_below_a_marker_until_its_entry_is_written(tmp_path, monkeypatch):
    """Even with ``flush.messages=1`` the appender flushes a marker only after its entry: a flush
    between them would move the recovery point past a marker whose entry a kill then loses,
    and recovery, which starts at the recovery point, would never write it back."""
    m = open_topic(tmp_path, flush_messages=1)
    try:
        log = m.get_log("t", 0)
        reached = []
        monkeypatch.setattr(appender, "crash_point", lambda name: reached.append((name, log.recovery_point)))
        w = TxnWriter(log)
        w.data(1, ("a", "1"))
        w.abort(1)
        assert reached == [("append.before-txn-index", 1)]  # the marker is at 1
        assert log.recovery_point == 2
    finally:
        m.close()
