"""Kafka's topic-level and broker-level log configuration: names, defaults, validators, precedence.

Users bring Kafka habits (``--config retention.ms=...``, a broker ``server.properties``), so the
keys, defaults, ranges and error texts are Kafka's (``LogConfig``/``ConfigDef``/
``KafkaConfig``). Every value is parsed and checked here before any caller touches disk; an
error names the key, the value and what is allowed.

Precedence, as in Kafka: a topic override beats the broker's ``log.*`` value, which beats the
built-in default. Within the broker, the finer unit wins (``log.retention.ms`` over
``log.retention.minutes`` over ``log.retention.hours``).
"""

from __future__ import annotations

import math
import os
import re
import stat
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, Iterable, Mapping

from .errors import ConfigError, ServerPropertiesError, UnknownConfigError
from .nofollow import file_kind

INT_MAX = 2**31 - 1
INT_MIN = -(2**31)
LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)

MS_PER_MINUTE = 60 * 1000
#: the latest clock any command accepts (9999-12-31T23:59:59.999Z): a record timestamp or ``now_ms``
#: past it is a typo, and it keeps every sum of a clock and a Kafka duration inside a long
MAX_TIMESTAMP_MS = 253_402_300_799_999
MS_PER_HOUR = 60 * MS_PER_MINUTE

# --------------------------------------------------------------------------- parsing

_INTEGER = re.compile(r"[+-]?[0-9]+")
_MAX_INTEGER_CHARS = 64  # longer is out of any range (and past Python's own limit beyond 4300 digits)
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_LIST_SPLIT = re.compile(r"\s*,\s*")

_TYPE_RANGE = {"INT": (INT_MIN, INT_MAX), "LONG": (LONG_MIN, LONG_MAX)}


def _parse_integer(key: str, value: object, type_name: str) -> int:
    lo, hi = _TYPE_RANGE[type_name]
    if isinstance(value, bool):
        raise ConfigError(key, value, f"Not a number of type {type_name}")
    if isinstance(value, int):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and _INTEGER.fullmatch(value.strip()) and len(value.strip()) <= _MAX_INTEGER_CHARS:
        number = int(value.strip())
    else:
        raise ConfigError(key, value, f"Not a number of type {type_name}")
    if not lo <= number <= hi:
        raise ConfigError(key, value, f"Not a number of type {type_name}")
    return number


def _parse_double(key: str, value: object) -> float:
    if isinstance(value, bool):
        raise ConfigError(key, value, "Not a number of type DOUBLE")
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str) and _DECIMAL.fullmatch(value.strip()):
        number = float(value.strip())
    else:
        raise ConfigError(key, value, "Not a number of type DOUBLE")
    if math.isnan(number):
        # Kafka lets NaN through its range checks (every comparison is false); we do not.
        raise ConfigError(key, value, "Not a number of type DOUBLE")
    return number


