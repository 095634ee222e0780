"""The cleaning report across topics (``logic/report.py``) over real logs' states, and as the state
sensor records it on a real instance."""

from __future__ import annotations

import time

import dagster as dg
import pytest

from platform_assets.defs.assets import REPORT_KEY
from platform_assets.logic.log_state import read_states
from platform_assets.logic.report import cleaning_report
from platform_assets.tools.workload import produce
from storage_engine import native
from storage_engine.log.append_validation import ProducerRecord
from storage_engine.logdir.manager import LogManager
from tests.helpers.engine import append_each
from tests.helpers.platform import COMPACTED, DELETE, apply_partition_requests, definitions_for, tick

NOW = int(time.time() * 1000)
HOUR_MS = 3_600_000


@pytest.fixture
def logs(tmp_path):
    """orders (0 and 2 dirty: WARN; 1 clean), clicks (expired segments: WARN), and
    users, whose partition 0 holds records written an hour ago under max.compaction.lag.ms of a
    minute (ERROR: an erasure deadline missed) and partition 1 nothing."""
    root = tmp_path / "logs"
    with LogManager([root]) as manager:
        produce(manager, [COMPACTED, DELETE], now_ms=NOW)
        manager.admin.create_topic("users", 2, {"cleanup.policy": "compact", "segment.bytes": "2000",
                                                "min.cleanable.dirty.ratio": "0.99", "max.compaction.lag.ms": "60000"})
        append_each(manager.get_log("users", 0),
                    [ProducerRecord(f"u{i % 50}".encode(), b"x" * 30, NOW - HOUR_MS + i) for i in range(120)])
    return root


def _report(logs, unreadable=None):
    with LogManager([logs], read_only=True) as manager:
        return cleaning_report(read_states(manager, now_ms=NOW), unreadable or {})


def test_the_partitions_that_need_cleaning_worst_first_and_every_partition_counted(logs):
    report = _report(logs, {("orders", 7): "a | b: not a segment file name"})
    assert [(r.topic, r.partition, r.verdict) for r in report.rows] == [
        ("orders", 7, "unreadable"), ("users", 0, "error"),
        # WARN: the dirtiest first (both orders partitions are wholly dirty: by name), then retention
        ("orders", 0, "warn"), ("orders", 2, "warn"), ("clicks", 0, "warn"), ("clicks", 1, "warn")]
    assert report.counts == {"unreadable": 1, "error": 1, "warn": 4, "ok": 2}
    assert report.topics == 3 and report.partitions == 8
    users = report.rows[1]
    assert users.deadline_ms is not None and users.deadline_ms < NOW  # missed
    assert users.reason.startswith("max.compaction.lag.ms: NOT ERASED: ")
    assert report.rows[4].deletable_bytes > 0 and report.rows[4].reason.startswith("retention: ")

    metadata = report.metadata()
    assert {k: metadata[k] for k in ("partitions_unreadable", "partitions_error", "partitions_warn", "partitions_ok",
                                     "topics", "partitions")} == {
        "partitions_unreadable": 1, "partitions_error": 1, "partitions_warn": 4, "partitions_ok": 2,
        "topics": 3, "partitions": 8}
    assert metadata["record core"].value == native.status().describe()  # this process's: it read the logs
    assert metadata["deletable_mb"] > 0 and metadata["earliest_deadline"].value == users.deadline_ms / 1000
    table = metadata["report"].value.splitlines()
    assert table[0] == "**1 unreadable, 1 error, 4 warn, 2 ok, of 8 partition(s) in 3 topic(s)**"
    assert table[2] == "| topic | partition | verdict | reason | deadline | dirty ratio | deletable |"
    # a | in a reason is escaped, or it would end the cell
    assert table[4] == "| orders | 7 | UNREADABLE | cannot be read: a \\| b: not a segment file name |  |  |  |"
    assert table[5].startswith("| users | 0 | ERROR | max.compaction.lag.ms: NOT ERASED: ")
    assert table[5].endswith(f" | {time.strftime('%Y-%m-%dT%H:%M', time.gmtime(users.deadline_ms / 1000))}"
                             f"{time.strftime(':%SZ', time.gmtime(users.deadline_ms / 1000))} | 1.000 |  |")


def test_the_table_is_bounded_and_says_how_many_more(logs):
    report = _report(logs)
    lines = report.markdown(max_rows=2).splitlines()
    assert [line.split(" | ")[0] for line in lines[4:6]] == ["| users", "| orders"]
    assert lines[-1] == "... and 3 more" and len(lines) == 8


def test_nothing_to_clean_says_so(tmp_path):
    root = tmp_path / "logs"
    with LogManager([root]) as manager:
        manager.admin.create_topic("quiet", 2, {"cleanup.policy": "compact"})
    report = _report(root)
    assert not report.rows
    assert report.markdown() == "Nothing needs cleaning: 0 unreadable, 0 error, 0 warn, 2 ok, of 2 partition(s) in " \
                                "1 topic(s)."


def test_the_state_sensor_records_the_report_with_each_change_only(logs):
    defs, settings = definitions_for(logs)
    with dg.instance_for_test() as instance:
        first = tick(defs, settings, instance, "log_state_sensor")
        apply_partition_requests(instance, first.dynamic_partitions_requests)
        [report] = [e for e in first.asset_events if isinstance(e, dg.AssetMaterialization)]
        assert report.asset_key == REPORT_KEY and report.metadata["partitions_error"].value == 1
        assert report.metadata["report"].value.startswith("**0 unreadable, 1 error, 4 warn, 2 ok, of 7 partition(s)")
        second = tick(defs, settings, instance, "log_state_sensor", first.cursor)
        assert not second.asset_events  # nothing changed: no report either
        with LogManager([logs]) as manager:
            manager.admin.alter_topic("users", {"max.compaction.lag.ms": str(10 * 24 * HOUR_MS)})
        third = tick(defs, settings, instance, "log_state_sensor", second.cursor)
        [report] = [e for e in third.asset_events if isinstance(e, dg.AssetMaterialization)]
        assert report.metadata["partitions_error"].value == 0 and report.metadata["partitions_warn"].value == 5  # its dirty ratio, 1.0 > 0.99, remains
