"""``logctl erasure-report``: whether every record superseded at least ``max.compaction.lag.ms``
ago is gone from the segments (an exact scan), and where a key still is, including ``.deleted``
files the delay has not yet let go."""

from __future__ import annotations

import json

from storage_engine.cleaner import LogCleaner
from storage_engine.cleaner.erasure import erasure_report
from storage_engine.log.append_validation import ProducerRecord
from storage_engine.logdir.manager import LogManager
from tests.helpers.cli import run_logctl
from tests.helpers.engine import append_each, flip_last_byte, open_topic

HOUR = 3_600_000
T0 = 1_700_000_000_000  # when the records were written


def _users(root, **configs):
    """``users``: a key ``alice`` written then tombstoned, ``bob`` written twice, in segments of a
    few batches each (so a compaction has something to clean), the last one rolled away."""
    configs = {"cleanup_policy": "compact", "segment_bytes": "300", "max_compaction_lag_ms": str(HOUR),
               "min_cleanable_dirty_ratio": "0.99", "delete_retention_ms": str(10 * HOUR), **configs}
    manager = open_topic(root, "users", 1, **configs)
    log = manager.get_log("users", 0)
    append_each(log, [ProducerRecord(b"alice", b"alice@example.com", T0), ProducerRecord(b"bob", b"b1", T0),
                      ProducerRecord(b"alice", None, T0 + 1000), ProducerRecord(b"bob", b"b2", T0 + 2000),
                      ProducerRecord(b"carol", b"c1", T0 + 3000)], now=T0)
    log.roll()
    manager.close()


def _report(root, monkeypatch, capsys, *args):
    code, out, err = run_logctl(root, monkeypatch, capsys, "erasure-report", "--json", *args)
    return code, json.loads(out) if out else None, err


