"""Retention of the remote tier (Kafka's ``RemoteLogManager`` expiration task) and its
``delete-records``: each a new version that drops whole remote segments and advances the log
start offset, never a deletion of objects (the sweeper deletes released objects later).

The decision is the engine's one rule, :func:`~..log.retention.plan_retention`, applied to the
version's segments as :class:`~..log.stats.SegmentStat` (:func:`.stats.plan_tier_retention`):
``retention.ms``, ``retention.bytes`` and the log start offset judge the whole logical log, so
the local bytes above the tier's end follow the remote segments as one more segment that no
pass may take (Kafka's ``RLMExpirationTask`` counts them in the size too). Local copies go by
``local.retention.*`` (``tiering.release_local_copies``).

Applying needs no local log directory (a Spark executor calls it): read the latest version,
plan, build the successor (``PartitionVersion.successor`` lists the released objects), commit
it conditionally. A writer that committed in between makes the commit fail with
``VersionConflictError`` and nothing changes; the next run plans afresh.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..config.topic import LogConfig
from ..faults import crash_point
from ..log.retention import RetentionPlan, RetentionResult
from ..outcomes import DELETED, NOTHING
from .local_state import remember
from .names import new_writer_id
from .partition import RemotePartition, wall_clock_ms
from .stats import TierFacts, plan_tier_retention
from .version import PartitionVersion, release_horizon_ms

NO_REMOTE_TIER = "the partition has no remote tier yet"


@dataclass
class RemoteRetentionResult(RetentionResult):
    """A retention of the remote tier: the engine's result, with the version it committed (or
    found) and the store's request counts."""

    remote_version: int | None = None
    remote_log_start_offset: int | None = None  # the version's, after the run
    remote_end_offset: int | None = None
    requests: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return super().to_dict() | {"tier": "remote", "remote_version": self.remote_version,
                                    "remote_log_start_offset": self.remote_log_start_offset,
                                    "remote_end_offset": self.remote_end_offset, "requests": self.requests}


def plan_remote_retention(version: PartitionVersion, config: LogConfig, now_ms: int, *,
                          local_bytes_above_end: int = 0) -> RetentionPlan:
    """The retention plan of ``version``'s segments (``stats.plan_tier_retention``, the one
    planner of a remote tier, which the sensors call on the version a partition remembers)."""
    return plan_tier_retention(TierFacts.of_version(version), config, now_ms,
                               local_bytes_above_end=local_bytes_above_end)


def apply_remote_retention(rp: RemotePartition, config: LogConfig, now_ms: int, *, local_bytes_above_end: int = 0,
                           partition_dir: Path | None = None) -> RemoteRetentionResult:
    """Plan retention of ``rp``'s latest version and commit a ``retention`` version; nothing
    when the plan drops nothing. ``partition_dir``: the local partition directory, when there is
    one, which then remembers the committed version (``local_state``)."""
    since = time.monotonic(), rp.store.counters()  # the run's clock and requests start here
    latest = rp.latest()
    if latest is None:
        return _result(rp, None, None, NOTHING, since, NO_REMOTE_TIER)
    plan = plan_remote_retention(latest, config, now_ms, local_bytes_above_end=local_bytes_above_end)
    if not plan.deletions:
        return _result(rp, latest, plan, NOTHING, since)
    assert plan.new_log_start_offset is not None, "a plan that drops segments moves the log start"
    committed = _commit(rp, latest, plan, config, "retention", partition_dir,
                        {"segments": list(plan.deleted_bases), "bytes": plan.bytes_to_free,
                         "reasons": sorted({d.reason for d in plan.deletions})},
                        log_start_offset=plan.new_log_start_offset)
    return _result(rp, committed, plan, DELETED, since)


def delete_records_remote(rp: RemotePartition, config: LogConfig, before_offset: int, *,
                          partition_dir: Path | None = None) -> RemoteRetentionResult:
    """Kafka's ``DeleteRecords`` on the remote tier: a ``delete-records`` version whose log start
    offset is ``before_offset``, without the remote segments wholly below it (the log-start pass
    of the one rule). Past the tier's end the tier empties and its end moves to
    ``before_offset`` too: the version is where the partition's log start offset is read, and
    an emptied tier ending below it would leave the offsets between in neither tier once the
    local log start moves (tiering then starts at the local segment holding it). Nothing when
    the remote log already starts there; the caller checked the offset against the high
    watermark."""
    since = time.monotonic(), rp.store.counters()  # the run's clock and requests start here
    latest = rp.latest()
    if latest is None:
        return _result(rp, None, None, NOTHING, since, NO_REMOTE_TIER)
    if before_offset <= latest.log_start_offset:
        return _result(rp, latest, None, NOTHING, since,
                       f"the remote log already starts at {latest.log_start_offset}")
    # a planning input only, never committed as such: the segments wholly below the new start go
    moved = replace(latest, log_start_offset=min(before_offset, latest.end_offset))
    plan = plan_remote_retention(moved, replace(config, cleanup_policy=("compact",)), wall_clock_ms())
    committed = _commit(rp, latest, plan, config, "delete-records", partition_dir,
                        {"before_offset": before_offset, "segments": list(plan.deleted_bases),
                         "bytes": plan.bytes_to_free},
                        log_start_offset=before_offset, end_offset=max(latest.end_offset, before_offset))
    result = _result(rp, committed, plan, DELETED, since)
    result.new_log_start_offset = before_offset
    return result


def _commit(rp: RemotePartition, latest: PartitionVersion, plan: RetentionPlan, config: LogConfig, operation: str,
            partition_dir: Path | None, summary: dict[str, Any], **changes: int) -> PartitionVersion:
    """Commit ``latest`` without the segments ``plan`` drops, with ``changes`` (the log start
    offset; delete-records past the tier's end: the end too)."""
    dropped = set(plan.deleted_bases)
    nxt = latest.successor(writer=new_writer_id(), operation=operation, committed_ms=wall_clock_ms(),
                           release_horizon_ms=release_horizon_ms(config), summary=summary,
                           segments=tuple(s for s in latest.segments if s.base_offset not in dropped), **changes)
    crash_point("remote-retention.before-commit")
    committed = rp.commit(nxt)
    crash_point("remote-retention.after-commit")
    if partition_dir is not None:
        remember(partition_dir, rp.store.url, committed)
    return committed


def _result(rp: RemotePartition, version: PartitionVersion | None, plan: RetentionPlan | None, status: str,
            since: tuple[float, dict[str, int]], reason: str | None = None) -> RemoteRetentionResult:
    result = RemoteRetentionResult(rp.topic, rp.partition, status, reason, plan)
    if version is not None:
        result.remote_version = version.version
        result.remote_log_start_offset, result.remote_end_offset = version.log_start_offset, version.end_offset
    if status == DELETED and plan is not None:
        result.deleted_segments = list(plan.deleted_bases)
        result.bytes_freed = plan.bytes_to_free
        result.new_log_start_offset = result.remote_log_start_offset
    result.requests = rp.store.counters_since(since[1])
    result.duration_s = time.monotonic() - since[0]
    return result
