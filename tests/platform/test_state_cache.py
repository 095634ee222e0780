"""The sensors' state cache: a partition's state is reused only while its files, checkpoint entries
and config are unchanged and it is younger than the TTL; otherwise it is what a fresh read gives."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import pytest

from platform_assets.logic.health import health_of
from platform_assets.logic.log_state import read_states
from platform_assets.logic.state_cache import StateCache
from storage_engine.cleaner import LogCleaner
from storage_engine.log.append_validation import ProducerRecord
from storage_engine.logdir.manager import LogManager
from storage_engine.logdir.topic_store import read_metadata, write_metadata
from tests.helpers.engine import TakenListing, append_each, flip_last_byte, open_topic, records
from tests.helpers.paths import REPO

NOW = int(time.time() * 1000)
DAY_MS = 86_400_000


@pytest.fixture
def logs(tmp_path):
    root = tmp_path / "logs"
    manager = open_topic(root, "t", partitions=3, cleanup_policy="compact,delete", segment_bytes=1024,
                         retention_ms=DAY_MS)
    for p in range(3):
        append_each(manager.get_log("t", p), records(60, keys=5, ts=NOW - 2 * DAY_MS))
    manager.close()
    return root


def cache() -> StateCache:
    """A cache that trusts mtimes at once: this file system keeps nanoseconds, and the tests change
    logs faster than the two seconds a coarse-mtime file system needs (tested on its own below)."""
    return StateCache(racy_ns=0)


def read(states: StateCache, root: Path, *, ttl_ms: int = 300_000, share: float = 0.1, now_ms: int = NOW):
    with LogManager([root], read_only=True) as manager:
        return states.read(manager, now_ms=now_ms, ttl_ms=ttl_ms, refresh_share=share)


def fresh(root: Path, now_ms: int = NOW):
    with LogManager([root], read_only=True) as manager:
        return read_states(manager, now_ms=now_ms)


def test_unchanged_partitions_are_reused_and_equal_a_fresh_read(logs):
    states_cache = cache()
    first = read(states_cache, logs)
    assert (states_cache.computed, states_cache.reused) == (3, 0)
    second = read(states_cache, logs)
    assert (states_cache.computed, states_cache.reused) == (0, 3)
    assert second == first == fresh(logs)


def test_an_append_a_compaction_and_delete_records_are_each_seen(logs):
    states_cache = cache()
    read(states_cache, logs)
    with LogManager([logs]) as manager:
        append_each(manager.get_log("t", 0), records(1, start=100, keys=5, ts=NOW))  # active segment only
    states = read(states_cache, logs)
    assert states_cache.computed == 1 and states == fresh(logs)
    read(states_cache, logs)

    with LogManager([logs]) as manager:
        LogCleaner(manager).compact("t", 1, now_ms=NOW)  # swaps segments and moves the cleaner checkpoint
    states = read(states_cache, logs)
    assert states_cache.computed == 1 and states == fresh(logs)
    assert states[1].cleaner_checkpoint is not None

    with LogManager([logs]) as manager:
        manager.get_log("t", 2).delete_records(10)  # only the log-start-offset checkpoint changes
    states = read(states_cache, logs)
    assert states_cache.computed == 1 and states[2].log_start_offset == 10 and states == fresh(logs)


def test_a_change_just_made_is_not_trusted_until_it_is_old_enough(logs):
    states_cache = StateCache()  # the real racy window: two seconds; the logs were just written
    read(states_cache, logs)
    read(states_cache, logs)
    assert states_cache.computed == 3  # every log changed in the last 2 s: recomputed again
    time.sleep(2.1)
    read(states_cache, logs)
    read(states_cache, logs)
    assert (states_cache.computed, states_cache.reused) == (0, 3)


def test_states_older_than_the_ttl_are_refreshed_a_share_at_a_time(logs):
    states_cache = cache()
    read(states_cache, logs)
    later = NOW + 10 * DAY_MS  # retention.ms has passed for everything: only the clock moved
    read(states_cache, logs, ttl_ms=1_000, share=0.5, now_ms=later)
    assert states_cache.computed == 2  # half of the three expired states, rounded up
    states = read(states_cache, logs, ttl_ms=1_000, share=0.5, now_ms=later)
    assert states_cache.computed == 1  # then the last
    assert states == fresh(logs, later) and all(s.deletable_segments for s in states)


def test_a_config_change_recomputes_and_gone_partitions_are_forgotten(logs):
    states_cache = cache()
    read(states_cache, logs)
    with LogManager([logs]) as manager:
        manager.admin.alter_topic("t", {"min.cleanable.dirty.ratio": "0.9"})
    states = read(states_cache, logs)
    assert states_cache.computed == 3 and states == fresh(logs)
    for name in os.listdir(logs / "t-2"):
        os.unlink(logs / "t-2" / name)
    os.rmdir(logs / "t-2")
    unreadable: dict = {}
    with LogManager([logs], read_only=True) as manager:
        states = states_cache.read(manager, now_ms=NOW, ttl_ms=300_000, refresh_share=0.1, unreadable=unreadable)
    assert [s.partition for s in states] == [0, 1]
    # the metadata still counts it: its directory is missing, which the read says (a reader's open would)
    assert list(unreadable) == [("t", 2)] and "The directory t-2 of partition 2 of topic t is missing" in unreadable[("t", 2)]


@pytest.mark.parametrize("where", ["partition dir", "segment", "second log dir"])
def test_what_the_engine_refuses_the_cache_refuses_naming_it(logs, tmp_path, where):
    """A symbolic link (the partition dir, or a segment in it) or a partition in two log dirs
    fails the read with the engine's own error, instead of being skipped or followed."""
    from storage_engine.errors import LogError

    outside = tmp_path / "outside"
    shutil.copytree(logs / "t-1", outside)
    dirs = [logs]
    if where == "partition dir":
        shutil.rmtree(logs / "t-1")
        (logs / "t-1").symlink_to(outside)
        error = f"^{logs / 't-1'} is a symbolic link: refusing"
    elif where == "segment":
        (logs / "t-1" / "00000000000000099999.log").symlink_to(outside / "00000000000000000000.log")
        error = f"^{logs / 't-1' / '00000000000000099999.log'} is a symbolic link: refusing"
    else:
        (tmp_path / "more").mkdir()
        shutil.copytree(outside, tmp_path / "more" / "t-1")
        dirs.append(tmp_path / "more")
        error = "Duplicate log directories for t-1"
    with LogManager(dirs, read_only=True) as manager, pytest.raises(LogError, match=error):
        cache().read(manager, now_ms=NOW, ttl_ms=300_000, refresh_share=0.1)


