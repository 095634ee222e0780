"""Kafka 4 semantics where they touch our configs, judged by a live 4.4 broker: the same input to
the broker and to our engine, the same outcome and, for a refusal, the broker's words.

* KIP-1161: an empty ``cleanup.policy`` keeps forever (``retention.ms`` never deletes);
* KIP-937: ``message.timestamp.after.max.ms`` is an hour by default, and a record past it is
  refused with the broker's ``InvalidTimestampException`` text (likewise ``before.max.ms``),
  even in a raw batch whose header understates its max timestamp; the broker rewrites that
  header to the records' true maximum, byte for byte as our append does;
* KIP-1066: ``cordoned.log.dirs`` gets no new partitions, the ones there keep working, every
  log dir cordoned refuses a new partition, and an entry not in ``log.dirs`` is refused.
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
from kafka.errors import InvalidReplicationFactorError, InvalidTimestampError, for_code
from kafka.net import KafkaNetClient
from kafka.protocol.producer import ProduceRequest

from storage_engine.config.topic import LogConfig
from storage_engine.errors import ConfigError, LogDirsCordonedError
from storage_engine.errors import InvalidTimestampError as OurInvalidTimestampError
from storage_engine.log.append_validation import ProducerRecord, build_batch, validate_producer_batch
from storage_engine.logdir.manager import LogManager
from storage_engine.logdir.placement import check_cordoned_log_dirs
from storage_engine.record import CompressionType, Record, encode_batch, scan_batches
from tests.helpers.kafka_broker import CLUSTER_ID, KafkaBroker, unique_topic

HOUR = 3_600_000
DAY = 24 * HOUR
#: our refusal adds where it happened to the broker's text
TP_SUFFIX = re.compile(r" in topic partition \S+$")


def _wall_ms() -> int:
    return int(time.time() * 1000)


def _broker_produce(broker: KafkaBroker, topic: str, timestamp: int) -> str | None:
    """The broker's refusal of one record at ``timestamp`` (its InvalidTimestampException text), or None."""
    producer = broker.producer()  # one each: a refused batch leaves kafka-python's producer refusing the next
    try:
        producer.send(topic, key=b"k", value=b"v", timestamp_ms=timestamp).get(timeout=30)
        return None
    except InvalidTimestampError as exc:
        return exc.args[0]
    finally:
        producer.close()


def _our_refusal(config: LogConfig, timestamp: int, now_ms: int) -> str | None:
    try:
        build_batch([ProducerRecord(b"k", b"v", timestamp)], base_offset=0, config=config,
                    compression=CompressionType.NONE, now_ms=now_ms, tp="t-0")
        return None
    except OurInvalidTimestampError as exc:
        return TP_SUFFIX.sub("", str(exc))


def _broker_clock(refusal: str, after_max_ms: int) -> int:
    """The broker's clock when it refused: its upper bound less ``message.timestamp.after.max.ms``."""
    return int(re.search(r", (-?\d+)\]$", refusal).group(1)) - after_max_ms


