"""Kafka 4 config semantics a 4.4 broker showed (``tests/live_kafka/test_kafka4_semantics.py``
checks the same inputs against it): KIP-1161's empty ``cleanup.policy``, KIP-937's
``message.timestamp.after.max.ms`` default and KIP-1066's ``cordoned.log.dirs``."""

from __future__ import annotations

import pytest

from storage_engine.config.broker import build_log_config, cordoned_log_dir_entries
from storage_engine.config.properties import unknown_key_warning
from storage_engine.config.topic import LogConfig, validate_topic_overrides
from storage_engine.errors import ConfigError
from storage_engine.limits import LONG_MAX


@pytest.mark.parametrize("value", ["", " ", ()])
def test_an_empty_cleanup_policy_keeps_forever(value) -> None:
    config = build_log_config(topic_overrides={"cleanup.policy": value})
    assert config.cleanup_policy == () and config.keep_forever
    assert not config.compact and not config.delete
    assert not LogConfig().keep_forever and not LogConfig(cleanup_policy=("compact",)).keep_forever


def test_a_broker_wide_empty_policy_keeps_forever_and_a_topic_may_say_otherwise() -> None:
    assert build_log_config({"log.cleanup.policy": ""}).keep_forever
    assert build_log_config({"log.cleanup.policy": ""}, {"cleanup.policy": "delete"}).delete


@pytest.mark.parametrize("value", ["compact,", ",delete", "compact,,delete", "compact, ,delete"])
def test_an_empty_item_of_a_policy_is_refused_in_the_brokers_words(value: str) -> None:
    with pytest.raises(ConfigError) as info:
        validate_topic_overrides({"cleanup.policy": value})
    assert str(info.value) == "Configuration 'cleanup.policy' values must not be empty."
    with pytest.raises(ConfigError) as info:
        build_log_config({"log.cleanup.policy": value})
    assert str(info.value) == "Configuration 'log.cleanup.policy' values must not be empty."


def test_timestamp_bounds_default_to_kafka_4s() -> None:
    config = LogConfig()
    assert config.message_timestamp_after_max_ms == 3_600_000  # KIP-937
    assert config.message_timestamp_before_max_ms == LONG_MAX
    assert build_log_config({"log.message.timestamp.after.max.ms": "0"}).message_timestamp_after_max_ms == 0
    with pytest.raises(ConfigError, match="Value must be at least 0"):
        validate_topic_overrides({"message.timestamp.after.max.ms": "-1"})


def test_cordoned_log_dirs_parse_as_the_broker_parses_them() -> None:
    assert cordoned_log_dir_entries({}) == ()
    assert cordoned_log_dir_entries({"cordoned.log.dirs": ""}) == ()
    assert cordoned_log_dir_entries({"cordoned.log.dirs": "/a, /b"}) == ("/a", "/b")
    assert cordoned_log_dir_entries({"cordoned.log.dirs": "*"}) == ("*",)
    assert unknown_key_warning("cordoned.log.dirs") is None  # a key the engine reads


@pytest.mark.parametrize(("value", "message"), [
    ("/a,", "Configuration 'cordoned.log.dirs' values must not be empty."),
    ("*,/a", "When cordoned.log.dirs is set to *, it must not contain other values"),
])
def test_cordoned_log_dirs_refusals_are_the_brokers(value: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        cordoned_log_dir_entries({"cordoned.log.dirs": value})
    assert str(info.value) == message
