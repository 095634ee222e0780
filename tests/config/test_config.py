"""Topic and broker log configuration: Kafka's names, defaults, validators and precedence (spec 3.5)."""

from __future__ import annotations

import dataclasses
import os

import pytest

from storage_engine.config.broker import broker_log_defaults, build_log_config
from storage_engine.config.cleaner import CleanerConfig, build_cleaner_config
from storage_engine.config.properties import parse_properties
from storage_engine.config.topic import TOPIC_CONFIG_KEYS, LogConfig, validate_topic_overrides
from storage_engine.config.values import LONG_MAX
from storage_engine.errors import ConfigError, LogError

KAFKA_DEFAULTS = {
    "segment.bytes": 1073741824,
    "segment.ms": 604800000,
    "segment.jitter.ms": 0,
    "segment.index.bytes": 10485760,
    "index.interval.bytes": 4096,
    "retention.ms": 604800000,
    "retention.bytes": -1,
    "file.delete.delay.ms": 60000,
    "flush.messages": 9223372036854775807,
    "flush.ms": 9223372036854775807,
    "max.message.bytes": 1048588,
    "preallocate": False,
    "cleanup.policy": ("delete",),
    "delete.retention.ms": 86400000,
    "min.compaction.lag.ms": 0,
    "max.compaction.lag.ms": 9223372036854775807,
    "min.cleanable.dirty.ratio": 0.5,
    "message.timestamp.type": "CreateTime",
    "message.timestamp.before.max.ms": 9223372036854775807,
    "message.timestamp.after.max.ms": 3600000,  # KIP-937 (Kafka 4.0)
    "compression.type": "producer",
    "compression.gzip.level": -1,
    "compression.lz4.level": 9,
    "compression.zstd.level": 3,
}


# --------------------------------------------------------------------------- defaults


def test_defaults_are_kafkas() -> None:
    config = LogConfig()
    for key, value in KAFKA_DEFAULTS.items():
        assert getattr(config, key.replace(".", "_")) == value, key
    assert build_log_config() == config
    assert set(KAFKA_DEFAULTS) <= set(TOPIC_CONFIG_KEYS)


def test_every_key_is_a_field() -> None:
    fields = {f.name for f in dataclasses.fields(LogConfig)}
    assert {k.replace(".", "_") for k in TOPIC_CONFIG_KEYS} == fields


def test_policy_properties() -> None:
    assert LogConfig().delete and not LogConfig().compact
    both = build_log_config(topic_overrides={"cleanup.policy": "compact,delete"})
    assert both.compact and both.delete and both.cleanup_policy == ("compact", "delete")
    spaced = build_log_config(topic_overrides={"cleanup.policy": " compact , delete "})
    assert spaced.cleanup_policy == ("compact", "delete")
    neither = build_log_config(topic_overrides={"cleanup.policy": ""})
    assert neither.cleanup_policy == () and not neither.compact and not neither.delete


def test_policy_properties_are_case_insensitive() -> None:
    # the validator is case-sensitive (Kafka's ValidList) but a typed config may carry any case
    config = LogConfig.__new__(LogConfig)
    object.__setattr__(config, "cleanup_policy", ("Compact",))
    assert config.compact and not config.delete


def test_max_segment_ms() -> None:
    assert LogConfig(segment_ms=1000).max_segment_ms == 1000
    compact = LogConfig(segment_ms=1000, cleanup_policy=("compact",), max_compaction_lag_ms=300)
    assert compact.max_segment_ms == 150  # half the lag: the other half is the cleaner's
    assert LogConfig(cleanup_policy=("compact",)).max_segment_ms == 604800000  # unlimited lag: segment.ms
    assert LogConfig(segment_ms=1000, max_compaction_lag_ms=300).max_segment_ms == 1000
    assert LogConfig(segment_ms=100, cleanup_policy=("compact",), max_compaction_lag_ms=300).max_segment_ms == 100


# --------------------------------------------------------------------------- topic overrides


