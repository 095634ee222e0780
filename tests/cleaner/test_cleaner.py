"""Compaction on files on disk: Kafka's LogCleanerTest / LogCleanerManagerTest scenarios.

Each test builds a real partition directory (through appends, or from raw batches for what a
client may not append: transactions, markers, unkeyed records, legacy messages), runs the
cleaner, reloads and reads the log back. The helpers at the top are shared with the property,
crash and concurrency tests.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import tracemalloc
from pathlib import Path

import pytest

from storage_engine.cleaner import (
    STAGING_SUFFIX,
    BatchFilter,
    Cleaner,
    CleanerLock,
    LastRecord,
    LogCleaner,
    ProducerStateBuilder,
    RecordOutcome,
    Throttler,
    TransactionTracker,
    retain_record,
)
from storage_engine.cleaner.offset_map import OffsetMap, entry_cost
from storage_engine.cleaner.plan import SegmentFacts, group_segments_by_size
from storage_engine.config.cleaner import CleanerConfig
from storage_engine.errors import LogChangedError
from storage_engine.log.append_validation import ProducerRecord
from storage_engine.logdir.manager import LogManager
from storage_engine.record import CompressionType, Record, encode_batch, scan_batches
from storage_engine.record.control import ControlRecordType
from storage_engine.record.file_records import SKIP_AT_LEAST
from storage_engine.record.rewrite import encode_legacy_message
from storage_engine.tools.logctl import main as logctl
from storage_engine.tools.verify import verify_log
from tests.helpers.cleaner import (
    MIB,
    NOW,
    checkpoint,
    compact,
    compacted,
    content,
    data_batch,
    headers,
    latest_per_key,
    marker,
    put,
    raw_log,
    small_map_cleaner,
    temp_files,
)
from tests.helpers.core_switch import CORES, using

# ---------------------------------------------------------------------------------- basics


def test_latest_value_of_every_key_is_kept_at_its_original_offset(tmp_path):
    with compacted(tmp_path) as m:
        log = m.get_log("t", 0)
        for round_ in range(5):
            for k in range(4):
                put(log, (f"k{k}", f"v{round_}.{k}"))
        log.roll()
        before = content(log)
        leo = log.log_end_offset
        report = compact(m)
        assert content(log) == latest_per_key(before) == [(16, "k0", "v4.0"), (17, "k1", "v4.1"),
                                                          (18, "k2", "v4.2"), (19, "k3", "v4.3")]
        assert (log.log_start_offset, log.log_end_offset) == (0, leo)
        assert checkpoint(log) == leo == report.new_checkpoint
        assert report.stats.duplicates_removed == 16 and report.distinct_keys == 4
        assert report.dirty_ratio_before == 1.0 and report.dirty_ratio_after == 0.0
        assert verify_log(log).ok
        assert not temp_files(tmp_path)
        assert log.append([ProducerRecord(b"k0", b"new", NOW)]).first_offset == leo
    with LogManager([tmp_path]) as m:  # and after a reload
        assert content(m.get_log("t", 0))[-1] == (20, "k0", "new")


def test_a_batch_whose_records_all_survive_is_copied_byte_for_byte(tmp_path):
    with compacted(tmp_path) as m:
        log = m.get_log("t", 0)
        put(log, ("a", "1"), ("b", "2"), ("c", "3"))
        put(log, ("d", "4"))
        put(log, ("d", "5"))
        log.roll()
        first = bytes(log.read_batches(0)[0].data)
        report = compact(m)
        assert bytes(log.read_batches(0)[0].data) == first
        assert report.stats.batches_copied >= 1 and report.stats.duplicates_removed == 1


@pytest.mark.parametrize("core", CORES)
def test_large_batches_without_a_winning_record_are_dropped_by_their_header(tmp_path, core):
    """Batches above ``SKIP_AT_LEAST`` none of whose records wins its key are decided by their
    header and left unread by the recopy (``read_batches_skipping``): the log keeps exactly the
    latest record of every key, whether a large batch is dropped whole, partly kept or copied."""
    value = "v" * 1024
    with using(core), compacted(tmp_path) as m:
        log = m.get_log("t", 0)
        for round_ in range(3):  # each batch ~25 KB: every key of rounds 0 and 1 is superseded
            put(log, *[(f"k{k}", f"{round_}.{k}.{value}") for k in range(24)])
        put(log, *[(f"k{k}", f"3.{k}.{value}") for k in range(12)], *[(f"x{k}", value) for k in range(12)])
        put(log, ("k0", None), *[(f"y{k}", value) for k in range(23)])
        log.roll()
        assert min(h.size_in_bytes for h in headers(log)) >= SKIP_AT_LEAST
        before = content(log)
        report = compact(m)
        assert content(log) == latest_per_key(before)
        assert report.stats.duplicates_removed == len(before) - len(latest_per_key(before))
        assert [h.base_offset for h in headers(log)] == [48, 72, 96]
        assert verify_log(log).ok


def test_a_partly_surviving_batch_keeps_its_offsets_and_producer_fields(tmp_path):
    segments = [
        [data_batch(0, [("a", "1"), ("b", "2"), ("c", "3"), ("d", "4")], pid=7, epoch=3, seq=10),
         data_batch(4, [("b", "x"), ("d", "y")])],
        [data_batch(6, [("z", "z")])],
    ]
    with raw_log(tmp_path, segments) as m:
        log = m.get_log("t", 0)
        compact(m)
        h = headers(log)[0]
        assert (h.base_offset, h.last_offset, h.records_count) == (0, 3, 2)
        assert (h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence) == (7, 3, 10, 13)
        assert content(log) == [(0, "a", "1"), (2, "c", "3"), (4, "b", "x"), (5, "d", "y"), (6, "z", "z")]
        assert verify_log(log).ok


def test_records_without_a_key_are_dropped_within_the_mapped_range(tmp_path):
    segments = [
        [data_batch(0, [(None, "u1"), ("a", "1")]), data_batch(2, [(None, "u2")])],
        [data_batch(3, [(None, "u3"), ("a", "2")])],  # active: beyond the map, untouched
    ]
    with raw_log(tmp_path, segments) as m:
        log = m.get_log("t", 0)
        report = compact(m)
        assert content(log) == [(1, "a", "1"), (3, None, "u3"), (4, "a", "2")]
        assert report.stats.unkeyed_removed == 2


def test_the_active_segment_is_never_cleaned(tmp_path):
    with compacted(tmp_path) as m:
        log = m.get_log("t", 0)
        for i in range(6):
            put(log, ("k", str(i)))
        report = compact(m)
        assert report.skipped and "active segment" in report.skipped
        assert len(content(log)) == 6
        log.roll()
        put(log, ("k", "in-active-1"))
        put(log, ("k", "in-active-2"))
        compact(m)
        assert content(log) == [(5, "k", "5"), (6, "k", "in-active-1"), (7, "k", "in-active-2")]


# ---------------------------------------------------------------------------------- tombstones


def _stamp_a_tombstone(m):
    """``k`` written, superseded by its tombstone, and compacted at ``NOW``: the tombstone stays."""
    log = m.get_log("t", 0)
    put(log, ("k", "v"))
    put(log, ("other", "o"))
    put(log, ("k", None))
    log.roll()
    compact(m, NOW)
    assert content(log) == [(1, "other", "o"), (2, "k", None)]
    return log


def test_tombstone_is_stamped_with_a_delete_horizon_then_removed_after_it(tmp_path):
    with compacted(tmp_path, delete_retention_ms=1000) as m:
        log = _stamp_a_tombstone(m)
        tomb = [h for h in headers(log) if h.base_offset == 2][0]
        assert tomb.delete_horizon_ms == NOW + 1000  # KIP-534: baseTimestamp = now + delete.retention.ms
        assert verify_log(log).ok
        assert log.read(2)[0].timestamp == NOW  # the record's own timestamp reads the same

        put(log, ("x", "1"), ts=NOW + 500)  # something dirty, so the next pass runs
        log.roll()
        compact(m, NOW + 999)  # before the horizon: still there
        assert (2, "k", None) in content(log)
        put(log, ("y", "1"), ts=NOW + 1000)
        log.roll()
        report = compact(m, NOW + 1000)  # at the horizon: gone
        assert (2, "k", None) not in content(log)
        assert report.stats.tombstones_removed == 1


def test_a_delete_retention_of_long_max_keeps_tombstones_for_ever(tmp_path):
    """delete.retention.ms=9223372036854775807 ("keep tombstones"): now + the retention passed
    int64, and every compaction of the partition failed writing the batch's timestamps. The
    horizon saturates at Long.MAX, which no clock reaches."""
    long_max = 2**63 - 1
    with compacted(tmp_path, delete_retention_ms=long_max) as m:
        log = _stamp_a_tombstone(m)
        assert [h.delete_horizon_ms for h in headers(log) if h.base_offset == 2] == [long_max]
        assert log.read(2)[0].timestamp == NOW and verify_log(log).ok
        put(log, ("x", "1"), ts=NOW + 500)
        log.roll()
        compact(m, 2**62)
        assert (2, "k", None) in content(log)


def test_tombstone_horizon_in_a_compressed_batch_keeps_every_timestamp(tmp_path):
    with compacted(tmp_path, delete_retention_ms=50) as m:
        log = m.get_log("t", 0)
        log.append([ProducerRecord(b"a", b"1", NOW - 7), ProducerRecord(b"b", None, NOW - 3),
                    ProducerRecord(b"c", b"3", NOW + 5)], compression=CompressionType.LZ4, now=NOW)
        log.roll()
        compact(m, NOW)
        (h,) = [h for h in headers(log)]
        assert h.delete_horizon_ms == NOW + 50 and h.compression == CompressionType.LZ4
        assert [(r.key, r.timestamp) for r in log.read(0, max_records=3)] == [
            (b"a", NOW - 7), (b"b", NOW - 3), (b"c", NOW + 5)]
        assert h.max_timestamp == NOW + 5


def legacy_segment(base: int, pairs, ts: int = NOW) -> bytes:
    return b"".join(
        encode_legacy_message(base + i, 1, False, ts, k.encode(), None if v is None else v.encode())
        for i, (k, v) in enumerate(pairs)
    )


def test_magic_v1_tombstones_follow_the_segment_mtime_rule(tmp_path):
    """Before KIP-534: tombstones go from segments last modified before the last clean segment's
    mtime minus delete.retention.ms (LogCleanerTest.testCleanTombstone for old formats)."""
    segments = [
        [legacy_segment(0, [("a", None)])],  # old segment of the clean section
        [legacy_segment(1, [("b", None)])],  # the last clean segment
        [legacy_segment(2, [("c", "1"), ("c", "2")])],  # dirty
        [legacy_segment(4, [("d", "1")])],  # active
    ]
    with raw_log(tmp_path, segments, delete_retention_ms=100_000) as m:
        log = m.get_log("t", 0)
        part = tmp_path / "t-0"
        os.utime(part / f"{0:020d}.log", (500, 500))  # 500 s: older than 1000 s - 100 s
        os.utime(part / f"{1:020d}.log", (1000, 1000))
        log.log_dir.cleaner_offsets.update({("t", 0): 2})
        compact(m)
        assert content(log) == [(1, "b", None), (3, "c", "2"), (4, "d", "1")]


# ---------------------------------------------------------------------------------- lags, ratios


def test_min_compaction_lag_keeps_young_segments_dirty(tmp_path):
    lag = 60_000
    with compacted(tmp_path, min_compaction_lag_ms=lag) as m:
        log = m.get_log("t", 0)
        put(log, ("k", "old1"), ts=NOW - 10 * lag)
        put(log, ("k", "old2"), ts=NOW - 10 * lag)
        log.roll()
        put(log, ("k", "young1"), ts=NOW - lag // 2)
        log.roll()
        put(log, ("k", "old3"), ts=NOW - 10 * lag)  # older timestamp but after the young segment
        log.roll()
        (cand,) = LogCleaner(m).candidates("t", now_ms=NOW)
        assert cand.first_uncleanable_offset == 2 and cand.bound_reason == "min.compaction.lag.ms"
        compact(m, NOW)
        assert content(log) == [(1, "k", "old2"), (2, "k", "young1"), (3, "k", "old3")]
        assert checkpoint(log) == 2
        compact(m, NOW + lag)  # the lag has passed
        assert content(log) == [(3, "k", "old3")]


def test_max_compaction_lag_makes_a_clean_looking_log_due(tmp_path):
    with compacted(tmp_path, min_cleanable_dirty_ratio="0.99", max_compaction_lag_ms=1000) as m:
        log = m.get_log("t", 0)
        for i in range(10):
            put(log, (f"k{i}", "v"), ts=NOW)
        log.roll()
        compact(m, NOW)  # everything clean now
        put(log, ("k0", "again"), ts=NOW)
        log.roll()
        (cand,) = LogCleaner(m).candidates("t", now_ms=NOW + 500)
        assert not cand.due and cand.cleanable_ratio < 0.99
        assert LogCleaner(m).compact_due("t", now_ms=NOW + 500) == []
        (cand,) = LogCleaner(m).candidates("t", now_ms=NOW + 5000)
        assert cand.due and cand.max_compaction_delay_ms == 4000
        (report,) = LogCleaner(m).compact_due("t", now_ms=NOW + 5000)
        assert report.passes == 1 and "max.compaction.lag.ms" in report.due_reason
        assert (0, "k0", "v") not in content(log)


def test_dirty_ratio_counts_a_partly_clean_segment_on_both_sides_and_orders_candidates(tmp_path):
    with LogManager([tmp_path]) as m:
        for name in ("clean", "dirty"):
            m.admin.create_topic(name, 1, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.3"})
        m.admin.create_topic("plain", 1, {})
        for name, dups in (("clean", 1), ("dirty", 5)):
            log = m.get_log(name, 0)
            for i in range(dups):
                put(log, ("k", str(i)))
            log.roll()
        m.get_log("plain", 0)
        cands = LogCleaner(m).candidates(now_ms=NOW)
        assert [c.topic for c in cands] == ["clean", "dirty"] or [c.topic for c in cands] == ["dirty", "clean"]
        assert all(c.cleanable_ratio == 1.0 for c in cands)  # nothing was ever cleaned
        LogCleaner(m).compact("clean", 0, now_ms=NOW)
        log = m.get_log("clean", 0)
        put(log, ("j", "1"))
        log.roll()
        cands = LogCleaner(m).candidates(now_ms=NOW)
        assert [c.topic for c in cands] == ["dirty", "clean"]
        clean = cands[1]
        assert clean.clean_bytes == log.segments[0].size and clean.cleanable_bytes == log.segments[1].size
        assert clean.cleanable_ratio == pytest.approx(clean.cleanable_bytes / (clean.clean_bytes + clean.cleanable_bytes))
        reports = LogCleaner(m).compact_due(now_ms=NOW)
        assert [r.topic for r in reports] == ["dirty", "clean"][: len(reports)]


def test_a_checkpoint_outside_the_log_is_reset_to_the_log_start(tmp_path):
    with compacted(tmp_path) as m:
        log = m.get_log("t", 0)
        for i in range(4):
            put(log, ("k", str(i)))
        log.roll()
        log.log_dir.cleaner_offsets.update({("t", 0): 10**9})
        (cand,) = LogCleaner(m).candidates("t", now_ms=NOW)
        assert cand.force_checkpoint_update and cand.first_dirty_offset == 0
        report = compact(m)
        assert report.first_dirty_offset == 0 and content(log) == [(3, "k", "3")]
        assert checkpoint(log) == 4
        put(log, ("k", "4"))
        log.roll()
        log.delete_records(4)
        log.log_dir.cleaner_offsets.update({("t", 0): 2})  # below the log start offset
        report = compact(m)
        assert report.first_dirty_offset == 4


def test_an_invalid_checkpoint_is_rewritten_even_when_the_log_is_not_selected(tmp_path):
    """LogCleanerManagerTest.testCheckpointUpdatedForInvalidOffsetNotSelected."""
    with compacted(tmp_path, min_cleanable_dirty_ratio="1.0") as m:  # a ratio of 1 never selects
        log = m.get_log("t", 0)
        for i in range(4):
            put(log, ("k", str(i)))
        log.roll()
        log.delete_records(2)
        log.log_dir.cleaner_offsets.update({("t", 0): 1})
        (cand,) = LogCleaner(m).candidates("t", now_ms=NOW)
        assert cand.first_dirty_offset == 2 and not cand.due and cand.force_checkpoint_update
        assert LogCleaner(m).compact_due("t", now_ms=NOW) == []
        assert checkpoint(log) == 2


# ---------------------------------------------------------------------------------- partial passes



def test_a_small_map_cleans_part_of_the_dirty_section_and_moves_the_checkpoint_that_far(tmp_path):
    with compacted(tmp_path) as m:
        log = m.get_log("t", 0)
        for r in range(2):
            for k in range(20):
                put(log, (f"k{k:02d}", f"r{r}"))
        log.roll()
        report = compact(m, cleaner=small_map_cleaner(5), max_passes=1)
        assert report.passes == 1 and report.new_checkpoint == 5 and checkpoint(log) == 5
        assert "offset map filled up" in report.warnings[0]
        assert report.rounds[0]["partial"] and report.map_entries == 5
        assert len(content(log)) == 40  # the later duplicates of k00..k04 lie beyond the map
        report = compact(m, cleaner=small_map_cleaner(5))
        assert checkpoint(log) == 40 and report.passes == 7
        assert content(log) == [(20 + k, f"k{k:02d}", "r1") for k in range(20)]


def test_a_run_of_several_passes_reports_the_ranges_sizes_before_and_after_not_the_sum_of_its_reads(tmp_path):
    """Each pass reads the cleaned range from the log start again, so the summed reads counted
    the earlier passes' output again: "Start size" was several times the log, and the size
    reduction far too small. The start and end are the range before the run and after it."""
    with compacted(tmp_path) as m:
        log = m.get_log("t", 0)
        for r in range(3):
            for k in range(20):
                put(log, (f"k{k:02d}", f"r{r}" * 20))
        log.roll()
        before = sum(s.size for s in log.segments[:-1])
        report = compact(m, cleaner=small_map_cleaner(5))
        after = sum(s.size for s in log.segments[:-1])
        assert report.passes > 3 and report.stats.bytes_read > 2 * before  # what the passes processed
        assert (report.start_bytes, report.start_records) == (before, 60)
        assert (report.end_bytes, report.end_records) == (after, 20)
        d = report.to_dict()
        assert d["size_reduction_pct"] == round(100 * (1 - after / before), 3)
        assert d["records_reduction_pct"] == round(100 * 40 / 60, 3)
        assert f"Start size: {before / 2**20:,.1f} MB (60 messages), end size: {after / 2**20:,.1f} MB (20 messages)" \
            in report.summary()


def test_a_full_map_still_updates_keys_it_holds(tmp_path):
    with compacted(tmp_path) as m:
        log = m.get_log("t", 0)
        for r in range(3):
            for k in range(3):
                put(log, (f"k{k:02d}", f"r{r}"))
        put(log, ("k99", "new key"))
        log.roll()
        report = compact(m, cleaner=small_map_cleaner(3), max_passes=1)
        assert report.new_checkpoint == 9  # stopped at the first key that did not fit
        assert content(log) == [(6, "k00", "r2"), (7, "k01", "r2"), (8, "k02", "r2"), (9, "k99", "new key")]


# ---------------------------------------------------------------------------------- grouping


def test_small_segments_are_regrouped_up_to_segment_bytes_keeping_base_and_mtime(tmp_path):
    with compacted(tmp_path) as m:
        log = m.get_log("t", 0)
        for i in range(12):
            put(log, (f"k{i:02d}", "x" * 50))
            if i % 2 == 1:
                log.roll()
        seg_size = log.segments[0].size
        m.admin.alter_topic("t", {"segment.bytes": str(3 * seg_size)})
        part = tmp_path / "t-0"
        for n, seg in enumerate(log.segments[:-1]):
            os.utime(seg.log_path, (1_000 + n, 1_000 + n))
        report = compact(m)
        assert [[b for b in g] for g in report.rounds[0]["groups"]] == [[0, 2, 4], [6, 8, 10]]
        assert [s.base_offset for s in log.segments] == [0, 6, 12]
        assert [int(os.stat(part / f"{b:020d}.log").st_mtime) for b in (0, 6)] == [1_002, 1_005]
        assert len(content(log)) == 12
        assert verify_log(log).ok


def test_grouping_respects_index_bytes_and_the_int32_offset_span():
    far = 2**31 - 100
    segs = [SegmentFacts(0, 100, 0, False, 80, 120), SegmentFacts(10, 100, 0, False, 80, 120),
            SegmentFacts(20, 100, 0, False, 80, 120), SegmentFacts(far, 100, 0, False, 8, 12)]
    # index bytes: 80+80 and 120+120 fit 240, a third does not
    assert [[s.base_offset for s in g] for g in group_segments_by_size(segs, 10_000, 240, far + 10)] == [
        [0, 10], [20, far]]
    # the span is measured from the group's first base: far + 9 - 20 fits an int32 ...
    assert [[s.base_offset for s in g] for g in group_segments_by_size(segs, 250, 10**6, far + 10)] == [
        [0, 10], [20, far]]
    # ... far + 199 - 20 does not
    assert [[s.base_offset for s in g] for g in group_segments_by_size(segs, 250, 10**6, far + 200)] == [
        [0, 10], [20], [far]]
    # an empty candidate skips the span check
    segs = [SegmentFacts(0, 100, 0), SegmentFacts(5, 0, 0), SegmentFacts(2**31 + 50, 10, 0)]
    assert [[s.base_offset for s in g] for g in group_segments_by_size(segs, 10**6, 10**6, 2**31 + 60)] == [
        [0, 5], [2**31 + 50]]


def test_segments_too_far_apart_for_one_segment_stay_apart_on_disk(tmp_path):
    far = 3_000_000_000
    segments = [[data_batch(0, [("a", "1"), ("b", "1")])], [data_batch(far, [("a", "2")])],
                [data_batch(far + 1, [("c", "1")])]]
    with raw_log(tmp_path, segments) as m:
        log = m.get_log("t", 0)
        compact(m)
        assert [s.base_offset for s in log.segments] == [0, far, far + 1]
        assert content(log) == [(1, "b", "1"), (far, "a", "2"), (far + 1, "c", "1")]


# ---------------------------------------------------------------------------------- transactions


def test_aborted_records_go_and_the_abort_marker_follows_after_its_horizon(tmp_path):
    """LogCleanerTest.testAbortMarkerRemoval / testDeleteEmptyTransactionalBatches shape."""
    segments = [
        [data_batch(0, [("k1", "aborted"), ("k2", "aborted")], pid=1, epoch=0, seq=0, transactional=True),
         data_batch(2, [("k3", "plain")]),
         marker(3, 1, 0, commit=False),
         data_batch(4, [("k4", "later")], pid=1, epoch=0, seq=2, transactional=True),
         marker(5, 1, 0, commit=True)],
        [data_batch(6, [("filler", "1")])],
    ]
    with raw_log(tmp_path, segments, delete_retention_ms=100) as m:
        log = m.get_log("t", 0)
        report = compact(m, NOW)
        assert content(log) == [(2, "k3", "plain"), (4, "k4", "later"), (6, "filler", "1")]
        assert report.stats.aborted_removed == 2
        ctl = [(h.base_offset, h.delete_horizon_ms) for h in headers(log) if h.is_control]
        assert ctl == [(3, None), (5, None)]  # the abort's batches were seen in this pass: kept as is
        log.roll()
        compact(m, NOW + 10)
        ctl = [(h.base_offset, h.delete_horizon_ms) for h in headers(log) if h.is_control]
        assert ctl == [(3, NOW + 110), (5, None)]  # nothing left of the aborted txn: horizon stamped
        put(log, ("more", "1"))
        log.roll()
        report = compact(m, NOW + 110)
        assert [h.base_offset for h in headers(log) if h.is_control] == [5]
        assert report.stats.markers_removed == 1
        assert verify_log(log).ok


def test_commit_marker_goes_once_its_transaction_was_compacted_away(tmp_path):
    segments = [
        [data_batch(0, [("k", "in-txn")], pid=2, epoch=0, seq=0, transactional=True),
         marker(1, 2, 0, commit=True),
         data_batch(2, [("p", "idempotent")], pid=2, epoch=0, seq=1),
         data_batch(3, [("k", "newer")])],
        [data_batch(4, [("filler", "1")])],
    ]
    with raw_log(tmp_path, segments, delete_retention_ms=100) as m:
        log = m.get_log("t", 0)
        compact(m, NOW)
        assert [h.base_offset for h in headers(log)] == [1, 2, 3, 4]  # txn batch emptied and dropped
        log.roll()
        compact(m, NOW)
        assert [(h.base_offset, h.delete_horizon_ms) for h in headers(log) if h.is_control] == [(1, NOW + 100)]
        put(log, ("more", "1"))
        log.roll()
        compact(m, NOW + 100)
        assert not [h for h in headers(log) if h.is_control]
        assert content(log)[:2] == [(2, "p", "idempotent"), (3, "k", "newer")]


def test_the_last_batch_of_an_active_producer_stays_as_an_empty_header(tmp_path):
    segments = [
        [data_batch(0, [("a", "1"), ("b", "1")], pid=9, epoch=4, seq=20),
         data_batch(2, [("a", "2"), ("b", "2")]),
         data_batch(4, [("c", "1")])],
        [data_batch(5, [("filler", "1")])],
    ]
    with raw_log(tmp_path, segments) as m:
        log = m.get_log("t", 0)
        report = compact(m)
        h = headers(log)[0]
        assert (h.base_offset, h.last_offset, h.records_count, h.base_timestamp) == (0, 1, 0, -1)
        assert (h.producer_id, h.producer_epoch, h.base_sequence) == (9, 4, 20)
        assert report.stats.empty_batches_kept == 1
        assert content(log)[:2] == [(2, "a", "2"), (3, "b", "2")]


def test_the_last_batch_of_the_round_keeps_its_offsets(tmp_path):
    segments = [
        [data_batch(0, [("a", "1")]), data_batch(1, [("a", None)])],
        [data_batch(2, [("b", "1")])],
    ]
    with raw_log(tmp_path, segments, delete_retention_ms=0) as m:
        log = m.get_log("t", 0)
        compact(m, NOW)  # stamps the tombstone's horizon (now + 0)
        log.log_dir.cleaner_offsets.update({("t", 0): 0})  # clean [0, 2) once more
        report = compact(m, NOW + 1)  # past the horizon: the tombstone goes, its batch ends the round
        assert report.stats.tombstones_removed == 1 and report.stats.empty_batches_kept == 1
        assert content(log) == [(2, "b", "1")]
        assert [(h.base_offset, h.records_count) for h in headers(log)][:1] == [(1, 0)]
        assert log.segments[0].read_next_offset() == 2


def test_an_open_transaction_bounds_the_cleanable_range(tmp_path):
    segments = [
        [data_batch(0, [("k", "1")]), data_batch(1, [("k", "2")])],
        [data_batch(2, [("t", "open")], pid=5, epoch=0, seq=0, transactional=True), data_batch(3, [("k", "3")])],
        [data_batch(4, [("k", "4")])],
        [data_batch(5, [("x", "1")])],
    ]
    with raw_log(tmp_path, segments) as m:
        log = m.get_log("t", 0)
        report = compact(m)
        assert report.first_uncleanable_offset == 2 and checkpoint(log) == 2
        assert content(log) == [(1, "k", "2"), (2, "t", "open"), (3, "k", "3"), (4, "k", "4"), (5, "x", "1")]


def test_producer_state_and_transaction_tracker_rules():
    def hdr(base, last, pid, epoch=0, txn=False, ctl=False):
        from storage_engine.record.records import BatchHeader
        attrs = (0x10 if txn else 0) | (0x20 if ctl else 0)
        return BatchHeader(base, 100, 0, 2, 0, attrs, last - base, NOW, NOW, pid, epoch, 0, last - base + 1)

    b = ProducerStateBuilder()
    b.observe(hdr(0, 1, 1, txn=True))
    b.observe(hdr(2, 2, 2, txn=True))
    b.observe(hdr(3, 3, 1, txn=True, ctl=True), ControlRecordType.ABORT)
    b.observe(hdr(4, 4, 3, epoch=7, txn=True, ctl=True), ControlRecordType.COMMIT)  # a marker alone
    snap = b.snapshot(10)
    assert [(a.producer_id, a.first_offset, a.last_offset) for a in snap.aborted] == [(1, 0, 3)]
    assert snap.last_stable_offset == 2 and snap.open_transactions == {2: 2}
    assert snap.last_records == {1: LastRecord(1, 0), 2: LastRecord(2, 0), 3: LastRecord(None, 7)}
    t = TransactionTracker(snap.aborted)
    assert t.on_data_batch(hdr(0, 1, 1, txn=True)) is True
    assert t.on_data_batch(hdr(2, 2, 2, txn=True)) is False
    assert t.on_control_batch(hdr(3, 3, 1, txn=True, ctl=True), ControlRecordType.ABORT) is False  # batches seen
    assert t.on_control_batch(hdr(5, 5, 2, txn=True, ctl=True), ControlRecordType.COMMIT) is False
    assert t.on_control_batch(hdr(6, 6, 2, txn=True, ctl=True), ControlRecordType.COMMIT) is True  # nothing seen
    assert t.on_control_batch(hdr(7, 7, 4, ctl=True), None) is True  # an already emptied marker


# ---------------------------------------------------------------------------------- codecs, legacy


@pytest.mark.parametrize("codec", [CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4,
                                   CompressionType.ZSTD])
def test_compressed_batches_keep_their_codec(tmp_path, codec):
    with compacted(tmp_path) as m:
        log = m.get_log("t", 0)
        put(log, ("a", "1"), ("b", "1"), ("c", "1"), compression=codec)
        put(log, ("d", "1"), ("e", "1"), compression=codec)
        put(log, ("b", "2"))
        log.roll()
        intact = bytes(log.read_batches(3)[0].data)
        compact(m)
        hs = headers(log)
        assert [(h.base_offset, h.records_count, h.compression) for h in hs[:2]] == [(0, 2, codec), (3, 2, codec)]
        assert bytes(log.read_batches(3)[0].data) == intact
        assert content(log) == [(0, "a", "1"), (2, "c", "1"), (3, "d", "1"), (4, "e", "1"), (5, "b", "2")]
        assert verify_log(log).ok


def test_legacy_compressed_wrapper_losing_records_becomes_plain_messages():
    import zlib
    inner = b"".join(encode_legacy_message(i, 1, False, NOW, k, v) for i, (k, v) in
                     enumerate([(b"a", b"1"), (b"b", b"2"), (b"a", b"3")]))
    body = bytes((1, 1)) + struct.pack(">q", NOW) + struct.pack(">i", -1)
    gz = zlib.compressobj(6, zlib.DEFLATED, 31)
    payload = gz.compress(inner) + gz.flush()
    body += struct.pack(">i", len(payload)) + payload
    msg = struct.pack(">I", zlib.crc32(body)) + body
    wrapper = struct.pack(">qi", 2, len(msg)) + msg
    (raw,) = list(scan_batches(wrapper))
    omap = OffsetMap(2 * MIB)
    omap.put_all([(0, b"a"), (1, b"b"), (2, b"a")])
    f = BatchFilter(omap, TransactionTracker(), {}, now_ms=NOW, delete_retention_ms=0, last_batch_base_offset=None)
    out = f.filter(raw)
    from storage_engine.record import decode_batch
    got = [(r.offset, r.key, r.value) for b in scan_batches(out.data) for r in decode_batch(b)]
    assert got == [(1, b"b", b"2"), (2, b"a", b"3")]


# ---------------------------------------------------------------------------------- exactness


def test_keys_whose_hashes_collide_both_keep_their_latest_value(tmp_path):
    """A Kafka-style digest map would merge these keys: the forced hash maps every key to one of
    three values, so k0/k3/k6... collide and, compared by hash alone, only one would survive."""
    with compacted(tmp_path) as m:
        log = m.get_log("t", 0)
        for r in range(3):
            for k in range(9):
                put(log, (f"k{k}", f"r{r}"))
        log.roll()
        cl = Cleaner(CleanerConfig(), hash_fn=lambda key: key[-1] % 3)
        report = compact(m, cleaner=cl)
        assert content(log) == [(18 + k, f"k{k}", "r2") for k in range(9)]
        assert report.map_collisions == 6 and report.distinct_keys == 9
        omap = OffsetMap(2 * MIB, hash_fn=lambda key: 0)
        omap.put_all([(0, b"x"), (1, b"y"), (2, b"x")])
        assert (omap.get(b"x"), omap.get(b"y"), omap.get(b"z"), omap.size) == (2, 1, -1, 2)


@pytest.mark.parametrize("core", CORES)
def test_the_inlined_record_rule_matches_retain_record(core):
    with using(core):
        _inlined_rule_matches(core)


def _inlined_rule_matches(core):
    """The offset strategy's keep/drop walk (compiled under the compiled core) against
    ``retain_record``, the rule's one definition."""
    omap = OffsetMap(2 * MIB)
    assert (omap.keymap is not None) == (core == "compiled")
    omap.put_all([(1, b"a"), (3, b"b"), (4, b"a")])
    cases = []
    for off, key, tomb in [(0, b"a", False), (1, b"a", False), (4, b"a", True), (3, b"b", False),
                           (2, None, False), (6, None, False), (6, b"a", True), (2, b"zz", True), (2, b"zz", False)]:
        cases.append((off, key, tomb))
    for retain_tombs in (True, False):
        for off, key, tomb in cases:
            expected = retain_record(off, key, tomb, latest_offset_of_key=omap.get(key) if key else -1,
                                     map_latest_offset=4, retain_tombstones=retain_tombs)
            horizon = None if retain_tombs else NOW - 1
            rec = Record(off, NOW, key, None if tomb else b"v")
            batch = encode_batch([rec], base_offset=off, delete_horizon_ms=horizon)
            (raw,) = list(scan_batches(batch))
            f = BatchFilter(omap, TransactionTracker(), {}, now_ms=NOW, delete_retention_ms=0,
                            last_batch_base_offset=None)
            kept = f.filter(raw) is not None
            assert kept == (expected is RecordOutcome.KEEP), (off, key, tomb, retain_tombs)