def test_a_tombstoned_key_past_the_bound_is_reported_until_compaction_removes_its_value(tmp_path, monkeypatch,
                                                                                          capsys):
    _users(tmp_path, file_delete_delay_ms=str(10 * HOUR))
    # within the bound: superseded, not yet due
    code, data, _ = _report(tmp_path, monkeypatch, capsys, "--now-ms", str(T0 + HOUR // 2), "--key", "alice")
    assert code == 0 and data["partitions"][0]["remnants"] == 0
    assert data["partitions"][0]["key"] == {"values": [0], "tombstones": [2], "in_deleted_files": []}
    # the engine's deadline from file metadata: the oldest uncleaned record and the time left
    assert data["partitions"][0]["deadline"] == {"oldest_offset": 0, "oldest_timestamp_ms": T0,
                                                 "deadline_ms": T0 + HOUR, "time_left_ms": HOUR // 2,
                                                 "in_active_segment": False}
    # past it: alice's value (offset 0) and bob's first (offset 1) must be gone, and are not
    now = T0 + 2 * HOUR
    code, data, _ = _report(tmp_path, monkeypatch, capsys, "--now-ms", str(now), "--key", "alice")
    p = data["partitions"][0]
    assert code == 1 and not data["ok"] and p["remnants"] == 2
    assert p["oldest"] == {"offset": 0, "superseded_by": 2, "superseded_at_ms": T0 + 1000,
                           "overdue_ms": now - (T0 + 1000 + HOUR)}
    assert p["deadline"]["time_left_ms"] == -HOUR
    code, out, _ = run_logctl(tmp_path, monkeypatch, capsys, "erasure-report", "--now-ms", str(now))
    assert code == 1 and "users-0: NOT ERASED: 2 record(s)" in out and "the oldest at offset 0" in out
    assert f"offset 0 (written at {T0}), must be cleaned by {T0 + HOUR}: missed by {HOUR} ms" in out
    assert "  why: not cleaned yet: the superseding record at offset 2 is cleanable" in out  # the cleaner is behind
    # the cleaner removes them; the old segments wait as .deleted files, and the report says so
    with LogManager([tmp_path]) as manager:
        LogCleaner(manager).compact("users", 0, now_ms=now)
    code, data, _ = _report(tmp_path, monkeypatch, capsys, "--now-ms", str(now), "--key", "alice")
    p = data["partitions"][0]
    assert code == 0 and p["remnants"] == 0 and p["deadline"] is None  # nothing uncleaned is left
    assert p["key"]["values"] == [] and p["key"]["tombstones"] == [2]  # kept for delete.retention.ms
    assert p["key"]["in_deleted_files"] == [0, 2]
    # once the .deleted files are gone, no byte of alice's value is left
    for f in (tmp_path / "users-0").glob("*.deleted"):
        f.unlink()
    code, data, _ = _report(tmp_path, monkeypatch, capsys, "--now-ms", str(now), "--key", "alice")
    assert data["partitions"][0]["key"] == {"values": [], "tombstones": [2], "in_deleted_files": []}


def test_an_unbounded_lag_proves_nothing_and_a_latest_tombstone_is_never_due(tmp_path, monkeypatch, capsys):
    _users(tmp_path, max_compaction_lag_ms=str(2**63 - 1))
    code, out, _ = run_logctl(tmp_path, monkeypatch, capsys, "erasure-report", "--now-ms", str(T0 + 100 * HOUR))
    assert code == 0 and "max.compaction.lag.ms is unlimited" in out
    manager = open_topic(tmp_path / "other", "t", 1, cleanup_policy="compact", max_compaction_lag_ms="1")
    append_each(manager.get_log("t", 0), [ProducerRecord(b"k", b"v", T0), ProducerRecord(b"k", None, T0)], now=T0)
    report = erasure_report(manager.get_log("t", 0), T0 + HOUR)
    manager.close()
    assert (report.remnants, report.oldest.offset) == (1, 0)  # the value, not the tombstone after it


def test_under_a_version_strategy_a_record_that_arrives_beaten_is_superseded_when_written(tmp_path):
    """``compaction.strategy=timestamp``: bob's second record (offset 2) carries an older
    timestamp than his first, so it lost on arrival and is due once the lag has passed since it
    was written; the later record with the newest timestamp is not superseded by it. The
    cleaner removes it (it is not the newest record of the pass: carol's is)."""
    manager = open_topic(tmp_path, "users", 1, cleanup_policy="compact", compaction_strategy="timestamp",
                         max_compaction_lag_ms=str(HOUR), min_cleanable_dirty_ratio="0.99")
    log = manager.get_log("users", 0)
    append_each(log, [ProducerRecord(b"bob", b"b-new", T0 + 5000), ProducerRecord(b"alice", b"a", T0),
                      ProducerRecord(b"bob", b"b-old", T0 + 1000), ProducerRecord(b"carol", b"c", T0 + 2000)], now=T0)
    log.roll()
    now = T0 + 2 * HOUR
    report = erasure_report(log, now, b"bob")
    assert (report.remnants, report.oldest.offset, report.oldest.superseded_by) == (1, 2, 0)
    assert report.oldest.overdue_ms == now - (T0 + 1000 + HOUR)
    LogCleaner(manager).compact("users", 0, now_ms=now)
    report = erasure_report(log, now, b"bob")
    manager.close()
    assert report.ok and report.key.values == (0,)


def test_bad_input_is_one_line_and_changes_nothing(tmp_path, monkeypatch, capsys):
    _users(tmp_path)
    before = {p.name: p.read_bytes() for p in (tmp_path / "users-0").iterdir() if p.is_file()}
    for args in (["--topic", "nope"], ["--key", "@@@", "--encoding", "base64"], ["--now-ms", "-1"],
                 ["--partition", "0"], ["--topic", "users", "--partition", "1"], ["--topic", "users", "--partition", "x"]):
        code, out, err = run_logctl(tmp_path, monkeypatch, capsys, "erasure-report", *args)
        assert code == 1 and out == "" and len(err.strip().splitlines()) == 1, (args, err)
    assert {p.name: p.read_bytes() for p in (tmp_path / "users-0").iterdir() if p.is_file()} == before


def _transactional_log(root, *, decided: bool):
    """``k=v1`` at 0, then ``k=v2`` in a transaction of producer 7 at 1 (aborted at 2 when
    ``decided``, else still open), and an unrelated record after it, long past the bound."""
    from tests.helpers.cleaner import data_batch, marker, raw_log

    batches = [data_batch(0, [("k", "v1")], ts=T0),
               data_batch(1, [("k", "v2")], ts=T0, pid=7, epoch=0, seq=0, transactional=True)]
    if decided:
        batches.append(marker(2, 7, 0, commit=False, ts=T0))
    return raw_log(root, [batches, [data_batch(3, [("other", "x")], ts=T0)]], max_compaction_lag_ms="1000",
                   min_cleanable_dirty_ratio="0.01")


def test_a_record_of_an_aborted_or_undecided_transaction_supersedes_nothing(tmp_path):
    """The report counted ``k=v1`` as superseded by an aborted ``k=v2``, where the cleaner (whose
    offset map never holds aborted records) keeps it; and by a record of a transaction still
    open, which no cleaning reaches yet."""
    from tests.helpers.cleaner import content

    for decided in (True, False):
        root = tmp_path / f"decided-{decided}"
        with _transactional_log(root, decided=decided) as manager:
            log = manager.get_log("t", 0)
            now = T0 + HOUR
            report = erasure_report(log, now, b"k")
            assert report.ok and report.remnants == 0, report.to_dict()
            assert report.key is not None and report.key.values == (0, 1)  # both still on disk
            LogCleaner(manager).compact("t", 0, now_ms=now)
            assert (0, "k", "v1") in content(log)  # the cleaner agrees: nothing replaced v1
            assert erasure_report(log, now).ok


def test_a_corrupt_batch_leaves_its_partition_unproven_and_the_others_proven(tmp_path, monkeypatch, capsys):
    """A CRC error in one partition of ``users`` is that partition's reason to be unproven (exit
    1); the other partition, and every other topic, still get their proof."""
    manager = open_topic(tmp_path, "users", 2, cleanup_policy="compact", max_compaction_lag_ms=str(HOUR),
                         min_cleanable_dirty_ratio="0.99")
    for p in (0, 1):
        append_each(manager.get_log("users", p), [ProducerRecord(b"k", b"v1", T0), ProducerRecord(b"k", b"v2", T0)],
                    now=T0)
        manager.get_log("users", p).roll()
    manager.close()
    flip_last_byte(tmp_path / "users-1" / f"{0:020d}.log", 0)
    now = str(T0 + 2 * HOUR)
    for args in ([], ["--topic", "users"]):
        code, data, err = _report(tmp_path, monkeypatch, capsys, "--now-ms", now, *args)
        assert code == 1 and not data["ok"] and err == "", (args, err)
        by_partition = {p["partition"]: p for p in data["partitions"]}
        assert by_partition[0]["ok"] is False and by_partition[0]["remnants"] == 1  # proven: one overdue
        assert by_partition[1]["ok"] is False and by_partition[1]["remnants"] is None
        assert "CRC" in by_partition[1]["unproven"] or "crc" in by_partition[1]["unproven"].lower()
        code, out, _ = run_logctl(tmp_path, monkeypatch, capsys, "erasure-report", "--now-ms", now, *args)
        assert code == 1 and "users-0: NOT ERASED: 1 record(s)" in out
        assert "users-1: UNPROVEN: " in out
    # --partition reports the one asked for
    code, data, _ = _report(tmp_path, monkeypatch, capsys, "--now-ms", now, "--topic", "users", "--partition", "0")
    assert code == 1 and [p["partition"] for p in data["partitions"]] == [0]
    code, data, _ = _report(tmp_path, monkeypatch, capsys, "--now-ms", now, "--topic", "users", "--partition", "1")
    assert code == 1 and [p["partition"] for p in data["partitions"]] == [1] and data["partitions"][0]["unproven"]


def test_a_delete_policy_topic_is_refused_as_having_no_bound_to_prove(tmp_path, monkeypatch, capsys):
    """A ``cleanup.policy=delete`` topic's records leave by retention, never by compaction: asking
    to prove ``max.compaction.lag.ms`` for it is refused in one line that says so (exit 1, as
    for any topic the report cannot prove), while the all-topics report leaves it out."""
    open_topic(tmp_path, "events", 1, cleanup_policy="delete").close()
    code, out, err = run_logctl(tmp_path, monkeypatch, capsys, "erasure-report", "--topic", "events")
    assert code == 1 and out == ""
    assert err == ("error: topic events has cleanup.policy=delete: its records leave by retention (retention.ms, "
                   "retention.bytes), not compaction, so there is no max.compaction.lag.ms bound to prove\n")
    code, out, _ = run_logctl(tmp_path, monkeypatch, capsys, "erasure-report")
    assert code == 0 and out == "no compacted partitions\n"
