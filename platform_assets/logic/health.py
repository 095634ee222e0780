"""Each partition's health: "does this log need cleaning, and why?", answered from its state.

The answer is the ``log_health`` asset check of every topic asset, one result per partition, so
it shows on the asset's Partitions view, its Checks tab and in the catalog without opening an
event:

* **ERROR**, the last cleaning failed (a run could not read or write the partition; nothing of
  it was swapped): the run's reason, then the verdict below. A later state change records the
  verdict alone; a cleaning that fails again says so again.
* **ERROR**, erasure not proven: records superseded more than ``max.compaction.lag.ms`` ago are
  still on disk, so a superseded value or a tombstoned key outlives the time the topic promises
  to keep it. File metadata says only that the oldest dirty record's deadline passed (the
  engine's ``ErasureDeadline``, the active segment included); for such a partition the state
  carries the engine's ``erasure_report``, which reads the records, so this check says what
  ``logctl erasure-report`` says: how many remain, the oldest one's offset, by which record and
  when it was superseded, and why it is still there (``why_kept``: *held by the active segment*,
  which no cleaning reaches until it rolls; held by another bound of the cleanable section; or
  the cleaner is behind). A partition the report could not read to its end fails too (unproven).
* **WARN**, cleaning due: half of the erasure deadline used (the compaction sensor asks for the
  partition now, so the deadline holds), the deadline passed with nothing superseded past it
  yet, a dirty ratio above ``min.cleanable.dirty.ratio`` (the cleaner would pick the log), an
  idle active segment due to roll (``logplat.roll.idle.segments``), or segments retention would
  delete, named with the rule that makes them deletable (``log-start-offset``,
  ``retention.bytes``, ``retention.ms``).
* **passed** otherwise, with the dirty ratio and its threshold.

Deadlines are named by the moment (``must be cleaned by 2026-11-23T12:57:01Z``), never by a
countdown, which would be wrong the second after it was recorded.

The state sensor evaluates it without a run and records a result only when the partition's
state or verdict changes (``PartitionState.observation_digest``), so the event log does not grow
with ticks. Cleaning runs evaluate it too, after cleaning (tied to the materialization), and it
can be executed on its own from the UI, which reads the partitions' state as they are.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import dagster as dg

from storage_engine.cleaner.erasure import ErasureReport

from .check_outcomes import HEALTH_CHECK, CheckOutcome
from .log_state import PartitionState, deadline_urgent
from .metadata import deadline_metadata, state_metadata
from .units import iso_time, size_text


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
    proof = state.erasure
    if proof is not None and not proof.ok:
        reasons.append(_not_erased(proof))
        severity = dg.AssetCheckSeverity.ERROR
    if candidacy is not None and state.compaction_due:
        dirty = f"{size_text(candidacy.cleanable_bytes)} dirty of {size_text(candidacy.total_bytes)}"
        deadline = candidacy.deadline
        if deadline is not None and deadline.time_left_ms <= 0:
            erased = " (erasure-report: nothing superseded past it yet)" if proof is not None and proof.ok else ""
            reasons.append(f"max.compaction.lag.ms: compaction due: the oldest uncleaned record, offset "
                           f"{deadline.oldest_offset}, written {iso_time(deadline.oldest_timestamp_ms)}, was due to "
                           f"be cleaned by {iso_time(deadline.deadline_ms)}{erased} ({dirty})")
        elif deadline_urgent(state) and deadline is not None:
            reasons.append(f"max.compaction.lag.ms: half the lag used: the oldest uncleaned record, offset "
                           f"{deadline.oldest_offset}, must be cleaned by {iso_time(deadline.deadline_ms)} ({dirty})")
        else:
            rule = ("logplat.roll.idle.segments" if candidacy.idle_roll_due and not candidacy.kafka_due
                    else "min.cleanable.dirty.ratio")
            reasons.append(f"{rule}: compaction due, {candidacy.why} ({dirty})")
        severity = severity or dg.AssetCheckSeverity.WARN
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


def _not_erased(proof: ErasureReport) -> str:
    """The engine's erasure report of a partition it did not prove erased, in its own terms."""
    if proof.unproven is not None:
        return f"max.compaction.lag.ms: erasure unproven, the records cannot be read to their end: {proof.unproven}"
    oldest = proof.oldest
    assert oldest is not None  # not ok and read: a remnant was counted, and the oldest kept
    due = oldest.superseded_at_ms + proof.max_compaction_lag_ms
    why = f": {proof.held_by}" if proof.held_by else ""
    return (f"max.compaction.lag.ms: NOT ERASED: {proof.remnants} superseded record(s) still on disk past the bound; "
            f"the oldest at offset {oldest.offset}, superseded by offset {oldest.superseded_by} at "
            f"{iso_time(oldest.superseded_at_ms)}, was due to be gone by {iso_time(due)}{why}")


def health_with_failure(state: PartitionState, *, cleaning_failed: str | None = None,
                        read_error: str | None = None) -> Health:
    """The verdict, ERROR first with why when the partition's cleaning failed (``cleaning_failed``)
    or its records cannot be read (``read_error``): what the file metadata alone cannot show."""
    health = health_of(state)
    failure = (f"last cleaning failed: {cleaning_failed}" if cleaning_failed is not None
               else f"its records cannot be read: {read_error}" if read_error is not None else None)
    if failure is None:
        return health
    return Health(dg.AssetCheckSeverity.ERROR, f"{failure}; {health.summary}", (failure, *health.reasons))


def health_outcome(state: PartitionState, *, cleaning_failed: str | None = None,
                   read_error: str | None = None) -> CheckOutcome:
    """The ``log_health`` result of one partition, emitted like the other checks (``checks.py``);
    ``cleaning_failed``: why the run that just tried to clean it failed; ``read_error``: where an
    audit's read of its records stopped (a damaged batch), which the cheap state cannot see."""
    health = health_with_failure(state, cleaning_failed=cleaning_failed, read_error=read_error)
    # the partition's figures with each verdict: the check's page plots them over time (size, dirty
    # ratio, log start: Dagster's OSS asset plots mix every partition, a check's result names one)
    metadata: dict[str, object] = {"status": health.level, **state_metadata(state),
                                   "deletable_segments": state.deletable_segments}
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