def test_map_memory_is_charged_honestly_and_bounded():
    """The reference's dict: charged 224 B a 16-byte key, above what Python allocates (pinned to
    the reference: tracemalloc sees Python's allocations, not the compiled map's)."""
    keys = [b"key-%012d" % i for i in range(50_000)]
    with using("reference"):
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        omap = OffsetMap(64 * MIB, 0.9)
        assert omap.put_all([(1_000_000 + i, k) for i, k in enumerate(keys)]) == len(keys)
        real = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
    # requested bytes are well below the charge, which also covers allocator size classes, dict
    # resizes and the sorted offsets list (the benchmark checks the resident memory)
    assert real <= 0.8 * omap.used_bytes, (real, omap.used_bytes)
    assert omap.bytes_per_entry == entry_cost(16) == 224


def test_the_compiled_map_charges_its_slots_and_arena():
    """The compiled ``KeyMap``: charged exactly its slot table (8 B a slot) and its arena (6-byte
    offset delta, key length, key: 23 B for a 16-byte key); at most 32 B a 16-byte key once
    full, and never more than its budget."""
    keys = [b"key-%012d" % i for i in range(50_000)]
    with using("compiled"):
        omap = OffsetMap(64 * MIB, 0.9)
        assert omap.put_all([(1_000_000 + i, k) for i, k in enumerate(keys)]) == len(keys)
        km = omap.keymap
        assert km.entry_bytes(16) == 23
        assert omap.used_bytes == km.slots * 8 + len(keys) * 23 and len(keys) <= 0.9 * km.slots
        full = OffsetMap(4 * MIB, 0.9)
        taken = full.put_all([(i, b"%016d" % i) for i in range(200_000)])
        assert 0 < taken < 200_000 and full.used_bytes <= full.capacity_bytes
        assert full.bytes_per_entry <= 32 and taken <= full.capacity_entries() <= 1.05 * taken
        assert [full.get(b"%016d" % i) for i in (0, taken - 1, taken)] == [0, taken - 1, -1]
        assert full.sorted_offsets() == list(range(taken))


