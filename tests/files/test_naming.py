"""File and directory naming rules (spec 1.14, Kafka's topic name rules)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from storage_engine.errors import InvalidTopicError, LogError
from storage_engine.files.naming import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    MAX_TOPIC_LENGTH,
    SNAPSHOT_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    filename_prefix_from_offset,
    offset_from_file_name,
    parse_partition_dir,
    parse_partition_number,
    partition_dir_name,
    segment_file,
    validate_topic_name,
)

topic_names = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-",
    min_size=1,
    max_size=MAX_TOPIC_LENGTH,
).filter(lambda t: t not in (".", ".."))


def test_suffixes_are_kafkas() -> None:
    assert (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, SNAPSHOT_SUFFIX) == (
        ".log",
        ".index",
        ".timeindex",
        ".txnindex",
        ".snapshot",
    )
    assert (DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX) == (".deleted", ".cleaned", ".swap")


@pytest.mark.parametrize(
    "name", ["a", "my-topic", "__consumer_offsets", "A.b_c-D9", "x" * MAX_TOPIC_LENGTH, "..."]
)
def test_valid_topic_names(name: str) -> None:
    validate_topic_name(name)


@pytest.mark.parametrize(
    ("name", "rule"),
    [
        ("", "empty"),
        (".", "'.' or '..'"),
        ("..", "'.' or '..'"),
        ("x" * (MAX_TOPIC_LENGTH + 1), "longer than 249"),
        ("has space", "character other than"),
        ("slash/name", "character other than"),
        ("ünïcode", "character other than"),
        ("tab\t", "character other than"),
    ],
)
def test_invalid_topic_names_name_the_rule(name: str, rule: str) -> None:
    with pytest.raises(InvalidTopicError) as info:
        validate_topic_name(name)
    assert rule in str(info.value)
    assert repr(name) in str(info.value)
    assert isinstance(info.value, LogError)


def test_partition_dir_name() -> None:
    assert partition_dir_name("my-topic", 0) == "my-topic-0"
    assert partition_dir_name("t", 12) == "t-12"
    with pytest.raises(InvalidTopicError, match="out of range"):
        partition_dir_name("t", -1)
    with pytest.raises(InvalidTopicError):
        partition_dir_name("bad topic", 0)
    with pytest.raises(InvalidTopicError):
        partition_dir_name("t", 2**31)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("my-topic-0", ("my-topic", 0)),
        ("__consumer_offsets-49", ("__consumer_offsets", 49)),
        ("a-b-c-12", ("a-b-c", 12)),
        ("x-delete-3", ("x-delete", 3)),
        ("t-0.3b1a2c4d5e6f47a8b9c0d1e2f3a4b5c6-delete", None),
        ("t-0.3b1a2c4d5e6f47a8b9c0d1e2f3a4b5c6-future", None),
        ("t-0.3b1a2c4d5e6f47a8b9c0d1e2f3a4b5c6-stray", None),
        ("t-0-delete", None),
        ("nodash", None),
        ("topic-", None),
        ("-0", None),
        ("topic-x", None),
        ("topic-01", None),
        ("topic--1", ("topic-", 1)),
        ("bad topic-0", None),
        ("t-99999999999", None),
        ("lost+found", None),
        ("t-٣", None),  # a non-ASCII digit
    ],
)
def test_parse_partition_dir(name: str, expected: tuple[str, int] | None) -> None:
    assert parse_partition_dir(name) == expected


@pytest.mark.parametrize("text, expected", [
    ("0", 0), ("42", 42), ("2147483647", 2**31 - 1),
    ("2147483648", None), ("007", None), ("-1", None), ("", None), (" 1", None), ("٣", None), ("1_0", None),
])
def test_one_rule_reads_a_partition_number(text: str, expected: int | None) -> None:
    """Directory names, partition keys and the data source's offsets read numbers by it."""
    assert parse_partition_number(text) == expected


@given(topic_names, st.integers(min_value=0, max_value=2**31 - 1))
def test_partition_dir_round_trip(topic: str, partition: int) -> None:
    assert parse_partition_dir(partition_dir_name(topic, partition)) == (topic, partition)


def test_filename_prefix_is_twenty_digits() -> None:
    assert filename_prefix_from_offset(0) == "00000000000000000000"
    assert filename_prefix_from_offset(368769) == "00000000000000368769"
    assert filename_prefix_from_offset(2**63 - 1) == "09223372036854775807"
    with pytest.raises(ValueError):
        filename_prefix_from_offset(-1)


def test_segment_file(tmp_path: Path) -> None:
    assert segment_file(tmp_path, 42, ".log") == tmp_path / "00000000000000000042.log"
    assert segment_file(tmp_path, 0, ".log.swap").name == "00000000000000000000.log.swap"


@pytest.mark.parametrize(
    ("name", "offset"),
    [
        ("00000000000000000000.log", 0),
        ("00000000000000368769.index", 368769),
        ("00000000000000000036.timeindex.cleaned", 36),
        ("00000000000000020907.log.deleted", 20907),
        ("00000000000000007111-0000000001.checkpoint".replace("-0000000001", ""), 7111),
    ],
)
def test_offset_from_file_name(name: str, offset: int) -> None:
    assert offset_from_file_name(name) == offset


@pytest.mark.parametrize("name", ["leader-epoch-checkpoint", "abc.log", ".log", "12", "-5.log"])
def test_offset_from_file_name_rejects(name: str) -> None:
    with pytest.raises(ValueError) as info:
        offset_from_file_name(name)
    assert name in str(info.value)


@given(st.integers(min_value=0, max_value=2**63 - 1))
def test_offset_name_round_trip(offset: int) -> None:
    assert offset_from_file_name(filename_prefix_from_offset(offset) + ".log") == offset

