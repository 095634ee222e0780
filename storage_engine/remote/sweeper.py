"""The sweep: physical deletion of a partition's objects, delayed, and only of what no retained
version names (Kafka deletes a segment's files ``file.delete.delay.ms`` after it left the log;
Delta Lake's ``VACUUM`` deletes files no retained table version references; WarpStream and
AutoMQ run the same orphan sweep after a failed writer).

What goes, decided by the pure :func:`plan_sweep` from one :func:`~.history.read_history`:

* an object a version released (it left the versions): once no retained version (the latest,
  every version superseded less than ``logplat.remote.version.retention.ms`` ago, every pinned
  one) names it, and ``file.delete.delay.ms`` after its release;
* an orphan (no stored version names it, no version lists it as released: the upload of a
  writer that died or lost the commit race): once older than the orphan floor
  (``ORPHAN_MIN_AGE_MS``; a writer never commits uploads older than half of it);
* the version objects of superseded versions no longer retained, oldest first, after the
  objects only they named (so the stored versions stay a run up to the latest, which never goes);
* pins whose holder died (expired).

It deletes less rather than more: any error listing, reading or parsing pins, versions or the
data listing deletes nothing for the partition and says why; a name in ``data/`` that is not
one of ours is left alone; a delete that fails stops the partition's sweep. Its decisions are
acted on for :data:`DECISION_VALID_MS` at most (restore's margin rests on it).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..config.topic import LogConfig
from ..faults import crash_point
from ..outcomes import DELETED, FAILED, NOTHING, PLANNED
from .errors import RemoteMetadataError, RemoteStorageError
from .history import History, read_history
from .names import check_data_name, version_name
from .partition import ORPHAN_MIN_AGE_MS, RemotePartition

#: How long after its gathering a sweep still deletes by it.
DECISION_VALID_MS = 5 * 60 * 1000


@dataclass(frozen=True)
class Deletion:
    """An object to delete (relative to the partition's folder) and the rule that lets it go."""

    name: str
    reason: str  # released | orphan | version | expired-pin

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "reason": self.reason}


@dataclass(frozen=True)
class SweepPlan:
    """The deletions in the order they are made (data objects, then versions oldest first, then
    expired pins) and what stays, counted by why."""

    deletions: tuple[Deletion, ...]
    retained: int  # objects a retained version names
    waiting: int  # released, within file.delete.delay.ms
    young_orphans: int  # named by no version, younger than the floor
    unrecognized: tuple[str, ...]  # names in data/ that are none of ours: never deleted

    def kept(self) -> dict[str, int]:
        return {"retained": self.retained, "waiting": self.waiting, "young_orphans": self.young_orphans,
                "unrecognized": len(self.unrecognized)}


def _release_times(history: History, retained: set[int]) -> dict[str, int]:
    """When each object no retained version names left the versions: the commit of the version
    after the newest stored one naming it, or the latest release a version lists for it."""
    out: dict[str, int] = {}
    for i, v in enumerate(history.versions):
        for r in v.released:
            out[r.name] = max(out.get(r.name, r.since_ms), r.since_ms)
        superseded = history.superseded_ms(i)
        if v.version not in retained and superseded is not None:
            for name in v.objects:
                out[name] = max(out.get(name, superseded), superseded)
    return out


def plan_sweep(history: History, *, now_ms_wall: int, retention_ms: int, delete_delay_ms: int,
               orphan_min_age_ms: int) -> SweepPlan:
    """What the sweep deletes (see the module docstring)."""
    retained = history.retained(now_ms_wall, retention_ms)
    kept_names = {name for v in history.versions if v.version in retained for name in v.objects}
    named = {name for v in history.versions for name in v.objects}
    released = _release_times(history, retained)  # every object a stored version names but kept_names
    deletions: list[Deletion] = []
    unrecognized, counts = [], {"retained": 0, "waiting": 0, "young": 0}
    for name, info in sorted(history.data.items()):
        try:
            check_data_name(name)
        except RemoteMetadataError:
            unrecognized.append(name)
            continue
        if name in kept_names:
            counts["retained"] += 1
        elif name in released:
            if now_ms_wall - released[name] >= delete_delay_ms:
                deletions.append(Deletion(name, "released"))
            else:
                counts["waiting"] += 1
        elif now_ms_wall - info.last_modified_ms >= orphan_min_age_ms:
            deletions.append(Deletion(name, "orphan"))
        else:
            counts["young"] += 1
    gone = {d.name for d in deletions} | (named - set(history.data))
    for v in history.versions:  # oldest first; stop at the first that stays
        if v.version in retained or not all(name in kept_names or name in gone for name in v.objects):
            break
        deletions.append(Deletion(version_name(v.version), "version"))
    deletions.extend(Deletion(p.name, "expired-pin") for p in history.pins if p.expires_ms <= now_ms_wall)
    return SweepPlan(tuple(deletions), counts["retained"], counts["waiting"], counts["young"], tuple(unrecognized))


