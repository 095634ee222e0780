"""Retention on files on disk: Kafka's UnifiedLogTest/LogManagerTest scenarios, plans, kills."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from storage_engine.errors import LogChangedError
from storage_engine.log.append_validation import ProducerRecord
from storage_engine.log.retention import apply_retention
from storage_engine.logdir.manager import LogManager
from storage_engine.record import RECORD_BATCH_OVERHEAD, scan_batches
from storage_engine.tools.logctl import main as logctl
from tests.helpers.crash import crash_env
from tests.helpers.engine import open_topic

NOW = 1_000_000


def build(log, spec):
    """One segment per (records, timestamp, value size); rolls between them."""
    offset = 0
    for i, (n, ts, size) in enumerate(spec):
        log.append([ProducerRecord(b"k%d" % (offset + j), b"x" * size, ts) for j in range(n)], now=NOW)
        offset += n
        if i < len(spec) - 1:
            log.roll()
    return [s.base_offset for s in log.segments]


def plan(m, topic="t"):
    return {(p.topic, p.partition): p for p in m.retention.plans(topic, now_ms=NOW)}[(topic, 0)]


def test_time_retention_with_mixed_timestamps_stops_at_the_first_young_segment(tmp_path):
    with open_topic(tmp_path, retention_ms=1500) as m:
        log = m.get_log("t", 0)
        bases = build(log, [(2, NOW - 4000, 10), (2, NOW - 2000, 10), (2, NOW - 100, 10), (2, NOW - 9000, 10)])
        p = plan(m)
        assert [d.base_offset for d in p.deletions] == bases[:2]
        assert {d.reason for d in p.deletions} == {"retention.ms"}
        assert p.new_log_start_offset == bases[2]
        result = m.retention.apply([p], now_ms=NOW)[0]
        assert result.deleted_segments == bases[:2]
        assert [s.base_offset for s in log.segments] == bases[2:]
        assert log.log_start_offset == bases[2]
        assert [r.offset for r in log.read(bases[2], max_records=10)] == [4, 5, 6, 7]


def test_a_segment_exactly_retention_ms_old_is_kept(tmp_path):
    with open_topic(tmp_path, retention_ms=1000) as m:
        build(m.get_log("t", 0), [(1, NOW - 1000, 10), (1, NOW, 10)])
        assert plan(m).deletions == ()


def test_future_timestamps_are_named_in_the_plan(tmp_path):
    with open_topic(tmp_path, retention_ms=1000) as m:
        bases = build(m.get_log("t", 0), [(1, NOW - 5000, 10), (1, NOW + 60_000, 10), (3, NOW - 9000, 10), (1, NOW, 10)])
        p = plan(m)
        assert p.deleted_bases == (bases[0],)
        assert len(p.warnings) == 1
        warning = p.warnings[0]
        assert f"segment {bases[1]}" in warning and "60000 ms in the future" in warning
        assert "holding back 2 later segment(s)" in warning


def test_size_retention_walks_uneven_segments(tmp_path):
    with open_topic(tmp_path, retention_bytes=1) as m:  # placeholder limit, replaced below
        log = m.get_log("t", 0)
        bases = build(log, [(1, NOW, 200), (1, NOW, 500), (1, NOW, 100), (1, NOW, 300)])
        sizes = [s.size for s in log.segments]
        limit = sum(sizes) - sizes[0] - sizes[1] // 2  # enough to drop segment 0, not segment 1
        m.admin.alter_topic("t", {"retention.bytes": str(limit)})
        p = plan(m)
        assert p.deleted_bases == (bases[0],)
        assert p.deletions[0].reason == "retention.bytes" and p.bytes_to_free == sizes[0]
        m.admin.alter_topic("t", {"retention.bytes": str(sizes[3])})  # keep only the newest
        assert plan(m).deleted_bases == tuple(bases[:3])
        m.admin.alter_topic("t", {"retention.bytes": str(sum(sizes))})  # exactly at the limit
        assert plan(m).deleted_bases == ()


def test_log_start_offset_retention_after_delete_records_even_when_compacted(tmp_path):
    with open_topic(tmp_path, cleanup_policy="compact", retention_ms=1) as m:
        log = m.get_log("t", 0)
        bases = build(log, [(3, 1, 10), (3, 1, 10), (3, 1, 10)])
        assert plan(m).deletions == ()  # compact: time retention does not apply
        log.delete_records(bases[1] + 1)
        p = plan(m)
        assert p.deleted_bases == (bases[0],)
        assert p.deletions[0].reason == "log-start-offset"
        m.retention.apply([p], now_ms=NOW)
        assert log.log_start_offset == bases[1] + 1  # never moves backwards to a segment base


def test_an_empty_policy_keeps_every_segment_past_its_limits_but_not_below_the_log_start(tmp_path):
    # KIP-1161: cleanup.policy= keeps forever (a 4.4 broker: tests/live_kafka/test_kafka4_semantics.py)
    with open_topic(tmp_path, cleanup_policy="", retention_ms=1, retention_bytes=1) as m:
        log = m.get_log("t", 0)
        bases = build(log, [(3, 1, 10), (3, 1, 10), (3, 1, 10)])
        p = plan(m)
        assert p.deletions == () and p.kept_forever and p.to_dict()["kept_forever"]
        assert m.retention.apply([p], now_ms=NOW) == []
        log.delete_records(bases[1])  # delete-records moves the log start under every policy
        assert plan(m).deleted_bases == (bases[0],)


def test_logctl_retention_says_an_empty_policy_keeps_forever(tmp_path, monkeypatch, capsys):
    open_topic(tmp_path, cleanup_policy="", retention_ms=1).close()
    assert logctl(["--log-dirs", str(tmp_path), "retention", "--now-ms", str(NOW)]) == 0
    assert capsys.readouterr().out.strip() == ("t-0: nothing to delete (cleanup.policy is empty: its records are "
                                               "kept forever (KIP-1161))")


def test_compact_delete_applies_time_and_size_too(tmp_path):
    with open_topic(tmp_path, cleanup_policy="compact,delete", retention_ms=10) as m:
        bases = build(m.get_log("t", 0), [(1, NOW - 100, 10), (1, NOW, 10)])
        assert plan(m).deleted_bases == (bases[0],)


def test_unlimited_retention_deletes_nothing(tmp_path):
    with open_topic(tmp_path, retention_ms=-1, retention_bytes=-1) as m:
        build(m.get_log("t", 0), [(1, 1, 1000), (1, 2, 1000)])
        assert plan(m).deletions == ()


def test_all_segments_expired_rolls_then_deletes_everything(tmp_path):
    with open_topic(tmp_path, retention_ms=100) as m:
        log = m.get_log("t", 0)
        bases = build(log, [(2, 1, 10), (3, 2, 10)])
        p = plan(m)
        assert p.deleted_bases == tuple(bases) and p.roll_first
        m.retention.apply([p], now_ms=NOW)
        assert [s.base_offset for s in log.segments] == [5]
        assert log.active_segment.size == 0
        assert (log.log_start_offset, log.log_end_offset) == (5, 5)
        assert log.append([ProducerRecord(b"a", b"b", NOW)]).first_offset == 5
        # The last, empty segment is never deleted.
        log.roll()
        assert plan(m).deleted_bases == ()


def test_an_empty_active_segment_stays_while_the_rest_goes(tmp_path):
    with open_topic(tmp_path, retention_ms=100) as m:
        log = m.get_log("t", 0)
        build(log, [(2, 1, 10)])
        log.roll()
        p = plan(m)
        assert p.deleted_bases == (0,) and not p.roll_first
        m.retention.apply([p], now_ms=NOW)
        assert [s.base_offset for s in log.segments] == [2]


def test_deleted_files_wait_for_the_delay_then_go(tmp_path):
    """The delay runs from the rename by the wall clock (the rename's ctime), whatever clock
    retention judges the segments by (here one in 1970)."""
    with open_topic(tmp_path, retention_ms=100, file_delete_delay_ms=2_000) as m:
        log = m.get_log("t", 0)
        build(log, [(1, 1, 10), (1, NOW, 10)])
        result = m.retention.apply([plan(m)], now_ms=NOW)[0]
        pending = sorted(os.path.basename(f) for f in result.pending_files)
        assert pending == ["00000000000000000000.index.deleted", "00000000000000000000.log.deleted",
                           "00000000000000000000.timeindex.deleted"]
        assert all(os.path.exists(f) for f in result.pending_files)
        m.retention.apply(m.retention.plans("t", now_ms=NOW), now_ms=NOW)  # too early
        assert all(os.path.exists(f) for f in result.pending_files)
        due = os.stat(result.pending_files[0]).st_ctime + 2.0
        time.sleep(max(0.0, due - time.time()) + 0.05)
        m.retention.apply(m.retention.plans("t", now_ms=NOW), now_ms=NOW)
        assert not any(os.path.exists(f) for f in result.pending_files)


def test_without_a_delay_deleted_files_go_at_once_whatever_the_clock(tmp_path):
    """With ``file.delete.delay.ms=0`` and a clock in the past (``--now-ms``), the files stayed
    (their ctime is the wall clock's, after that "now") while the result said none was pending."""
    with open_topic(tmp_path, retention_ms=100, file_delete_delay_ms=0) as m:
        log = m.get_log("t", 0)
        build(log, [(1, 1, 10), (1, NOW, 10)])
        result = m.retention.apply([plan(m)], now_ms=NOW)[0]
        assert result.deleted_segments == [0] and result.pending_files == []
        assert not [n for n in os.listdir(log.dir) if n.endswith(".deleted")]


def test_apply_refuses_a_plan_the_log_outgrew(tmp_path):
    later = NOW + 10**6
    with open_topic(tmp_path, retention_ms=100) as m:
        log = m.get_log("t", 0)
        build(log, [(1, 1, 10), (1, NOW, 10)])
        p = m.retention.plans("t", now_ms=later)[0]
        assert p.deleted_bases == (0, 1) and p.roll_first
        # Another writer appends a fresh record to the active segment after the plan was made.
        log.append([ProducerRecord(b"z", b"z", later)], now=later)
        with pytest.raises(LogChangedError, match="changed since retention was planned"):
            apply_retention(log, p, later)
        assert [s.base_offset for s in log.segments] == [0, 1]
        assert apply_retention(log, None, later).deleted_segments == [0]


def test_a_partition_that_changed_since_its_plan_is_reported_and_the_others_applied(tmp_path, capsys):
    """``logctl retention`` (local) failed as a whole with the first partition a producer had
    changed since the plan: the partitions before it already applied, the ones after it never
    visited, exit 1. Now that partition is reported "changed" (as the Spark job reports it)."""
    later = NOW + 10**6
    with open_topic(tmp_path, partitions=3, retention_ms=100) as m:
        for p in range(3):
            build(m.get_log("t", p), [(1, 1, 10), (1, NOW, 10)])
        plans = m.retention.plans("t", now_ms=later)
        m.get_log("t", 1).append([ProducerRecord(b"z", b"z", later)], now=later)  # a producer, after the plan
        results = m.retention.apply(plans, now_ms=later)
    assert [(r.plan.partition, r.deleted_segments, r.changed is not None) for r in results] == [
        (0, [0, 1], False), (1, [], True), (2, [0, 1], False)]
    changed = results[1].to_dict()
    assert changed["applied"] is False and changed["status"] == "changed"
    assert "changed since retention was planned" in changed["reason"]


def test_the_cli_names_the_planned_log_start_of_a_partition_that_changed(tmp_path, capsys, monkeypatch):
    """A changed partition's line said the log start would move to "the log end offset (the
    active segment is rolled first)" for a plan that rolled nothing: the applied result's empty
    log start was read instead of the plan's."""
    from storage_engine.log import retention

    with open_topic(tmp_path, retention_bytes=400, segment_bytes=300) as m:
        build(m.get_log("t", 0), [(2, NOW, 60)] * 4)  # four segments of one batch
    real = retention.apply_retention

    def a_producer_first(log, plan, now_ms):  # a producer's roll lands between the plan and the apply
        log.append([ProducerRecord(b"z", b"z" * 60, NOW)] * 3, now=NOW)
        log.roll(NOW)
        return real(log, plan, now_ms)

    monkeypatch.setattr("storage_engine.logdir.retention.apply_retention", a_producer_first)
    assert logctl(["--log-dirs", str(tmp_path), "retention", "--now-ms", str(NOW)]) == 0
    out = capsys.readouterr().out
    assert "not applied (changed)" in out and "log start offset -> 4\n" in out and "rolled first" not in out, out


def test_apply_refuses_a_plan_the_log_outgrew_even_after_routine_repairs(tmp_path):
    """Only a load that changed the segment list lets a plan be made again: the stray producer
    snapshot every close leaves (removed by the next open) is no licence to delete otherwise."""
    later = NOW + 10**6
    with open_topic(tmp_path, retention_ms=100) as m:
        build(m.get_log("t", 0), [(1, 1, 10), (1, NOW, 10)])
    for _ in range(2):  # sessions that append and close, each leaving a snapshot at its log end
        with LogManager([tmp_path]) as m:
            m.get_log("t", 0).append([ProducerRecord(b"y", b"y", NOW)], now=NOW)
    with LogManager([tmp_path]) as m:
        log = m.get_log("t", 0)
        assert any("producer snapshot" in a for a in log.load_actions) and not log.segments_repaired
        p = m.retention.plans("t", now_ms=later)[0]
        assert p.deleted_bases == (0, 1) and p.roll_first
        log.append([ProducerRecord(b"z", b"z", later)], now=later)
        with pytest.raises(LogChangedError, match="changed since retention was planned"):
            apply_retention(log, p, later)


def test_planning_reads_no_record_bytes(tmp_path):
    with open_topic(tmp_path, retention_ms=1000) as m:
        bases = build(m.get_log("t", 0), [(3, NOW - 5000, 50), (3, NOW - 3000, 50), (3, NOW, 50)])
        before = plan(m)
    for base in bases[:-1]:  # wipe the records of every inactive segment, keep its batch headers and size
        path = tmp_path / "t-0" / f"{base:020d}.log"
        data = bytearray(path.read_bytes())
        for batch in scan_batches(bytes(data)):
            end = batch.position + batch.header.size_in_bytes
            data[batch.position + RECORD_BATCH_OVERHEAD:end] = bytes(end - batch.position - RECORD_BATCH_OVERHEAD)
        path.write_bytes(bytes(data))
    with LogManager([tmp_path]) as m:
        stats = {s.partition: s for s in m.partition_stats("t")}
        assert m.retention.plans("t", now_ms=NOW)[0].deleted_bases == before.deleted_bases == tuple(bases[:2])
        assert stats[0].size_bytes > 0


def test_cli_dry_run_changes_nothing_and_apply_does(tmp_path, capsys):
    with open_topic(tmp_path, retention_ms=100) as m:
        build(m.get_log("t", 0), [(1, 1, 10), (1, NOW, 10)])
    listing = sorted(os.listdir(tmp_path / "t-0"))
    assert logctl(["--log-dirs", str(tmp_path), "retention", "--dry-run", "--json", "--now-ms", str(NOW)]) == 0
    out = json.loads(capsys.readouterr().out)
    (part,) = out["partitions"]
    assert part["applied"] is False and [s["base_offset"] for s in part["segments_to_delete"]] == [0]
    assert part["segments_to_delete"][0]["reason"] == "retention.ms"
    assert sorted(os.listdir(tmp_path / "t-0")) == listing
    assert logctl(["--log-dirs", str(tmp_path), "retention", "--json", "--now-ms", str(NOW)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["partitions"][0]["deleted_segments"] == [0]
    assert "00000000000000000000.log" not in os.listdir(tmp_path / "t-0")


def _retention_cli(tmp_path, capsys, *flags: str) -> tuple[int, dict]:
    code = logctl(["--log-dirs", str(tmp_path), "retention", "--json", "--now-ms", str(NOW), *flags])
    out = capsys.readouterr().out
    return code, json.loads(out) if out else {}


def test_the_dry_run_leaves_out_an_empty_stray_segment_as_the_run_does(tmp_path, capsys):
    """The stats counted an empty segment inside another's offsets, which the writable open
    removes: the dry run planned around it, and the run then failed as "changed since planned"."""
    with open_topic(tmp_path, retention_ms=100) as m:
        bases = build(m.get_log("t", 0), [(3, 1, 10), (3, 2, 10), (3, NOW, 10)])
    (tmp_path / "t-0" / f"{bases[0] + 1:020d}.log").write_bytes(b"")
    code, dry = _retention_cli(tmp_path, capsys, "--dry-run")
    assert code == 0 and [s["base_offset"] for s in dry["partitions"][0]["segments_to_delete"]] == bases[:2]
    code, run = _retention_cli(tmp_path, capsys)
    assert code == 0 and run["partitions"][0]["deleted_segments"] == bases[:2], run


def test_a_plan_made_before_the_open_repaired_the_log_is_made_again(tmp_path, capsys):
    """An interrupted swap (segments 0 and 1 cleaned into one) is completed by the run's open, so
    the plan made from the files before it (delete 0 and 1) no longer matched the log: the run
    failed as "changed since planned". A partition holding a ``.swap`` is now planned from its
    log as the open leaves it (``LogManager.planning_stats``)."""
    with open_topic(tmp_path, retention_ms=100) as m:
        bases = build(m.get_log("t", 0), [(3, 1, 10), (3, NOW, 10), (3, NOW, 10)])
    part = tmp_path / "t-0"
    merged = b"".join((part / f"{b:020d}.log").read_bytes() for b in bases[:2])
    (part / f"{bases[0]:020d}.log.swap").write_bytes(merged)
    code, run = _retention_cli(tmp_path, capsys)
    (result,) = run["partitions"]
    assert code == 0 and result["segments_to_delete"] == [] and not result["applied"], result  # it holds a young record
    assert sorted(int(n[:20]) for n in os.listdir(part) if n.endswith(".log")) == [bases[0], bases[2]]


def test_broker_retention_precedence_drives_the_plan(tmp_path):
    with open_topic(tmp_path) as m:
        build(m.get_log("t", 0), [(1, NOW - 3 * 60_000, 10), (1, NOW, 10)])
    broker = {"log.retention.hours": "1000", "log.retention.minutes": "2"}
    with LogManager([tmp_path], broker) as m:
        assert m.retention.plans("t", now_ms=NOW)[0].deleted_bases == (0,)
    broker["log.retention.ms"] = str(10 * 60_000)  # ms wins over minutes
    with LogManager([tmp_path], broker) as m:
        assert m.retention.plans("t", now_ms=NOW)[0].deleted_bases == ()


CRASH_POINTS = [
    "retention.after-roll",
    "retention.after-checkpoint",
    "remove-segments.after-rename-0",
    "remove-segments.after-rename-1",
    "remove-segments.after-rename-2",
]


@pytest.mark.parametrize("point", CRASH_POINTS)
@pytest.mark.parametrize("everything_expires", [False, True])
def test_a_kill_at_each_step_leaves_the_log_before_or_after(tmp_path, point, everything_expires):
    with open_topic(tmp_path, retention_ms=1000, file_delete_delay_ms=60_000) as m:
        last_ts = 1 if everything_expires else NOW
        build(m.get_log("t", 0), [(2, 1, 10), (2, 2, 10), (2, 3, 10), (2, last_ts, 10)])
        before = [r.offset for r in m.get_log("t", 0).read(0, max_records=100)]
    script = textwrap.dedent(f"""
        from storage_engine.logdir.manager import LogManager
        m = LogManager([{str(tmp_path)!r}])
        plans = m.retention.plans("t", now_ms={NOW})
        m.retention.apply(plans, now_ms={NOW})
        m.close()
    """)
    env = crash_env(point)
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    reached = everything_expires or point != "retention.after-roll"
    assert proc.returncode == (-9 if reached else 0), proc.stderr
    with LogManager([tmp_path]) as m:
        log = m.get_log("t", 0)
        after = [r.offset for r in log.read(log.log_start_offset, max_records=100)]
        expected_after = [] if everything_expires else [6, 7]
        assert after in (before, expected_after), (point, after)
        if proc.returncode == -9 and point != "retention.after-roll":
            assert after == expected_after  # past the commit point the deletion completes
        names = os.listdir(tmp_path / "t-0")
        assert not [n for n in names if n.endswith((".deleted", ".swap", ".cleaned"))]
        logs = {n[:20] for n in names if n.endswith(".log")}
        for kind in (".index", ".timeindex"):
            assert {n[:20] for n in names if n.endswith(kind)} <= logs  # no orphaned index
        from storage_engine.tools.verify import verify_log
        assert verify_log(log).ok
        assert log.append([ProducerRecord(b"n", b"n", NOW)]).first_offset == 8


def test_retention_after_delete_records_deletes_what_the_open_already_dropped(tmp_path, capsys):
    """The plan comes from file metadata; opening the log for the apply drops segments wholly
    below the log start offset delete-records committed. That is the plan carried out, not a
    concurrent change (it used to fail with "changed since retention was planned")."""
    root = str(tmp_path)
    assert logctl(["--log-dirs", root, "topic", "create", "o", "--partitions", "1",
                   "--config", "segment.bytes=4096", "--config", "file.delete.delay.ms=0"]) == 0
    with LogManager([tmp_path]) as m:
        log = m.get_log("o", 0)
        for base in range(0, 600, 10):
            log.append([ProducerRecord(b"k%03d" % i, b"v" * 40, NOW) for i in range(base, base + 10)], now=NOW)
    assert logctl(["--log-dirs", root, "delete-records", "o", "--partition", "0", "--before-offset", "152"]) == 0
    capsys.readouterr()
    assert logctl(["--log-dirs", root, "retention", "--topic", "o", "--now-ms", str(NOW), "--json"]) == 0
    (part,) = json.loads(capsys.readouterr().out)["partitions"]
    assert part["applied"] and part["deleted_segments"] and part["log_start_offset_after"] == 152
    assert min(int(n[:20]) for n in os.listdir(tmp_path / "o-0") if n.endswith(".log")) <= 152
    with LogManager([tmp_path]) as m:
        assert m.get_log("o", 0).log_start_offset == 152


def test_a_roll_cut_short_before_its_final_time_index_entry_is_planned_by_its_batches(tmp_path):
    """A kill between a roll's new segment and the old one's final time-index entry (before the
    roll wrote that entry first) leaves the old time index untrimmed, its last entry an earlier
    batch's: the stats trusted it and planned a deletion that the apply, reading the batches,
    refused as a change on every run."""
    later = NOW + 10**6
    with open_topic(tmp_path, retention_ms=10**6, index_interval_bytes=1) as m:
        log = m.get_log("t", 0)
        log.append([ProducerRecord(b"a", b"x" * 50, 1_000)], now=NOW)
        log.append([ProducerRecord(b"b", b"x" * 50, 1_001)], now=NOW)
        log.append([ProducerRecord(b"c", b"x" * 50, later)], now=NOW)
        log.roll(NOW)
        log.append([ProducerRecord(b"d", b"x" * 50, later)], now=NOW)
    time_index = tmp_path / "t-0" / "00000000000000000000.timeindex"
    entries = time_index.read_bytes()
    assert len(entries) == 2 * 12  # b's and c's (the first batch is never indexed)
    time_index.write_bytes(entries[:12] + bytes(10 * 12))  # c's missing, the file untrimmed
    with LogManager([tmp_path], read_only=True) as m:
        [stats] = m.partition_stats("t")
        assert stats.segments[0].max_record_timestamp == later
        assert m.retention.plans("t", now_ms=later).pop().deleted_bases == ()
