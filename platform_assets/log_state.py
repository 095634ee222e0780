"""Each partition's cheap state, and the decisions sensors and schedules take from it.

The state of a partition is what the engine can say without reading a record: its segment list
(sizes, mtimes), the checkpoint files, the time-index tails and batch headers
(``PartitionStats``), and from those the engine's own compaction candidacy (``LogToClean``:
dirty ratio, ``max.compaction.lag.ms``, due or not) and retention plan (``RetentionPlan``).
Nothing here re-decides what the engine decides; this module only picks, orders and names the
work.

Run keys are derived from the log state (``state_hash``: the non-active segments, the active
segment's base, the log start offset and the cleaner checkpoint). A run that cleans a partition
changes that state, so the next request for it gets a new key (new work is never blocked), while
a partition whose state has not changed since its request keeps its key (Dagster never launches
the same key twice, so work is never repeated). Appends to the active segment do not change the
key: they cannot make a log more cleanable until the segment rolls.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from itertools import chain
from typing import AbstractSet, Collection, Iterable, Sequence

from storage_engine.cleaner import candidacy_from_stats
from storage_engine.cleaner_plan import LogToClean, order_by_dirtiness
from storage_engine.config import LogConfig
from storage_engine.manager import LogManager
from storage_engine.retention import RetentionPlan, plan_retention
from storage_engine.stats import PartitionStats

TopicPartition = tuple[str, int]


def short_hash(*parts: object) -> str:
    """12 hex digits of BLAKE2b over ``repr(parts)``: names a state, is not a security boundary."""
    return hashlib.blake2b(repr(parts).encode(), digest_size=6).hexdigest()


@dataclass(frozen=True)
class PartitionState:
    """One partition as the sensors see it, with the engine's verdicts."""

    topic: str
    partition: int
    compact: bool  # the topic's cleanup.policy
    delete: bool
    size_bytes: int
    segments: int
    log_start_offset: int
    cleaner_checkpoint: int | None
    active_base_offset: int | None
    state_hash: str
    candidacy: LogToClean | None  # compacted topics only
    retention: RetentionPlan | None

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)

    @property
    def log_end_offset(self) -> int | None:
        """Known without opening the log only for compacted partitions (the candidacy reads the
        active segment's batch headers); ``None`` otherwise."""
        return self.candidacy.log_end_offset if self.candidacy else None

    @property
    def dirty_ratio(self) -> float | None:
        return self.candidacy.cleanable_ratio if self.candidacy else None

    @property
    def retention_applies_with_compaction(self) -> bool:
        """``compact,delete``: a compaction run applies retention too."""
        return self.compact and self.delete

    @property
    def compaction_due(self) -> bool:
        return bool(self.candidacy and self.candidacy.due)

    @property
    def deletable_segments(self) -> int:
        return len(self.retention.deletions) if self.retention else 0

    @property
    def deletable_bytes(self) -> int:
        return self.retention.bytes_to_free if self.retention else 0

    def observation_digest(self) -> str:
        """Changes when the log's structure or a verdict changes, not on every append: what an
        observation is worth recording for."""
        return short_hash(self.state_hash, self.compaction_due, self.deletable_segments)


def state_of(stats: PartitionStats, config: LogConfig, *, now_ms: int, compaction: bool = True,
             retention: bool = True) -> PartitionState:
    """The state of one partition from its stats (``compaction``/``retention`` skip a verdict a
    caller does not need; each costs a few small reads)."""
    active = stats.segments[-1].base_offset if stats.segments else None
    candidacy = candidacy_from_stats(stats, config, now_ms) if compaction and config.compact else None
    plan = plan_retention(stats, config, now_ms) if retention else None
    return PartitionState(
        topic=stats.topic,
        partition=stats.partition,
        compact=config.compact,
        delete=config.delete,
        size_bytes=stats.size_bytes,
        segments=len(stats.segments),
        log_start_offset=stats.log_start_offset,
        cleaner_checkpoint=stats.cleaner_checkpoint,
        active_base_offset=active,
        state_hash=short_hash(stats.fingerprint(), active, stats.log_start_offset, stats.cleaner_checkpoint),
        candidacy=candidacy,
        retention=plan,
    )


def read_states(
    manager: LogManager,
    *,
    now_ms: int,
    topics: Collection[str] | None = None,
    compaction: bool = True,
    retention: bool = True,
) -> list[PartitionState]:
    """The state of every partition (of ``topics``, or of all), in log-dir order."""
    stats: Iterable[PartitionStats]
    if topics is None:
        stats = manager.partition_stats()
    else:
        stats = chain.from_iterable(manager.partition_stats(t) for t in sorted(topics))
    configs: dict[str, LogConfig] = {}
    out = []
    for s in stats:
        config = configs.get(s.topic)
        if config is None:
            config = configs[s.topic] = manager.topic_config(s.topic)
        out.append(state_of(s, config, now_ms=now_ms, compaction=compaction, retention=retention))
    return out


# ---------------------------------------------------------------------------- decisions


def compaction_choices(
    states: Sequence[PartitionState], *, limit: int, busy: AbstractSet[TopicPartition] = frozenset()
) -> list[PartitionState]:
    """Due partitions (Kafka's rule: dirty ratio above ``min.cleanable.dirty.ratio``, or
    ``max.compaction.lag.ms`` overdue), dirtiest first, at most ``limit``; partitions that
    already have a run queued or in flight wait for it."""
    by_tp = {s.tp: s for s in states if s.candidacy is not None and s.tp not in busy}
    ordered = order_by_dirtiness([s.candidacy for s in by_tp.values()])  # type: ignore[misc]
    return [by_tp[(c.topic, c.partition)] for c in ordered[:limit]]


def retention_choices(
    states: Sequence[PartitionState], *, limit: int, busy: AbstractSet[TopicPartition] = frozenset()
) -> list[PartitionState]:
    """Partitions with deletable segments, most bytes to free first, at most ``limit``.

    A ``compact,delete`` partition that is due for compaction is left to the compaction run,
    which applies retention right after cleaning (as Kafka's cleaner thread does), so the two
    sensors never queue two runs for one change.
    """
    chosen = [
        s for s in states
        if s.deletable_segments and s.tp not in busy and not (s.compaction_due and s.retention_applies_with_compaction)
    ]
    return sorted(chosen, key=lambda s: (-s.deletable_bytes, s.topic, s.partition))[:limit]


def compaction_run_key(state: PartitionState) -> str:
    return f"compact/{state.topic}/{state.partition}/{state.state_hash}"


def retention_run_key(state: PartitionState) -> str:
    plan = state.retention
    deleted = plan.deleted_bases if plan else ()
    return f"retention/{state.topic}/{state.partition}/{state.state_hash}-{short_hash(deleted)}"
