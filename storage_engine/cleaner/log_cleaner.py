"""The loop over a log dir's compacted partitions (Kafka's ``LogCleaner`` and the candidacy of
``LogCleanerManager``): which are candidates, clean one, clean every due one, and the
after-steps. The manager (``LogManager``) only opens logs and reads their stats; every
compaction step of the local engine, and of the Spark job's whole partitions, goes through here.

A topic with ``remote.storage.enable`` is compacted on its remote tier only
(``remote_cleaning.compact_tiered``: tier, then clean the latest remote version with the same
cleaner), and its candidacy is judged over the remote version's stats and the local segments
past the tier's end (``remote.stats.tiered_stats``, what the platform's sensors judge too),
by the same rule.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from functools import cached_property
from typing import TYPE_CHECKING

from ..config.cleaner import CleanerConfig, build_cleaner_config
from ..config.topic import LogConfig
from ..errors import LogError
from ..outcomes import SKIPPED
from ..remote.location import location_from_env
from ..remote.stats import remembered_facts, tiered_stats
from .candidacy import candidacy_from_stats
from .cleaner import Cleaner, reset_out_of_range_checkpoint
from .outcome import PARTITION_ERRORS, outcome_of
from .partition_cleaning import after_steps, finish
from .plan import LogToClean
from .remote_cleaning import compact_tiered
from .report import CompactionReport

if TYPE_CHECKING:
    from ..logdir.manager import LogManager


def require_compacted(topic: str, config: LogConfig) -> None:
    """Refuse a topic whose ``cleanup.policy`` does not include ``compact``."""
    if not config.compact:
        policy = ("is empty (KIP-1161: kept forever)" if config.keep_forever
                  else f"is {','.join(config.cleanup_policy)}")
        raise LogError(f"topic {topic}'s cleanup.policy {policy}: only compacted topics are cleaned")


class LogCleaner:
    """Compaction of a :class:`LogManager`'s partitions. ``cleaner`` (default: one built from the
    broker's ``log.cleaner.*`` settings when first needed) cleans one partition at a time."""

    def __init__(self, manager: LogManager, cleaner: Cleaner | None = None) -> None:
        self.manager = manager
        if cleaner is not None:
            self.cleaner = cleaner

    @property
    def config(self) -> CleanerConfig:
        """The ``log.cleaner.*`` broker settings (offset-map memory, I/O buffer, throttle)."""
        return build_cleaner_config(self.manager.broker_props)

    @cached_property
    def cleaner(self) -> Cleaner:
        return Cleaner(self.config)

    def candidates(self, topic: str | None = None, *, now_ms: int) -> list[LogToClean]:
        """Every compacted partition's cleaning candidacy from its stats and config
        (``LogManager.partition_facts``), dirtiest first.

        Due or not: ``LogToClean.due`` says which Kafka's cleaner would pick. Open transactions
        are only seen by the cleaning pass itself.
        """
        out = []
        location: str | None = None
        for facts in self.manager.partition_facts(topic):
            if not facts.config.compact:
                continue
            stats = facts.stats
            if facts.config.remote_storage_enable:
                location = location or _remote_url()
                stats = tiered_stats(stats, remembered_facts(stats, location))
            if (ltc := candidacy_from_stats(stats, facts.config, now_ms)) is not None:
                out.append(ltc)
        return sorted(out, key=lambda c: -c.cleanable_ratio)

    def compacted_partitions(self, partitions: Sequence[tuple[str, int]] | None = None) -> list[tuple[str, int]]:
        """``partitions`` (default: every partition of every compacted topic), validated before
        anything is touched: each must exist and belong to a compacted topic."""
        manager = self.manager
        if partitions is None:
            return [(t, p) for t in manager.topics() if manager.topic_config(t).compact for p in manager.partitions(t)]
        for topic, partition in partitions:
            if partition not in manager.partitions(topic):
                raise LogError(f"partition {topic}-{partition} does not exist in {manager.dir_list()}")
            require_compacted(topic, manager.topic_config(topic))
        return sorted(set(partitions))

    def compact(self, topic: str, partition: int, *, now_ms: int, force: bool = True, max_passes: int | None = None,
                cleaner: Cleaner | None = None) -> CompactionReport:
        """Compact one partition (regardless of its dirty ratio unless ``force=False``), then the
        after-steps (:func:`~.partition_cleaning.finish`: for ``compact,delete`` topics, time/size
        retention as Kafka's cleaner thread does).

        Raises ``LogChangedError`` when another process changed the segments being cleaned or is
        cleaning the same partition; nothing changed on disk then.
        """
        log = self.manager.get_log(topic, partition)
        require_compacted(topic, log.config)
        cleaner = cleaner or self.cleaner
        if log.config.remote_storage_enable:
            report = compact_tiered(log, now_ms=now_ms, force=force, cleaner=cleaner)
            if report.skipped is not None:
                report.settle(SKIPPED, report.skipped)
            return report
        report = cleaner.clean(log, now_ms=now_ms, force=force, max_passes=max_passes)
        finish(log, report, now_ms, cleaner)
        if report.skipped is not None:
            report.settle(SKIPPED, report.skipped)
        return report

    def clean(self, topic: str, partition: int, *, now_ms: int, force: bool,
              max_passes: int | None = None) -> CompactionReport:
        """:meth:`compact`, with a problem of the partition's own files turned into its report's
        outcome (:data:`~.outcome.OUTCOME_OF_ERROR`), so a run over many goes on past it, as
        Kafka's cleaner thread goes on past an uncleanable partition."""
        started = time.monotonic()
        try:
            return self.compact(topic, partition, now_ms=now_ms, force=force, max_passes=max_passes)
        except PARTITION_ERRORS as exc:
            report = CompactionReport(topic, partition, now_ms)
            report.settle(*outcome_of(exc))
            report.duration_s = time.monotonic() - started
            return report

    def compact_due(self, topic: str | None = None, *, now_ms: int,
                    max_passes: int | None = None) -> list[CompactionReport]:
        """Compact every due partition, dirtiest first; a partition another process changed or is
        cleaning is skipped (its report says why), one whose files cannot be read or written is
        reported failed and the others are cleaned all the same (:meth:`clean`). A partition
        that is not due is opened only when its checkpoint was found out of range (it is reset)
        or its topic is ``compact,delete`` (the after-steps run either way, as in Kafka's
        cleaner thread); it is reported when retention deleted something."""
        reports = []
        for ltc in self.candidates(topic, now_ms=now_ms):
            if ltc.due:
                reports.append(self.clean(ltc.topic, ltc.partition, now_ms=now_ms, force=False, max_passes=max_passes))
            elif (report := self._not_due(ltc, now_ms)) is not None:
                reports.append(report)
        return reports

    def _not_due(self, ltc: LogToClean, now_ms: int) -> CompactionReport | None:
        """A partition that is not due: its out-of-range checkpoint reset and its after-steps run
        when either applies; a report when retention deleted something."""
        config = self.manager.topic_config(ltc.topic)
        if config.remote_storage_enable or not (ltc.force_checkpoint_update or config.delete):
            return None  # a tiered log's checkpoint and retention are its remote tier's
        log = self.manager.get_log(ltc.topic, ltc.partition)
        reset_out_of_range_checkpoint(log, ltc)
        retention = after_steps(log, now_ms)
        if retention is None or not retention.deleted_segments:
            return None
        report = CompactionReport(ltc.topic, ltc.partition, now_ms, skipped=f"not due: {ltc.why}")
        report.retention = retention.to_dict()
        return report


def _remote_url() -> str | None:
    """The configured remote location's URL (no request), for the remembered versions."""
    location = location_from_env()
    return location.url if location is not None else None