@pytest.mark.parametrize("core", CORES)
def test_a_full_map_refuses_new_keys_and_takes_updates(core):
    """The budget holds what ``OffsetMap.capacity_for`` says, under either core's cost."""
    keys = [b"key-%012d" % i for i in range(5_000)]
    with using(core):
        small = OffsetMap(100_000, 0.5)
        taken = small.put_all([(i, k) for i, k in enumerate(keys)])
        assert OffsetMap.capacity_for(taken, 16) <= 50_000 < OffsetMap.capacity_for(taken + 1, 16)
        assert small.used_bytes <= small.capacity_bytes and small.size == taken
        assert small.put(keys[0], 10**6) and small.get(keys[0]) == 10**6  # updates always fit
        assert not small.put(b"brand-new-key", 10**6 + 1)
        assert small.size == taken and small.get(b"brand-new-key") == -1


# ---------------------------------------------------------------------------------- concurrency, policy


def test_a_log_changed_between_reading_and_commit_is_left_alone(tmp_path):
    class Interfering(Cleaner):
        def _clean_group(self, log, group, rnd, bfilter):
            seg = super()._clean_group(log, group, rnd, bfilter)
            victim = log.dir / f"{group[0].base_offset:020d}.log"
            shutil.copy(victim, str(victim) + ".tmp")  # another cleaner swapped this segment
            os.replace(str(victim) + ".tmp", victim)
            return seg

    with compacted(tmp_path) as m:
        log = m.get_log("t", 0)
        for i in range(6):
            put(log, ("k", str(i)))
        log.roll()
        before = content(log)
        with pytest.raises(LogChangedError, match="was replaced"):
            compact(m, cleaner=Interfering())
        assert content(log) == before and checkpoint(log) is None
        assert not temp_files(tmp_path)
        compact(m)
        assert content(log) == [(5, "k", "5")]


