"""A broker's settings: its ``log.*`` keys as the topic configs' defaults (Kafka's
``KafkaConfig`` names, units and precedence), and the broker-level limits the engine reads
(partitions per topic, the retention check interval, the cordoned log dirs)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from .topic import TOPIC_CONFIGS, LogConfig, check_segment_index_bytes, check_together, validate_topic_overrides
from .values import LONG_MAX, MS_PER_HOUR, MS_PER_MINUTE, Validator, at_least, no_empty_items, parse_value


@dataclass(frozen=True)
class BrokerSource:
    """One broker key that can supply a topic key: how to parse it and the unit factor to ms."""

    key: str
    type: str
    validator: Validator | None = None
    factor: int = 1


@dataclass(frozen=True)
class BrokerMapping:
    """A topic key and the broker keys that set its default, first present wins."""

    topic_key: str
    sources: tuple[BrokerSource, ...]


def _same(topic_key: str, broker_key: str) -> BrokerMapping:
    spec = TOPIC_CONFIGS[topic_key]
    return BrokerMapping(topic_key, (BrokerSource(broker_key, spec.type, spec.validator),))


BROKER_MAPPINGS: tuple[BrokerMapping, ...] = (
    BrokerMapping(
        "retention.ms",
        (
            BrokerSource("log.retention.ms", "LONG"),
            BrokerSource("log.retention.minutes", "INT", factor=MS_PER_MINUTE),
            BrokerSource("log.retention.hours", "INT", factor=MS_PER_HOUR),
        ),
    ),
    BrokerMapping(
        "segment.ms",
        (
            BrokerSource("log.roll.ms", "LONG", at_least(1)),
            BrokerSource("log.roll.hours", "INT", at_least(1), factor=MS_PER_HOUR),
        ),
    ),
    BrokerMapping(
        "segment.jitter.ms",
        (
            BrokerSource("log.roll.jitter.ms", "LONG", at_least(0)),
            BrokerSource("log.roll.jitter.hours", "INT", at_least(0), factor=MS_PER_HOUR),
        ),
    ),
    BrokerMapping(
        "flush.ms",
        (
            BrokerSource("log.flush.interval.ms", "LONG", at_least(0)),
            BrokerSource("log.flush.scheduler.interval.ms", "LONG", at_least(0)),
        ),
    ),
    _same("retention.bytes", "log.retention.bytes"),
    _same("local.retention.ms", "log.local.retention.ms"),
    _same("local.retention.bytes", "log.local.retention.bytes"),
    _same("segment.bytes", "log.segment.bytes"),
    _same("segment.index.bytes", "log.index.size.max.bytes"),
    _same("index.interval.bytes", "log.index.interval.bytes"),
    _same("file.delete.delay.ms", "log.segment.delete.delay.ms"),
    _same("flush.messages", "log.flush.interval.messages"),
    _same("max.message.bytes", "message.max.bytes"),
    _same("preallocate", "log.preallocate"),
    _same("cleanup.policy", "log.cleanup.policy"),
    _same("delete.retention.ms", "log.cleaner.delete.retention.ms"),
    _same("min.compaction.lag.ms", "log.cleaner.min.compaction.lag.ms"),
    _same("max.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms"),
    _same("min.cleanable.dirty.ratio", "log.cleaner.min.cleanable.ratio"),
    _same("compaction.strategy", "log.cleaner.compaction.strategy"),
    _same("compaction.strategy.header", "log.cleaner.compaction.strategy.header"),
    _same("message.timestamp.type", "log.message.timestamp.type"),
    _same("message.timestamp.before.max.ms", "log.message.timestamp.before.max.ms"),
    _same("message.timestamp.after.max.ms", "log.message.timestamp.after.max.ms"),
    _same("compression.type", "compression.type"),
    _same("compression.gzip.level", "compression.gzip.level"),
    _same("compression.lz4.level", "compression.lz4.level"),
    _same("compression.zstd.level", "compression.zstd.level"),
    _same("min.insync.replicas", "min.insync.replicas"),
    _same("unclean.leader.election.enable", "unclean.leader.election.enable"),
)


def _broker_retention_ms(key: str, raw: object, ms: int) -> int:
    """Kafka's broker rule: any negative means unlimited (-1), and 0 is refused."""
    if ms < 0:
        return -1
    if ms == 0:
        raise ConfigError(
            key, raw, "log.retention.ms must be unlimited (-1) or, greater than or equal to 1"
        )
    return ms


