"""The platform's pure decisions: partition key order, names, cron, run bookkeeping, check
verdicts, cursors. Fast; no Dagster instance, no Spark."""

from __future__ import annotations

from dataclasses import replace

import dagster as dg
import pytest

from platform_assets.defs.cleanup import retention_job_needed
from platform_assets.defs.schedules import cron_for_interval_ms
from platform_assets.defs.sensors import busy_logs
from platform_assets.logic.catalog import safe_name
from platform_assets.logic.check_outcomes import (
    INDEXES_AGREE,
    KEYS_UNIQUE,
    LATEST_VALUES,
    OFFSETS_INCREASE,
    evaluate_checks,
)
from platform_assets.logic.log_state import (
    PartitionState,
    config_token,
    deadline_urgent,
    due_for_compaction,
    due_for_retention,
    state_of,
)
from platform_assets.logic.observation_cursor import ObservationCursor
from platform_assets.logic.partition_keys import KeyUpdate, partition_number, plan_key_update
from platform_assets.logic.settings import PlatformSettings
from spark_jobs.reads import Digest, Duplicates, Verification, split_problems
from storage_engine.cleaner.plan import ErasureDeadline, LogToClean, max_compaction_delay_ms
from storage_engine.config.broker import build_log_config, retention_check_interval_ms
from storage_engine.config.topic import LogConfig
from storage_engine.errors import ConfigError
from storage_engine.log.append_validation import ProducerRecord
from storage_engine.log.stats import live_stats
from tests.helpers.engine import open_topic


def _apply(existing: list[str], update: KeyUpdate) -> list[str]:
    """As Dagster applies the requests: a delete removes every row holding the key."""
    kept = [k for k in existing if k not in set(update.delete)]
    return kept + list(update.add)


@pytest.mark.parametrize(
    "existing, on_disk, expected",
    [
        ([], [2, 0, 1], ["0", "1", "2"]),
        (["0", "1"], [0, 1, 2, 10], ["0", "1", "2", "10"]),  # new partitions go at the end
        (["0", "1", "10"], [0, 1, 10, 4], ["0", "1", "4", "10"]),  # a gap filled: 10 re-added after 4
        (["0", "1"], [0], ["0", "1"]),  # a partition gone from disk keeps its key (and its history)
        (["0", "7", "1", "x"], [0, 1], ["0", "1"]),  # keys typed into the UI that name no partition go
        (["0", "1", "1", "2"], [0, 1, 2], ["0", "1", "2"]),  # a key listed twice is repaired
    ],
)
def test_partition_keys_stay_in_numeric_order(existing, on_disk, expected):
    keys = list(existing)
    history = {"1"}  # partition 1 was materialized once
    for _ in range(2):  # a gap takes two ticks: delete what follows it, then add it back
        update = plan_key_update(keys, on_disk, history)
        assert not set(update.add) & set(update.delete)  # Dagster refuses both in one tick
        keys = _apply(keys, update)
    assert keys == expected
    assert plan_key_update(expected, on_disk, history) == KeyUpdate()


def test_keys_already_in_order_need_no_update_and_foreign_keys_with_a_history_are_left_alone():
    assert not plan_key_update(["0", "1", "2"], [0, 1, 2])
    assert plan_key_update(["0", "manual", "1"], [0, 1, 2], {"manual"}) == KeyUpdate(add=("2",))
    assert plan_key_update(["0", "manual", "1"], [0, 1, 2]) == KeyUpdate(delete=("manual",), add=("2",))


def test_partition_keys_are_plain_numbers():
    assert partition_number("12") == 12
    for bad in ("012", "-1", "a", "", "١", "2147483648"):  # "١": an Arabic-Indic 1, which int() reads
        with pytest.raises(ValueError):
            partition_number(bad)