def test_a_stray_partition_directory_has_no_state(logs):
    """``t-5`` beside a three-partition topic is no partition to the engine, so the sensors (the
    cache and a fresh read alike) show no state for it, and so no asset partition."""
    shutil.copytree(logs / "t-2", logs / "t-5")
    states = read(cache(), logs)
    assert [s.partition for s in states] == [0, 1, 2]
    assert states == fresh(logs)


def test_after_an_unclean_shutdown_states_show_what_recovery_leaves(logs):
    """No writer since a crash: the next writable open truncates at the batch failing its CRC
    and drops the segments after it. The states came from the files' metadata, so the sensors
    planned for segments and bytes that recovery deletes."""
    part = logs / "t-0"
    bases = sorted(int(n[:20]) for n in os.listdir(part) if n.endswith(".log"))
    assert len(bases) >= 3
    (logs / ".kafka_cleanshutdown").unlink()  # the last writer was killed
    (logs / "recovery-point-offset-checkpoint").write_text("0\n1\nt 0 0\n")  # before its first flush
    flip_last_byte(part / f"{bases[1]:020d}.log", 1)
    states_cache = cache()
    states = read(states_cache, logs)
    assert states == fresh(logs)
    with LogManager([logs]) as manager:  # recovery
        log = manager.get_log("t", 0)
        recovered = (len(log.segments), log.size_bytes, log.segments[-1].base_offset)
    assert (states[0].segments, states[0].size_bytes, states[0].active_base_offset) == recovered
    assert recovered[0] == 2 and recovered[2] == bases[1]
    assert read(states_cache, logs) == fresh(logs) and states_cache.computed >= 1  # no longer pending


