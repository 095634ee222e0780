"""Compaction of the remote tier on the real S3 server: the engine's cleaner on a materialized
version, committed as a ``compact`` version, routed by ``LogCleaner`` for a tiered topic."""

from __future__ import annotations

import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage_engine.cleaner import Cleaner, LogCleaner
from storage_engine.cleaner.remote_cleaning import compact_remote
from storage_engine.record import Record, encode_batch
from storage_engine.remote.access import remote_partition
from storage_engine.remote.local_state import recall
from storage_engine.remote.location import ENV_REMOTE_STORAGE
from storage_engine.remote.materialize import materialize
from storage_engine.remote.names import data_writer
from storage_engine.remote.partition import wall_clock_ms
from storage_engine.remote.sweeper import sweep_partition
from storage_engine.remote.tiering import tier_partition
from tests.helpers.cleaner import NOW, marker, raw_log
from tests.helpers.engine import append_each, open_topic, records
from tests.helpers.random_logs import differential, local_records, rounds, tiered_records, txn_batch


def test_materialize_lays_out_a_partition_dir(remote_env, tmp_path) -> None:
    manager = open_topic(tmp_path / "logs", segment_bytes=400, remote_storage_enable="true", cleanup_policy="compact")
    log = manager.get_log("t", 0)
    append_each(log, records(30, keys=5))
    rp = remote_partition("t", 0, log.config)
    tier_partition(log, rp, NOW, release_local=False)
    version = rp.latest()
    part = materialize(rp, version, tmp_path / "scratch")
    names = sorted(p.name for p in part.iterdir())
    bases = [s.base_offset for s in version.segments]
    assert f"{version.end_offset:020d}.log" in names and (part / f"{version.end_offset:020d}.log").stat().st_size == 0
    for seg in version.segments:
        path = part / f"{seg.base_offset:020d}.log"
        assert path.stat().st_size == seg.size_bytes and int(path.stat().st_mtime * 1000) == seg.mtime_ms
    assert len(bases) == len([n for n in names if n.endswith(".log")]) - 1


def test_tiered_topic_is_compacted_on_the_remote_tier(remote_env, tmp_path) -> None:
    manager = open_topic(tmp_path / "logs", segment_bytes=400, remote_storage_enable="true", cleanup_policy="compact")
    log = manager.get_log("t", 0)
    append_each(log, records(60, keys=5))
    report = LogCleaner(manager).compact("t", 0, now_ms=NOW)
    assert report.status == "compacted", report.reason
    rp = remote_partition("t", 0, log.config)
    version = rp.latest()
    assert version.operation == "compact" and report.remote_version == version.version == 2
    assert rp.missing_objects(version) == []
    assert recall(log.dir, rp.store.url).version == 2
    assert version.cleaner_checkpoint == version.end_offset
    assert report.requests["requests_put"] >= 1
    again = compact_remote(rp, log.config, now_ms=NOW, force=False, scratch_dir=tmp_path / "s2").report
    assert again.status == "skipped" and again.remote_version == 2
    assert not list((tmp_path / "s2").iterdir())


# ------------------------------------------------------------------ tiered vs untiered

@pytest.mark.parametrize("strategy", ["offset", "timestamp", "header"])
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(txn_batch, min_size=1, max_size=10), per_segment=st.integers(1, 4), rounds=rounds,
       segment_bytes=st.integers(300, 1500), retention=st.sampled_from([0, 700, 5000]))
def test_tiered_compaction_keeps_what_untiered_compaction_keeps(remote_env, tmp_path_factory, strategy, batches,
                                                                per_segment, rounds, segment_bytes,
                                                                retention) -> None:
    """Random logs (codecs, committed and aborted transactions, tombstones, version headers),
    compacted round after round at a rising clock, tiered and untiered: the same records."""
    differential(tmp_path_factory.mktemp("diff"), remote_env[ENV_REMOTE_STORAGE], batches, per_segment, rounds,
                 segment_bytes, retention, strategy)


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["offset", "timestamp", "header"])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(txn_batch, min_size=1, max_size=30), per_segment=st.integers(1, 4), rounds=rounds,
       segment_bytes=st.integers(300, 1500), retention=st.sampled_from([0, 700, 5000]))
def test_tiered_compaction_keeps_what_untiered_compaction_keeps_many(remote_env, tmp_path_factory, strategy, batches,
                                                                     per_segment, rounds, segment_bytes,
                                                                     retention) -> None:
    differential(tmp_path_factory.mktemp("diff"), remote_env[ENV_REMOTE_STORAGE], batches, per_segment, rounds,
                 segment_bytes, retention, strategy)


# ------------------------------------------------------------------ races and readers

def _tiered_log(root, n: int = 80, keys: int = 5):
    """A tiered topic with duplicates, tiered (version 1), and its logical content before."""
    manager = open_topic(root, segment_bytes=400, remote_storage_enable="true", cleanup_policy="compact",
                         min_cleanable_dirty_ratio="0.01")
    log = manager.get_log("t", 0)
    append_each(log, records(n, keys=keys))
    log.roll()
    rp = remote_partition("t", 0, log.config)
    tier_partition(log, rp, NOW, release_local=False)
    return manager, log, rp