def test_safe_names_are_legal_and_distinct():
    assert safe_name("orders") == "orders"
    names = {safe_name(t) for t in ("a.b", "a-b", "a_b")}
    assert len(names) == 3 and all(n.replace("_", "").isalnum() for n in names)
    # a legal name spelled as another topic's changed name used to keep it: two jobs of one name
    changed = safe_name("orders.state")
    assert changed.startswith("orders_state_") and safe_name(changed) not in (changed, "orders.state")
    assert safe_name("orders_state_v2") == "orders_state_v2" and safe_name("x_12345") == "x_12345"


@pytest.mark.parametrize(
    "interval_ms, cron",
    [(300_000, "*/5 * * * *"), (1_000, "* * * * *"), (60_000, "* * * * *"), (7_200_000, "0 */2 * * *"),
     (3_600_000, "0 * * * *"), (172_800_000, "0 0 * * *")],
)
def test_sweep_cron_follows_the_retention_check_interval(interval_ms, cron):
    assert cron_for_interval_ms(interval_ms) == cron


@pytest.mark.parametrize("raw", ["0", "-1", "1_000", "ten", "\u0663", "2147483648", "9" * 5000])
def test_a_platform_setting_from_the_environment_is_a_plain_positive_number(monkeypatch, tmp_path, raw):
    monkeypatch.setenv("LOGPLAT_LOG_DIRS", str(tmp_path))
    monkeypatch.setenv("LOGPLAT_SENSOR_INTERVAL_S", raw)
    with pytest.raises(ValueError, match=r"^LOGPLAT_SENSOR_INTERVAL_S='.*': expected a whole number from 1 to 2147483647$"):
        PlatformSettings.from_env()
    monkeypatch.setenv("LOGPLAT_SENSOR_INTERVAL_S", " 45 ")
    assert PlatformSettings.from_env().sensor_interval_s == 45


def test_retention_check_interval_comes_from_the_broker_properties():
    assert retention_check_interval_ms({}) == 300_000
    assert retention_check_interval_ms({"log.retention.check.interval.ms": "60000"}) == 60_000
    for bad in ("0", "1_000", "ten", str(2**63)):  # the engine's own rule for a LONG broker key
        with pytest.raises(ConfigError, match=f"Invalid value '{bad}' for configuration log.retention.check.interval.ms"):
            PlatformSettings(log_dirs=("x",), broker_props={"log.retention.check.interval.ms": bad})
    with pytest.raises(ValueError, match="LOGPLAT_AUTOMATION"):
        PlatformSettings(log_dirs=("x",), automation="sometimes")
    with pytest.raises(ValueError, match="LOGPLAT_CLEANING='stopped': expected one of running, paused"):
        PlatformSettings(log_dirs=("x",), cleaning="stopped")


def _run(tags: dict[str, str], asset: str | None = None) -> dg.DagsterRun:
    selection = frozenset([dg.AssetKey(["logs", asset])]) if asset else None
    return dg.DagsterRun(job_name="j", run_id=f"r{len(tags)}{asset}", tags=tags, asset_selection=selection)


def test_runs_in_flight_mark_their_partitions_busy():
    busy = busy_logs([
        _run({"logplat/topic": "a", "dagster/partition": "3"}),
        _run({"dagster/asset_partition_range_start": "1", "dagster/asset_partition_range_end": "2"}, asset="b"),
        _run({}, asset="c"),  # a run over a whole topic
    ])
    assert ("a", 3) in busy and ("a", 4) not in busy
    assert ("b", 1) in busy and ("b", 2) in busy and ("b", 3) not in busy
    assert ("c", 99) in busy and ("d", 0) not in busy


def _state(partition: int = 0, *, checkpoint: int | None = 10, state_hash: str = "h") -> PartitionState:
    return PartitionState("t", partition, True, False, 100, 2, 0, checkpoint, 10, state_hash, None, None)