def _parse_boolean(key: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("true", "false"):
            return text == "true"
    raise ConfigError(key, value, "Expected value to be either true or false")


def _parse_string(key: str, value: object) -> str:
    if isinstance(value, str):
        return value.strip()
    raise ConfigError(key, value, "Expected value to be a string")


def _parse_list(key: str, value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        text = value.strip()
        return () if text == "" else tuple(_LIST_SPLIT.split(text))
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return tuple(v.strip() for v in value)
    raise ConfigError(key, value, "Expected a comma-separated list")


_PARSERS: dict[str, Callable[[str, object], Any]] = {
    "INT": lambda k, v: _parse_integer(k, v, "INT"),
    "LONG": lambda k, v: _parse_integer(k, v, "LONG"),
    "DOUBLE": _parse_double,
    "BOOLEAN": _parse_boolean,
    "STRING": _parse_string,
    "LIST": _parse_list,
}

# --------------------------------------------------------------------------- validators
# A validator takes (key, raw value for the message, parsed value) and raises ConfigError.

Validator = Callable[[str, object, Any], None]


def _fmt(n: float) -> str:
    return str(int(n)) if float(n).is_integer() else str(n)


def at_least(minimum: float) -> Validator:
    def check(key: str, raw: object, value: Any) -> None:
        if value < minimum:
            raise ConfigError(key, raw, f"Value must be at least {_fmt(minimum)}")

    return check


def between(minimum: float, maximum: float) -> Validator:
    def check(key: str, raw: object, value: Any) -> None:
        if value < minimum:
            raise ConfigError(key, raw, f"Value must be at least {_fmt(minimum)}")
        if value > maximum:
            raise ConfigError(key, raw, f"Value must be no more than {_fmt(maximum)}")

    return check


def one_of(*choices: str) -> Validator:
    def check(key: str, raw: object, value: Any) -> None:
        if value not in choices:
            raise ConfigError(key, raw, f"String must be one of: {', '.join(choices)}")

    return check


def each_one_of(*choices: str) -> Validator:
    def check(key: str, raw: object, value: Any) -> None:
        for item in value:
            if item not in choices:
                raise ConfigError(key, raw, f"String must be one of: {', '.join(choices)}")

    return check


def _gzip_level(key: str, raw: object, value: Any) -> None:
    # -1 is zlib's "default compression"; otherwise zlib's 1..9.
    if value != -1 and not 1 <= value <= 9:
        raise ConfigError(key, raw, "Value must be between 1 and 9, or -1 (the codec's default)")


# --------------------------------------------------------------------------- topic configs


@dataclass(frozen=True)
class ConfigSpec:
    """One topic-level key: its type, default and validator (Kafka's ``ConfigDef`` entry)."""

    key: str
    type: str
    default: object
    validator: Validator | None = None
    doc: str = ""

    @property
    def field(self) -> str:
        return self.key.replace(".", "_")

    def parse(self, value: object, *, key: str | None = None) -> object:
        """Parse and check ``value``; errors name ``key`` (a broker key may stand in for ours)."""
        name = key or self.key
        parsed = _PARSERS[self.type](name, value)
        if self.validator is not None:
            self.validator(name, value, parsed)
        return parsed


def _header_name(key: str, raw: object, value: Any) -> None:
    # A record header key: any printable UTF-8 text a producer can set, within reason.
    if len(value.encode("utf-8")) > 255 or not value.isprintable():
        raise ConfigError(key, raw, "Value must be a printable header name of at most 255 bytes")


COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("compact", "delete")
COMPACTION_STRATEGIES = ("offset", "timestamp", "header")

TOPIC_CONFIGS: dict[str, ConfigSpec] = {
    s.key: s
    for s in [
        ConfigSpec("segment.bytes", "INT", 1073741824, at_least(14), "segment file size limit"),
        ConfigSpec("segment.ms", "LONG", 604800000, at_least(1), "roll a segment this old"),
        ConfigSpec("segment.jitter.ms", "LONG", 0, at_least(0), "random slack on segment.ms"),
        ConfigSpec("segment.index.bytes", "INT", 10485760, at_least(4), "index file size"),
        ConfigSpec("index.interval.bytes", "INT", 4096, at_least(0), "bytes between index entries"),
        ConfigSpec("retention.ms", "LONG", 604800000, at_least(-1), "delete segments older"),
        ConfigSpec("retention.bytes", "LONG", -1, None, "delete segments beyond this size"),
        ConfigSpec("file.delete.delay.ms", "LONG", 60000, at_least(0), ".deleted files linger"),
        ConfigSpec("flush.messages", "LONG", LONG_MAX, at_least(1), "fsync every N messages"),
        ConfigSpec("flush.ms", "LONG", LONG_MAX, at_least(0), "fsync every N ms"),
        ConfigSpec("max.message.bytes", "INT", 1048588, at_least(0), "largest batch accepted"),
        ConfigSpec("preallocate", "BOOLEAN", False, None, "preallocate segment files"),
        ConfigSpec("cleanup.policy", "LIST", ("delete",), each_one_of(*CLEANUP_POLICIES), ""),
        ConfigSpec("delete.retention.ms", "LONG", 86400000, at_least(0), "tombstone lifetime"),
        ConfigSpec("min.compaction.lag.ms", "LONG", 0, at_least(0), "never compact younger"),
        ConfigSpec("max.compaction.lag.ms", "LONG", LONG_MAX, at_least(1), "compact by then"),
        ConfigSpec("min.cleanable.dirty.ratio", "DOUBLE", 0.5, between(0, 1), "clean above"),
        # KIP-280 (accepted, never shipped by Kafka): which record of a key compaction keeps.
        ConfigSpec("compaction.strategy", "STRING", "offset", one_of(*COMPACTION_STRATEGIES),
                   "which record of a key wins"),
        ConfigSpec("compaction.strategy.header", "STRING", "", _header_name,
                   "header holding the version (8-byte big-endian long)"),
        ConfigSpec("message.timestamp.type", "STRING", "CreateTime", one_of(*TIMESTAMP_TYPES)),
        ConfigSpec("message.timestamp.before.max.ms", "LONG", LONG_MAX, at_least(0)),
        ConfigSpec("message.timestamp.after.max.ms", "LONG", LONG_MAX, at_least(0)),
        ConfigSpec("compression.type", "STRING", "producer", one_of(*COMPRESSION_TYPES)),
        ConfigSpec("compression.gzip.level", "INT", -1, _gzip_level),
        ConfigSpec("compression.lz4.level", "INT", 9, between(1, 17)),
        ConfigSpec("compression.zstd.level", "INT", 3, between(-131072, 22)),
        # Replication settings: accepted and stored so Kafka users' topic configs carry over;
        # a single-copy store has no replicas to count or elect.
        ConfigSpec("min.insync.replicas", "INT", 1, at_least(1)),
        ConfigSpec("unclean.leader.election.enable", "BOOLEAN", False, None),
    ]
}

TOPIC_CONFIG_KEYS: tuple[str, ...] = tuple(TOPIC_CONFIGS)


def check_config_key(key: str) -> None:
    """A topic config name this engine does not know is refused to delete as to set: deleting
    it could only be a typo (a known name that is not set is accepted, and changes nothing)."""
    if key not in TOPIC_CONFIGS:
        raise UnknownConfigError(f"Cannot delete config {key}: no topic config has that name. Valid names: "
                                 f"{', '.join(sorted(TOPIC_CONFIG_KEYS))}")


def _unknown_key_error(key: str, value: object) -> ConfigError:
    return ConfigError(
        key,
        value,
        f"Unknown topic config name: {key}. Valid names: {', '.join(sorted(TOPIC_CONFIG_KEYS))}",
    )


def _check_together(values: Mapping[str, object], raw: Mapping[str, object]) -> None:
    """The rules between keys: the compaction lags' order, and the header strategy's header."""
    _check_compaction_lags(values, raw)
    if values["compaction.strategy"] == "header" and not values["compaction.strategy.header"]:
        raise ConfigError(
            "compaction.strategy.header",
            raw.get("compaction.strategy.header", ""),
            "compaction.strategy=header needs compaction.strategy.header to name the header that holds "
            "each record's version",
        )


def _check_compaction_lags(values: Mapping[str, object], raw: Mapping[str, object]) -> None:
    lo = values["min.compaction.lag.ms"]
    hi = values["max.compaction.lag.ms"]
    if lo > hi:  # type: ignore[operator]
        raise ConfigError(
            "min.compaction.lag.ms",
            raw.get("min.compaction.lag.ms", lo),
            f"conflict topic config setting min.compaction.lag.ms ({lo}) > "
            f"max.compaction.lag.ms ({hi})",
        )


@dataclass(frozen=True)
class LogConfig:
    """Resolved, typed log settings of one topic; field names are the topic keys with '.' -> '_'.

    Constructing one directly validates it too, so no code path can carry a value Kafka
    would refuse down to the disk.
    """

    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    retention_ms: int = 604800000
    retention_bytes: int = -1
    file_delete_delay_ms: int = 60000
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    max_message_bytes: int = 1048588
    preallocate: bool = False
    cleanup_policy: tuple[str, ...] = ("delete",)
    delete_retention_ms: int = 86400000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    compaction_strategy: str = "offset"
    compaction_strategy_header: str = ""
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False

    def __post_init__(self) -> None:
        values: dict[str, object] = {}
        for spec in TOPIC_CONFIGS.values():
            raw = getattr(self, spec.field)
            parsed = spec.parse(raw)
            if parsed != raw or type(parsed) is not type(raw):
                object.__setattr__(self, spec.field, parsed)
            values[spec.key] = parsed
        _check_together(values, values)

    @cached_property
    def compact(self) -> bool:
        return any(p.lower() == "compact" for p in self.cleanup_policy)

    @cached_property
    def delete(self) -> bool:
        return any(p.lower() == "delete" for p in self.cleanup_policy)

    @cached_property
    def max_segment_ms(self) -> int:
        """``segment.ms``, shortened to half of a finite ``max.compaction.lag.ms`` on compacted
        topics.

        The active segment is never cleaned, so a compacted topic must roll before its records'
        erasure deadline. Kafka rolls at the full lag, which makes a record cleanable exactly
        when its deadline passes; rolling at half leaves the other half for the cleaner (the
        compaction sensor asks for a partition once half its oldest record's lag is used, see
        ``cleaner.plan.ErasureDeadline``). With Kafka's default lag (unlimited) nothing changes.
        """
        if self.compact and 0 < self.max_compaction_lag_ms < LONG_MAX:
            return min(max(self.max_compaction_lag_ms // 2, 1), self.segment_ms)
        return self.segment_ms

    def to_topic_dict(self) -> dict[str, object]:
        """The settings under their Kafka topic keys (for ``describe`` and metadata)."""
        return {spec.key: getattr(self, spec.field) for spec in TOPIC_CONFIGS.values()}


#: Kafka's internal topics are compacted: the broker creates ``__consumer_offsets`` with
#: ``cleanup.policy=compact`` and ``offsets.topic.segment.bytes`` (100 MiB), and
#: ``__transaction_state`` likewise (``transaction.state.log.segment.bytes``).
INTERNAL_TOPIC_DEFAULTS: dict[str, dict[str, str]] = {
    "__consumer_offsets": {"cleanup.policy": "compact", "segment.bytes": str(100 * 1024 * 1024)},
    "__transaction_state": {"cleanup.policy": "compact", "segment.bytes": str(100 * 1024 * 1024)},
}


def creation_overrides(topic: str, overrides: Mapping[str, str]) -> dict[str, str]:
    """The overrides a new topic is created with: an internal topic's defaults, then the caller's."""
    return {**INTERNAL_TOPIC_DEFAULTS.get(topic, {}), **overrides}


def validate_topic_overrides(overrides: Mapping[str, object]) -> dict[str, object]:
    """Parse topic overrides (strings from the CLI or typed values) into typed values.

    Rejects unknown keys, values out of range and ``min.compaction.lag.ms`` above
    ``max.compaction.lag.ms`` (with the other taken from the defaults when absent).
    """
    parsed: dict[str, object] = {}
    for key, value in overrides.items():
        spec = TOPIC_CONFIGS.get(key)
        if spec is None:
            raise _unknown_key_error(key, value)
        parsed[key] = spec.parse(value)
    defaults = {k: s.default for k, s in TOPIC_CONFIGS.items()}
    _check_compaction_lags({**defaults, **parsed}, overrides)
    return parsed


# --------------------------------------------------------------------------- broker configs


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
        value = _PARSERS[source.type](source.key, raw)
        if source.validator is not None:
            source.validator(source.key, raw, value)
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
    values: dict[str, object] = {k: s.default for k, s in TOPIC_CONFIGS.items()}
    values.update(broker_log_defaults(broker_props or {}))
    overrides = topic_overrides or {}
    values.update(validate_topic_overrides(overrides))
    _check_together(values, overrides)
    return LogConfig(**{TOPIC_CONFIGS[k].field: v for k, v in values.items()})


# --------------------------------------------------------------------------- cleaner config

_MIB = 1024 * 1024


@dataclass(frozen=True)
class CleanerConfig:
    """Broker-level knobs of the log cleaner (Kafka's ``CleanerConfig``), shared by every cleaning run."""

    dedupe_buffer_size: int = 134217728
    io_buffer_load_factor: float = 0.9
    io_buffer_size: int = 524288
    io_max_bytes_per_second: float = float("inf")
    backoff_ms: int = 15000
    threads: int = 1
    enable: bool = True

    def __post_init__(self) -> None:
        if self.threads > 0 and self.dedupe_buffer_size / self.threads <= _MIB:
            raise ConfigError(
                "log.cleaner.dedupe.buffer.size",
                self.dedupe_buffer_size,
                "log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread.",
            )

    @property
    def dedupe_buffer_size_per_thread(self) -> int:
        """Offset-map memory of one cleaner, capped like Kafka's at a Java array's size."""
        return min(self.dedupe_buffer_size // max(self.threads, 1), INT_MAX)

    @property
    def io_buffer_size_per_thread(self) -> int:
        """Read and write buffers each get half of a thread's share."""
        return self.io_buffer_size // max(self.threads, 1) // 2


def _positive_fraction(key: str, raw: object, value: Any) -> None:
    # Stricter than Kafka (no validator there): a map fuller than its slots cannot work.
    if not 0 < value <= 1:
        raise ConfigError(key, raw, "Value must be greater than 0 and at most 1")


def _positive(key: str, raw: object, value: Any) -> None:
    if not value > 0:
        raise ConfigError(key, raw, "Value must be greater than 0")


_CLEANER_KEYS: dict[str, tuple[str, str, Validator | None]] = {
    "log.cleaner.dedupe.buffer.size": ("dedupe_buffer_size", "LONG", at_least(0)),
    "log.cleaner.io.buffer.load.factor": ("io_buffer_load_factor", "DOUBLE", _positive_fraction),
    "log.cleaner.io.buffer.size": ("io_buffer_size", "INT", at_least(0)),
    "log.cleaner.io.max.bytes.per.second": ("io_max_bytes_per_second", "DOUBLE", _positive),
    "log.cleaner.backoff.ms": ("backoff_ms", "LONG", at_least(0)),
    "log.cleaner.threads": ("threads", "INT", at_least(0)),
    "log.cleaner.enable": ("enable", "BOOLEAN", None),
}


def build_cleaner_config(broker_props: Mapping[str, object] | None = None) -> CleanerConfig:
    """The cleaner settings from ``log.cleaner.*`` broker keys; other keys are ignored."""
    props = broker_props or {}
    values: dict[str, object] = {}
    for key, (field, type_name, validator) in _CLEANER_KEYS.items():
        if key in props:
            raw = props[key]
            value = _PARSERS[type_name](key, raw)
            if validator is not None:
                validator(key, raw, value)
            values[field] = value
    return CleanerConfig(**values)  # type: ignore[arg-type]


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
    value = _PARSERS["INT"](MAX_PARTITIONS_KEY, raw)
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
    value = _PARSERS["LONG"](RETENTION_CHECK_INTERVAL_KEY, raw)
    at_least(1)(RETENTION_CHECK_INTERVAL_KEY, raw, value)
    return value


def parse_properties(lines: Iterable[str]) -> dict[str, str]:
    """A minimal Java ``.properties`` reader: ``key=value`` or ``key: value``, ``#``/``!`` comments.

    Enough for a broker's ``server.properties`` (no line continuations or escapes).
    """
    props: dict[str, str] = {}
    for line in lines:
        text = line.strip()
        if not text or text[0] in "#!":
            continue
        match = re.match(r"([^=:\s]+)\s*[=:\s]\s*(.*)$", text)
        if match:
            props[match.group(1)] = match.group(2)
        else:
            props[text] = ""
    return props


SERVER_PROPERTIES_ENV = "LOGPLAT_SERVER_PROPERTIES"


def broker_props_from_env() -> dict[str, str]:
    """Broker-level ``log.*`` settings from the ``server.properties`` file named by
    ``$LOGPLAT_SERVER_PROPERTIES``, if set, read with :func:`parse_properties` and validated.

    The one place the engine reads that variable: the CLI and the platform's settings both call it.
    """
    path = os.environ.get(SERVER_PROPERTIES_ENV)
    if not path:
        return {}
    props = parse_properties(_read_server_properties(path).splitlines())
    build_log_config(props, validate_topic_overrides({}))
    return props


def _read_server_properties(path: str) -> str:
    """The file's text; :class:`ServerPropertiesError` naming the variable and what is wrong
    when it is missing, unreadable, not a regular file (a FIFO would block the read for ever) or
    not UTF-8. A symbolic link is fine: the file is the user's, outside any log dir."""
    where = f"{SERVER_PROPERTIES_ENV}={path}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise ServerPropertiesError(f"{where}: cannot read it: {exc.strerror}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ServerPropertiesError(f"{where}: it is {file_kind(mode)}, not a properties file")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
    except OSError as exc:
        raise ServerPropertiesError(f"{where}: cannot read it: {exc.strerror}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ServerPropertiesError(f"{where}: not UTF-8 text (byte {data[exc.start]:#04x} at offset {exc.start})") from None
