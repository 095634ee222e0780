"""The topic-level configs (Kafka's ``LogConfig``): every key with its type, default and
validator, the rules between keys, and the resolved ``LogConfig`` a log runs with."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ..errors import ConfigError, UnknownConfigError
from ..files.naming import METADATA_LOG_TOPIC
from ..limits import TIME_INDEX_ENTRY_SIZE
from .values import LONG_MAX, MS_PER_HOUR, Validator, at_least, between, each_one_of, one_of, parse_value


def _gzip_level(key: str, raw: object, value: Any) -> None:
    # -1 is zlib's "default compression"; otherwise zlib's 1..9.
    if value != -1 and not 1 <= value <= 9:
        raise ConfigError(key, raw, "Value must be between 1 and 9, or -1 (the codec's default)")


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
        return parse_value(self.type, key or self.key, value, self.validator)


def _header_name(key: str, raw: object, value: Any) -> None:
    """A record header key (KIP-280's ``compaction.strategy.header``): any printable UTF-8 text a
    producer can set, within reason. Header keys are matched exactly, and ``ConfigDef`` trims a
    STRING value, so surrounding whitespace would silently select another header: refused."""
    if isinstance(raw, str) and raw != value:
        raise ConfigError(key, raw, "Value must be a header name without leading or trailing whitespace "
                                    "(the value is trimmed, so it would name another header)")
    if len(value.encode("utf-8")) > 255 or not value.isprintable():
        raise ConfigError(key, raw, "Value must be a printable header name of at most 255 bytes")


COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("compact", "delete")
COMPACTION_STRATEGIES = ("offset", "timestamp", "header")
#: The platform's own topic config (``LogConfig.logplat_roll_idle_segments``).
ROLL_IDLE_SEGMENTS = "logplat.roll.idle.segments"
REMOTE_VERSION_RETENTION = "logplat.remote.version.retention.ms"

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
        # KIP-1161 (Kafka 4.1+): the empty list is a policy too, keep forever (``LogConfig.keep_forever``)
        ConfigSpec("cleanup.policy", "LIST", ("delete",), each_one_of(*CLEANUP_POLICIES),
                   "delete, compact, both, or empty: keep forever"),
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
        # KIP-937: Kafka 4 refuses a record more than an hour ahead of the broker's clock (here
        # ``now_ms``); one far in the future would hold time retention back (``log.retention``)
        ConfigSpec("message.timestamp.before.max.ms", "LONG", LONG_MAX, at_least(0),
                   "refuse a CreateTime this much older than now"),
        ConfigSpec("message.timestamp.after.max.ms", "LONG", MS_PER_HOUR, at_least(0),
                   "refuse a CreateTime this much ahead of now"),
        ConfigSpec("compression.type", "STRING", "producer", one_of(*COMPRESSION_TYPES)),
        ConfigSpec("compression.gzip.level", "INT", -1, _gzip_level),
        ConfigSpec("compression.lz4.level", "INT", 9, between(1, 17)),
        ConfigSpec("compression.zstd.level", "INT", 3, between(-131072, 22)),
        # Replication settings: accepted and stored so Kafka users' topic configs carry over;
        # a single-copy store has no replicas to count or elect.
        ConfigSpec("min.insync.replicas", "INT", 1, at_least(1)),
        ConfigSpec("unclean.leader.election.enable", "BOOLEAN", False, None),
        # Ours, not Kafka's (hence the prefix): a compaction run rolls an idle active segment
        # once its first record is max_segment_ms old, which Kafka does only on an append.
        ConfigSpec(ROLL_IDLE_SEGMENTS, "BOOLEAN", False, None,
                   "a compaction run rolls an active segment older than the max segment ms"),
        # KIP-405's tiered storage keys: rolled segments also live in the remote tier
        # (``LOGPLAT_REMOTE_STORAGE``); the local copies go after local retention (-2: the
        # whole log's ``retention.*``). Unlike Kafka, a compacted topic may be tiered.
        ConfigSpec("remote.storage.enable", "BOOLEAN", False, None, "keep rolled segments in the remote tier"),
        ConfigSpec("local.retention.ms", "LONG", -2, at_least(-2), "local copies of tiered segments older go"),
        ConfigSpec("local.retention.bytes", "LONG", -2, at_least(-2), "local tiered bytes beyond this go"),
        # Ours: how long a superseded remote version stays readable (``--as-of-version``,
        # restore) before the sweeper may delete its objects (Delta's log retention).
        ConfigSpec(REMOTE_VERSION_RETENTION, "LONG", 604800000, at_least(0),
                   "superseded remote versions stay readable this long"),
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


def check_together(values: Mapping[str, object], raw: Mapping[str, object]) -> None:
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
    message_timestamp_after_max_ms: int = MS_PER_HOUR
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    logplat_roll_idle_segments: bool = False
    remote_storage_enable: bool = False
    local_retention_ms: int = -2
    local_retention_bytes: int = -2
    logplat_remote_version_retention_ms: int = 604800000

    def __post_init__(self) -> None:
        values: dict[str, object] = {}
        for spec in TOPIC_CONFIGS.values():
            raw = getattr(self, spec.field)
            parsed = spec.parse(raw)
            if parsed != raw or type(parsed) is not type(raw):
                object.__setattr__(self, spec.field, parsed)
            values[spec.key] = parsed
        check_together(values, values)

    @cached_property
    def compact(self) -> bool:
        return any(p.lower() == "compact" for p in self.cleanup_policy)

    @cached_property
    def delete(self) -> bool:
        return any(p.lower() == "delete" for p in self.cleanup_policy)

    @property
    def keep_forever(self) -> bool:
        """KIP-1161's empty ``cleanup.policy``: neither retention nor compaction ever removes a
        record (a 4.4 broker keeps such a topic's expired segments); only records below a
        ``delete-records`` log start offset leave, as they do under every policy."""
        return not self.compact and not self.delete

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

    @property
    def effective_local_retention_ms(self) -> int:
        """``local.retention.ms``, or ``retention.ms`` when it is -2 (Kafka's rule)."""
        return self.retention_ms if self.local_retention_ms == -2 else self.local_retention_ms

    @property
    def effective_local_retention_bytes(self) -> int:
        """``local.retention.bytes``, or ``retention.bytes`` when it is -2 (Kafka's rule)."""
        return self.retention_bytes if self.local_retention_bytes == -2 else self.local_retention_bytes

    def to_topic_dict(self) -> dict[str, object]:
        """The settings under their Kafka topic keys (for ``describe`` and metadata)."""
        return {spec.key: getattr(self, spec.field) for spec in TOPIC_CONFIGS.values()}


#: Kafka's internal topics are compacted: the broker creates ``__consumer_offsets`` with
#: ``cleanup.policy=compact`` and ``offsets.topic.segment.bytes`` (100 MiB), and
#: ``__transaction_state`` likewise (``transaction.state.log.segment.bytes``). KRaft's metadata
#: log is never cleaned by topic rules (``naming.METADATA_LOG_TOPIC``): no retention, no
#: compaction; topic retention deleted a copied broker's whole metadata log past its snapshot.
INTERNAL_TOPIC_DEFAULTS: dict[str, dict[str, str]] = {
    "__consumer_offsets": {"cleanup.policy": "compact", "segment.bytes": str(100 * 1024 * 1024)},
    "__transaction_state": {"cleanup.policy": "compact", "segment.bytes": str(100 * 1024 * 1024)},
    METADATA_LOG_TOPIC: {"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1"},
}


def check_segment_index_bytes(config: LogConfig) -> None:
    """Refuse, for a topic created or altered now, a ``segment.index.bytes`` (or the broker's
    ``log.index.size.max.bytes`` under it) below one 12-byte time index entry. Kafka's
    validator takes 4, and then no segment of the topic can be made ("Invalid max index size"):
    one create so broke every writable command of its log dir. A value stored before stays
    readable, so that the topic can be altered or deleted."""
    if config.segment_index_bytes < TIME_INDEX_ENTRY_SIZE:
        raise ConfigError("segment.index.bytes", config.segment_index_bytes,
                          f"Value must be at least {TIME_INDEX_ENTRY_SIZE} (one time index entry)")


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
