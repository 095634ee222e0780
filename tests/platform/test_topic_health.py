"""``topic_health``'s rollup of a topic's partition verdicts (``logic/topic_health.py``)."""

from __future__ import annotations

import dagster as dg

from platform_assets.logic.topic_health import (
    ERROR,
    MAX_DESCRIPTION,
    MISSING,
    PASSED,
    PENDING,
    UNREADABLE,
    WARN,
    PartitionVerdict,
    topic_health,
    verdict_of,
)

CORRUPT = "last cleaning failed: CorruptRecordError: batch at offset 0 of orders-1 fails its CRC"


def test_an_error_anywhere_fails_the_topic_as_error_naming_the_worst_partitions_first():
    health = topic_health([PartitionVerdict("2", WARN, "cleaning due: min.cleanable.dirty.ratio"),
                           PartitionVerdict("0", PASSED, "nothing due"),
                           PartitionVerdict("1", ERROR, CORRUPT)])
    assert not health.passed and health.severity is dg.AssetCheckSeverity.ERROR
    assert health.description() == (f"2 of 3 partition(s) need attention: ERROR 1 (1: {CORRUPT}), "
                                    "WARN 1 (2: cleaning due: min.cleanable.dirty.ratio)")
    metadata = health.metadata()
    assert (metadata["partitions"], metadata["partitions_error"], metadata["partitions_warn"],
            metadata["partitions_passed"], metadata["partitions_unreadable"]) == (3, 1, 1, 1, 0)
    assert metadata["failing_partitions"].value == "1, 2"


def test_warn_only_is_a_warn_and_an_unreadable_partition_is_an_error():
    warn = topic_health([PartitionVerdict("0", PASSED), PartitionVerdict("1", WARN, "retention: 1 segment(s)")])
    assert not warn.passed and warn.severity is dg.AssetCheckSeverity.WARN
    assert warn.description().startswith("1 of 2 partition(s) need attention: WARN 1 (1: retention")
    unreadable = topic_health([PartitionVerdict("3", UNREADABLE, "cannot be read: a symlink"),
                               PartitionVerdict("1", WARN, "due")])
    assert unreadable.severity is dg.AssetCheckSeverity.ERROR
    assert unreadable.description().startswith("2 of 2 partition(s) need attention: UNREADABLE 1 (3: cannot")


def test_passed_when_nothing_fails_counting_what_has_no_current_result():
    health = topic_health([PartitionVerdict("0", PASSED), PartitionVerdict("1", MISSING, "materialized since"),
                           PartitionVerdict("2", PENDING, "planned by run abcd1234")])
    assert health.passed
    assert health.description() == ("1 of 3 partition(s) passed: PENDING 1 (2: planned by run abcd1234), "
                                    "MISSING 1 (1: materialized since)")
    assert topic_health([]).passed and topic_health([]).description() == "no partition has a log_health result yet"


def test_partitions_are_named_in_numeric_order_at_most_three_per_level_and_the_text_is_bounded():
    health = topic_health(PartitionVerdict(str(p), WARN, "x" * 400) for p in (10, 2, 1, 30, 4))
    text = health.description()
    assert len(text) <= MAX_DESCRIPTION
    assert text.startswith("5 of 5 partition(s) need attention: WARN 5 (1: xxx")
    assert text.index("(1: ") < text.index("; 2: ") < text.index("; 4: ") and "; 2 more)" in text
    assert "10: " not in text
    many = topic_health(PartitionVerdict(str(p), level, "y" * 400) for p in range(1000)
                        for level in (ERROR, WARN, UNREADABLE, PENDING, MISSING))
    assert len(many.description()) <= MAX_DESCRIPTION and many.description().endswith("...")


def test_a_recorded_evaluation_becomes_a_verdict_without_its_partition_prefix():
    error = verdict_of("1", passed=False, severity=dg.AssetCheckSeverity.ERROR, description=f"partition 1: {CORRUPT}",
                       status="error")
    assert error == PartitionVerdict("1", ERROR, CORRUPT)
    assert verdict_of("2", passed=False, severity=dg.AssetCheckSeverity.WARN, description="partition 2: due",
                      status="warn").level == WARN
    assert verdict_of("3", passed=False, severity=dg.AssetCheckSeverity.ERROR, description="cannot be read: x",
                      status="unreadable").level == UNREADABLE
    assert verdict_of("0", passed=True, severity=dg.AssetCheckSeverity.WARN, description="partition 0: ok",
                      status="ok") == PartitionVerdict("0", PASSED, "ok")


def test_the_digest_follows_what_the_result_shows():
    one = topic_health([PartitionVerdict("0", PASSED, "a"), PartitionVerdict("1", WARN, "due")])
    same = topic_health([PartitionVerdict("1", WARN, "due"), PartitionVerdict("0", PASSED, "a")])
    other = topic_health([PartitionVerdict("0", PASSED, "a"), PartitionVerdict("1", PASSED, "due")])
    assert one.digest() == same.digest() != other.digest() and len(one.digest()) == 12
