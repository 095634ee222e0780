"""One partition's cleanup run: its state before and after, and what the jobs reported; the
figures a materialization records of it (``metadata.cleanup_metadata``) come from here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from storage_engine.cleaner import CompactionReport
from storage_engine.log.retention import RetentionResult
from storage_engine.outcomes import BY_IMPORTANCE, COMPACTED, DELETED, NOTHING
from storage_engine.remote.retention import RemoteRetentionResult

from .log_state import PartitionState, short_hash
from .partition_keys import partition_key


@dataclass
class PartitionCleanup:
    """One partition's run: its state before and after, and what the jobs reported."""

    partition: int
    before: PartitionState
    leo_before: int
    after: PartitionState | None = None
    leo_after: int = 0
    compaction: CompactionReport | None = None
    retention: RetentionResult | None = None
    #: a tiered partition's retention of its remote tier (``retention`` is then its local copies')
    remote_retention: RemoteRetentionResult | None = None

    @property
    def _retentions(self) -> list[RetentionResult]:
        return [o for o in (self.remote_retention, self.retention) if o is not None]

    @property
    def key(self) -> str:
        return partition_key(self.partition)

    @property
    def status(self) -> str:
        """The most telling of what the jobs reported: a failure or a change under the job first,
        then what was done (a compaction, a retention deletion), then why nothing was."""
        statuses = {o.status for o in (self.compaction, *self._retentions) if o is not None}
        if self._retention_done.get("deleted_segments"):
            statuses.add(DELETED)
        return str(next((s for s in BY_IMPORTANCE if s in statuses), NOTHING))

    @property
    def reason(self) -> str | None:
        for outcome in (self.compaction, *self._retentions):
            if outcome is not None and outcome.reason:
                return outcome.reason
        return None

    def reports(self) -> list[dict[str, Any]]:
        """What the jobs reported, as dicts (a tiered partition's carry its ``remote_version``)."""
        return [o.to_dict() for o in (self.compaction, *self._retentions) if o is not None]

    def _report(self) -> dict[str, Any]:
        return self.compaction.to_dict() if self.compaction is not None else {}

    def counter(self, name: str) -> int | None:
        return self._report().get(name) if self.compaction is not None else None

    def report_value(self, name: str) -> float | None:
        if self.compaction is None or self.compaction.status != COMPACTED:
            return None
        return self._report().get(name)

    @property
    def _retention_done(self) -> dict[str, Any]:
        """What retention did: the retention job's outcomes (a tiered partition's remote tier's and
        local copies'), or the compaction's ``retention``."""
        if self._retentions:
            return {"deleted_segments": [b for o in self._retentions for b in o.deleted_segments],
                    "bytes_freed": sum(o.bytes_freed for o in self._retentions)}
        return self._report().get("retention") or {}

    @property
    def bytes_reclaimed(self) -> int:
        report = self._report()
        compacted = report.get("bytes_read", 0) - report.get("bytes_written", 0) if report else 0
        return max(compacted, 0) + int(self._retention_done.get("bytes_freed") or 0)

    @property
    def records_removed(self) -> int | None:
        if self.compaction is None:
            return None
        report = self._report()
        return report.get("records_read", 0) - report.get("records_written", 0)

    @property
    def retention_rules(self) -> str | None:
        """Which retention rules deleted this run's segments, with counts (``retention.ms: 3``)."""
        rules: Counter[str] = Counter()
        for outcome in self._retentions:
            deleted, plan = set(outcome.deleted_segments), outcome.plan
            rules.update(d.reason for d in (plan.deletions if plan is not None else ()) if d.base_offset in deleted)
        return ", ".join(f"{rule}: {n}" for rule, n in sorted(rules.items())) or None

    @property
    def segments_deleted(self) -> int:
        """Segments gone: merged by a compaction (whose before/after count includes the retention
        it applies), else deleted by retention."""
        by_job = sum(len(o.deleted_segments) for o in self._retentions)
        if self.compaction is None:
            return by_job
        report = self._report()
        if self.compaction.status == COMPACTED:
            return by_job + max(report.get("segments_before", 0) - report.get("segments_after", 0), 0)
        return by_job + len((report.get("retention") or {}).get("deleted_segments") or [])

    @property
    def duration_s(self) -> float:
        """This partition's own seconds in the jobs (a range run's partitions share the jobs'
        wall time, which the run records once: ``spark_job_seconds``)."""
        own = self.compaction.duration_s if self.compaction is not None else 0.0
        # a tiered partition's two retention outcomes each carry the partition's whole time
        return own + max((o.duration_s for o in self._retentions), default=0.0)

    @property
    def data_version(self) -> str:
        """Names the log's state after the run: equal versions mean equal logs."""
        assert self.after is not None
        return short_hash(self.after.state_hash, self.leo_after)


def run_data_version(cleanups: Sequence[PartitionCleanup]) -> str:
    """A run's data version: its partition's own version, or one naming every partition's
    version for a range (Dagster gives every partition of a run the same data version tag;
    each partition's own version is in its ``log_state_version`` metadata)."""
    if len(cleanups) == 1:
        return cleanups[0].data_version
    return short_hash(*(c.data_version for c in sorted(cleanups, key=lambda c: c.partition)))