def test_a_state_read_while_a_writer_lived_is_read_again_once_it_died(logs):
    """Nothing in the partition changes when its writer is killed, so only the log dir's
    "recovery pending" in the signature tells the cache that the state it keeps (read while a
    writer was live, damage shown where it is) is no longer what a writable open leaves."""
    part = logs / "t-0"
    bases = sorted(int(n[:20]) for n in os.listdir(part) if n.endswith(".log"))
    writer = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from storage_engine.logdir.manager import LogManager
        m = LogManager([{str(logs)!r}])
        m.get_log("t", 0)
        print("up", flush=True)
        time.sleep(120)""")], stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert writer.stdout.readline().strip() == "up"
        (logs / "recovery-point-offset-checkpoint").write_text("0\n1\nt 0 0\n")  # before its first flush
        flip_last_byte(part / f"{bases[1]:020d}.log", 1)  # damaged while the writer is live
        states_cache = cache()
        assert read(states_cache, logs)[0].segments == len(bases)  # a live writer recovers nothing
    finally:
        writer.kill()
        writer.wait()
    states = read(states_cache, logs)
    assert states_cache.computed >= 1 and states == fresh(logs) and states[0].segments == 2


@pytest.mark.parametrize("when", ["right after the log dir's listing", "as its files are listed"])
def test_a_partition_deleted_after_the_listing_has_no_state(logs, monkeypatch, when):
    """A topic delete renaming a partition dir away after the cache listed the log dir failed
    the whole read (``partition_stats`` skips such a partition)."""
    real = os.scandir
    renamed = []
    trigger = logs if when.startswith("right") else logs / "t-1"

    def listed_then_deleted(path="."):
        if Path(path) == trigger and not renamed:
            entries = list(real(path)) if trigger == logs else None
            meta = read_metadata(logs, "t")  # as a topic delete does: its commit point, then the renames
            write_metadata(replace(meta, deleting=True), logs)
            renamed.append((logs / "t-1").rename(logs / "t-1.gone"))
            return TakenListing(entries) if entries is not None else real(path)
        return real(path)

    states_cache = cache()
    with LogManager([logs], read_only=True) as manager:
        monkeypatch.setattr(os, "scandir", listed_then_deleted)
        states = states_cache.read(manager, now_ms=NOW, ttl_ms=300_000, refresh_share=0.1)
    assert renamed and [s.partition for s in states] == [0, 2]


def test_a_topic_whose_delete_a_kill_interrupted_has_no_states(logs):
    """Past the delete's commit point the topic is gone to readers (the next writable open
    finishes the delete): its partitions were read as live, and the state sensor told the user
    to reload the code location for a topic about to vanish."""
    write_metadata(replace(read_metadata(logs, "t"), deleting=True), logs)
    unreadable: dict = {}
    with LogManager([logs], read_only=True) as manager:
        assert cache().read(manager, now_ms=NOW, ttl_ms=300_000, refresh_share=0.1, unreadable=unreadable) == []
    assert unreadable == {}


def test_a_create_in_flight_is_not_reported_as_missing_directories(logs):
    """A create writes its metadata, then its directories, under the topics lock: a state read
    between the two reported every partition of the new topic as a missing directory (a false
    ERROR in log_health until the next tick). Missing directories are looked at again under the
    lock, shared, so the read waits for the create."""
    import threading

    from storage_engine.logdir.topic_store import TopicMetadata, metadata_lock

    written = threading.Event()

    def create() -> None:
        with metadata_lock([logs]):
            write_metadata(TopicMetadata("fresh", 2, {}, "0" * 32, log_dirs=1), logs)
            written.set()
            time.sleep(0.5)
            for p in range(2):
                (logs / f"fresh-{p}").mkdir()

    creator = threading.Thread(target=create)
    creator.start()
    try:
        assert written.wait(10)
        unreadable: dict = {}
        with LogManager([logs], read_only=True) as manager:
            cache().read(manager, now_ms=NOW, ttl_ms=300_000, refresh_share=0.1, unreadable=unreadable)
    finally:
        creator.join()
    assert [tp for tp in unreadable if tp[0] == "fresh"] == []


def test_a_file_where_a_partition_directory_belongs_is_reported_missing(logs):
    """The look again under the lock took any entry of the name for the directory: a file named
    ``t-1`` hid partition 1 from the sensors with no word, where a reader's open says it is missing."""
    shutil.rmtree(logs / "t-1")
    (logs / "t-1").write_text("not a directory\n")
    unreadable: dict = {}
    with LogManager([logs], read_only=True) as manager:
        states = cache().read(manager, now_ms=NOW, ttl_ms=300_000, refresh_share=0.1, unreadable=unreadable)
    assert [s.partition for s in states] == [0, 2]
    assert list(unreadable) == [("t", 1)] and "The directory t-1 of partition 1 of topic t is missing" in unreadable[("t", 1)]


