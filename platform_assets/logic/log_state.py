"""Each partition's cheap state, and the decisions sensors and schedules take from it.

The state of a partition is what the engine can say without reading a record: its segment list
(sizes, mtimes), the checkpoint files, the time-index tails and batch headers
(``PartitionStats``), and from those the engine's own compaction candidacy (``LogToClean``:
dirty ratio, ``max.compaction.lag.ms``, due or not) and retention plan (``RetentionPlan``).
Nothing here re-decides what the engine decides; this module only picks, orders and names the
work.

A compacted partition whose erasure deadline (the active segment's records included) has passed
is *possibly overdue*: file metadata cannot tell whether a superseded record is still there, so
its state carries the engine's exact answer, ``erasure_report`` (which reads its records), and
``log_health`` says what ``logctl erasure-report`` says. Only those partitions are read.

Each state also knows when the clock alone changes a verdict (:func:`next_transition_ms`), so the
state cache recomputes it then rather than a TTL late.

Run keys are derived from the log state (``state_hash``: where the partition lives, the
non-active segments with their mtimes, the active segment's base, the log start offset and the
cleaner checkpoint, and the topic's config; for retention also the segments the plan deletes). Where and when make a
log dir written afresh, or a topic deleted and created again, with the same records, a new
state: without them its runs had all "already run", and nothing was cleaned. A run that cleans a partition changes that state, so the next request for it
gets a new key (new work is never blocked), while a partition whose state has not changed since
its request keeps its key (Dagster never launches the same key twice, so work is never
repeated). Appends to the active segment do not change the key: they cannot make a log more
cleanable until the segment rolls.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import cast

from storage_engine.cleaner import LogToClean, candidacy_from_stats, order_by_dirtiness
from storage_engine.cleaner.erasure import ErasureReport, partition_erasure_report
from storage_engine.config.topic import LogConfig
from storage_engine.log.retention import RetentionPlan, plan_retention
from storage_engine.log.stats import PartitionStats
from storage_engine.logdir.manager import LogManager
from storage_engine.remote.stats import plan_tiered_retention, tiered_stats

from .tiering import TierNeed, remembered_tier, tiering_need

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
    directory: str = ""  # the partition's directory (in one of the log dirs)
    #: the engine's erasure report, read only for a partition possibly overdue (:func:`possibly_overdue`)
    erasure: ErasureReport | None = field(default=None, hash=False)
    #: a tiered topic's (``remote.storage.enable``): what tiering would do (``tiering.tiering_need``)
    tiering: TierNeed | None = field(default=None, hash=False)
    #: the remembered remote tier (``tiering.remembered_tier``): its latest version, bytes and segments
    remote_version: int | None = None
    remote_bytes: int = 0
    remote_segments: int = 0

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
        """Due by Kafka's rule, or by its erasure deadline (:func:`deadline_urgent`)."""
        return bool(self.candidacy and self.candidacy.due) or deadline_urgent(self)

    @property
    def needs_cleaning(self) -> bool:
        """Work for a run: due for compaction, or segments retention would delete (what the
        sweep asks for and the main job waits on)."""
        return self.compaction_due or bool(self.deletable_segments)

    @property
    def deletable_segments(self) -> int:
        return len(self.retention.deletions) if self.retention else 0

    @property
    def deletable_bytes(self) -> int:
        return self.retention.bytes_to_free if self.retention else 0

    def observation_digest(self) -> str:
        """Changes when the log's structure or a verdict changes, not on every append: what an
        observation is worth recording for."""
        overdue = bool(self.candidacy and self.candidacy.overdue)
        proof = self.erasure
        erased = None if proof is None else (proof.ok, proof.unproven, proof.oldest and proof.oldest.offset)
        return short_hash(self.state_hash, self.compaction_due, overdue, self.deletable_segments,  # urgent: in due
                          erased)


def state_of(stats: PartitionStats, config: LogConfig, *, now_ms: int) -> PartitionState:
    """The state of one partition from its stats, with the engine's verdicts. A tiered
    partition's dirty ratio and retention plan are the engine's planners' of a tiered partition
    (``storage_engine.remote.stats``) over its remembered remote version and the local log above
    it, what ``logctl compact --dry-run`` and ``logctl retention --dry-run`` say: the dirty
    ratio of the whole log (``tiered_stats``), and the remote tier's retention plan
    (``plan_tiered_retention``; its local copies are the tiering need's). Without a remembered
    version a tiered partition has no retention plan (``logctl`` plans none either: nothing is
    tiered yet). Its state names the remembered version, so a commit on the remote tier alone
    is a new state."""
    active = stats.segments[-1].base_offset if stats.segments else None
    tier = remembered_tier(stats, config)
    planning = tiered_stats(stats, tier)
    candidacy = candidacy_from_stats(planning, config, now_ms) if config.compact else None
    if not config.remote_storage_enable:
        plan: RetentionPlan | None = plan_retention(planning, config, now_ms)
    else:
        plan = None if tier is None else plan_tiered_retention(stats, tier, config, now_ms).remote
    state_hash = short_hash(str(stats.directory), [(s.base_offset, s.mtime_ms) for s in stats.segments if not s.is_active],
                            stats.fingerprint(), active, stats.log_start_offset, stats.cleaner_checkpoint,
                            config_token(config),  # a config change is a new state: a failure keyed on it is cleared
                            *((tier.version,) if tier is not None else ()))
    return PartitionState(
        topic=stats.topic,
        partition=stats.partition,
        compact=config.compact,
        delete=config.delete,
        size_bytes=stats.size_bytes,
        segments=len(stats.segments),
        log_start_offset=planning.log_start_offset,
        cleaner_checkpoint=planning.cleaner_checkpoint,
        active_base_offset=active,
        state_hash=state_hash,
        candidacy=candidacy,
        retention=plan,
        directory=str(stats.directory),
        tiering=(tiering_need(stats, config, tier, now_ms=now_ms, state_hash=state_hash)
                 if config.remote_storage_enable else None),
        remote_version=None if tier is None else tier.version,
        remote_bytes=0 if tier is None else tier.size_bytes,
        remote_segments=0 if tier is None else len(tier.segments),
    )


