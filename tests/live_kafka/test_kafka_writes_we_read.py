"""Kafka writes, we read: real producers write through a live Kafka 4.4 broker, our engine opens
a copy of the broker's partition folders (taken while it runs, and after a clean stop) and reads
exactly what a real consumer fetches, under both isolation levels, and ``verify`` finds nothing.

What the broker writes here: idempotent producers of every codec with headers, two transactional
producers interleaved with commits and aborts and a transaction left open (so the last stable
offset is below the log end), CreateTime and LogAppendTime topics, segments a few KiB long
(``internal.segment.bytes``: Kafka 4 refuses a ``segment.bytes`` below 1 MiB), and a compacted
topic the broker's own cleaner has cleaned.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from storage_engine.config.broker import topic_log_config
from storage_engine.logdir.manager import LogManager
from storage_engine.tools.verify import verify_log
from tests.helpers.kafka_broker import KafkaBroker, unique_topic

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
SMALL_SEGMENTS = {"internal.segment.bytes": "4096"}
COMPACT = {"cleanup.policy": "compact"}  # what our engine needs to know of the topic: offsets may vanish


def send(producer, topic: str, n: int, tag: str, *, keys: int | None = None, tombstone_every: int = 0) -> None:
    """``n`` records tagged ``tag``, with headers (one of them empty); ``keys``: cycle
    through that many keys (else a key per record), a null value every ``tombstone_every``."""
    for i in range(n):
        key = f"k{i % keys if keys else i}-{'' if keys else tag}".encode()
        value = None if tombstone_every and i % tombstone_every == 0 else f"{tag}-{i}".encode() * 3
        producer.send(topic, key=key, value=value, headers=[("tag", tag.encode()), ("i", str(i).encode()), ("empty", b"")])


def write_transactions(broker: KafkaBroker, topic: str, *, keys: int | None = None,
                       leave_open: bool = True) -> list:
    """Two transactional producers interleaved: each commits one transaction and aborts another,
    batches of both mixed in the log, and plain idempotent records between them; with
    ``leave_open`` the first producer's last transaction stays open (flushed, not ended). Returns
    the producers, for the caller to close once it has read what it needs."""
    t1 = broker.producer(transactional_id=unique_topic("t1"), compression_type="lz4", linger_ms=2, batch_size=2048)
    t2 = broker.producer(transactional_id=unique_topic("t2"), linger_ms=2, batch_size=2048)
    plain = broker.producer(enable_idempotence=True, compression_type="gzip", linger_ms=2, batch_size=2048)
    for t in (t1, t2):
        t.init_transactions()
    for round_, (end1, end2) in enumerate((("commit", "abort"), ("abort", "commit"))):
        t1.begin_transaction()
        t2.begin_transaction()
        for part in range(3):  # flushed in turn: their batches interleave in the log
            for t, name in ((t1, "t1"), (t2, "t2")):
                send(t, topic, 15, f"{name}-r{round_}-p{part}", keys=keys)
                t.flush()
            send(plain, topic, 5, f"plain-r{round_}-p{part}", keys=keys)
            plain.flush()
        for t, end in ((t1, end1), (t2, end2)):
            getattr(t, f"{end}_transaction")()
    if leave_open:
        t1.begin_transaction()
        send(t1, topic, 20, "t1-open", keys=keys)
        t1.flush()
        send(plain, topic, 10, "plain-after-open", keys=keys)
        plain.flush()
    plain.close()
    return [t1, t2]


def write_codecs(broker: KafkaBroker, topic: str) -> None:
    """Idempotent producers, one per codec, each in several flushed batches."""
    for codec in CODECS:
        producer = broker.producer(enable_idempotence=True, compression_type=None if codec == "none" else codec,
                                   linger_ms=2, batch_size=2048)
        for part in range(3):
            send(producer, topic, 30, f"{codec}-{part}")
            producer.flush()
        producer.close()


def copy_partition(broker: KafkaBroker, topic: str, log_dir: Path) -> None:
    """The broker's partition folder, copied file by file as it is now (the broker may be running)."""
    shutil.copytree(broker.partition_dir(topic), log_dir / f"{topic}-0")


def broker_view(broker: KafkaBroker, topic: str) -> dict[str, object]:
    """What real consumers see: records and end offsets under each isolation level, the log start."""
    from kafka import KafkaConsumer, TopicPartition

    tp = TopicPartition(topic, 0)
    view: dict[str, object] = {iso: [_theirs(r) for r in broker.consume(topic, isolation_level=iso)]
                               for iso in ISOLATION_LEVELS}
    for iso in ISOLATION_LEVELS:
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level=iso)
        try:
            view[f"end/{iso}"] = consumer.end_offsets([tp])[tp]
            view["start"] = consumer.beginning_offsets([tp])[tp]
        finally:
            consumer.close()
    return view