T0 = 1_700_000_000_000  # when the transition tests' records were written
LAG_MS = 240_000


def _ratio_never(log) -> None:
    """A key written at T0, T0 + 1 s and T0 + 2 s, one batch each, in a rolled segment, and once
    more in the active one: cleanable bytes, a ratio that can never exceed
    min.cleanable.dirty.ratio=1.0 (only the clock makes it due)."""
    append_each(log, [ProducerRecord(b"k", b"v", T0 + i * 1000) for i in range(3)], now=T0)
    log.roll(T0)
    append_each(log, [ProducerRecord(b"k", b"v", T0 + 3000)], now=T0)


def _idle(log) -> None:
    append_each(log, records(3, keys=1, ts=T0), now=T0)


def _retention_expiry(log) -> None:
    append_each(log, records(3, keys=3, ts=T0), now=T0)
    log.roll(T0)
    append_each(log, records(1, start=3, ts=T0 + DAY_MS), now=T0 + DAY_MS)  # within message.timestamp.after.max.ms


def _min_lag(log) -> None:
    append_each(log, records(3, keys=1, ts=T0), now=T0)
    log.roll(T0)
    append_each(log, records(1, start=3, keys=1, ts=T0 + 10), now=T0)


COMPACTED = {"cleanup_policy": "compact", "min_cleanable_dirty_ratio": "1.0", "max_compaction_lag_ms": str(LAG_MS)}


def _urgent(s) -> bool:
    return s.compaction_due and s.candidacy.deadline.urgent