def test_only_one_cleaner_per_partition(tmp_path):
    with compacted(tmp_path) as m:
        log = m.get_log("t", 0)
        put(log, ("k", "1"))
        put(log, ("k", "2"))
        log.roll()
        with CleanerLock(log.dir):
            with pytest.raises(LogChangedError, match="being cleaned by another process"):
                compact(m)
            (report,) = LogCleaner(m).compact_due("t", now_ms=NOW)
            assert "being cleaned" in report.skipped
        assert compact(m).passes == 1


def test_stale_staging_files_of_a_dead_cleaner_are_removed(tmp_path):
    with compacted(tmp_path) as m:
        log = m.get_log("t", 0)
        put(log, ("k", "1"))
        put(log, ("k", "2"))
        log.roll()
        stale = tmp_path / "t-0" / f"{0:020d}.log{STAGING_SUFFIX}"
        stale.write_bytes(b"junk")
        compact(m)
        assert not stale.exists() and content(log) == [(1, "k", "2")]


def test_compact_delete_topics_get_compaction_then_retention(tmp_path):
    with compacted(tmp_path, cleanup_policy="compact,delete", retention_ms=1000) as m:
        log = m.get_log("t", 0)
        put(log, ("a", "1"), ts=NOW - 5000)
        put(log, ("a", "2"), ts=NOW - 5000)
        log.roll()
        put(log, ("b", "1"), ts=NOW)
        report = compact(m, NOW)
        assert report.passes == 1 and report.stats.duplicates_removed == 1
        assert report.retention["deleted_segments"] == [0]  # the compacted segment, past retention.ms
        assert content(log) == [(2, "b", "1")]


