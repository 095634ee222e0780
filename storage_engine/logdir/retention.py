"""Retention over the log dirs: Kafka's ``LogManager.cleanupLogs``, plan and apply.

Each partition's plan is the engine's one rule (``log.retention.plan_retention``) applied to its
cheap stats; applying deletes through the partition's own log (``log.retention.apply_retention``)
and then removes the ``.deleted`` files whose ``file.delete.delay.ms`` has passed. Composed into
the log manager as ``manager.retention``; the Spark job applies the same plans a task at a time.

A tiered topic's (``remote.storage.enable``) segments are not planned here: retention judges its
whole logical log, remote segments first, and its local copies go only once tiered
(``remote.tier_runs.retain_tiered``, a layer above this one).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import LogChangedError, LogError
from ..log.retention import RetentionPlan, RetentionResult, apply_retention, plan_retention, sweep_deleted_files
from ..outcomes import CHANGED
from .locations import locate

if TYPE_CHECKING:
    from .manager import LogManager


class Retention:
    """Retention plans for a manager's partitions, their application, and the delayed sweep."""

    def __init__(self, manager: LogManager) -> None:
        self._manager = manager

    def delete_expired_files(self, *, unreadable: dict[str, str] | None = None
                             ) -> dict[tuple[str, int], list[tuple[str, int]]]:
        """Remove every partition's ``.deleted`` files once ``file.delete.delay.ms`` has passed
        since their rename by the wall clock (Kafka's scheduled ``deleteSegmentFiles``), whether or not anything
        else touches the partition; returns the removed files and sizes by partition. Needs no
        partition lock: readers that still hold such a file open keep reading it. A topic that
        cannot be read (a symlink in a partition dir, a refused config) is refused, or with
        ``unreadable`` recorded there by topic and passed over, so it does not stop the others'."""
        removed = {}
        delays: dict[str, int | None] = {}
        deleting = self._manager.metadata.being_deleted()  # no topic to anyone: the next writable open finishes it
        located = self._manager.partition_locations(refused=unreadable)  # one listing of the log dirs
        for key, loc in sorted(located.items()):
            topic = key[0]
            if topic in deleting:
                continue
            if topic not in delays:
                try:
                    delays[topic] = self._manager.topic_config(topic).file_delete_delay_ms
                except LogError as exc:
                    if unreadable is None:
                        raise
                    unreadable[topic], delays[topic] = str(exc), None
            delay_ms = delays[topic]
            if delay_ms is not None and (files := sweep_deleted_files(loc.path, delay_ms)):
                removed[key] = files
        return removed

    def plans(self, topic: str | None = None, *, now_ms: int) -> list[RetentionPlan]:
        """Retention plans for every partition (of ``topic``) of the topics without a remote tier,
        from their facts (``LogManager.partition_facts``)."""
        return [plan_retention(f.stats, f.config, now_ms) for f in self._manager.partition_facts(topic)
                if not f.config.remote_storage_enable]

    def apply(self, plans: Sequence[RetentionPlan], *, now_ms: int) -> list[RetentionResult]:
        """Apply plans that delete something; sweep ``.deleted`` files whose delay has passed.
        A partition that changed since its plan (a producer rolled) is left alone and reported
        so (``RetentionResult.changed``), as the Spark job reports it; the next run plans it
        afresh. Failing the whole run there left the partitions before it changed and the
        ones after it unvisited, under an error. A partition with nothing to delete is not
        opened, only swept: its writable open changed files all the same (a broker's stale
        producer snapshots removed), which the Spark job, opening only what it deletes from,
        left, and cost a load per partition."""
        results = []
        delays: dict[str, int] = {}
        for plan in plans:
            if plan.deletions:
                log = self._manager.get_log(plan.topic, plan.partition)
                try:
                    results.append(apply_retention(log, plan, now_ms))
                except LogChangedError as exc:
                    results.append(RetentionResult.of(plan, CHANGED, str(exc)))
                sweep_deleted_files(log.dir, log.config.file_delete_delay_ms)
            elif (loc := locate(self._manager.log_dirs, plan.topic, plan.partition)) is not None:
                if plan.topic not in delays:
                    delays[plan.topic] = self._manager.topic_config(plan.topic).file_delete_delay_ms
                sweep_deleted_files(loc.path, delays[plan.topic])
        return results