_DEFAULTS = LogConfig().to_topic_dict()


def config_token(config: LogConfig) -> list[tuple[str, str]]:
    """What of a topic's config a partition's state depends on: the settings that differ from
    the engine's defaults, by Kafka key. Not the whole ``LogConfig``: a setting a later version
    adds, at its default, must not make every partition's state new (dropping every failure
    hold and every run's "already cleaned in this state" at once)."""
    return sorted((k, repr(v)) for k, v in config.to_topic_dict().items() if v != _DEFAULTS[k])


def possibly_overdue(state: PartitionState) -> bool:
    """Whether the partition's erasure deadline (its oldest dirty record's, the active segment
    included) has passed: only then can a superseded record be past ``max.compaction.lag.ms``
    (the record that superseded it is dirty, and no older than its segment's first batch) --
    as far as file metadata can tell: a batch's records older than its maxTimestamp, or
    records a producer stamped (CreateTime) older than the batches before them, fall due
    earlier than this says, and until the deadline passes only ``logctl erasure-report``,
    which reads every record, sees them. The erasure report is read only past it, as it
    reads every record of the partition."""
    c = state.candidacy
    return c is not None and c.deadline is not None and c.deadline.time_left_ms <= 0


def with_erasure_proof(manager: LogManager, state: PartitionState, now_ms: int) -> PartitionState:
    """``state`` with the engine's erasure report (``partition_erasure_report``, what ``logctl
    erasure-report`` prints) when it is :func:`possibly_overdue`; unchanged otherwise."""
    if not possibly_overdue(state):
        return state
    return replace(state, erasure=partition_erasure_report(manager, state.topic, state.partition, now_ms))


def next_transition_ms(state: PartitionState, now_ms: int) -> int | None:
    """The first moment after ``now_ms`` at which the clock alone changes the state's verdicts,
    its files unchanged (None: never): the candidacy's (``LogToClean.clock_transitions_ms``: the
    erasure deadline's urgent point and the deadline, Kafka's overdue moment, the end of
    ``min.compaction.lag.ms``, the idle active segment's roll), retention's next ``retention.ms``
    expiry (``RetentionPlan.next_expiry_ms``) and, in an erasure report, the moment the next
    superseded record becomes due (``ErasureReport.next_due_ms``)."""
    moments = list(state.candidacy.clock_transitions_ms) if state.candidacy is not None else []
    for later in (state.retention and state.retention.next_expiry_ms, state.erasure and state.erasure.next_due_ms):
        if later is not None:
            moments.append(later)
    return min((m for m in moments if m > now_ms), default=None)


def read_states(manager: LogManager, *, now_ms: int, topics: Collection[str] | None = None,
                partitions: Collection[int] | None = None) -> list[PartitionState]:
    """The state of every partition (of ``topics``, or of all; with ``partitions``, of those
    numbers of ``topics`` alone), by topic and partition number: one question to the engine
    (``LogManager.partition_facts``)."""
    facts = manager.partition_facts(None if topics is None else sorted(topics), partitions)
    return [with_erasure_proof(manager, state_of(f.stats, f.config, now_ms=now_ms), now_ms) for f in facts]


def observe(manager: LogManager, topic: str, partitions: Collection[int], *,
            now_ms: int) -> dict[int, tuple[PartitionState, int]]:
    """Each of ``partitions`` of ``topic`` found: its state and its log end offset (the log
    opened as the manager opens it), in one question to the engine
    (``LogManager.partition_facts``)."""
    facts = manager.partition_facts([topic], partitions, log_end_offsets=True)
    return {f.stats.partition: (with_erasure_proof(manager, state_of(f.stats, f.config, now_ms=now_ms), now_ms),
                                cast(int, f.log_end_offset)) for f in facts}


# ---------------------------------------------------------------------------- decisions