@pytest.mark.parametrize(("configs", "kafka_configs"), [
    (LogConfig(), {}),
    (LogConfig(message_timestamp_before_max_ms=60_000, message_timestamp_after_max_ms=0),
     {"message.timestamp.before.max.ms": "60000", "message.timestamp.after.max.ms": "0"}),
])
def test_timestamp_bounds_and_refusals_are_the_brokers(kafka_broker, configs: LogConfig, kafka_configs) -> None:
    """KIP-937 with Kafka 4's defaults, then with both bounds set: a record just inside is taken
    by both, one outside refused by both in the same words, our clock set to the broker's."""
    topic = unique_topic("kip937")
    kafka_broker.create_topic(topic, kafka_configs)
    after = configs.message_timestamp_after_max_ms
    too_late = _wall_ms() + after + 10 * 60_000  # ten minutes past the bound: no clock skew matters
    refusal = _broker_produce(kafka_broker, topic, too_late)
    assert refusal is not None and refusal.startswith(f"Timestamp {too_late} of message with offset 0 is out of range")
    broker_now = _broker_clock(refusal, after)
    assert _our_refusal(configs, too_late, broker_now) == refusal
    assert _our_refusal(configs, broker_now + after, broker_now) is None  # the bound itself is inside
    assert _our_refusal(configs, broker_now + after + 1, broker_now) is not None
    accepted = []
    old = 1_000  # 1970: too old only when message.timestamp.before.max.ms says so
    old_refusal = _broker_produce(kafka_broker, topic, old)
    if configs.message_timestamp_before_max_ms == LogConfig().message_timestamp_before_max_ms:
        assert old_refusal is None and _our_refusal(configs, old, broker_now) is None
        accepted.append(old)
    else:
        assert old_refusal is not None
        assert _our_refusal(configs, old, _broker_clock(old_refusal, after)) == old_refusal
    inside = _wall_ms() + (after - 10 * 60_000 if after else -10_000)
    assert _broker_produce(kafka_broker, topic, inside) is None
    accepted.append(inside)
    assert [r.timestamp for r in kafka_broker.consume(topic)] == accepted


def _produce_raw(broker: KafkaBroker, topic: str, batch: bytes) -> tuple[str, str | None]:
    """Send ``batch`` as it is in a ProduceRequest (kafka-python's producer always builds its
    own, with a true max timestamp): the partition's error name and the broker's words (its
    first record error's, as kafka-python's producer reports them)."""
    client = KafkaNetClient(bootstrap_servers=broker.bootstrap)
    try:
        node = client.least_loaded_node(bootstrap_fallback=True)
        partition = ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=batch)
        request = ProduceRequest(acks=-1, timeout_ms=30_000, topic_data=[
            ProduceRequest.TopicProduceData(name=topic, partition_data=[partition])], max_version=9)
        response = client.send_and_receive(node, request)
    finally:
        client.close()
    (answer,) = response.responses[0].partition_responses
    words = answer.record_errors[0].batch_index_error_message if answer.record_errors else answer.error_message
    return for_code(answer.error_code).__name__, words


def test_a_header_understating_its_max_timestamp_is_judged_by_its_records(kafka_broker) -> None:
    """A raw batch whose header claims its first record's timestamp as its max: the broker
    refuses the record an hour and ten minutes ahead all the same, and for a batch inside the
    bound stores the true max in the header (CRC recomputed), byte for byte as our append."""
    topic = unique_topic("kip937raw")
    kafka_broker.create_topic(topic, {})
    now = _wall_ms()

    def understated(timestamps: list[int]) -> bytes:
        return encode_batch([Record(i, ts, b"k", b"v") for i, ts in enumerate(timestamps)], base_offset=0,
                            max_timestamp=timestamps[0])

    too_late = now + HOUR + 10 * 60_000
    error, message = _produce_raw(kafka_broker, topic, understated([now, too_late]))
    assert error == "InvalidTimestampError" and message.startswith(f"Timestamp {too_late} of message with offset 1 ")
    with pytest.raises(OurInvalidTimestampError) as ours_refused:
        validate_producer_batch(understated([now, too_late]), base_offset=0, config=LogConfig(),
                                now_ms=_broker_clock(message, HOUR), tp="t-0")
    assert TP_SUFFIX.sub("", str(ours_refused.value)) == message
    kept = understated([now - 5, now + 30 * 60_000, now])
    assert _produce_raw(kafka_broker, topic, kept)[0] == "NoError"
    (theirs,) = scan_batches(next(kafka_broker.partition_dir(topic).glob("*.log")).read_bytes())
    ours = validate_producer_batch(kept, base_offset=0, config=LogConfig(), now_ms=now, tp="t-0")
    assert theirs.header.max_timestamp == ours.max_timestamp == now + 30 * 60_000
    # equal but for the partition leader epoch (bytes 12-16), which the broker stamps and the CRC does not cover
    assert bytes(theirs.data[:12]) + bytes(theirs.data[16:]) == bytes(ours.data[:12]) + bytes(ours.data[16:])