def test_the_observation_cursor_reports_only_changes_and_forgets_gone_partitions():
    cursor = ObservationCursor()
    a, b = _state(0), _state(1)
    assert cursor.changed(a)
    cursor.record(a)
    cursor.record(b)
    assert not cursor.changed(a)
    assert cursor.changed(_state(0, state_hash="other"))
    cursor.keep_only([a.tp])
    again = ObservationCursor.parse(cursor.dump())
    assert not again.changed(a) and again.changed(b)
    assert ObservationCursor.parse("not json").seen == {}


def test_the_cursor_keeps_where_topic_health_read_to_and_each_topics_rollup():
    cursor = ObservationCursor()
    assert cursor.health_after is None and cursor.rollup_changed("t", "abc")
    cursor.health_after = 42
    cursor.record_rollup("t", "abc")
    cursor.record_rollup("gone", "def")
    cursor.keep_only([_state(0).tp])  # topic "gone" has no partition left: its rollup goes
    again = ObservationCursor.parse(cursor.dump())
    assert again.health_after == 42 and again.rollups == {"t": "abc"}
    assert not again.rollup_changed("t", "abc") and again.rollup_changed("t", "abd")


def test_verify_problems_split_by_the_file_they_name():
    problems = ["/d/00000000000000000000.log: offsets go backwards at position 10: 4 after 7",
                "/d/00000000000000000000.index: entry 1 (offset 5) points at position 9, not a batch start",
                "/d/00000000000000000000.timeindex: entry 0 timestamp 9 goes backwards",
                "/d/00000000000000000000.log: index unreadable: bad"]
    log, index = split_problems(problems)
    assert log == (problems[0],)
    assert index == tuple(problems[1:])


def test_check_verdicts():
    clean = evaluate_checks(0, _state(), Duplicates(), Verification(10, (), ()), (Digest(3, 7), Digest(3, 7)))
    assert {o.name: o.passed for o in clean} == {KEYS_UNIQUE: True, OFFSETS_INCREASE: True, INDEXES_AGREE: True,
                                                 LATEST_VALUES: True}
    broken = evaluate_checks(0, _state(), Duplicates(keys=1, records=3), Verification(10, ("x",), ("y",)),
                             (Digest(3, 7), Digest(3, 8)))
    assert not any(o.passed for o in broken)
    assert next(o for o in broken if o.name == KEYS_UNIQUE).metadata["extra_records"] == 2
    alone = evaluate_checks(0, _state(), Duplicates(), Verification(10, (), ()), None)
    assert LATEST_VALUES not in {o.name for o in alone}
    # equal digests of a read that stopped at a damaged batch prove nothing about the rest
    stopped = evaluate_checks(0, _state(), Duplicates(), Verification(10, (), ()), (Digest(3, 7), Digest(3, 7)),
                              "CRC mismatch at position 400")
    latest = next(o for o in stopped if o.name == LATEST_VALUES)
    assert not latest.passed and latest.description.endswith("stopped at a damaged batch: CRC mismatch at position 400")


def _candidate(partition: int, ratio: float, time_left_ms: int | None = None, lag_ms: int = 60_000) -> PartitionState:
    """A compacted partition at ``ratio``; with ``time_left_ms``, its erasure deadline that far
    away (negative: missed by that much) under ``max.compaction.lag.ms`` = ``lag_ms``."""
    deadline = None if time_left_ms is None else ErasureDeadline(10, 0, lag_ms, time_left_ms, lag_ms)
    ltc = LogToClean("t", partition, 0, 0, 100, 0, 100, int(1000 * (1 - ratio)), int(1000 * ratio),
                     max_compaction_delay_ms(deadline), 0.5, False, "active segment", deadline)
    return PartitionState("t", partition, True, False, 1000, 3, 0, 0, 100, "h", ltc, None)


