"""Tiering (Kafka's ``RemoteLogManager`` copy task and its local retention): rolled segments
below the last stable offset are copied to the remote tier and committed as the next version;
then the local copies of tiered segments past ``local.retention.*`` are removed.

The decisions are pure (:func:`plan_tiering`, :func:`plan_local_release`); :func:`tier_partition`
applies them in a crash-safe order:

1. under the partition lock, plan from the live segments and open the files to copy (an open
   descriptor keeps reading the bytes it opened even if a file is renamed later);
2. upload each segment's ``.index``, ``.timeindex`` and ``.log`` (and the producer snapshot at
   the new end, when the log has one) as new, uniquely named objects: nothing names them yet;
3. **commit** version N+1 by a conditional create (``RemotePartition.commit``); a kill before
   this leaves only unnamed objects (swept as orphans), after it the tier is complete;
4. remember the version in the partition directory (``local_state``);
5. remove the local copies of tiered segments past local retention, through the engine's own
   retention apply (``apply_retention``: log start offset first, then ``.deleted`` renames).
   The local log start offset is then Kafka's *local* log start offset; the log's own start
   is the remote version's.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..config.topic import LogConfig
from ..errors import LogError
from ..faults import crash_point
from ..files.naming import SNAPSHOT_SUFFIX, segment_file
from ..files.nofollow import open_nofollow
from ..log.retention import RetentionPlan, RetentionResult, apply_retention, plan_retention
from ..log.stats import PartitionStats
from ..outcomes import NOTHING, TIERED
from .local_state import check_location, remember
from .names import data_name, new_writer_id
from .partition import RemotePartition, close_files, open_segment_files, wall_clock_ms
from .version import empty_version, release_horizon_ms

if TYPE_CHECKING:
    from ..log.log import Log


class TieringGapError(LogError):
    """The local log and the remote tier do not meet: tiering would leave a hole of offsets."""


@dataclass(frozen=True)
class TierPlan:
    """What tiering would copy: local segments ``[base, end)`` in order, from the remote end."""

    topic: str
    partition: int
    remote_end: int
    last_stable_offset: int
    uploads: tuple[tuple[int, int], ...]

    @property
    def new_end(self) -> int:
        return self.uploads[-1][1] if self.uploads else self.remote_end


def plan_tiering(topic: str, partition: int, bases: Sequence[int], *, log_start_offset: int, log_end_offset: int,
                 last_stable_offset: int, remote_end: int | None, remote_empty: bool = False) -> TierPlan:
    """The segments to copy: every rolled segment (never the active, the last of ``bases``) that
    ends at or below the last stable offset and starts at the remote tier's end (the local log
    start when nothing is remote yet). A tier that holds no segment (``remote_empty``: retention
    or delete-records took them all) has nothing to meet: tiering starts at the segment holding
    the log start, which is at or past that tier's end (delete-records may have moved both into
    a local segment). Raises :class:`TieringGapError` when the tiers cannot meet."""
    ends = [*bases[1:], log_end_offset]
    if remote_end is not None and remote_end > log_end_offset:
        raise TieringGapError(f"{topic}-{partition}: the remote tier ends at offset {remote_end}, past the local "
                              f"log end offset {log_end_offset}")
    if remote_end is not None and remote_empty:
        log_start_offset, remote_end = max(log_start_offset, remote_end), None
    start = log_start_offset if remote_end is None else remote_end
    if remote_end is not None:
        if remote_end < log_start_offset and (not bases or bases[0] > remote_end):
            raise TieringGapError(f"{topic}-{partition}: the remote tier ends at offset {remote_end} but the local "
                                  f"log starts at {log_start_offset}: offsets in between are in neither tier")
        inside = [b for b, e in zip(bases, ends, strict=True) if b < remote_end < e]
        if inside:
            raise TieringGapError(f"{topic}-{partition}: the remote tier ends at offset {remote_end}, inside local "
                                  f"segment {inside[0]}")
    uploads = []
    for base, end in zip(bases[:-1], ends[:-1], strict=True):
        if end <= start:
            continue
        if end > last_stable_offset:
            break
        uploads.append((base, end))
    return TierPlan(topic, partition, start, last_stable_offset, tuple(uploads))


def local_release_config(config: LogConfig) -> LogConfig:
    """The config local retention judges tiered segments by: ``local.retention.*`` (-2: the
    whole log's) as time and size limits, whatever the cleanup policy (the copies are safe)."""
    return replace(config, cleanup_policy=("delete",), retention_ms=config.effective_local_retention_ms,
                   retention_bytes=config.effective_local_retention_bytes)


def plan_local_release(stats: PartitionStats, config: LogConfig, remote_end: int, now_ms: int, *,
                       remote_log_start: int = 0) -> RetentionPlan:
    """Kafka's local retention of a tiered log: the retention plan of the local segments under
    :func:`local_release_config`, cut to the segments wholly below ``remote_end`` (never a copy
    that is the only one). Copies wholly below ``remote_log_start`` go too, whatever
    ``local.retention.*`` says: the remote tier's retention or delete-records removed their
    records from the log."""
    if remote_log_start > stats.log_start_offset:
        stats = replace(stats, log_start_offset=min(remote_log_start, remote_end))
    plan = plan_retention(stats, local_release_config(config), now_ms)
    segs = stats.segments
    ends = {s.base_offset: (segs[i + 1].base_offset if i + 1 < len(segs) else None) for i, s in enumerate(segs)}
    kept = []
    for d in plan.deletions:
        end = ends.get(d.base_offset)
        if end is None or end > remote_end:
            break
        kept.append(d)
    if not kept:
        return replace(plan, deletions=(), new_log_start_offset=None, roll_first=False)
    new_start = max(stats.log_start_offset, ends[kept[-1].base_offset] or remote_end)
    return replace(plan, deletions=tuple(kept), new_log_start_offset=new_start, roll_first=False)


@dataclass
class TierResult:
    """One partition's tiering: what was copied and committed, and what local retention removed."""

    topic: str
    partition: int
    status: str
    reason: str | None = None
    version: int | None = None
    uploaded_segments: list[int] = field(default_factory=list)
    uploaded_bytes: int = 0
    remote_log_start_offset: int | None = None
    remote_end_offset: int | None = None
    local_release: RetentionResult | None = None
    requests: dict[str, int] = field(default_factory=dict)
    duration_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "status": self.status, "reason": self.reason,
                "version": self.version, "uploaded_segments": self.uploaded_segments,
                "uploaded_bytes": self.uploaded_bytes, "remote_log_start_offset": self.remote_log_start_offset,
                "remote_end_offset": self.remote_end_offset,
                "local_release": self.local_release.to_dict() if self.local_release else None,
                "requests": self.requests, "duration_s": round(self.duration_s, 3)}