def _begin_offsets(broker: KafkaBroker, topics: list[str]) -> dict[str, int]:
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    try:
        found = consumer.beginning_offsets([TopicPartition(t, 0) for t in topics])
        return {tp.topic: offset for tp, offset in found.items()}
    finally:
        consumer.close()


def _produce_old(broker: KafkaBroker, topics: list[str], old: int) -> None:
    producer = broker.producer()
    for topic in topics:
        for i in range(5):
            producer.send(topic, key=b"k%d" % i, value=b"v", timestamp_ms=old, partition=0)
    producer.flush()
    producer.close()


def _retention_pass_completed(broker: KafkaBroker, old: int) -> None:
    """Wait until the broker's retention has trimmed a ``delete`` topic made now, then another
    made after that.

    Kafka's retention (``LogManager.cleanupLogs``) takes the logs it will go through when a pass
    starts and handles them one by one, so a topic trimmed says nothing of topics later in the
    same pass. The first marker is in no pass that started before this call; the second in no
    pass that started before the first was trimmed: when it is trimmed, the pass that trimmed
    the first (one that started after every record before this call was written) has gone
    through every log."""
    for _ in range(2):
        marker = unique_topic("retention-pass")
        broker.create_topic(marker, {"cleanup.policy": "delete", "retention.ms": "1000"})
        _produce_old(broker, [marker], old)
        deadline = time.monotonic() + 20
        while _begin_offsets(broker, [marker])[marker] < 5:
            assert time.monotonic() < deadline, "the broker's retention never deleted the delete topic's records"
            time.sleep(0.2)


def _placement_in_ours(tmp_path: Path, topics: dict[str, int]) -> dict[str, set[int]]:
    """Which of two log dirs (by index), the first cordoned, our engine puts each topic's
    partitions in."""
    dirs = [tmp_path / f"ours-{i}" for i in range(2)]
    for d in dirs:
        d.mkdir()
    with LogManager(dirs, {"cordoned.log.dirs": str(dirs[0])}) as m:
        for topic, partitions in topics.items():
            m.admin.create_topic(topic, partitions)
        paths = [d.resolve() for d in dirs]
        return {t: {paths.index(loc.log_dir.path) for (tt, _), loc in m.partition_locations().items() if tt == t}
                for t in topics}


def _broker_placement(broker: KafkaBroker, topic: str, partitions: int) -> set[int]:
    return {next(i for i, d in enumerate(broker.log_dirs) if (d / f"{topic}-{p}").is_dir()) for p in range(partitions)}