def broker_log_defaults(broker_props: Mapping[str, object]) -> dict[str, object]:
    """Topic-key defaults set by a broker's ``log.*`` properties (only keys the broker sets).

    Keys that are not log settings are ignored: a broker file has many. Errors name the broker
    key that carried the bad value.
    """
    result: dict[str, object] = {}
    for mapping in BROKER_MAPPINGS:
        source = next((s for s in mapping.sources if s.key in broker_props), None)
        if source is None:
            continue
        raw = broker_props[source.key]
        value = parse_value(source.type, source.key, raw, source.validator)
        if source.factor != 1:
            value = value * source.factor
            if value > LONG_MAX:
                raise ConfigError(source.key, raw, "Value in milliseconds does not fit a LONG")
        if mapping.topic_key == "retention.ms":
            value = _broker_retention_ms(source.key, raw, value)
        result[mapping.topic_key] = TOPIC_CONFIGS[mapping.topic_key].parse(value, key=source.key)
    return result


def build_log_config(
    broker_props: Mapping[str, object] | None = None,
    topic_overrides: Mapping[str, object] | None = None,
) -> LogConfig:
    """Topic overrides win over broker values, which win over Kafka's defaults."""
    values: dict[str, Any] = {k: s.default for k, s in TOPIC_CONFIGS.items()}  # each checked by its ConfigDef
    values.update(broker_log_defaults(broker_props or {}))
    overrides = topic_overrides or {}
    values.update(validate_topic_overrides(overrides))
    check_together(values, overrides)
    return LogConfig(**{TOPIC_CONFIGS[k].field: v for k, v in values.items()})


def topic_log_config(broker_props: Mapping[str, object] | None, overrides: Mapping[str, object]) -> LogConfig:
    """A topic's config from its overrides (as stored, or given to a create or an alter) over
    the broker's settings, refused as a create refuses it: the one rule for the create, the
    alter, a topic's stored config and the config recovery falls back on. That includes a
    ``segment.index.bytes`` below one time index entry (``check_segment_index_bytes``)."""
    config = build_log_config(broker_props, overrides)
    check_segment_index_bytes(config)
    return config


#: Partitions one topic may have. Kafka has no such limit (KIP-578 proposed one); here a
#: ``topic create`` makes every partition directory at once, so an unbounded count fills the
#: disk with directories. The ceiling keeps ``<topic>-<partition>`` of a 249-character topic
#: within a 255-byte file name.
MAX_PARTITIONS_KEY = "logplat.max.partitions.per.topic"
DEFAULT_MAX_PARTITIONS = 1000
MAX_PARTITIONS_CEILING = 99999


def max_partitions_per_topic(broker_props: Mapping[str, object] | None = None) -> int:
    """``logplat.max.partitions.per.topic`` (default 1000, at most 99999)."""
    raw = (broker_props or {}).get(MAX_PARTITIONS_KEY)
    if raw is None:
        return DEFAULT_MAX_PARTITIONS
    value = parse_value("INT", MAX_PARTITIONS_KEY, raw)
    if not 1 <= value <= MAX_PARTITIONS_CEILING:
        raise ConfigError(MAX_PARTITIONS_KEY, raw, f"must be between 1 and {MAX_PARTITIONS_CEILING}")
    return value


RETENTION_CHECK_INTERVAL_KEY = "log.retention.check.interval.ms"
DEFAULT_RETENTION_CHECK_INTERVAL_MS = 300_000  # Kafka's default: five minutes


def retention_check_interval_ms(broker_props: Mapping[str, object] | None = None) -> int:
    """Kafka's ``log.retention.check.interval.ms`` (a LONG of at least 1): how often the broker's
    retention thread runs. The platform's sweep schedule and its sensors' trust in an unchanged
    partition's state follow it."""
    raw = (broker_props or {}).get(RETENTION_CHECK_INTERVAL_KEY)
    if raw is None:
        return DEFAULT_RETENTION_CHECK_INTERVAL_MS
    return parse_value("LONG", RETENTION_CHECK_INTERVAL_KEY, raw, at_least(1))


CORDONED_LOG_DIRS_KEY = "cordoned.log.dirs"
#: ``cordoned.log.dirs=*``: every log dir
ALL_LOG_DIRS = "*"


def cordoned_log_dir_entries(broker_props: Mapping[str, object] | None = None) -> tuple[str, ...]:
    """KIP-1066's ``cordoned.log.dirs`` (a LIST, default empty): the log dirs that get no new
    partitions, or ``*`` for all of them, refused in a 4.4 broker's words when an entry is empty
    or ``*`` comes with others. That each entry is a log dir is checked where the log dirs are
    known (``logdir.placement.check_cordoned_log_dirs``)."""
    raw = (broker_props or {}).get(CORDONED_LOG_DIRS_KEY)
    if raw is None:
        return ()
    entries: tuple[str, ...] = parse_value("LIST", CORDONED_LOG_DIRS_KEY, raw, no_empty_items)
    if ALL_LOG_DIRS in entries and len(entries) > 1:
        raise ConfigError(CORDONED_LOG_DIRS_KEY, raw, "", message=(
            f"When {CORDONED_LOG_DIRS_KEY} is set to {ALL_LOG_DIRS}, it must not contain other values"))
    return entries