def test_throttler_sleeps_to_hold_the_rate():
    t = [0.0]
    slept = []

    def sleep(s):
        slept.append(s)
        t[0] += s

    th = Throttler(1000.0, clock=lambda: t[0], sleep=sleep)
    th.maybe_throttle(500)  # within the check interval: nothing
    t[0] = 0.5
    th.maybe_throttle(1500)  # 2000 bytes in 0.5 s at 1000 B/s: sleep 1.5 s
    assert slept == [pytest.approx(1.5)]


def test_io_throttle_slows_a_cleaning_run(tmp_path):
    with compacted(tmp_path) as m:
        log = m.get_log("t", 0)
        for _i in range(100):
            put(log, ("k", "x" * 1000))
        log.roll()
        # ~200 KB of reads and writes at 100 KB/s, checked every millisecond: ~2 s of throttling
        # on an idle machine. The throttle sleeps only when a check finds the rate above the
        # target: a machine loaded enough (a full suite beside other work) to be slower than
        # that on its own is rightly never throttled, as two full suites here showed.
        cl = Cleaner(CleanerConfig(io_max_bytes_per_second=100_000.0))
        cl.throttler.check_interval_s = 0.001
        report = compact(m, cleaner=cl)
        io_rate = (report.stats.bytes_read + report.stats.bytes_written) / report.duration_s
        assert report.throttled_s > 0.05 or io_rate <= 100_000.0, report.to_dict()
        assert content(log) == [(99, "k", "x" * 1000)]
        assert report.mb_per_s < 2.0


