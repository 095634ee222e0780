"""KIP-937's timestamp bounds on an append: ``message.timestamp.after.max.ms`` (an hour by default
in Kafka 4) and ``message.timestamp.before.max.ms`` against the broker clock (``now_ms``,
``--now-ms``), refused in a 4.4 broker's words (``tests/live_kafka/test_kafka4_semantics.py``
reads them from one)."""

from __future__ import annotations

import json

import pytest

from storage_engine.config.topic import LogConfig
from storage_engine.errors import InvalidTimestampError
from storage_engine.limits import LONG_MAX
from storage_engine.log.append_validation import ProducerRecord, build_batch, validate_producer_batch
from storage_engine.record import CompressionType, Record, encode_batch
from tests.helpers.cli import run_logctl
from tests.helpers.engine import open_topic

NOW = 1_800_000_000_000
HOUR = 3_600_000


def _refusal(ts: int, offset: int, lower: int, upper: int) -> str:
    return (f"Timestamp {ts} of message with offset {offset} is out of range. "
            f"The timestamp should be within [{lower}, {upper}] in topic partition t-0")


def _build(timestamps: list[int], config: LogConfig) -> None:
    build_batch([ProducerRecord(b"k", b"v", ts) for ts in timestamps], base_offset=7, config=config,
                compression=CompressionType.NONE, now_ms=NOW, tp="t-0")


def _producer_batch(timestamps: list[int], codec: CompressionType = CompressionType.NONE) -> bytes:
    return encode_batch([Record(i, ts, b"k", b"v") for i, ts in enumerate(timestamps)], base_offset=0,
                        compression=codec)


def test_an_hour_ahead_is_accepted_and_a_millisecond_more_refused() -> None:
    config = LogConfig()
    _build([NOW + HOUR, 1], config)  # any age: before.max.ms is unbounded
    with pytest.raises(InvalidTimestampError) as info:
        _build([NOW, NOW, NOW + HOUR + 1], config)
    assert str(info.value) == _refusal(NOW + HOUR + 1, 2, NOW - LONG_MAX, NOW + HOUR)


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.GZIP])
def test_a_producer_batch_is_held_to_the_same_bounds(codec: CompressionType) -> None:
    """The uncompressed batch of the fast path (no record decoded) too: its max timestamp bounds
    every record's."""
    config = LogConfig()
    ok = validate_producer_batch(_producer_batch([NOW, NOW + HOUR], codec), base_offset=5, config=config,
                                 now_ms=NOW, tp="t-0")
    assert (ok.first_offset, ok.max_timestamp) == (5, NOW + HOUR)
    with pytest.raises(InvalidTimestampError) as info:
        validate_producer_batch(_producer_batch([NOW, NOW + HOUR + 1], codec), base_offset=5, config=config,
                                now_ms=NOW, tp="t-0")
    assert str(info.value) == _refusal(NOW + HOUR + 1, 1, NOW - LONG_MAX, NOW + HOUR)


def test_before_max_ms_bounds_the_past() -> None:
    config = LogConfig(message_timestamp_before_max_ms=60_000, message_timestamp_after_max_ms=0)
    _build([NOW - 60_000, NOW], config)
    with pytest.raises(InvalidTimestampError) as info:
        _build([NOW - 60_001], config)
    assert str(info.value) == _refusal(NOW - 60_001, 0, NOW - 60_000, NOW)


def test_bounds_stop_at_a_longs_range_where_javas_sum_wraps() -> None:
    config = LogConfig(message_timestamp_before_max_ms=0, message_timestamp_after_max_ms=LONG_MAX)
    with pytest.raises(InvalidTimestampError) as info:
        _build([NOW - 1], config)
    assert str(info.value) == _refusal(NOW - 1, 0, NOW, LONG_MAX)


def test_log_append_time_is_not_bounded() -> None:
    _build([NOW + 10 * HOUR], LogConfig(message_timestamp_type="LogAppendTime"))


def test_logctl_produce_judges_by_its_now_ms(tmp_path, monkeypatch, capsys) -> None:
    open_topic(tmp_path).close()

    def produce(ts: int) -> tuple[int, str, str]:
        line = json.dumps({"key": "k", "value": "v", "timestamp": ts})
        return run_logctl(tmp_path, monkeypatch, capsys, "produce", "t", "--partition", "0", "--now-ms", str(NOW),
                          stdin=line + "\n")

    assert produce(NOW + HOUR)[0] == 0
    code, out, err = produce(NOW + HOUR + 1)
    assert (code, out) == (1, "")
    assert err.strip() == "error: " + _refusal(NOW + HOUR + 1, 0, NOW - LONG_MAX, NOW + HOUR)
    code, out, _ = run_logctl(tmp_path, monkeypatch, capsys, "consume", "t", "--partition", "0")
    assert [json.loads(line)["timestamp"] for line in out.splitlines()] == [NOW + HOUR]  # the refused one: not written