def test_overrides_are_parsed_to_types() -> None:
    parsed = validate_topic_overrides(
        {
            "retention.ms": "1000",
            "segment.bytes": " 2048 ",
            "preallocate": "TRUE",
            "min.cleanable.dirty.ratio": "0.25",
            "cleanup.policy": "compact",
            "message.timestamp.type": "LogAppendTime",
            "compression.type": "zstd",
        }
    )
    assert parsed == {
        "retention.ms": 1000,
        "segment.bytes": 2048,
        "preallocate": True,
        "min.cleanable.dirty.ratio": 0.25,
        "cleanup.policy": ("compact",),
        "message.timestamp.type": "LogAppendTime",
        "compression.type": "zstd",
    }


def test_typed_overrides_are_accepted() -> None:
    config = build_log_config(topic_overrides={"retention.ms": 5, "preallocate": True, "cleanup.policy": ["compact"]})
    assert config.retention_ms == 5 and config.preallocate and config.cleanup_policy == ("compact",)


def test_unknown_key() -> None:
    with pytest.raises(ConfigError) as info:
        validate_topic_overrides({"retention.msec": "5"})
    err = info.value
    assert err.key == "retention.msec" and err.value == "5"
    assert "Unknown topic config name: retention.msec" in str(err)
    assert "retention.ms" in err.allowed  # lists the valid names
    assert isinstance(err, LogError)


# Mirrors LogConfigTest#testFromPropsInvalid: which values each key must reject.
INVALID = {
    "segment.bytes": ["not_a_number", "-1", "13"],
    "segment.ms": ["not_a_number", "-1", "0"],
    "segment.jitter.ms": ["not_a_number", "-1"],
    "segment.index.bytes": ["not_a_number", "-1", "3"],
    "index.interval.bytes": ["not_a_number", "-1"],
    "retention.ms": ["not_a_number", "-2", "1.5"],
    "retention.bytes": ["not_a_number", "1e3"],
    "file.delete.delay.ms": ["not_a_number", "-1"],
    "flush.messages": ["not_a_number", "-1", "0"],
    "flush.ms": ["not_a_number", "-1"],
    "max.message.bytes": ["not_a_number", "-1", "2147483648"],
    "preallocate": ["not_a_number", "-1", "yes"],
    "cleanup.policy": ["true", "foobar", "Compact", "compact;delete"],  # "compact,": tests/config/test_kafka4.py
    "delete.retention.ms": ["not_a_number", "-1"],
    "min.compaction.lag.ms": ["not_a_number", "-1"],
    "max.compaction.lag.ms": ["not_a_number", "-1", "0"],
    "min.cleanable.dirty.ratio": ["not_a_number", "-0.1", "1.2", "NaN", "-1"],
    "message.timestamp.type": ["not_a_number", "-1", "createtime"],
    "message.timestamp.before.max.ms": ["not_a_number", "-1"],
    "message.timestamp.after.max.ms": ["not_a_number", "-1"],
    "compression.type": ["not_a_number", "-1", "brotli", "none"],
    "compression.gzip.level": ["not_a_number", "-2", "0", "10"],
    "compression.lz4.level": ["not_a_number", "-1", "0", "18"],
    "compression.zstd.level": ["not_a_number", "-131073", "23"],
    "min.insync.replicas": ["not_a_number", "0", "-1"],
    "unclean.leader.election.enable": ["not_a_number", "-1"],
    "logplat.roll.idle.segments": ["not_a_number", "-1"],
    "remote.storage.enable": ["yes", "1"],
    "local.retention.ms": ["-3", "soon"],
    "local.retention.bytes": ["-3", "1.5"],
    "logplat.remote.version.retention.ms": ["-1", "week"],
    "compaction.strategy": ["not_a_number", "-1", "Offset", "version"],
    "compaction.strategy.header": ["a\x01b", "x" * 256, "tab\there"],
}
VALID = {
    "retention.ms": ["-1", "0", str(LONG_MAX)],
    "retention.bytes": ["-1", "-5", "0", str(LONG_MAX)],
    "segment.bytes": ["14", str(2**31 - 1)],
    "index.interval.bytes": ["0"],
    "min.cleanable.dirty.ratio": ["0", "1", "0.01", "1e-1", ".5"],
    "cleanup.policy": ["compact", "delete", "delete,compact", ""],
    "compression.gzip.level": ["-1", "1", "9"],
    "compression.lz4.level": ["1", "17"],
    "compression.zstd.level": ["-131072", "-1", "0", "22"],
    "compression.type": ["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"],
    "message.timestamp.type": ["CreateTime", "LogAppendTime"],
    "preallocate": ["true", "false", "False"],
    "segment.jitter.ms": ["0"],
    "max.compaction.lag.ms": ["1"],
    "min.insync.replicas": ["1"],
    "compaction.strategy": ["offset", "timestamp", "header"],
    "compaction.strategy.header": ["ver", "version-ü", "-1", ""],
}


