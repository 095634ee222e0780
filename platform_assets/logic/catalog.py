"""The topics the code location is built from, read from the log dirs when it loads.

A topic is an asset, and Dagster needs assets at load time: a new topic appears after a reload of
the code location (the Reload button, ``reloadRepositoryLocation``, or a restart), while a new
*partition* of a known topic appears at run time through the state sensor.

Kafka topic names may hold ``.`` and ``-``, which Dagster's job, op and group names may not
(``^[A-Za-z0-9_]+$``). :attr:`Topic.safe_name` replaces them with ``_`` and, when it had to,
appends a short digest of the real name so that ``a.b`` and ``a-b`` (legal together in Kafka)
never share a job; a legal name that ends as a changed one does is changed too, so that topic
``a_b_34fafd`` and topic ``a-b`` never share one either (their clash stopped the whole code
location from loading). The asset key and the partition set keep the real name.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from storage_engine.config.topic import LogConfig
from storage_engine.config.values import LONG_MAX
from storage_engine.errors import LogError
from storage_engine.logdir.log_dir import missing_log_dir
from storage_engine.logdir.manager import LogManager

from .units import binary_size_text, duration_text

_UNSAFE = re.compile(r"[^A-Za-z0-9_]")
_DIGEST_SUFFIX = re.compile(r"_[0-9a-f]{6}$")  # how a changed name ends

#: Topic settings shown on each asset: what decides when and how its logs are cleaned.
SHOWN_CONFIGS = (
    "cleanup.policy",
    "min.cleanable.dirty.ratio",
    "compaction.strategy",
    "compaction.strategy.header",
    "min.compaction.lag.ms",
    "max.compaction.lag.ms",
    "delete.retention.ms",
    "retention.ms",
    "retention.bytes",
    "segment.bytes",
    "segment.ms",
)


def safe_name(topic: str) -> str:
    """``topic`` as a Dagster name: unchanged when already legal and not ending as a changed
    name does, else ``_`` for each illegal character plus six hex digits of the topic's SHA-1."""
    cleaned = _UNSAFE.sub("_", topic)
    if cleaned == topic and not _DIGEST_SUFFIX.search(topic):
        return topic
    return f"{cleaned}_{hashlib.sha1(topic.encode()).hexdigest()[:6]}"


@dataclass(frozen=True)
class Topic:
    """One topic as the definitions see it at load time (its partitions are the asset's dynamic
    partition keys, which the state sensor keeps up to date)."""

    name: str
    config: LogConfig

    @property
    def compact(self) -> bool:
        return self.config.compact

    @property
    def delete(self) -> bool:
        return self.config.delete

    @property
    def policy(self) -> str:
        """``compact``, ``delete`` or ``compact_delete``: also the asset group."""
        return "_".join(p for p in ("compact", "delete") if getattr(self.config, p)) or "none"

    @property
    def safe_name(self) -> str:
        return safe_name(self.name)

    def shown_configs(self) -> dict[str, str]:
        values = self.config.to_topic_dict()
        return {k: config_text(k, values[k]) for k in SHOWN_CONFIGS}


UNLIMITED = {-1, LONG_MAX}  # Kafka's "no limit" values (retention.bytes=-1, max.compaction.lag.ms=Long.MAX_VALUE)


def config_text(key: str, value: object) -> str:
    """A config value as a person reads it: lists joined, Kafka's no-limit values as "unlimited",
    times and sizes with their unit beside the raw value (``604800000 (7 d)``, ``1073741824 (1 GiB)``:
    binary units, in which Kafka's defaults are round)."""
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    if not isinstance(value, int) or isinstance(value, bool):
        return str(value)
    if value in UNLIMITED:
        return "unlimited"
    if key.endswith(".ms") and value > 0:
        return f"{value} ({duration_text(value / 1000)})"
    if key.endswith(".bytes"):
        return f"{value} ({binary_size_text(value)})"
    return str(value)


@dataclass(frozen=True)
class Catalog:
    """The topics the code location is built from, and those it could not build, with why."""

    topics: tuple[Topic, ...]
    refused: Mapping[str, str]


def discover_topics(log_dirs: Sequence[str], broker_props: Mapping[str, str]) -> Catalog:
    """Every topic in the log dirs (metadata files and partition directories), read-only. Only
    names and configs are read: a bad file in one partition shows on that partition (the
    sensors' ``log_health``, its runs), and a topic whose config is refused is left out with the
    reason, which the state sensor reports; neither stops the code location from loading, which
    would stop every run of every topic. Nor does a log dir that is not there (unmounted, a
    file): the load reads the others, and the sensors' ticks fail naming it."""
    refused: dict[str, LogError] = {}
    present = [d for d in log_dirs if missing_log_dir(d) is None]
    if not present:
        return Catalog((), {})
    with LogManager(present, broker_props, read_only=True) as manager:
        configs = manager.topic_configs(refused=refused)
    return Catalog(tuple(Topic(name, config) for name, config in configs.items()),
                   {name: str(exc) for name, exc in refused.items()})