@pytest.mark.parametrize("configs, write, moment, since, changed", [
    # ErasureDeadline.urgent: half the lag used by the first batch (timestamp T0)
    (COMPACTED, _ratio_never, T0 + LAG_MS // 2, 100_000, _urgent),
    # the deadline itself: possibly overdue, so the state carries the engine's erasure report
    (COMPACTED, _ratio_never, T0 + LAG_MS, 100_000, lambda s: s.erasure is not None),
    # Kafka's maxCompactionDelay turns positive one millisecond later
    (COMPACTED, _ratio_never, T0 + LAG_MS + 1, 1, lambda s: s.candidacy.overdue),
    # the report's first superseded record becomes due: offset 0, superseded at T0 + 1 s
    (COMPACTED, _ratio_never, T0 + 1000 + LAG_MS, 998, lambda s: not s.erasure.ok and s.erasure.oldest.offset == 0),
    # retention.ms: the first segment (largest timestamp T0 + 2) expires
    ({"cleanup_policy": "delete", "retention_ms": str(DAY_MS)}, _retention_expiry, T0 + 2 + DAY_MS + 1, DAY_MS,
     lambda s: s.deletable_segments == 1),
    # min.compaction.lag.ms ends for the first dirty segment (largest timestamp T0 + 2)
    ({**COMPACTED, "min_compaction_lag_ms": "60000"}, _min_lag, T0 + 2 + 60_000, 50_000,
     lambda s: s.candidacy.bound_reason == "active segment"),
    # the idle active segment's roll (logplat.roll.idle.segments), once its max segment ms (segment.ms
    # here) has passed: Kafka's shouldRoll is strict, so one millisecond after it
    ({**COMPACTED, "segment_ms": "60000", "logplat_roll_idle_segments": "true"}, _idle, T0 + 60_000 + 1, 50_000,
     lambda s: s.candidacy.idle_roll_due and s.compaction_due),
], ids=["urgent", "deadline", "kafka-overdue", "erasure-report", "retention-ms", "min-compaction-lag", "idle-roll"])
def test_a_state_is_reused_until_its_next_clock_transition_and_recomputed_at_it(tmp_path, configs, write, moment,
                                                                               since, changed):
    root = tmp_path / "logs"
    with open_topic(root, "t", 1, **configs) as manager:
        write(manager.get_log("t", 0))
    states_cache = cache()
    long_ttl = 30 * DAY_MS  # no TTL refresh: only the transition recomputes
    (first,) = read(states_cache, root, ttl_ms=long_ttl, now_ms=moment - since)
    assert not changed(first) and states_cache.computed == 1
    (before,) = read(states_cache, root, ttl_ms=long_ttl, share=0.0, now_ms=moment - 1)
    assert states_cache.reused == 1 and before is first
    # nothing the clock changes happened by then: reusing it was right
    assert health_of(before) == health_of(fresh(root, moment - 1)[0]) and not changed(fresh(root, moment - 1)[0])
    (at,) = read(states_cache, root, ttl_ms=long_ttl, share=0.0, now_ms=moment)
    assert states_cache.computed == 1 and changed(at)
    assert [at] == fresh(root, moment)


def budgeted(states: StateCache, root: Path, *, now_ms: int = NOW, ttl_ms: int = 300_000):
    """A read with no time to spare (it computes the one state every read computes), and the
    partitions it left pending."""
    pending: set = set()
    with LogManager([root], read_only=True) as manager:
        got = states.read(manager, now_ms=now_ms, ttl_ms=ttl_ms, refresh_share=0.1, budget_s=0.0, pending=pending)
    return got, pending


def test_a_budgeted_read_leaves_partitions_pending_never_stale_and_later_reads_complete_them(logs):
    states_cache = cache()
    states, pending = budgeted(states_cache, logs)
    assert [s.partition for s in states] == [0] and pending == {("t", 1), ("t", 2)}
    states, pending = budgeted(states_cache, logs)
    assert [s.partition for s in states] == [0, 1] and pending == {("t", 2)}
    states, pending = budgeted(states_cache, logs)
    assert not pending and states == fresh(logs)

    with LogManager([logs]) as manager:  # two partitions change: one is read, the other is pending
        for p in (0, 1):
            append_each(manager.get_log("t", p), records(1, start=100, keys=5, ts=NOW))
    states, pending = budgeted(states_cache, logs)
    assert pending == {("t", 1)} and states_cache.computed == 1
    assert states == [s for s in fresh(logs) if s.partition != 1]  # partition 1's old state is not returned
    states, pending = budgeted(states_cache, logs)
    assert not pending and states == fresh(logs)


def test_a_budgeted_read_computes_clock_transitions_first_then_changed_files_then_first_reads(tmp_path):
    root = tmp_path / "logs"
    with open_topic(root, "a", 2) as manager:  # directories listed before z's
        for p in range(2):
            append_each(manager.get_log("a", p), records(3, ts=T0), now=T0)
    with open_topic(root, "z", 1, cleanup_policy="delete", retention_ms=DAY_MS) as manager:
        _retention_expiry(manager.get_log("z", 0))
    moment, long_ttl = T0 + 2 + DAY_MS + 1, 30 * DAY_MS  # z-0's first segment expires at ``moment``
    states_cache = cache()
    read(states_cache, root, ttl_ms=long_ttl, now_ms=moment - 1)
    with LogManager([root]) as manager:
        append_each(manager.get_log("a", 0), records(1, start=3, ts=T0), now=T0)  # a-0's files change
    with open_topic(root, "b", 1) as manager:  # b-0: never read
        append_each(manager.get_log("b", 0), records(1, ts=T0), now=T0)

    states, pending = budgeted(states_cache, root, now_ms=moment, ttl_ms=long_ttl)
    assert pending == {("a", 0), ("b", 0)}
    assert [(s.topic, s.partition) for s in states] == [("a", 1), ("z", 0)] and states[1].deletable_segments == 1
    _, pending = budgeted(states_cache, root, now_ms=moment, ttl_ms=long_ttl)
    assert pending == {("b", 0)}
    states, pending = budgeted(states_cache, root, now_ms=moment, ttl_ms=long_ttl)
    assert not pending and [s.tp for s in states] == [("a", 0), ("a", 1), ("b", 0), ("z", 0)]
    # a-1's state, reused from ``moment - 1`` (no transition), differs from a fresh one only in its read time
    assert [s for s in states if s.tp != ("a", 1)] == [s for s in fresh(root, moment) if s.tp != ("a", 1)]


def test_a_budget_without_a_pending_set_is_refused(logs):
    with LogManager([logs], read_only=True) as manager, pytest.raises(ValueError, match="needs a pending set"):
        cache().read(manager, now_ms=NOW, ttl_ms=300_000, refresh_share=0.1, budget_s=1.0)
