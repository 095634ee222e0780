"""Tiered partitions (``remote.storage.enable``) as the sensors see them, and what a tiering run records.

A sensor judges thousands of partitions per tick, so it never asks the bucket: it reads the
partition's local stats and the copy of its latest remote version that every commit leaves in
the partition directory (``storage_engine.remote.local_state.recall``, Kafka's cached remote log
metadata). From those two alone, through the engine's own planners of a tiered partition
(``storage_engine.remote.stats``, which ``logctl compact --dry-run`` and ``logctl retention
--dry-run`` use too, so the platform and ``logctl`` say the same of it):

* :func:`remembered_tier`: the remembered version as the engine's planning facts (``TierFacts``),
  from which ``log_state`` takes the dirty ratio (``tiered_stats``) and the retention plans
  (``plan_tiered_retention``) of the whole log;
* :func:`tiering_need`: the work a tiering run (``remote.tiering.tier_partition``) would find:
  rolled local segments that end past the remembered tier's end (Kafka's ``RemoteLogManager``
  copies those; the last stable offset, unknown to cheap stats, is checked by the run itself),
  and local copies past ``local.retention.*`` or below the remote log start (``plan_local_release``,
  the engine's own rule, as ``tier_partition`` applies it).
  Its ``token`` names that state (remembered version, local segment bases, copies to release):
  the run key, so the same work is never requested twice and new work always gets a new key.

:func:`every_request_type` completes a partition's own request counts (``TierResult.requests``)
with the types it did not use, for its materialization.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from storage_engine.config.topic import LogConfig
from storage_engine.errors import LogError
from storage_engine.log.stats import PartitionStats
from storage_engine.remote.location import ENV_REMOTE_STORAGE, parse_location
from storage_engine.remote.stats import TierFacts, remembered_facts
from storage_engine.remote.tiering import plan_local_release

#: The request types a run's metadata always counts (``ObjectStore.counters``), zero included.
REQUEST_TYPES = ("PUT", "GET", "LIST", "DELETE", "HEAD")


@dataclass(frozen=True)
class TierNeed:
    """What a tiering run would do to a partition, as its cheap stats tell."""

    remote_version: int | None  # the remembered latest version (None: nothing remembered)
    remote_end: int | None
    tierable: tuple[tuple[int, int, int], ...]  # rolled local segments past the tier's end: (base, end, bytes)
    releasable: tuple[int, ...]  # bases of local copies past local.retention.*
    token: str

    @property
    def tierable_bytes(self) -> int:
        return sum(size for _, _, size in self.tierable)

    @property
    def needed(self) -> bool:
        return bool(self.tierable or self.releasable)

    def reason(self) -> str:
        parts = []
        if self.tierable:
            parts.append(f"{len(self.tierable)} rolled segment(s), {self.tierable_bytes} bytes, from offset "
                         f"{self.tierable[0][0]} to tier")
        if self.releasable:
            parts.append(f"{len(self.releasable)} local copies past local retention")
        return "; ".join(parts) or "nothing to tier"


@functools.lru_cache(maxsize=16)
def _location_url(value: str) -> str | None:
    try:
        return parse_location(value, os.environ).url
    except LogError:  # a malformed location: the tiering run says why, in one line
        return None


def remote_location_url() -> str | None:
    """The configured remote location's URL (``LOGPLAT_REMOTE_STORAGE``), or None when unset or
    malformed: the key under which ``local_state`` remembers versions."""
    value = os.environ.get(ENV_REMOTE_STORAGE)
    return _location_url(value) if value else None


def remote_tier_in_use(configs: Iterable[LogConfig]) -> bool:
    """Whether tiering can happen here: a remote location is configured, or a topic is tiered
    (whose runs then say what is missing). Where it can, ``tiering_sensor`` and the remote sweep
    exist, over every topic: one altered to ``remote.storage.enable=true`` is tiered and swept
    without a reload."""
    return remote_location_url() is not None or any(c.remote_storage_enable for c in configs)


def remembered_tier(local: PartitionStats, config: LogConfig) -> TierFacts | None:
    """The remembered latest remote version of a partition of a tiered topic at the configured
    location (``remote.stats.remembered_facts``); None for an untiered topic, an unset location
    or nothing remembered."""
    if not config.remote_storage_enable:
        return None
    return remembered_facts(local, remote_location_url())


def tiering_need(local: PartitionStats, config: LogConfig, tier: TierFacts | None, *,
                 now_ms: int, state_hash: str) -> TierNeed:
    """What tiering would do (see the module docstring); ``state_hash`` names the local log's
    state and goes into the token with the remembered version."""
    from .log_state import short_hash

    segments = local.segments
    ends = [s.base_offset for s in segments[1:]]
    start = local.log_start_offset if tier is None else tier.end_offset
    tierable = tuple((s.base_offset, end, s.size_bytes) for s, end in zip(segments[:-1], ends, strict=True)
                     if end > start)
    releasable: tuple[int, ...] = ()
    if tier is not None:
        releasable = tuple(d.base_offset for d in plan_local_release(
            local, config, tier.end_offset, now_ms, remote_log_start=tier.log_start_offset).deletions)
    version = None if tier is None else tier.version
    return TierNeed(version, None if tier is None else tier.end_offset, tierable, releasable,
                    short_hash(version, state_hash, [b for b, _, _ in tierable], releasable))


def every_request_type(counts: Mapping[str, int]) -> dict[str, int]:
    """``counts`` (``ObjectStore.counters_since``) with every type of :data:`REQUEST_TYPES`
    (zero is a count, not a missing value)."""
    return {f"requests_{t.lower()}": 0 for t in REQUEST_TYPES} | dict(counts)