class _MeetingCleaner(Cleaner):
    """A cleaner that waits, once it has cleaned its scratch copy, until the other one has too:
    both then upload and commit on top of the same version."""

    def __init__(self, barrier: threading.Barrier) -> None:
        super().__init__()
        self.barrier = barrier

    def clean(self, log, **kwargs):
        report = super().clean(log, **kwargs)
        self.barrier.wait(timeout=60)
        return report


def test_two_cleaners_of_one_partition_commit_once(remote_env, tmp_path) -> None:
    manager, log, rp = _tiered_log(tmp_path / "logs")
    before = tiered_records(log, rp, tmp_path / "before")
    barrier = threading.Barrier(2)
    reports: list = [None, None]

    def run(i: int) -> None:
        reports[i] = compact_remote(rp, log.config, now_ms=NOW, force=True, scratch_dir=tmp_path / f"s{i}",
                                    cleaner=_MeetingCleaner(barrier)).report

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert sorted(r.status for r in reports) == ["changed", "compacted"], [r.reason for r in reports]
    assert rp.version_numbers() == [1, 2]
    latest = rp.latest()
    assert latest.operation == "compact" and rp.missing_objects(latest) == []
    after = tiered_records(log, rp, tmp_path / "after")
    latest_per_key = {key: value for _, key, value, _, _ in before}
    assert {key: value for _, key, value, _, _ in after} == latest_per_key and len(after) < len(before)
    named = {name for n in rp.version_numbers() for name in rp.read_version(n).objects}
    stored = {o.name[len(rp.prefix):] for o in rp.store.list(rp.name("data/"))}
    orphans = stored - named
    loser = next(r for r in reports if r.status == "changed")
    assert orphans and len(orphans) == 3 * len(loser.uploaded_segments)
    assert len({data_writer(name) for name in orphans}) == 1 and latest.writer not in {data_writer(n) for n in orphans}
    # the sweep keeps the loser's uploads while they are younger than the floor, then deletes them
    young = sweep_partition(rp, log.config, now_ms_wall=wall_clock_ms())
    assert not young.deleted and orphans <= {o.name[len(rp.prefix):] for o in rp.store.list(rp.name("data/"))}
    swept = sweep_partition(rp, log.config, now_ms_wall=wall_clock_ms(), orphan_min_age_ms=0)
    assert {d.name for d in swept.deleted} == orphans and rp.missing_objects(rp.latest()) == []
    assert {key: value for _, key, value, _, _ in tiered_records(log, rp, tmp_path / "swept")} == latest_per_key
    manager.close()


def test_a_reader_of_a_version_keeps_reading_it_after_the_next_commit(remote_env, tmp_path) -> None:
    manager, log, rp = _tiered_log(tmp_path / "logs")
    first = rp.latest()
    held = {name: rp.read(name) for name in sorted(first.objects)}
    report = LogCleaner(manager).compact("t", 0, now_ms=NOW)
    assert report.status == "compacted" and rp.latest().version == 2
    assert first.objects - rp.latest().objects  # the compaction replaced objects ...
    assert {name: rp.read(name) for name in sorted(first.objects)} == held  # ... which still read the same
    assert rp.missing_objects(first) == []
    manager.close()


def test_a_transaction_whose_marker_is_still_local_waits_for_it(remote_env, tmp_path) -> None:
    """An aborted transaction's batches are remote, its marker only in the local active segment:
    the remote cleaner sees it open and keeps it (never removes more than the local cleaner);
    once the marker is tiered, the next compaction equals the untiered one."""
    aborted = encode_batch([Record(0, NOW, b"k1", b"aborted")], base_offset=0, producer_id=7, producer_epoch=0,
                           base_sequence=0, is_transactional=True)
    plain_batch = encode_batch([Record(1, NOW, b"k2", b"v")], base_offset=1)
    segments = [[aborted, plain_batch], [marker(2, 7, 0, commit=False)]]
    configs = {"segment_bytes": 10_000, "delete_retention_ms": 0}
    with raw_log(tmp_path / "plain", segments, **configs) as plain, \
            raw_log(tmp_path / "tiered", segments, remote_storage_enable="true", **configs) as tiered:
        logs = (plain.get_log("t", 0), tiered.get_log("t", 0))
        rp = remote_partition("t", 0, logs[1].config)
        reports = [LogCleaner(m).compact("t", 0, now_ms=NOW) for m in (plain, tiered)]
        assert reports[0].status == "compacted" and reports[1].status in ("compacted", "skipped")
        untiered = local_records(logs[0], 0)
        first = tiered_records(logs[1], rp, tmp_path / "r1")
        gone = (0, b"k1", b"aborted", (), NOW)
        assert gone not in untiered and gone in first and set(untiered) <= set(first)
        for log in logs:
            log.roll()
        for m in (plain, tiered):
            LogCleaner(m).compact("t", 0, now_ms=NOW + 1)
        assert tiered_records(logs[1], rp, tmp_path / "r2") == local_records(logs[0], 0)