def deadline_urgent(state: PartitionState) -> bool:
    """Whether half of the partition's ``max.compaction.lag.ms`` is used by its oldest uncleaned
    record (``ErasureDeadline.urgent``, overdue included) and a run can do something about it
    (bytes to clean, or an idle active segment it rolls, ``logplat.roll.idle.segments``): the
    compaction sensor asks for it then, so that it is clean before the deadline, whatever its
    dirty ratio."""
    c = state.candidacy
    return (c is not None and c.deadline is not None and c.deadline.urgent
            and (c.cleanable_bytes > 0 or c.idle_roll_due))


def forced_by_deadline(run: Sequence[PartitionState]) -> bool:
    """Whether a run must clean its partitions even where the engine would not: it holds one
    asked for by its erasure deadline alone (:func:`deadline_urgent`, not due by Kafka's rule,
    ``LogToClean.kafka_due``), which an unforced run would skip, and ask for again at every tick. The compaction
    sensor and the sweep both ask with it."""
    return any(deadline_urgent(s) and not s.candidacy.kafka_due for s in run)  # type: ignore[union-attr]


def due_for_compaction(states: Sequence[PartitionState]) -> list[PartitionState]:
    """The partitions to compact, earliest deadline first: those whose erasure deadline is
    urgent or missed (:func:`deadline_urgent`), least time left first, then the others Kafka's
    cleaner would pick (dirty ratio above ``min.cleanable.dirty.ratio``), dirtiest first, the
    engine's own order. Kafka's cleaner picks the dirtiest log whatever its deadline, and only
    once ``max.compaction.lag.ms`` has passed; with a bounded number of runs per tick that could
    leave an overdue partition waiting behind dirtier ones."""
    by_tp = {s.tp: s for s in states if s.candidacy is not None}
    urgent = sorted((s for s in by_tp.values() if deadline_urgent(s)),
                    key=lambda s: (s.candidacy.deadline.time_left_ms, s.tp))  # type: ignore[union-attr]
    first = {s.tp for s in urgent}
    ordered = order_by_dirtiness([s.candidacy for s in by_tp.values()])  # type: ignore[misc]
    return urgent + [by_tp[(c.topic, c.partition)] for c in ordered if (c.topic, c.partition) not in first]


def due_for_retention(states: Sequence[PartitionState]) -> list[PartitionState]:
    """Partitions with deletable segments, most bytes to free first.

    A ``compact,delete`` partition that is due for compaction is left to the compaction run,
    which applies retention right after cleaning (as Kafka's cleaner thread does), so the two
    sensors never queue two runs for one change.
    """
    chosen = [s for s in states if s.deletable_segments and not (s.compaction_due and s.retention_applies_with_compaction)]
    return sorted(chosen, key=lambda s: (-s.deletable_bytes, s.topic, s.partition))


def due_for_tiering(states: Sequence[PartitionState]) -> list[PartitionState]:
    """Tiered partitions with rolled segments to copy or local copies to release
    (``tiering.tiering_need``), most bytes to copy first."""
    chosen = [s for s in states if s.tiering is not None and s.tiering.needed]
    return sorted(chosen, key=lambda s: (-s.tiering.tierable_bytes, s.topic, s.partition))  # type: ignore[union-attr]


def tiering_token(state: PartitionState) -> str:
    """What a tiering run of the partition depends on: the remembered version and the local
    segments (``TierNeed.token``)."""
    assert state.tiering is not None
    return state.tiering.token


def compaction_token(state: PartitionState) -> str:
    """What a compaction of the partition depends on: its state."""
    return state.state_hash


def retention_token(state: PartitionState) -> str:
    """What retention of the partition depends on: its state and which segments the plan deletes
    (more segments expire as time passes, without the log changing)."""
    deleted = state.retention.deleted_bases if state.retention else ()
    return f"{state.state_hash}-{short_hash(deleted)}"


def contiguous_runs(chosen: Sequence[PartitionState]) -> list[list[PartitionState]]:
    """The chosen partitions as runs: per topic, consecutive partition numbers go together (one
    run, one Spark job: a single-run range), in the order of each run's first member in
    ``chosen`` (so the dirtiest partition's run comes first)."""
    by_topic: dict[str, list[PartitionState]] = {}
    for s in chosen:
        by_topic.setdefault(s.topic, []).append(s)
    runs: list[list[PartitionState]] = []
    for members in by_topic.values():
        current: list[PartitionState] = []
        for s in sorted(members, key=lambda m: m.partition):
            if current and s.partition != current[-1].partition + 1:
                runs.append(current)
                current = []
            current.append(s)
        runs.append(current)
    rank = {s.tp: i for i, s in enumerate(chosen)}
    return sorted(runs, key=lambda run: min(rank[s.tp] for s in run))


def run_key(kind: str, run: Sequence[PartitionState], tokens: Sequence[str]) -> str:
    """``<kind>/<topic>/<partition or first-last>/<hash of every member's token>``."""
    first, last = run[0].partition, run[-1].partition
    span = str(first) if first == last else f"{first}-{last}"
    return f"{kind}/{run[0].topic}/{span}/{short_hash(*zip((s.partition for s in run), tokens, strict=False))}"
