"""The live Kafka 4.4 broker of these tests (``tests/helpers/kafka_broker.py``).

``kafka_libs`` fetches Kafka once (Maven, into a cache later runs reuse) or skips, saying why,
when Java or Maven Central is not there. ``kafka_broker`` is one KRaft node the whole session
shares (a test makes its own topics: :func:`unique_topic`); ``broker_factory`` makes brokers a
test owns, for the tests that stop, edit and restart one.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.kafka_broker import KafkaBroker, ensure_kafka_broker_skippable
from tests.helpers.kafka_oracle import kafka_python_codecs  # noqa: F401  (fixture: snappy for kafka-python)


@pytest.fixture(scope="session")
def kafka_libs() -> Path:
    return ensure_kafka_broker_skippable()


@pytest.fixture(scope="session")
def kafka_broker(kafka_libs: Path, tmp_path_factory) -> Iterator[KafkaBroker]:
    broker = KafkaBroker(Path(tmp_path_factory.mktemp("kafka")), kafka_libs)
    try:
        yield broker.start()
    finally:
        broker.stop()
        broker.kill()


@pytest.fixture
def broker_factory(kafka_libs: Path, tmp_path: Path) -> Iterator:
    """``broker_factory(**kwargs)``: a started broker of this test's own, stopped after it."""
    made: list[KafkaBroker] = []

    def make(name: str = "broker", **kwargs) -> KafkaBroker:
        broker = KafkaBroker(tmp_path / name, kafka_libs, **kwargs)
        made.append(broker)
        return broker.start()

    yield make
    for broker in made:
        broker.stop()
        broker.kill()
