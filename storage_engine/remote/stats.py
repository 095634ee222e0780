"""A tiered partition's planning stats: its logical log (the remote tier, then the local log
above it) as the engine's one compaction rule and one retention rule see it.

Two kinds of callers plan a tiered partition: those that read its latest version from the bucket
(``logctl retention --dry-run``, the Spark retention job, a remote retention) and those that may
not send a request per partition (``LogCleaner.candidates`` behind ``logctl compact --dry-run``,
the platform's sensors), which use the version the partition remembers
(``local_state.recall``, Kafka's cached remote log metadata). Both reduce what they have to
:class:`TierFacts`, and every plan is built from those by the functions here, so what a sensor
shows of a tiered partition is what ``logctl`` says of it.

* :func:`tiered_stats`: the remote segments, then the local segments from the tier's end (the
  local copies below it are shadowed, not the log's), with the version's log start offset and
  cleaner checkpoint: what ``candidacy_from_stats`` judges (dirty ratio, lag bounds).
* :func:`plan_tier_retention`: retention of the remote tier (Kafka's ``RLMExpirationTask``):
  ``log.retention.plan_retention`` over the remote segments, the local bytes above the tier's
  end following as one more segment no pass may take (``retention.bytes`` counts them).
* :func:`plan_tiered_retention`: that plan and the release of the local copies it leaves
  (``tiering.plan_local_release``, below the remote log start the plan leaves): the two rows of
  ``logctl retention --dry-run``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from ..config.topic import LogConfig
from ..log.retention import RetentionPlan, plan_retention
from ..log.stats import PartitionStats, SegmentStat
from .local_state import RemoteTierState, recall
from .tiering import plan_local_release
from .version import PartitionVersion


@dataclass(frozen=True)
class TierFacts:
    """What planning needs of a remote version: its offsets, checkpoint and segments as stats (a
    version does not record a segment's first batch timestamp, so ``max.compaction.lag.ms``
    judges a remote segment by its largest)."""

    topic: str
    partition: int
    version: int
    log_start_offset: int
    end_offset: int
    cleaner_checkpoint: int | None
    segments: tuple[tuple[int, int, int, int], ...]  # (base, size, mtime ms, max timestamp)

    @classmethod
    def of_version(cls, version: PartitionVersion) -> TierFacts:
        return cls(version.topic, version.partition, version.version, version.log_start_offset, version.end_offset,
                   version.cleaner_checkpoint,
                   tuple((s.base_offset, s.size_bytes, s.mtime_ms, s.max_timestamp) for s in version.segments))

    @classmethod
    def remembered(cls, topic: str, partition: int, state: RemoteTierState) -> TierFacts:
        return cls(topic, partition, state.version, state.log_start_offset, state.end_offset, state.cleaner_checkpoint,
                   tuple((base, size, mtime, max_ts) for base, _end, size, max_ts, mtime in state.segments))

    @property
    def size_bytes(self) -> int:
        return sum(size for _, size, _, _ in self.segments)

    def segment_stats(self) -> list[SegmentStat]:
        return [SegmentStat.of(base, size, mtime, False, max_ts) for base, size, mtime, max_ts in self.segments]


def remembered_facts(local: PartitionStats, location: str | None) -> TierFacts | None:
    """The remote version ``local``'s partition remembers at ``location`` (``local_state``: no
    request), as planning facts; None without a location or a remembered version."""
    state = recall(local.directory, location) if location is not None else None
    return None if state is None else TierFacts.remembered(local.topic, local.partition, state)


def local_bytes_above(local: PartitionStats, end_offset: int) -> int:
    """The bytes of the local segments from the tier's end: the log the remote tier does not hold."""
    return sum(s.size_bytes for s in local.segments if s.base_offset >= end_offset)


def tiered_stats(local: PartitionStats, tier: TierFacts | None) -> PartitionStats:
    """The planning stats of a tiered partition's logical log (see the module docstring); the
    local stats as they are without a version, or when the local log does not reach the tier's
    end (no segment at or past it: the next tiering run reports the gap)."""
    if tier is None:
        return local
    above = [s for s in local.segments if s.base_offset >= tier.end_offset]
    if not above:
        return local
    return replace(local, segments=[*tier.segment_stats(), *above], log_start_offset=tier.log_start_offset,
                   cleaner_checkpoint=tier.cleaner_checkpoint)


def plan_tier_retention(tier: TierFacts, config: LogConfig, now_ms: int, *,
                        local_bytes_above_end: int = 0) -> RetentionPlan:
    """The retention plan of ``tier``'s segments: the segments to drop, oldest first, and the
    new log start offset (the tier's end when every segment goes: the local log holds the
    rest). Reads nothing but its arguments."""
    # the local log above the tier's end: counted by retention.bytes, never expired nor taken
    tail = SegmentStat.of(tier.end_offset, local_bytes_above_end, now_ms, True, now_ms)
    stats = PartitionStats(tier.topic, tier.partition, Path(f"{tier.topic}-{tier.partition}"),
                           [*tier.segment_stats(), tail], tier.log_start_offset)
    plan = plan_retention(stats, config, now_ms)
    deletions = tuple(d for d in plan.deletions if d.base_offset < tier.end_offset)
    left = [base for base, *_ in tier.segments[len(deletions):]]
    new_start = max(tier.log_start_offset, left[0] if left else tier.end_offset) if deletions else None
    return replace(plan, deletions=deletions, new_log_start_offset=new_start, roll_first=False,
                   next_expiry_ms=plan.next_expiry_ms if left else None)


@dataclass(frozen=True)
class TieredRetention:
    """A tiered partition's retention, planned: the remote tier's, then its local copies'."""

    remote: RetentionPlan
    local: RetentionPlan


def plan_tiered_retention(local: PartitionStats, tier: TierFacts, config: LogConfig,
                          now_ms: int) -> TieredRetention:
    """What a retention run of the partition would do (``tier_runs.retain_tiered_partition``):
    drop the remote segments :func:`plan_tier_retention` names, then release the local copies
    past ``local.retention.*`` and those below the remote log start it leaves."""
    remote = plan_tier_retention(tier, config, now_ms, local_bytes_above_end=local_bytes_above(local, tier.end_offset))
    start = remote.new_log_start_offset or tier.log_start_offset
    return TieredRetention(remote, plan_local_release(local, config, tier.end_offset, now_ms, remote_log_start=start))
