"""Each partition's health: "does this log need cleaning, and why?", answered from its state.

The answer is the ``log_health`` asset check of every topic asset, one result per partition, so
it shows on the asset's Partitions view, its Checks tab and in the catalog without opening an
event:

* **ERROR**, the last cleaning failed (a run could not read or write the partition; nothing of
  it was swapped): the run's reason, then the verdict below. A later state change records the
  verdict alone; a cleaning that fails again says so again.
* **ERROR**, an erasure deadline missed: the dirty section holds records older than
  ``max.compaction.lag.ms`` (Kafka's ``LogToClean.maxCompactionDelayMs`` > 0 with cleanable
  bytes), so a superseded value or a tombstoned key may outlive the time the topic promises to
  keep it. The result names the oldest uncleaned record's offset, when it was written and by
  how long its deadline passed (the engine's ``ErasureDeadline``). From file metadata alone the
  platform cannot tell whether a superseded key is in there, so any overdue dirty section
  counts: the cleaner is behind its deadline (``logctl erasure-report`` answers exactly).
* **WARN**, cleaning due: half of the erasure deadline used (the compaction sensor asks for the
  partition now, so the deadline holds), a dirty ratio above ``min.cleanable.dirty.ratio`` (the
  cleaner would pick the log), or segments retention would delete, named with the rule that makes them
  deletable (``log-start-offset``, ``retention.bytes``, ``retention.ms``).
* **passed** otherwise, with the dirty ratio and its threshold.

The state sensor evaluates it without a run and records a result only when the partition's
state or verdict changes (``PartitionState.observation_digest``), so the event log does not grow
with ticks. Cleaning runs evaluate it too, after cleaning (tied to the materialization), and it
can be executed on its own from the UI, which reads the partitions' state as they are.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import dagster as dg

from .check_outcomes import HEALTH_CHECK, CheckOutcome
from .log_state import PartitionState, deadline_urgent
from .metadata import deadline_metadata
from .units import duration_text, iso_time, size_text


@dataclass(frozen=True)
class Health:
    """One partition's verdict: ``severity`` is None when it passed."""

    severity: dg.AssetCheckSeverity | None
    summary: str
    reasons: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return self.severity is None

    @property
    def level(self) -> str:
        return "ok" if self.severity is None else self.severity.value.lower()


def health_of(state: PartitionState) -> Health:
    """The verdict for one partition, from the engine's own candidacy and retention plan."""
    reasons: list[str] = []
    severity = None
    candidacy = state.candidacy
    if candidacy is not None and state.compaction_due:
        overdue = candidacy.overdue
        dirty = f"{size_text(candidacy.cleanable_bytes)} dirty of {size_text(candidacy.total_bytes)}"
        deadline = candidacy.deadline
        if overdue and deadline is not None:
            reasons.append(f"max.compaction.lag.ms: missed by {duration_text(-deadline.time_left_ms / 1000)}: the "
                           f"oldest uncleaned record, offset {deadline.oldest_offset}, written "
                           f"{iso_time(deadline.oldest_timestamp_ms)}, was due to be cleaned by "
                           f"{iso_time(deadline.deadline_ms)} ({dirty})")
        elif deadline_urgent(state) and deadline is not None:
            reasons.append(f"max.compaction.lag.ms: erasure deadline in {duration_text(deadline.time_left_ms / 1000)}: "
                           f"the oldest uncleaned record, offset {deadline.oldest_offset}, must be cleaned by "
                           f"{iso_time(deadline.deadline_ms)} ({dirty})")
        else:
            rule = "max.compaction.lag.ms" if overdue else "min.cleanable.dirty.ratio"
            reasons.append(f"{rule}: compaction due, {candidacy.why} ({dirty})")
        severity = dg.AssetCheckSeverity.ERROR if overdue else dg.AssetCheckSeverity.WARN
    if state.deletable_segments and state.retention is not None:
        rules = Counter(d.reason for d in state.retention.deletions)
        why = ", ".join(f"{n} by {rule}" for rule, n in sorted(rules.items()))
        reasons.append(f"retention: {state.deletable_segments} segment(s), {size_text(state.deletable_bytes)} "
                       f"deletable ({why})")
        severity = severity or dg.AssetCheckSeverity.WARN
    if severity is dg.AssetCheckSeverity.ERROR:
        summary = "erasure deadline missed: " + "; ".join(reasons)
    elif severity is not None:
        summary = "cleaning due: " + "; ".join(reasons)
    elif candidacy is not None:
        summary = f"nothing due: {candidacy.why}"
    else:
        summary = "nothing due: no segment is deletable"
    return Health(severity, summary, tuple(reasons))


def health_outcome(state: PartitionState, *, cleaning_failed: str | None = None,
                   read_error: str | None = None) -> CheckOutcome:
    """The ``log_health`` result of one partition, emitted like the other checks (``checks.py``);
    ``cleaning_failed``: why the run that just tried to clean it failed; ``read_error``: where an
    audit's read of its records stopped (a damaged batch), which the cheap state cannot see."""
    health = health_of(state)
    failure = (f"last cleaning failed: {cleaning_failed}" if cleaning_failed is not None
               else f"its records cannot be read: {read_error}" if read_error is not None else None)
    if failure is not None:
        health = Health(dg.AssetCheckSeverity.ERROR, f"{failure}; {health.summary}", (failure, *health.reasons))
    metadata: dict[str, object] = {"status": health.level, "deletable_segments": state.deletable_segments}
    if state.dirty_ratio is not None:
        metadata["dirty_ratio"] = round(state.dirty_ratio, 6)
    if state.candidacy is not None:
        metadata["min_cleanable_dirty_ratio"] = state.candidacy.min_cleanable_ratio
        metadata.update(deadline_metadata(state))
    if health.reasons:
        metadata["reasons"] = dg.MetadataValue.md("\n".join(f"* {r}" for r in health.reasons))
    return CheckOutcome(HEALTH_CHECK, state.partition, health.passed, health.summary, metadata,
                        severity=health.severity or dg.AssetCheckSeverity.WARN)


def unreadable_outcome(partition: int, why: str) -> CheckOutcome:
    """The ``log_health`` result of a partition the engine refuses to open (a symlink, a misnamed
    or wrong-kind file, a malformed checkpoint): failed, saying why. No run is planned for it
    until it is repaired by hand, as a broker takes such a log dir offline."""
    return CheckOutcome(HEALTH_CHECK, partition, False, f"cannot be read: {why}",
                        {"status": "unreadable", "reasons": dg.MetadataValue.md(f"* {why}")},
                        severity=dg.AssetCheckSeverity.ERROR)