def test_every_key_has_invalid_cases() -> None:
    assert set(INVALID) == set(TOPIC_CONFIG_KEYS)


# LogConfigTest#testFromPropsInvalid: every key rejects "not_a_number" and "-1", except these,
# which have their own invalid values above.
MINUS_ONE_EXCEPTIONS = {
    "retention.bytes",
    "retention.ms",
    "cleanup.policy",
    "compression.gzip.level",
    "compression.zstd.level",
    "compaction.strategy.header",
    "local.retention.ms",  # -1 (unlimited) and -2 (the whole log's) are valid, as in Kafka
    "local.retention.bytes",
}


@pytest.mark.parametrize("key", sorted(set(TOPIC_CONFIG_KEYS) - MINUS_ONE_EXCEPTIONS))
def test_from_props_invalid_rule(key: str) -> None:
    for value in ("not_a_number", "-1"):
        with pytest.raises(ConfigError):
            validate_topic_overrides({key: value})


@pytest.mark.parametrize(
    ("key", "value"), [(k, v) for k, values in INVALID.items() for v in values]
)
def test_invalid_values_are_rejected_naming_key_value_and_allowed(key: str, value: str) -> None:
    with pytest.raises(ConfigError) as info:
        validate_topic_overrides({key: value})
    err = info.value
    assert err.key == key and err.value == value
    assert err.allowed
    message = str(err)
    assert key in message and repr(value) in message and err.allowed in message


@pytest.mark.parametrize(("key", "value"), [(k, v) for k, values in VALID.items() for v in values])
def test_valid_values_are_accepted(key: str, value: str) -> None:
    validate_topic_overrides({key: value})


@pytest.mark.parametrize(
    ("key", "value", "allowed"),
    [
        ("segment.bytes", "13", "Value must be at least 14"),
        ("retention.ms", "-2", "Value must be at least -1"),
        ("min.cleanable.dirty.ratio", "1.2", "Value must be no more than 1"),
        ("min.cleanable.dirty.ratio", "-0.1", "Value must be at least 0"),
        ("cleanup.policy", "foobar", "String must be one of: compact, delete"),
        ("message.timestamp.type", "x", "String must be one of: CreateTime, LogAppendTime"),
        ("retention.ms", "not_a_number", "Not a number of type LONG"),
        ("segment.bytes", "not_a_number", "Not a number of type INT"),
        ("segment.bytes", "2147483648", "Not a number of type INT"),
        ("min.cleanable.dirty.ratio", "abc", "Not a number of type DOUBLE"),
        ("preallocate", "1", "Expected value to be either true or false"),
    ],
)
def test_kafka_error_texts(key: str, value: str, allowed: str) -> None:
    with pytest.raises(ConfigError) as info:
        validate_topic_overrides({key: value})
    assert info.value.allowed == allowed
    assert str(info.value) == f"Invalid value {value!r} for configuration {key}: {allowed}"