def test_compaction_takes_the_earliest_deadline_before_the_dirtiest():
    """Missed or half-used erasure deadlines first, least time left first; then dirtiest first;
    a partition neither dirty enough nor near its deadline is not due."""
    states = [_candidate(0, 0.9), _candidate(1, 0.2, -10_000), _candidate(2, 0.6, -100_000), _candidate(3, 0.1),
              _candidate(4, 0.7), _candidate(5, 0.1, 20_000), _candidate(6, 0.1, 50_000)]
    assert [s.partition for s in due_for_compaction(states)] == [2, 1, 5, 0, 4]
    assert [deadline_urgent(s) for s in states] == [False, True, True, False, False, True, False]
    assert states[5].compaction_due and not states[5].candidacy.due  # due by its deadline, not by Kafka's rule
    assert not states[6].compaction_due


def test_a_log_written_again_with_the_same_records_is_a_new_state(tmp_path):
    """A fresh log dir, or a topic deleted and created again, with the same records as one
    cleaned before had the same state tokens, so the sensors found every run "already ran in
    its current state" and nothing was cleaned. Where and when the segments were written are
    part of the state; reading the same log twice gives the same state."""
    import time

    from platform_assets.logic.log_state import read_states
    from storage_engine.log.append_validation import ProducerRecord
    from storage_engine.logdir.manager import LogManager

    def write(root, topic="t"):
        with LogManager([root]) as manager:
            manager.admin.create_topic(topic, 1, {"cleanup.policy": "compact", "segment.bytes": "300"})
            log = manager.get_log(topic, 0)
            for i in range(12):
                log.append([ProducerRecord(f"k{i % 3}".encode(), b"v" * 40, 1000 + i)], now=1000 + i)

    def state(root):
        with LogManager([root], read_only=True) as manager:
            [s] = read_states(manager, now_ms=2000)
            return s.state_hash

    write(tmp_path / "a")
    first = state(tmp_path / "a")
    assert state(tmp_path / "a") == first  # stable while nothing changes
    time.sleep(0.05)
    write(tmp_path / "b")
    assert state(tmp_path / "b") != first  # the same records elsewhere
    with LogManager([tmp_path / "a"]) as manager:
        manager.admin.delete_topic("t")
    write(tmp_path / "a")
    assert state(tmp_path / "a") != first  # the same records again, in the same place


def test_a_partitions_state_depends_on_the_configs_set_not_on_the_engines_fields():
    """The state hash held ``repr(LogConfig)``: a setting a new version adds, at its default,
    changed every partition's state at the upgrade, dropping every failure hold and every "already
    cleaned in this state" at once. Only the settings that differ from the defaults count."""
    assert config_token(LogConfig()) == []
    changed = replace(LogConfig(), retention_ms=1, cleanup_policy=("compact",))
    assert config_token(changed) == [("cleanup.policy", "('compact',)"), ("retention.ms", "1")]


@pytest.mark.parametrize(("policy", "without", "with_deletable"), [
    ("delete", True, True), ("compact,delete", False, False), ("compact", False, True),
    ("", False, True),  # KIP-1161: kept forever, but a delete-records log start offset still frees segments
])
def test_a_run_calls_the_retention_job_as_the_policy_says(policy, without, with_deletable):
    config = build_log_config(topic_overrides={"cleanup.policy": policy})
    assert (retention_job_needed(config, 0), retention_job_needed(config, 2)) == (without, with_deletable)


def test_a_kept_forever_partition_never_needs_cleaning(tmp_path):
    """The sensors' verdicts on an empty cleanup.policy past its retention.ms and retention.bytes."""
    with open_topic(tmp_path, cleanup_policy="", retention_ms=1, retention_bytes=1, segment_bytes=200) as m:
        log = m.get_log("t", 0)
        for i in range(5):
            log.append([ProducerRecord(b"k%d" % i, b"x" * 50, 1)], now=1)
        state = state_of(live_stats(log), log.config, now_ms=10**9)
    assert len(log.segments) > 2 and state.deletable_segments == 0
    assert not state.needs_cleaning and due_for_retention([state]) == [] and due_for_compaction([state]) == []