def _theirs(r) -> tuple:
    return r.offset, r.timestamp, r.timestamp_type, r.key, r.value, tuple((k, v) for k, v in r.headers)


def our_view(log_dir: Path, topic: str, configs: dict[str, str] | None = None) -> dict[str, object]:
    """The same facts from our engine over a copy, after ``verify`` found nothing wrong with it."""
    overrides = {topic: topic_log_config({}, configs or {})}
    with LogManager([log_dir], topic_configs=overrides) as manager:
        log = manager.get_log(topic, 0)
        report = verify_log(log)
        assert report.ok, report.problems
        types = {}
        for raw in log.iter_batches():
            for offset in range(raw.header.base_offset, raw.header.next_offset):
                types[offset] = int(raw.header.timestamp_type)
        view: dict[str, object] = {
            iso: [(r.offset, r.timestamp, types[r.offset], r.key, r.value, r.headers)
                  for r in log.read(log.log_start_offset, max_records=10**6, max_bytes=8 << 20, isolation_level=iso)]
            for iso in ISOLATION_LEVELS}
        view["end/read_uncommitted"] = log.log_end_offset
        view["end/read_committed"] = log.last_stable_offset()
        view["start"] = log.log_start_offset
        return view


def assert_same(ours: dict[str, object], theirs: dict[str, object]) -> None:
    for key in theirs:
        assert ours[key] == theirs[key], key


@pytest.mark.parametrize("timestamp_type", ["CreateTime", "LogAppendTime"])
def test_idempotent_transactional_every_codec_read_from_a_running_brokers_copy(kafka_broker, tmp_path,
                                                                                timestamp_type):
    topic = unique_topic(f"writes-{timestamp_type.lower()}")
    kafka_broker.create_topic(topic, {**SMALL_SEGMENTS, "message.timestamp.type": timestamp_type})
    write_codecs(kafka_broker, topic)
    open_producers = write_transactions(kafka_broker, topic)
    try:
        copy_partition(kafka_broker, topic, tmp_path)
        theirs = broker_view(kafka_broker, topic)
    finally:
        for producer in open_producers:
            producer.close()
    assert len(list((tmp_path / f"{topic}-0").glob("*.log"))) > 3  # several segments
    assert theirs["end/read_committed"] < theirs["end/read_uncommitted"]  # the open transaction
    assert len(theirs["read_committed"]) < len(theirs["read_uncommitted"])  # aborted and undecided records
    assert_same(our_view(tmp_path, topic), theirs)


def test_compacted_topic_the_brokers_cleaner_cleaned_read_while_running_and_after_a_clean_stop(
        broker_factory, tmp_path):
    broker = broker_factory()
    compacted = unique_topic("writes-compacted")
    broker.create_topic(compacted, {**COMPACT, "internal.segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01",
                                    "delete.retention.ms": "100"})
    producer = broker.producer(enable_idempotence=True, compression_type="zstd", linger_ms=2, batch_size=1024)
    for part in range(4):
        send(producer, compacted, 100, f"c{part}", keys=25, tombstone_every=9)
        producer.flush()
    producer.close()
    for t in write_transactions(broker, compacted, keys=25, leave_open=False):
        t.close()
    broker.wait_cleaned(compacted)
    open_txn = unique_topic("writes-open")  # a transaction left open across the clean stop
    broker.create_topic(open_txn, SMALL_SEGMENTS)
    open_producers = write_transactions(broker, open_txn)

    running = tmp_path / "running"
    copy_partition(broker, compacted, running)
    theirs = {topic: broker_view(broker, topic) for topic in (compacted, open_txn)}
    cleaned = theirs[compacted]
    assert len(cleaned["read_uncommitted"]) < cleaned["end/read_uncommitted"]  # the cleaner removed records
    assert_same(our_view(running, compacted, COMPACT), cleaned)

    broker.stop()  # the transaction stays open: the broker's producer snapshot holds it
    for producer in open_producers:
        producer.close(timeout=0)
    stopped = tmp_path / "stopped"
    shutil.copytree(broker.log_dirs[0], stopped)
    assert (stopped / ".kafka_cleanshutdown").exists()
    assert theirs[open_txn]["end/read_committed"] < theirs[open_txn]["end/read_uncommitted"]
    assert_same(our_view(stopped, compacted, COMPACT), cleaned)
    assert_same(our_view(stopped, open_txn), theirs[open_txn])
