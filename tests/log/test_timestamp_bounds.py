"""KIP-937's timestamp bounds on an append: ``message.timestamp.after.max.ms`` (an hour by default
in Kafka 4) and ``message.timestamp.before.max.ms`` against the broker clock (``now_ms``,
``--now-ms``), refused in a 4.4 broker's words (``tests/live_kafka/test_kafka4_semantics.py``
reads them from one)."""

from __future__ import annotations

import json

import pytest

from storage_engine.config.topic import LogConfig
from storage_engine.errors import InvalidRecordError, InvalidTimestampError
from storage_engine.limits import LONG_MAX
from storage_engine.log.append_validation import ProducerRecord, build_batch, validate_producer_batch
from storage_engine.record import CompressionType, Record, decode_batch, encode_batch, scan_batches, verify_batch
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


def _producer_batch(timestamps: list[int], codec: CompressionType = CompressionType.NONE, *,
                    header_max: int | None = None, keys: list[bytes | None] | None = None) -> bytes:
    """A producer's batch; ``header_max`` is the max timestamp its header claims (by default the
    records' true one)."""
    keys = keys or [b"k"] * len(timestamps)
    return encode_batch([Record(i, ts, k, b"v") for i, (ts, k) in enumerate(zip(timestamps, keys, strict=True))],
                        base_offset=0, compression=codec, max_timestamp=header_max)


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


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.GZIP])
def test_a_header_understating_its_max_timestamp_is_refused_past_the_bound(codec: CompressionType) -> None:
    """Kafka's LogValidator reads every record's timestamp, never the header's claim: a producer
    header saying NOW hides nothing."""
    data = _producer_batch([NOW, NOW + HOUR + 1, NOW], codec, header_max=NOW)
    with pytest.raises(InvalidTimestampError) as info:
        validate_producer_batch(data, base_offset=5, config=LogConfig(), now_ms=NOW, tp="t-0")
    assert str(info.value) == _refusal(NOW + HOUR + 1, 1, NOW - LONG_MAX, NOW + HOUR)


@pytest.mark.parametrize("after_max_ms", [HOUR, LONG_MAX])
@pytest.mark.parametrize("header_max", [NOW, NOW + 10 * HOUR])
def test_the_max_timestamp_kept_is_the_records_true_one(after_max_ms: int, header_max: int) -> None:
    """Under- or overstated, the header's max timestamp is rewritten to the records' (Kafka's
    ``setMaxTimestamp``, CRC recomputed), with or without a bound: ``.timeindex`` and time
    retention read it. An overstating header is no refusal: no record is out of range."""
    data = _producer_batch([NOW - 5, NOW + HOUR, NOW], header_max=header_max)
    config = LogConfig(message_timestamp_after_max_ms=after_max_ms)
    batch = validate_producer_batch(data, base_offset=5, config=config, now_ms=NOW, tp="t-0")
    (raw,) = scan_batches(bytes(batch.data))
    verify_batch(raw)
    assert (batch.max_timestamp, raw.header.max_timestamp, batch.offset_of_max_timestamp) == (NOW + HOUR,) * 2 + (7,)
    assert [(r.offset, r.timestamp) for r in decode_batch(raw)] == [(5, NOW - 5), (6, NOW + HOUR), (7, NOW)]


def test_a_log_indexes_the_true_max_timestamp(tmp_path) -> None:
    with open_topic(tmp_path) as manager:
        log = manager.get_log("t", 0)
        info = log.append_batch(_producer_batch([NOW, NOW + HOUR - 1], header_max=NOW), now=NOW)
        assert info.max_timestamp == NOW + HOUR - 1
        assert log.offset_for_timestamp(NOW + 1) == (NOW + HOUR - 1, 1)


def test_only_minus_one_is_exempt_from_the_bounds() -> None:
    """Kafka exempts ``RecordBatch.NO_TIMESTAMP`` alone: -2 is an hour-bound timestamp like any other."""
    bounded = LogConfig(message_timestamp_before_max_ms=HOUR)
    for timestamps in ([-1, NOW], [-1]):
        batch = validate_producer_batch(_producer_batch(timestamps), base_offset=0, config=bounded, now_ms=NOW,
                                        tp="t-0")
        assert batch.max_timestamp == max(timestamps)
    with pytest.raises(InvalidTimestampError) as info:
        validate_producer_batch(_producer_batch([NOW, -2]), base_offset=0, config=bounded, now_ms=NOW, tp="t-0")
    assert str(info.value) == _refusal(-2, 1, NOW - HOUR, NOW + HOUR)
    with pytest.raises(InvalidTimestampError):
        _build([-2], bounded)
    only_minus_two = encode_batch([Record(0, -2, b"k", b"v")], base_offset=0, base_timestamp=0)  # a raw batch
    unbounded_past = validate_producer_batch(only_minus_two, base_offset=0, config=LogConfig(), now_ms=NOW, tp="t-0")
    assert unbounded_past.max_timestamp == -1  # Kafka's maxBatchTimestamp starts at NO_TIMESTAMP


def test_a_compacted_topic_refuses_a_keyless_record_of_a_kept_batch() -> None:
    data = _producer_batch([NOW, NOW], keys=[b"k", None])
    with pytest.raises(InvalidRecordError, match=r"without key in topic partition t-0 \(record 1\)"):
        validate_producer_batch(data, base_offset=0, config=LogConfig(cleanup_policy="compact"), now_ms=NOW,
                                tp="t-0")


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
