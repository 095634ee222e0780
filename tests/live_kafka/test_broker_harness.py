"""The harness itself: a broker starts, serves a produced record, stops cleanly and restarts; a
port taken under it makes it start again on fresh ones; no Java skips, or fails when required."""

from __future__ import annotations

import socket

import pytest

from tests.helpers.kafka_broker import (
    PORT_TAKEN,
    REQUIRE_ENV,
    KafkaBrokerError,
    ensure_kafka_broker_skippable,
    unique_topic,
)


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


def test_a_start_whose_port_is_taken_starts_again_on_fresh_ports(broker_factory):
    """free_port() lets go of the port before the JVM binds it, and a restart reuses the last
    ones: a port another process holds makes the broker fail "Address already in use", and the
    harness starts it again on fresh ports."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))  # bound, not listening: a client's connection is refused, not left hanging
        taken = holder.getsockname()[1]
        broker = broker_factory("taken", port=taken)
        assert broker.port != taken
        assert PORT_TAKEN in (broker.workdir / "server.log").read_text() + (broker.workdir / "stdout.log").read_text()
        topic = unique_topic("fresh-port")
        broker.create_topic(topic)
        producer = broker.producer()
        producer.send(topic, key=b"k", value=b"v").get(timeout=30)
        producer.close()
    assert [r.value for r in broker.consume(topic)] == [b"v"]


@pytest.mark.parametrize(("required", "outcome"), [("", pytest.skip.Exception), ("1", pytest.fail.Exception)])
def test_no_java_skips_unless_kafka_is_required(monkeypatch, tmp_path, required, outcome):
    """Without Java or Maven (an empty cache, nothing on PATH) the live tests skip, saying why;
    CI sets LOGPLAT_REQUIRE_KAFKA=1 so that a runner without them fails instead."""
    monkeypatch.setenv("LOGPLAT_KAFKA_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv(REQUIRE_ENV, required)
    with pytest.raises(outcome, match="needs java and mvn on PATH"):
        ensure_kafka_broker_skippable()


def test_a_cache_that_cannot_be_made_is_an_error_naming_the_variable(monkeypatch, tmp_path):
    """LOGPLAT_KAFKA_CACHE under a file: one line saying what to set, not a skip (Java is there)
    nor a NotADirectoryError traceback."""
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("LOGPLAT_KAFKA_CACHE", str(tmp_path / "file" / "cache"))
    with pytest.raises(KafkaBrokerError, match="cannot be made .*set LOGPLAT_KAFKA_CACHE to a writable directory"):
        ensure_kafka_broker_skippable()
