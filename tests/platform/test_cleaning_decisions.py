"""The pure decisions behind failed cleanings, run tags and the pause switch."""

from __future__ import annotations

import pytest

from platform_assets.logic.cleaning_failures import (
    MAX_BACKOFF_S,
    PERMANENT,
    RUN_FAILED,
    TRANSIENT,
    error_class,
    failure_kind,
    failures_of_run,
    judge_failures,
)
from platform_assets.logic.cleaning_switch import CleaningSwitch, SwitchValueError, default_switch
from platform_assets.logic.run_tags import start_tags

STATES, FAILED = "logplat/states", "logplat/failed_partitions"
TP = ("orders", 0)


@pytest.mark.parametrize("reason, kind", [
    ("CorruptRecordError: CRC mismatch (file 0.log, position 0, offset 12975)", PERMANENT),
    ("UnknownCompressionError: codec 7", PERMANENT),  # a subclass of CorruptRecordError
    ("LogGapError: offsets 10..19 missing", PERMANENT),
    ("OSError: [Errno 28] No space left on device", TRANSIENT),
    ("CompactionWriteError: disk full", TRANSIENT),
    ("NeedsRecoveryError: interrupted swap", TRANSIENT),
    ("Py4JJavaError: An error occurred while calling o42.collect", TRANSIENT),
    ("something without a class", TRANSIENT),
])
def test_a_failure_is_permanent_only_when_the_bytes_are_bad(reason, kind):
    assert failure_kind(error_class(reason)) == kind


def test_a_run_names_its_failed_partitions_or_fails_them_all():
    tags = {STATES: "0:aa,1:bb-x,2:cc"}
    assert [(f.tp, f.state, f.error) for f in failures_of_run("orders", tags, STATES, FAILED, 5.0)] == [
        (("orders", 0), "aa", RUN_FAILED), (("orders", 1), "bb", RUN_FAILED), (("orders", 2), "cc", RUN_FAILED)]
    named = failures_of_run("orders", {**tags, FAILED: "1:CorruptRecordError"}, STATES, FAILED, 5.0)
    assert [(f.tp, f.kind) for f in named] == [(("orders", 1), PERMANENT)]
    legacy = failures_of_run("orders", {**tags, FAILED: "2"}, STATES, FAILED, 5.0)  # tagged before the class was
    assert [(f.tp, f.kind) for f in legacy] == [(("orders", 2), PERMANENT)]


def _failures(*errors_and_times, state="aa"):
    return [f for error, ended in errors_and_times
            for f in failures_of_run("orders", {STATES: f"0:{state}", FAILED: f"0:{error}"}, STATES, FAILED, ended)]


def test_transient_failures_back_off_doubling_and_capped():
    one = _failures(("OSError", 100.0))
    assert judge_failures(one, {TP: "aa"}, now_s=129.0, base_s=30).held[TP].retry_at_s == 130.0
    assert judge_failures(one, {TP: "aa"}, now_s=130.0, base_s=30).attempts == {TP: 1}
    three = _failures(("OSError", 0.0), (RUN_FAILED, 50.0), ("OSError", 100.0))
    assert judge_failures(three, {TP: "aa"}, now_s=100.0, base_s=30).held[TP].retry_at_s == 220.0  # 30 * 4
    many = _failures(*((RUN_FAILED, float(i)) for i in range(20)))
    assert judge_failures(many, {TP: "aa"}, now_s=0.0, base_s=30).held[TP].retry_at_s == 19.0 + MAX_BACKOFF_S


def test_a_permanent_failure_holds_until_the_state_changes():
    failures = _failures(("OSError", 0.0), ("CorruptRecordError", 10.0))
    verdicts = judge_failures(failures, {TP: "aa"}, now_s=1e9, base_s=30)
    assert verdicts.held[TP].retry_at_s is None and not verdicts.attempts
    assert "1 partition(s) whose cleaning failed" in verdicts.note() and "orders-0 (CorruptRecordError" in verdicts.note()
    fresh = judge_failures(failures, {TP: "bb"}, now_s=0.0, base_s=30)  # a new state: the failures are not its own
    assert not fresh.held and not fresh.attempts and fresh.note() is None


@pytest.mark.parametrize("tags, trigger, reason", [
    ({"dagster/backfill": "abcd"}, "backfill", "backfill abcd of orders partitions 0..2"),
    ({"dagster/schedule_name": "sweep__orders"}, "sweep", "swept by sweep__orders: orders partitions 0..2"),
    ({}, "manual", "materialized by hand (UI or API): orders partitions 0..2"),
])
def test_a_run_gets_the_tags_its_launcher_could_not_set(tags, trigger, reason):
    added = start_tags(tags, "orders", [0, 1, 2], {0: "aa", 1: "bb", 2: "cc"})
    assert added == {"logplat/topic": "orders", "logplat/trigger": trigger, "logplat/reason": reason,
                     "logplat/states": "0:aa,1:bb,2:cc"}


def test_a_sensors_tags_are_kept():
    tags = {"logplat/topic": "orders", "logplat/trigger": "compaction-sensor", "logplat/reason": "dirty",
            "logplat/states": "0:aa-1"}
    assert start_tags(tags, "orders", [0], {0: "aa"}) == {}


def test_the_switch_round_trips_and_refuses_what_it_did_not_write():
    switch = CleaningSwitch(paused=True, reason="disk swap", at_ms=0)
    assert CleaningSwitch.parse(switch.dump()) == switch
    assert switch.skip_reason() == "cleaning paused at 1970-01-01T00:00:00Z: disk swap (launch resume_cleaning to resume)"
    assert not default_switch("running").paused and default_switch("paused").paused
    with pytest.raises(SwitchValueError, match="logplat/cleaning_switch holds 'yes'"):
        CleaningSwitch.parse("yes")