def test_python_number_syntax_is_not_kafkas() -> None:
    for value in ["1_000", "0x10", "1.0", " "]:
        with pytest.raises(ConfigError):
            validate_topic_overrides({"segment.ms": value})
    with pytest.raises(ConfigError):
        validate_topic_overrides({"segment.ms": True})


def test_min_lag_above_max_lag() -> None:
    with pytest.raises(ConfigError) as info:
        validate_topic_overrides({"min.compaction.lag.ms": "500", "max.compaction.lag.ms": "100"})
    assert "min.compaction.lag.ms (500) > max.compaction.lag.ms (100)" in str(info.value)
    validate_topic_overrides({"min.compaction.lag.ms": "100", "max.compaction.lag.ms": "100"})
    with pytest.raises(ConfigError):
        LogConfig(min_compaction_lag_ms=5, max_compaction_lag_ms=4)


def test_min_lag_above_broker_max_lag() -> None:
    with pytest.raises(ConfigError, match="conflict"):
        build_log_config({"log.cleaner.max.compaction.lag.ms": "100"}, {"min.compaction.lag.ms": "200"})


def test_direct_construction_is_validated() -> None:
    with pytest.raises(ConfigError) as info:
        LogConfig(segment_bytes=10)
    assert info.value.key == "segment.bytes"
    with pytest.raises(ConfigError):
        LogConfig(cleanup_policy=("nope",))
    assert LogConfig(min_cleanable_dirty_ratio=1).min_cleanable_dirty_ratio == 1.0


# --------------------------------------------------------------------------- broker precedence


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({}, 604800000),
        ({"log.retention.hours": "1"}, 3600000),
        ({"log.retention.hours": "1", "log.retention.minutes": "2"}, 120000),
        ({"log.retention.hours": "1", "log.retention.minutes": "2", "log.retention.ms": "3"}, 3),
        ({"log.retention.minutes": "2", "log.retention.ms": "3"}, 3),
        ({"log.retention.ms": "-1"}, -1),
        ({"log.retention.ms": "-5"}, -1),
        ({"log.retention.hours": "-1"}, -1),
        ({"log.retention.minutes": "-30", "log.retention.hours": "5"}, -1),
    ],
)
def test_broker_retention_precedence(props: dict[str, str], expected: int) -> None:
    assert build_log_config(props).retention_ms == expected


@pytest.mark.parametrize(
    "props",
    [{"log.retention.ms": "0"}, {"log.retention.minutes": "0"}, {"log.retention.hours": "0"}],
)
def test_broker_rejects_zero_retention(props: dict[str, str]) -> None:
    with pytest.raises(ConfigError) as info:
        broker_log_defaults(props)
    assert info.value.key == next(iter(props))
    assert "unlimited (-1)" in str(info.value)


def test_topic_may_set_zero_retention() -> None:
    assert build_log_config({}, {"retention.ms": "0"}).retention_ms == 0


