"""The harness itself: a broker starts, serves a produced record, stops cleanly and restarts."""

from __future__ import annotations

from tests.helpers.kafka_broker import unique_topic


def test_broker_serves_and_restarts_over_its_clean_shutdown(broker_factory):
    broker = broker_factory()
    topic = unique_topic("harness")
    broker.create_topic(topic)
    producer = broker.producer()
    producer.send(topic, key=b"k", value=b"v").get(timeout=30)
    producer.close()
    broker.stop()
    assert (broker.log_dirs[0] / ".kafka_cleanshutdown").exists()
    broker.start()
    [record] = broker.consume(topic)
    assert (record.offset, record.key, record.value) == (0, b"k", b"v")
