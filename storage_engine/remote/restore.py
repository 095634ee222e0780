"""Restore: commit an older version's content as a new version (Delta Lake's ``RESTORE``).

Nothing is copied: the new version names version N's objects again (its segments, log start
offset, cleaner checkpoint and producer snapshot), so a restore is one conditional commit. It
is refused, changing nothing, when N is not retained (or will not be for
:data:`RESTORE_MARGIN_MS`), when any object N names is gone, and when N's tier does not end
where the latest's does: offsets at and above the latest's end live in the local log, so a
restore that ended elsewhere would lose or repeat offsets. The one exception: the latest has a
segment starting exactly at N's end, and then that newer tail is kept after N's segments (a
retention or compaction undone, the records tiered since kept).

The order is crash safe and sweep safe: (1) pin N (``pins.py``), so a sweep that starts now
keeps its objects however long the restore takes; (2) check every object N names is there;
(3) commit; (4) remove the pin (a holder that died leaves it to expire). A kill before (3)
leaves the latest version as it was; after it the restored version is the latest and complete.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config.topic import LogConfig
from ..faults import crash_point
from .errors import RemoteStorageError
from .history import History, read_history
from .local_state import remember
from .names import new_writer_id
from .partition import RemotePartition, wall_clock_ms
from .pins import pin, unpin
from .sweeper import DECISION_VALID_MS
from .version import PartitionVersion, RemoteSegment, release_horizon_ms

#: A version whose retention ends within this is refused: a sweep that judged it expired just
#: before the pin went up acts on its judgement for at most ``DECISION_VALID_MS``.
RESTORE_MARGIN_MS = 2 * DECISION_VALID_MS


class RestoreRefusedError(RemoteStorageError):
    """The version cannot be restored (see the module docstring); nothing was written."""


@dataclass(frozen=True)
class RestorePlan:
    """What the restored version holds: ``target``'s content, then ``tail`` (the latest's
    segments from ``target.end_offset`` on, when the tiers' ends differ)."""

    target: PartitionVersion
    latest: PartitionVersion
    tail: tuple[RemoteSegment, ...]

    def changes(self) -> dict[str, Any]:
        """The fields :meth:`PartitionVersion.successor` changes."""
        return {"segments": (*self.target.segments, *self.tail), "log_start_offset": self.target.log_start_offset,
                "end_offset": self.latest.end_offset, "cleaner_checkpoint": self.target.cleaner_checkpoint,
                "producer_snapshot": self.latest.producer_snapshot if self.tail else self.target.producer_snapshot}

    def summary(self) -> dict[str, Any]:
        return {"restored_version": self.target.version, "replaced_version": self.latest.version,
                "appended_segments": [s.base_offset for s in self.tail]}


def plan_restore(latest: PartitionVersion, target: PartitionVersion) -> RestorePlan:
    """The restore of ``target`` over ``latest``, or :class:`RestoreRefusedError` when its tier
    does not end where the latest's does (nor at one of the latest's segment boundaries)."""
    tp = f"{latest.topic}-{latest.partition}"
    if target.version == latest.version:
        raise RestoreRefusedError(f"{tp}: version {target.version} is the latest: nothing to restore")
    if target.end_offset == latest.end_offset:
        return RestorePlan(target, latest, ())
    if target.end_offset < latest.end_offset and any(s.base_offset == target.end_offset for s in latest.segments):
        return RestorePlan(target, latest, tuple(s for s in latest.segments if s.base_offset >= target.end_offset))
    raise RestoreRefusedError(
        f"{tp}: version {target.version} ends at offset {target.end_offset} and the latest (version "
        f"{latest.version}) at {latest.end_offset}, with no segment of it starting at {target.end_offset}: "
        "restoring it would lose or repeat offsets")


def check_restorable(history: History, number: int, config: LogConfig, tp: str,
                     now_ms_wall: int) -> tuple[PartitionVersion, PartitionVersion]:
    """The latest version and version ``number``, if ``number`` is stored, retained for
    :data:`RESTORE_MARGIN_MS` more and readable; else :class:`RestoreRefusedError`."""
    latest = history.latest
    if latest is None:
        raise RestoreRefusedError(f"{tp} has no remote versions")
    found = [v for v in history.versions if v.version == number]
    if not found:
        stored = f"{history.versions[0].version}-{latest.version}"
        raise RestoreRefusedError(f"{tp} has no version {number} (stored: {stored})")
    target = found[0]
    if number not in history.retained(now_ms_wall + RESTORE_MARGIN_MS, config.logplat_remote_version_retention_ms):
        raise RestoreRefusedError(f"{tp}: version {number} is no longer retained "
                                  f"(logplat.remote.version.retention.ms={config.logplat_remote_version_retention_ms})")
    if not history.readable(target):
        gone = sorted(target.objects - set(history.data))
        raise RestoreRefusedError(f"{tp}: version {number} cannot be restored: {len(gone)} of its objects are "
                                  f"gone ({gone[0]} ...)")
    return latest, target


@dataclass
class RestoreResult:
    topic: str
    partition: int
    restored_version: int
    version: int
    replaced_version: int
    appended_segments: list[int]
    log_start_offset: int
    end_offset: int
    warnings: list[str] = field(default_factory=list)
    requests: dict[str, int] = field(default_factory=dict)
    duration_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "restored_version": self.restored_version,
                "remote_version": self.version, "replaced_version": self.replaced_version,
                "appended_segments": self.appended_segments, "log_start_offset": self.log_start_offset,
                "end_offset": self.end_offset, "warnings": self.warnings, "requests": self.requests,
                "duration_s": round(self.duration_s, 3)}


def restore(rp: RemotePartition, config: LogConfig, version_number: int, *,
            partition_dir: Path | None = None) -> RestoreResult:
    """Commit version ``version_number``'s content as the next version of ``rp`` (see the
    module docstring). ``partition_dir``: the local partition directory, when there is one, to
    remember the new version in. Raises :class:`RestoreRefusedError` (nothing written) and
    ``VersionConflictError`` (another writer committed first: nothing a reader sees changed)."""
    started, before = time.monotonic(), rp.store.counters()
    latest, target = check_restorable(read_history(rp), version_number, config, rp.tp, wall_clock_ms())
    plan = plan_restore(latest, target)
    writer = new_writer_id()
    held = pin(rp, target.version, writer, now_ms_wall=wall_clock_ms())
    warnings = []
    try:
        crash_point("restore.after-pin")
        if missing := rp.missing_objects(target):
            raise RestoreRefusedError(f"{rp.tp}: version {target.version} cannot be restored: {missing[0]} is gone")
        committed = rp.commit(latest.successor(writer=writer, operation="restore", committed_ms=wall_clock_ms(),
                                               release_horizon_ms=release_horizon_ms(config),
                                               summary=plan.summary(), **plan.changes()))
        crash_point("restore.after-commit")
    finally:
        try:
            unpin(rp, held)
        except RemoteStorageError as exc:
            warnings.append(f"the pin {held.name} stays until it expires: {exc}")
    if partition_dir is not None:
        remember(partition_dir, rp.store.url, committed)
    return RestoreResult(rp.topic, rp.partition, target.version, committed.version, latest.version,
                         [s.base_offset for s in plan.tail], committed.log_start_offset, committed.end_offset,
                         warnings, rp.store.counters_since(before), time.monotonic() - started)