@dataclass
class _OpenSegment:
    base: int
    end: int
    max_timestamp: int
    mtime_ms: int
    files: dict[str, int | None]  # kind -> descriptor (``open_segment_files``)


def _open_segments(log: Log, plan: TierPlan) -> list[_OpenSegment]:
    by_base = {s.base_offset: s for s in log.segments}
    out: list[_OpenSegment] = []
    try:
        for base, end in plan.uploads:
            seg = by_base[base]
            out.append(_OpenSegment(base, end, seg.max_timestamp_so_far, seg.last_modified_ms,
                                    open_segment_files(seg)))
    except BaseException:
        for s in out:
            close_files(s.files)
        raise
    return out


def tier_partition(log: Log, rp: RemotePartition, now_ms: int, *, release_local: bool = True) -> TierResult:
    """Copy ``log``'s tierable segments to ``rp``, commit, then apply local retention (see the
    module docstring). Raises ``VersionConflictError`` if another writer committed first (nothing
    this call uploaded is named then) and :class:`TieringGapError` when the tiers do not meet."""
    started, before = time.monotonic(), rp.store.counters()
    check_location(log.dir, rp.store.url)  # never start a second tier beside a remembered one
    result = TierResult(log.topic, log.partition, NOTHING)
    version = rp.latest()
    writer = new_writer_id()
    with log.lock.hold():
        log.sync_for_change()
        plan = plan_tiering(log.topic, log.partition, [s.base_offset for s in log.segments],
                            log_start_offset=log.log_start_offset, log_end_offset=log.log_end_offset,
                            last_stable_offset=log.last_stable_offset_locked(),
                            remote_end=version.end_offset if version else None,
                            remote_empty=version is not None and not version.segments)
        opened = _open_segments(log, plan)
        checkpoint = log.log_dir.cleaner_offsets.get((log.topic, log.partition))
        log_start = log.log_start_offset
        snapshot_fd = _open_snapshot(log, plan.new_end) if opened else None
    try:
        if opened:
            uploads_since = wall_clock_ms()
            segments = []
            for seg in opened:
                segments.append(rp.upload_segment(writer, base_offset=seg.base, end_offset=seg.end,
                                                  max_timestamp=seg.max_timestamp, mtime_ms=seg.mtime_ms,
                                                  files=seg.files))
                result.uploaded_bytes += segments[-1].size_bytes
            snapshot = None
            if snapshot_fd is not None:
                snapshot = data_name(plan.new_end, writer, "snapshot")
                rp.store.put_fd(rp.name(snapshot), snapshot_fd)
            crash_point("tier.after-upload")
            base = version or empty_version(log.topic, log.partition, log_start)
            if not base.segments:  # an empty tier (delete-records emptied it) starts where the local log does
                base = replace(base, log_start_offset=max(base.log_start_offset, min(log_start, opened[0].end - 1)))
            if version is None and checkpoint is not None:
                checkpoint = min(checkpoint, plan.new_end)
            version = rp.commit(base.successor(
                writer=writer, operation="tier", committed_ms=wall_clock_ms(),
                release_horizon_ms=release_horizon_ms(log.config),
                segments=(*base.segments, *segments), end_offset=plan.new_end,
                cleaner_checkpoint=base.cleaner_checkpoint if version is not None else checkpoint,
                producer_snapshot=snapshot or base.producer_snapshot,
                summary={"segments": [s.base_offset for s in segments], "bytes": result.uploaded_bytes,
                         "from_offset": plan.remote_end, "to_offset": plan.new_end}),
                uploads_since_ms=uploads_since)
            crash_point("tier.after-commit")
            result.status, result.uploaded_segments = TIERED, [s.base_offset for s in segments]
    finally:
        for seg in opened:
            close_files(seg.files)
        if snapshot_fd is not None:
            os.close(snapshot_fd)
    if version is not None:
        remember(log.dir, rp.store.url, version)
        result.version = version.version
        result.remote_log_start_offset, result.remote_end_offset = version.log_start_offset, version.end_offset
        if release_local:
            result.local_release = release_local_copies(log, version.end_offset, now_ms,
                                                        remote_log_start=version.log_start_offset)
            if result.local_release.deleted_segments:
                result.status = TIERED
    result.requests = rp.store.counters_since(before)
    result.duration_s = time.monotonic() - started
    return result


def _open_snapshot(log: Log, offset: int) -> int | None:
    try:
        return open_nofollow(segment_file(log.dir, offset, SNAPSHOT_SUFFIX), os.O_RDONLY)
    except FileNotFoundError:
        return None


def release_local_copies(log: Log, remote_end: int, now_ms: int, *, remote_log_start: int = 0) -> RetentionResult:
    """Local retention of a tiered log (:func:`plan_local_release`), applied by the engine's
    retention apply under the partition lock."""
    return apply_retention(log, None, now_ms, planner=lambda stats, now: plan_local_release(
        stats, log.config, remote_end, now, remote_log_start=remote_log_start))