@dataclass
class SweepResult:
    """One partition's sweep."""

    topic: str
    partition: int
    status: str
    reason: str | None = None
    dry_run: bool = False
    remote_version: int | None = None
    deleted: list[Deletion] = field(default_factory=list)
    kept: dict[str, int] = field(default_factory=dict)
    unrecognized: list[str] = field(default_factory=list)
    requests: dict[str, int] = field(default_factory=dict)
    duration_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "status": self.status, "reason": self.reason,
                "dry_run": self.dry_run, "remote_version": self.remote_version,
                "deleted": [d.to_dict() for d in self.deleted], "kept": self.kept,
                "unrecognized": self.unrecognized, "requests": self.requests,
                "duration_s": round(self.duration_s, 3)}

    def summary(self) -> str:
        """One line: what went (or would go) and why, what stayed and why (``logctl sweep``, the
        platform's sweep run log)."""
        tp = f"{self.topic}-{self.partition}"
        if self.status == FAILED and not self.deleted:
            return f"{tp}: failed: {self.reason}"
        reasons = Counter(d.reason for d in self.deleted)
        verb = "would delete" if self.dry_run else "deleted"
        did = ", ".join(f"{n} {why}" for why, n in sorted(reasons.items())) or "nothing"
        kept = ", ".join(f"{n} {why.replace('_', ' ')}" for why, n in self.kept.items())
        return (f"{tp}: {verb} {len(self.deleted)} object(s) ({did}); kept: {kept}"
                + (f"; {self.reason}" if self.reason else ""))


def sweep_partition(rp: RemotePartition, config: LogConfig, *, now_ms_wall: int,
                    orphan_min_age_ms: int = ORPHAN_MIN_AGE_MS, dry_run: bool = False) -> SweepResult:
    """Plan and (unless ``dry_run``) make ``rp``'s deletions (see the module docstring).
    ``now_ms_wall``: the wall clock the ages are judged by (object stores stamp wall clock)."""
    started, before = time.monotonic(), rp.store.counters()
    result = SweepResult(rp.topic, rp.partition, NOTHING, dry_run=dry_run)
    try:
        history = read_history(rp)
    except RemoteStorageError as exc:
        result.status, result.reason = FAILED, f"nothing deleted: {exc}"
        return _finish(result, rp, started, before)
    plan = plan_sweep(history, now_ms_wall=now_ms_wall, retention_ms=config.logplat_remote_version_retention_ms,
                      delete_delay_ms=config.file_delete_delay_ms, orphan_min_age_ms=orphan_min_age_ms)
    result.remote_version = history.latest.version if history.latest else None
    result.kept, result.unrecognized = plan.kept(), list(plan.unrecognized)
    if dry_run:
        result.deleted = list(plan.deletions)
        result.status = PLANNED if plan.deletions else NOTHING
        return _finish(result, rp, started, before)
    for i, deletion in enumerate(plan.deletions):
        if (time.monotonic() - started) * 1000 > DECISION_VALID_MS:
            result.reason = (f"stopped after {i} of {len(plan.deletions)} deletions: the plan is older than "
                             f"{DECISION_VALID_MS // 1000} s; the next sweep plans again")
            break
        try:
            rp.store.delete(rp.name(deletion.name))
        except RemoteStorageError as exc:
            result.status, result.reason = FAILED, f"stopped after {i} of {len(plan.deletions)} deletions: {exc}"
            break
        result.deleted.append(deletion)
        crash_point(f"sweep.after-delete-{i}")
    if result.deleted and result.status != FAILED:
        result.status = DELETED
    return _finish(result, rp, started, before)


def _finish(result: SweepResult, rp: RemotePartition, started: float, before: dict[str, int]) -> SweepResult:
    result.requests = rp.store.counters_since(before)  # this partition's share of a store a run shares
    result.duration_s = time.monotonic() - started
    return result