# ---------------------------------------------------------------------------------- report, CLI


def test_the_report_has_what_kafka_logs_and_more(tmp_path):
    with compacted(tmp_path) as m:
        log = m.get_log("t", 0)
        for i in range(10):
            put(log, (f"k{i % 3}", "v" * 30))
        put(log, ("k0", None))
        log.roll()
        d = compact(m).to_dict()
    for key in ("bytes_read", "bytes_written", "records_read", "records_written", "distinct_keys",
                "duplicates_removed", "tombstones_removed", "map_fill", "map_capacity_entries", "passes",
                "duration_s", "mb_per_s", "records_per_s", "size_reduction_pct", "new_checkpoint",
                "dirty_ratio_before", "dirty_ratio_after", "map_bytes_per_entry"):
        assert key in d, key
    assert (d["records_read"], d["records_written"], d["duplicates_removed"], d["distinct_keys"]) == (11, 3, 8, 3)
    assert 0 < d["size_reduction_pct"] < 100 and d["new_checkpoint"] == 11 and d["passes"] == 1
    json.dumps(d)


def test_cli_compact(tmp_path, capsys):
    with compacted(tmp_path) as m:
        log = m.get_log("t", 0)
        for i in range(5):
            put(log, ("k", str(i)))
        log.roll()
    base = ["--log-dirs", str(tmp_path), "compact", "--now-ms", str(NOW)]
    assert logctl(base + ["--dry-run", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["partitions"][0]["due"] and out["partitions"][0]["dirty_ratio"] == 1.0
    assert logctl(base + ["--json"]) == 0
    (part,) = json.loads(capsys.readouterr().out)["partitions"]
    assert part["records_written"] == 1 and part["new_checkpoint"] == 5 and part["engine"] == "local"
    assert logctl(base + ["--topic", "t", "--partition", "0"]) == 0
    assert "nothing cleanable" in capsys.readouterr().out
    assert logctl(base + ["--engine", "spark"]) == 1
    assert "not available in this entry point" in capsys.readouterr().err  # spark_jobs.cli adds it
    assert logctl(base + ["--partition", "0"]) == 1
    assert "--partition needs --topic" in capsys.readouterr().err


# ---------------------------------------------------------------------------------- real broker data


def _real_consumer_offsets(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("__consumer_offsets-*") if p.is_dir())


def test_real_consumer_offsets_compact_to_one_record_per_key(real_kafka, tmp_path):
    sources = _real_consumer_offsets(real_kafka)
    if not sources:
        pytest.skip("no __consumer_offsets partitions in the fixtures")
    checked = 0
    for n, src in enumerate(sources):
        log_dir = tmp_path / f"dir{n}"
        log_dir.mkdir()
        shutil.copytree(src, log_dir / src.name)
        with LogManager([log_dir]) as m:
            topic, partition = "__consumer_offsets", int(src.name.rsplit("-", 1)[1])
            log = m.get_log(topic, partition)
            before = [(r.offset, r.key, r.value) for r in log.read(log.log_start_offset, max_records=10**9)]
            log.roll()
            report = LogCleaner(m).compact(topic, partition, now_ms=NOW)
            after = [(r.offset, r.key, r.value) for r in log.read(log.log_start_offset, max_records=10**9)]
            expected = {}
            for off, k, v in before:
                expected[k] = (off, k, v)
            assert after == sorted(expected.values()), src
            assert len({k for _, k, _ in after}) == len(after)
            assert verify_log(log).ok, verify_log(log).problems
            if before:
                checked += 1
                assert report.passes == 1
    assert checked >= 5


def test_a_cleaner_lock_error_other_than_busy_is_raised_not_taken_for_busy(tmp_path, monkeypatch):
    """Any flock error read as "another process is cleaning", so an ENOLCK (a filesystem
    without locks) skipped the partition in silence on every run."""
    import errno
    import fcntl

    def no_locks(fd: int, op: int) -> None:
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    held = CleanerLock(tmp_path)
    assert held.acquire()
    assert not CleanerLock(tmp_path).acquire()  # held: busy
    held.release()
    monkeypatch.setattr(fcntl, "flock", no_locks)
    with pytest.raises(OSError, match="No locks available"):
        CleanerLock(tmp_path).acquire()


def test_the_inlined_key_cost_is_key_object_size():
    """The offset map's hot loops (``OffsetMap.put``, ``put_all``, ``record_decisions``) charge
    ``(len(key) + 48) & ~15`` inline; it must stay the reference ``key_object_size``."""
    from storage_engine.cleaner.offset_map import key_object_size

    assert all((n + 48) & ~15 == key_object_size(n) for n in range(4096))


def test_a_damaged_batch_in_the_clean_section_is_named_by_its_segment_file(tmp_path):
    """The recopy's error about a batch named the partition directory ("file .../t-0"), where
    ``verify`` names the segment file; it names the segment file now."""
    from storage_engine.errors import CorruptRecordError

    with compacted(tmp_path) as m:
        log = m.get_log("t", 0)
        for round_ in range(3):  # one batch of four keys a segment
            put(log, *[(f"k{k}", f"v{round_}.{k}") for k in range(4)])
            log.roll()
        compact(m)
        first = log.segments[0].log_path
        data = bytearray(first.read_bytes())
        data[-3] ^= 0xFF  # a record byte of its last batch: the CRC no longer matches
        first.write_bytes(bytes(data))
        for k in range(4):
            put(log, (f"k{k}", "newer"))
        log.roll()
        with pytest.raises(CorruptRecordError, match=f"file {first},"):
            compact(m)


def test_a_spark_tasks_staging_never_recreates_a_deleted_partition_directory(tmp_path):
    """A Spark task made its staging directory with every parent: after a ``topic delete`` under
    the job, it recreated the partition directory, read from then on as a topic without
    metadata. It makes only the staging levels, inside a partition directory that must be there."""
    from storage_engine.cleaner.staging import make_remote_staging, remote_staging_dir

    partition_dir = tmp_path / "t-0"
    partition_dir.mkdir()
    staging = remote_staging_dir(partition_dir, "job1")
    assert make_remote_staging(staging / "group-0-attempt-1").is_dir() and staging.is_dir()
    assert make_remote_staging(staging) == staging  # again: already there
    partition_dir.rename(tmp_path / "t-0.abc-delete")
    for path in (staging, staging / "group-1-attempt-1"):
        with pytest.raises(FileNotFoundError):
            make_remote_staging(path)
    assert not partition_dir.exists()
    with pytest.raises(ValueError, match="not inside a Spark staging directory"):
        make_remote_staging(tmp_path / "elsewhere")
