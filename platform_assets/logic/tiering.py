"""Tiered partitions (``remote.storage.enable``) as the sensors see them, and what a tiering run records.

A sensor judges thousands of partitions per tick, so it never asks the bucket: it reads the
partition's local stats and the copy of its latest remote version that every commit leaves in
the partition directory (``storage_engine.remote.local_state.recall``, Kafka's cached remote log
metadata). From those two alone:

* :func:`logical_stats`: the partition as one log, the remembered remote segments followed by
  the local segments from the tier's end, with the version's log start offset and cleaner
  checkpoint: the stats the dirty ratio and the retention plan of a tiered partition are
  computed from (the remote tier is where it is compacted and retained);
* :func:`tiering_need`: the work a tiering run (``remote.tiering.tier_partition``) would find:
  rolled local segments that end past the remembered tier's end (Kafka's ``RemoteLogManager``
  copies those; the last stable offset, unknown to cheap stats, is checked by the run itself),
  and local copies past ``local.retention.*`` (``plan_local_release``, the engine's own rule).
  Its ``token`` names that state (remembered version, local segment bases, copies to release):
  the run key, so the same work is never requested twice and new work always gets a new key.

:func:`run_requests` turns an object store's request counters, read before and after a
partition's tiering, into that partition's own counts for its materialization.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from storage_engine.config.topic import LogConfig
from storage_engine.errors import LogError
from storage_engine.log.stats import PartitionStats, SegmentStat
from storage_engine.remote.local_state import RemoteTierState, recall
from storage_engine.remote.location import ENV_REMOTE_STORAGE, parse_location
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


def remembered_tier(directory: Path | str, config: LogConfig) -> RemoteTierState | None:
    """The remembered latest remote version of a partition of a tiered topic at the configured
    location; None for an untiered topic, an unset location or nothing remembered."""
    if not config.remote_storage_enable:
        return None
    url = remote_location_url()
    return None if url is None else recall(Path(directory), url)


def logical_stats(local: PartitionStats, tier: RemoteTierState) -> PartitionStats:
    """The partition as one log: the tier's segments (their remembered sizes, mtimes and largest
    timestamps), then the local segments from the tier's end (the shadowed copies below it are
    not counted twice), with the version's log start offset and cleaner checkpoint. A local log
    that does not reach the tier's end (no segment at or past it) is left as it is: the next
    tiering run reports the gap."""
    above = [s for s in local.segments if s.base_offset >= tier.end_offset]
    if not above:
        return local
    remote = [SegmentStat.of(base, size, mtime, False, max_ts) for base, _end, size, max_ts, mtime in tier.segments]
    return replace(local, segments=[*remote, *above], log_start_offset=tier.log_start_offset,
                   cleaner_checkpoint=tier.cleaner_checkpoint)


def tiering_need(local: PartitionStats, config: LogConfig, tier: RemoteTierState | None, *,
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
        releasable = tuple(d.base_offset for d in plan_local_release(local, config, tier.end_offset, now_ms).deletions)
    version = None if tier is None else tier.version
    return TierNeed(version, None if tier is None else tier.end_offset, tierable, releasable,
                    short_hash(version, state_hash, [b for b, _, _ in tierable], releasable))


def run_requests(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    """The requests and bytes between two readings of ``ObjectStore.counters()``, every type of
    :data:`REQUEST_TYPES` included (zero is a count, not a missing value)."""
    keys = {*(f"requests_{t.lower()}" for t in REQUEST_TYPES), *before, *after}
    return {k: after.get(k, 0) - before.get(k, 0) for k in sorted(keys)}