@pytest.mark.parametrize(
    ("props", "key", "expected"),
    [
        ({"log.roll.hours": "2"}, "segment_ms", 7200000),
        ({"log.roll.hours": "2", "log.roll.ms": "99"}, "segment_ms", 99),
        ({"log.roll.jitter.hours": "1"}, "segment_jitter_ms", 3600000),
        ({"log.roll.jitter.hours": "1", "log.roll.jitter.ms": "7"}, "segment_jitter_ms", 7),
        ({"log.flush.scheduler.interval.ms": "3000"}, "flush_ms", 3000),
        ({"log.flush.scheduler.interval.ms": "3000", "log.flush.interval.ms": "10"}, "flush_ms", 10),
        ({"log.flush.interval.messages": "5"}, "flush_messages", 5),
        ({"log.segment.bytes": "1024"}, "segment_bytes", 1024),
        ({"log.retention.bytes": "4096"}, "retention_bytes", 4096),
        ({"log.cleanup.policy": "compact"}, "cleanup_policy", ("compact",)),
        ({"log.cleaner.delete.retention.ms": "10"}, "delete_retention_ms", 10),
        ({"log.cleaner.min.compaction.lag.ms": "10"}, "min_compaction_lag_ms", 10),
        ({"log.cleaner.max.compaction.lag.ms": "10"}, "max_compaction_lag_ms", 10),
        ({"log.cleaner.min.cleanable.ratio": "0.1"}, "min_cleanable_dirty_ratio", 0.1),
        ({"log.index.size.max.bytes": "4096"}, "segment_index_bytes", 4096),
        ({"log.index.interval.bytes": "1"}, "index_interval_bytes", 1),
        ({"log.segment.delete.delay.ms": "0"}, "file_delete_delay_ms", 0),
        ({"message.max.bytes": "100"}, "max_message_bytes", 100),
        ({"log.preallocate": "true"}, "preallocate", True),
        ({"log.message.timestamp.type": "LogAppendTime"}, "message_timestamp_type", "LogAppendTime"),
        ({"log.message.timestamp.before.max.ms": "5"}, "message_timestamp_before_max_ms", 5),
        ({"log.message.timestamp.after.max.ms": "6"}, "message_timestamp_after_max_ms", 6),
        ({"compression.type": "lz4"}, "compression_type", "lz4"),
        ({"compression.zstd.level": "-3"}, "compression_zstd_level", -3),
    ],
)
def test_broker_keys_map_to_topic_keys(props: dict[str, str], key: str, expected: object) -> None:
    assert getattr(build_log_config(props), key) == expected


def test_topic_overrides_win_over_broker() -> None:
    config = build_log_config(
        {"log.retention.hours": "1", "log.segment.bytes": "4096", "log.cleanup.policy": "compact"},
        {"retention.ms": "50", "cleanup.policy": "delete"},
    )
    assert config.retention_ms == 50
    assert config.segment_bytes == 4096  # broker value where the topic is silent
    assert config.cleanup_policy == ("delete",)


def test_unknown_broker_keys_are_ignored() -> None:
    assert broker_log_defaults({"broker.id": "1", "listeners": "PLAINTEXT://:9092", "log.dirs": "/x"}) == {}
    assert broker_log_defaults({"log.segment.bytes": "100"}) == {"segment.bytes": 100}