def test_an_empty_policy_keeps_forever_and_cordoned_log_dirs_get_no_new_partitions(broker_factory, tmp_path) -> None:
    """One broker of two log dirs, restarted with the first cordoned. KIP-1066: a topic made
    before keeps working there; new ones go to the other, in the broker as in ours. KIP-1161:
    beside a ``delete`` topic that retention empties, the empty policy keeps every record."""
    broker = broker_factory("cordoned", log_dir_count=2, overrides={"log.retention.check.interval.ms": "200",
                                                                               "log.initial.task.delay.ms": "0"})
    earlier = unique_topic("earlier")
    broker.create_topic(earlier, partitions=2)
    assert _broker_placement(broker, earlier, 2) == {0, 1}  # one in each: the fewest partitions first
    broker.stop()
    broker.overrides["cordoned.log.dirs"] = str(broker.log_dirs[0])
    broker.start()

    keep, control = unique_topic("keep"), unique_topic("control")
    broker.create_topic(keep, {"cleanup.policy": "", "retention.ms": "1000"})
    broker.create_topic(control, {"cleanup.policy": "delete", "retention.ms": "1000"})
    admin = broker.admin()
    try:
        described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, keep, configs=["cleanup.policy"])])
    finally:
        admin.close()
    assert described["topic"][keep]["cleanup.policy"]["value"] == ""  # kept as given: the empty list

    old = _wall_ms() - DAY
    _produce_old(broker, [keep, control, earlier], old)
    producer = broker.producer()
    producer.send(earlier, key=b"k", value=b"v", partition=1).get(timeout=30)
    producer.close()
    _retention_pass_completed(broker, old)  # a whole pass went over keep's expired records
    assert _begin_offsets(broker, [keep, control]) == {keep: 0, control: 5}
    assert [(r.offset, r.key) for r in broker.consume(keep)] == [(i, b"k%d" % i) for i in range(5)]
    assert len(broker.consume(earlier, 1)) == 1  # in the cordoned log dir, and working
    assert _broker_placement(broker, keep, 1) == _broker_placement(broker, control, 1) == {1}

    assert _placement_in_ours(tmp_path, {keep: 1, control: 1}) == {keep: {1}, control: {1}}

    root = tmp_path / "retention"
    root.mkdir()
    with LogManager([root]) as m:  # the same topics and records, retention by the same clock
        for topic, policy in ((keep, ""), (control, "delete")):
            m.admin.create_topic(topic, 1, {"cleanup.policy": policy, "retention.ms": "1000"})
            m.get_log(topic, 0).append([ProducerRecord(b"k%d" % i, b"v", old) for i in range(5)], now=old)
        now = _wall_ms()
        m.retention.apply(m.retention.plans(now_ms=now), now_ms=now)
        starts = {t: m.get_log(t, 0).log_start_offset for t in (keep, control)}
    assert starts == _begin_offsets(broker, [keep, control]) == {keep: 0, control: 5}


def test_every_log_dir_cordoned_refuses_a_new_partition_in_the_brokers_words(broker_factory, tmp_path) -> None:
    broker = broker_factory("all-cordoned", log_dir_count=2, overrides={"cordoned.log.dirs": "*"})
    admin = broker.admin()
    try:
        with pytest.raises(InvalidReplicationFactorError) as info:
            admin.create_topics([NewTopic(unique_topic("nowhere"), 1, 1)])
    finally:
        admin.close()
    broker_words = re.search(r"error_message='([^']*)'", str(info.value)).group(1)
    dirs = [tmp_path / f"ours-{i}" for i in range(2)]
    for d in dirs:
        d.mkdir()
    with LogManager(dirs, {"cordoned.log.dirs": "*"}) as m, pytest.raises(LogDirsCordonedError) as ours:
        m.admin.create_topic("nowhere", 1)
    assert str(ours.value).startswith(broker_words)
    assert not any(p.name.startswith("nowhere") for d in dirs for p in d.iterdir())


@pytest.mark.parametrize("cordoned", ["{missing}", "{dir},{missing}"])
def test_a_cordoned_entry_not_in_log_dirs_is_refused_in_the_brokers_words(kafka_libs, tmp_path, cordoned) -> None:
    """The broker refuses such a config before it starts (``kafka-storage format`` reads it the same way)."""
    broker = KafkaBroker(tmp_path / "broker", kafka_libs, log_dir_count=1)
    entries = cordoned.format(dir=broker.log_dirs[0], missing=tmp_path / "missing")
    config = tmp_path / "server.properties"
    props = {**broker.properties(), "cordoned.log.dirs": entries}
    config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    done = subprocess.run(["java", "-cp", f"{kafka_libs}/*", "kafka.tools.StorageTool", "format", "-t", CLUSTER_ID,
                           "-c", str(config)], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    broker_words = re.search(r"requirement failed: (.*)", done.stdout + done.stderr).group(1)
    with pytest.raises(ConfigError) as ours:
        check_cordoned_log_dirs(broker.log_dirs, {"cordoned.log.dirs": entries})
    assert str(ours.value) == broker_words