@pytest.mark.parametrize(
    ("props", "key"),
    [
        ({"log.segment.bytes": "10"}, "log.segment.bytes"),
        ({"log.roll.hours": "0"}, "log.roll.hours"),
        ({"log.roll.ms": "0"}, "log.roll.ms"),
        ({"log.roll.jitter.ms": "-1"}, "log.roll.jitter.ms"),
        ({"log.retention.hours": "many"}, "log.retention.hours"),
        ({"log.cleaner.min.cleanable.ratio": "2"}, "log.cleaner.min.cleanable.ratio"),
        ({"log.cleanup.policy": "forever"}, "log.cleanup.policy"),
        ({"log.preallocate": "maybe"}, "log.preallocate"),
        ({"message.max.bytes": "-1"}, "message.max.bytes"),
    ],
)
def test_bad_broker_values_name_the_broker_key(props: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as info:
        broker_log_defaults(props)
    assert info.value.key == key
    assert key in str(info.value)


def test_parse_properties() -> None:
    text = "# comment\n! also\nlog.retention.hours=24\nlog.segment.bytes : 2048\n\nlog.dirs /tmp/x\n"
    assert parse_properties(text.splitlines()) == {
        "log.retention.hours": "24",
        "log.segment.bytes": "2048",
        "log.dirs": "/tmp/x",
    }


# --------------------------------------------------------------------------- cleaner


def test_cleaner_defaults() -> None:
    config = build_cleaner_config()
    assert config == CleanerConfig()
    assert (config.dedupe_buffer_size, config.io_buffer_load_factor, config.io_buffer_size) == (
        134217728,
        0.9,
        524288,
    )
    assert config.io_max_bytes_per_second == float("inf")
    assert (config.backoff_ms, config.threads) == (15000, 1)
    assert config.io_buffer_size_per_thread == 262144


def test_cleaner_keys() -> None:
    config = build_cleaner_config(
        {
            "log.cleaner.dedupe.buffer.size": str(64 * 1024 * 1024),
            "log.cleaner.threads": "2",
            "log.cleaner.io.buffer.load.factor": "0.5",
            "log.cleaner.io.buffer.size": "1048576",
            "log.cleaner.io.max.bytes.per.second": "1000000",
            "log.cleaner.backoff.ms": "10",
            "log.retention.ms": "1",  # not a cleaner key: ignored
        }
    )
    assert config.threads == 2 and config.dedupe_buffer_size_per_thread == 32 * 1024 * 1024
    assert config.io_buffer_load_factor == 0.5 and config.io_max_bytes_per_second == 1e6
    assert config.backoff_ms == 10 and config.io_buffer_size_per_thread == 262144


def test_cleaner_per_thread_memory_is_capped() -> None:
    config = CleanerConfig(dedupe_buffer_size=2**33)
    assert config.dedupe_buffer_size_per_thread == 2**31 - 1


@pytest.mark.parametrize(
    ("props", "key"),
    [
        ({"log.cleaner.dedupe.buffer.size": str(1024 * 1024)}, "log.cleaner.dedupe.buffer.size"),
        (
            {"log.cleaner.dedupe.buffer.size": str(4 * 1024 * 1024), "log.cleaner.threads": "4"},
            "log.cleaner.dedupe.buffer.size",
        ),
        ({"log.cleaner.threads": "-1"}, "log.cleaner.threads"),
        ({"log.cleaner.io.buffer.load.factor": "0"}, "log.cleaner.io.buffer.load.factor"),
        ({"log.cleaner.io.buffer.load.factor": "1.5"}, "log.cleaner.io.buffer.load.factor"),
        ({"log.cleaner.io.max.bytes.per.second": "0"}, "log.cleaner.io.max.bytes.per.second"),
        ({"log.cleaner.backoff.ms": "x"}, "log.cleaner.backoff.ms"),
        ({"log.cleaner.io.buffer.size": "-1"}, "log.cleaner.io.buffer.size"),
    ],
)
def test_cleaner_rejects(props: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as info:
        build_cleaner_config(props)
    assert info.value.key == key


def test_cleaner_dedupe_message() -> None:
    with pytest.raises(ConfigError, match="at least 1MB per cleaner thread"):
        build_cleaner_config({"log.cleaner.dedupe.buffer.size": "1048576"})
    # no threads, no map: nothing to check
    assert build_cleaner_config({"log.cleaner.threads": "0", "log.cleaner.dedupe.buffer.size": "1"}).threads == 0


def test_parse_properties_reads_continuation_lines_and_escapes_as_java_does() -> None:
    """``java.util.Properties.load``: an odd number of trailing backslashes continues the line
    (the next line's leading whitespace dropped), an even number is escaped backslashes; a
    comment line never continues; escapes in keys and values."""
    text = ("log.retention.ms=36\\\n    00000\n"
            "# a comment ends here \\\nlog.segment.bytes = 1048576\n"
            "log.cleaner.compaction.strategy.header : a\\\\\n"
            "log\\.roll\\ ms=1\n"
            "log.flush.interval.messages \\u0031\\t\n"
            "last.key=\\\n")
    assert parse_properties(text.split("\n")) == {
        "log.retention.ms": "3600000",
        "log.segment.bytes": "1048576",
        "log.cleaner.compaction.strategy.header": "a\\",
        "log.roll ms": "1",
        "log.flush.interval.messages": "1",
        "last.key": "",
    }


def test_a_misspelt_broker_key_is_warned_of_in_one_line_naming_the_file(tmp_path, monkeypatch, capsys) -> None:
    """A misspelt key left the default in force without a word; a Kafka broker key the engine
    has no use for (``broker.id``) and one it reads are read without one."""
    from storage_engine.logdir.environment import broker_props_from_env

    props_file = tmp_path / "server.properties"
    props_file.write_text("broker.id=1\nlog.retention.msx=5000\nlog.segment.bytes=1048576\nfrobnicate=1\n")
    monkeypatch.setenv("LOGPLAT_SERVER_PROPERTIES", str(props_file))
    assert broker_props_from_env()["log.segment.bytes"] == "1048576"
    assert capsys.readouterr().err.splitlines() == [
        f"warning: LOGPLAT_SERVER_PROPERTIES={props_file}: unknown key 'log.retention.msx' "
        "(did you mean log.retention.ms?): ignored",
        f"warning: LOGPLAT_SERVER_PROPERTIES={props_file}: unknown key 'frobnicate': ignored"]


def test_broker_props_from_env_reads_java_properties_syntax(tmp_path, monkeypatch) -> None:
    """The env-named server.properties is read by parse_properties: ``key: value`` counts too."""
    from storage_engine.logdir.environment import broker_props_from_env

    props_file = tmp_path / "server.properties"
    props_file.write_text("# broker\nlog.retention.ms: 5000\n! note\nlog.segment.bytes=1048576\n")
    monkeypatch.setenv("LOGPLAT_SERVER_PROPERTIES", str(props_file))
    assert broker_props_from_env() == {"log.retention.ms": "5000", "log.segment.bytes": "1048576"}
    monkeypatch.delenv("LOGPLAT_SERVER_PROPERTIES")
    assert broker_props_from_env() == {}


@pytest.mark.parametrize("make, error", [
    (lambda p: None, "cannot read it: No such file or directory"),
    (lambda p: p.mkdir(), "it is a directory, not a properties file"),
    (lambda p: os.mkfifo(p), "it is a FIFO, not a properties file"),  # a read would block for ever
    (lambda p: p.write_bytes(b"log.retention.ms=5\n\xff=1\n"), "not UTF-8 text (byte 0xff at offset 19)"),
    (lambda p: p.write_text("log.segment.bytes=\\u12\n"), r"malformed \uxxxx escape in '\\u12'"),
    (lambda p: p.write_text("log.retention.check.interval.ms=0\n"),
     "Invalid value '0' for configuration log.retention.check.interval.ms: Value must be at least 1"),
    (lambda p: p.write_text("log.cleaner.threads=-1\n"),
     "Invalid value '-1' for configuration log.cleaner.threads: Value must be at least 0"),
], ids=["missing", "directory", "fifo", "not-utf8", "bad-escape", "bad-check-interval", "bad-cleaner-threads"])
def test_a_properties_file_that_cannot_be_read_is_named_with_its_variable(tmp_path, monkeypatch, make, error) -> None:
    """A FIFO hung every command; the others gave bare OS or codec errors naming neither the
    file nor the variable."""
    from storage_engine.errors import ServerPropertiesError
    from storage_engine.logdir.environment import broker_props_from_env

    path = tmp_path / "server.properties"
    make(path)
    monkeypatch.setenv("LOGPLAT_SERVER_PROPERTIES", str(path))
    with pytest.raises(ServerPropertiesError) as raised:
        broker_props_from_env()
    assert str(raised.value) == f"LOGPLAT_SERVER_PROPERTIES={path}: {error}"


def test_the_header_strategy_needs_its_header_from_the_topic_or_the_broker() -> None:
    """KIP-280's ``header`` strategy reads each record's version from a named header: without
    the name the topic is refused, with it from either level the topic is accepted."""
    with pytest.raises(ConfigError) as info:
        build_log_config({}, {"compaction.strategy": "header"})
    assert info.value.key == "compaction.strategy.header" and "compaction.strategy=header" in str(info.value)
    config = build_log_config({"log.cleaner.compaction.strategy.header": "ver"}, {"compaction.strategy": "header"})
    assert (config.compaction_strategy, config.compaction_strategy_header) == ("header", "ver")
    assert build_log_config({"log.cleaner.compaction.strategy": "timestamp"}).compaction_strategy == "timestamp"
    assert build_log_config().compaction_strategy == "offset"
