"""Proof that ``max.compaction.lag.ms`` held: which superseded records are still on disk.

Kafka's ``max.compaction.lag.ms`` (KIP-354) bounds how long a record may stay uncompacted, which
is what data-protection rules ask of a superseded value or a deleted (tombstoned) key; Kafka
never shows whether the bound held. This module answers it exactly, by reading every record
(a read-only scan, as ``verify`` reads):

* A record is **due for erasure** once a later record of its key (a newer value or a tombstone)
  was written ``max.compaction.lag.ms`` ago or more (the later record's timestamp plus the lag is
  at or before now): from then on the cleaner was bound to have removed it. A report lists how
  many such records are still in the partition's segments and the oldest of them, with how long
  it is overdue. A tombstone that is its key's latest record is not due (Kafka keeps it for
  ``delete.retention.ms`` after cleaning, so consumers see the delete).
* Under a version compaction strategy (``compaction.strategy`` ``timestamp`` or ``header``,
  KIP-280) "later" means a higher ``(version, offset)``: a record that arrives with a lower
  version than its key's winner is superseded from the moment it is written. The record a
  cleaning kept as the newest of its pass, whatever its version, is reported until the next
  pass removes it.
* The partition's :class:`~storage_engine.cleaner.plan.ErasureDeadline` from file metadata (the
  oldest uncleaned record the bound covers, the active segment's included, and the time left),
  as the sensors see it.
* Why the oldest remnant is still there (:func:`why_kept`), from where the record that
  superseded it lies: in the active segment (held there: the cleaner never cleans it, and
  Kafka rolls it only on an append), beyond another bound of the cleanable section (an open
  transaction, ``min.compaction.lag.ms``), or cleanable (the cleaner is behind).
* For one key, every offset that still holds a record of it: in the live segments, and in
  ``.deleted`` files that ``file.delete.delay.ms`` has not yet let go (bytes still on disk).
* Transactions count as the cleaner counts them: a record of an aborted transaction supersedes
  nothing (Kafka's ``buildOffsetMap`` leaves aborted batches out of the offset map, through
  the same ``TransactionTracker``), and neither does one at or past the last stable offset,
  which no cleaning reaches until its transaction is decided. Aborted records are not
  remnants either: any cleaning that reaches them drops them whole.
* A tiered partition (``remote.storage.enable``) is read as one log across its tiers
  (``remote.reads.TieredLog``): the remote segments, then the local log from the tier's end.
* A partition that cannot be read to its end (a CRC error, a segment a read-only open refuses)
  is **unproven**, with the reason; the other partitions are still read and proven, as
  ``verify`` reports each damaged partition and carries on.
* Only compacted topics have the bound: a ``cleanup.policy=delete`` topic's records leave by
  retention (``retention.ms``, ``retention.bytes``), never by compaction, so there is nothing
  to prove, and asking for it is refused (:func:`require_compaction_bound`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..config.topic import LogConfig
from ..config.values import LONG_MAX
from ..errors import LogChangedError, LogError
from ..files.naming import DELETED_SUFFIX, LOG_SUFFIX
from ..files.nofollow import open_nofollow
from ..log.log import Log
from ..log.stats import live_stats
from ..record import decode_batch
from ..record.control import control_type_of
from ..record.file_records import read_batches
from ..remote.reads import TieredLog, tiered_log
from .candidacy import candidacy_from_stats
from .plan import ErasureDeadline, LogToClean
from .rules import ProducerSnapshot, ProducerStateBuilder, TransactionTracker
from .strategy import Winners, version_rule

if TYPE_CHECKING:
    from ..logdir.manager import LogManager

#: Kafka's "no bound" value of ``max.compaction.lag.ms``.
UNBOUNDED = LONG_MAX
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Remnant:
    """A record still on disk that the bound says should be gone."""

    offset: int
    superseded_by: int  # the offset of the later record of its key
    superseded_at_ms: int  # that record's timestamp
    overdue_ms: int  # how long past superseded_at_ms + max.compaction.lag.ms

    def to_dict(self) -> dict:
        return {"offset": self.offset, "superseded_by": self.superseded_by,
                "superseded_at_ms": self.superseded_at_ms, "overdue_ms": self.overdue_ms}


@dataclass(frozen=True)
class KeyRecords:
    """Where one key still has records: offsets of values and tombstones in the live segments,
    and offsets in ``.deleted`` files."""

    values: tuple[int, ...] = ()
    tombstones: tuple[int, ...] = ()
    in_deleted_files: tuple[int, ...] = ()

    def to_dict(self) -> dict:
        return {"values": list(self.values), "tombstones": list(self.tombstones),
                "in_deleted_files": list(self.in_deleted_files)}


@dataclass
class ErasureReport:
    topic: str
    partition: int
    max_compaction_lag_ms: int
    now_ms: int
    records_read: int = 0
    remnants: int = 0
    oldest: Remnant | None = None
    key: KeyRecords | None = None
    deadline: ErasureDeadline | None = None
    held_by: str | None = None  # why the oldest remnant is still on disk (:func:`why_kept`)
    next_due_ms: int | None = None  # when the next superseded record not yet due becomes due, the files unchanged
    notes: list[str] = field(default_factory=list)
    unproven: str | None = None  # why the partition could not be read to its end

    @property
    def ok(self) -> bool:
        return self.unproven is None and self.remnants == 0

    def add(self, remnant: Remnant) -> None:
        """Count one record still on disk past its bound; keep the oldest (lowest offset)."""
        self.remnants += 1
        if self.oldest is None or remnant.offset < self.oldest.offset:
            self.oldest = remnant

    def superseded_later(self, due_ms: int) -> None:
        """A record superseded, but not yet due: it is due at ``due_ms`` (keep the earliest)."""
        if self.next_due_ms is None or due_ms < self.next_due_ms:
            self.next_due_ms = due_ms

    def to_dict(self) -> dict:
        """The report as ``--json`` prints it; an unproven partition's counts are ``null`` (what
        was read before the damage proves nothing)."""
        read = self.unproven is None
        return {"topic": self.topic, "partition": self.partition, "ok": self.ok, "unproven": self.unproven,
                "max_compaction_lag_ms": self.max_compaction_lag_ms, "now_ms": self.now_ms,
                "records_read": self.records_read if read else None, "remnants": self.remnants if read else None,
                "oldest": self.oldest.to_dict() if self.oldest else None,
                "deadline": self.deadline.to_dict() if self.deadline else None,
                "held_by": self.held_by,
                "next_due_ms": self.next_due_ms,
                "key": self.key.to_dict() if self.key else None}


def require_compaction_bound(topic: str, config: LogConfig) -> None:
    """Refuse a report on a topic the cleaner never cleans: only ``cleanup.policy`` ``compact``
    has a ``max.compaction.lag.ms`` to prove (Kafka's ``LogConfig.compact``)."""
    if not config.compact:
        raise LogError(f"topic {topic} has cleanup.policy={','.join(config.cleanup_policy)}: its records leave by "
                       "retention (retention.ms, retention.bytes), not compaction, so there is no "
                       "max.compaction.lag.ms bound to prove")


def partition_erasure_report(manager: LogManager, topic: str, partition: int, now_ms: int,
                             key: bytes | None = None) -> ErasureReport:
    """``erasure_report`` of one partition; one that cannot be opened or read to its end is
    reported unproven with the reason, so one damaged partition does not hide the others'
    proofs (as ``verify_partition`` reports it as a problem). A log a writer changed while it was
    read (``LogChangedError``) is not damaged: that goes to the caller, to read it again."""
    try:
        return erasure_report(manager.get_log(topic, partition), now_ms, key)
    except LogChangedError:
        raise
    except (LogError, OSError) as exc:
        lag = manager.topic_config(topic).max_compaction_lag_ms
        return ErasureReport(topic, partition, lag, now_ms, unproven=str(exc))


def erasure_report(log: Log, now_ms: int, key: bytes | None = None) -> ErasureReport:
    """The partition's report (see the module docstring); ``key`` adds where that key is."""
    config = log.config
    lag = config.max_compaction_lag_ms
    candidacy = log_candidacy(log, now_ms)
    report = ErasureReport(log.topic, log.partition, lag, now_ms,
                           deadline=candidacy.deadline if candidacy is not None else None)
    rule = version_rule(config.compaction_strategy, config.compaction_strategy_header)
    winners = Winners(rule) if rule is not None else None
    # each key's records not yet superseded long enough ago: a later record whose timestamp is
    # at least the lag before now makes all of them due
    unsuperseded: dict[bytes, list[int]] = {}
    values: list[int] = []
    tombstones: list[int] = []
    view = tiered_log(log)  # a tiered partition is read as one log across its tiers
    producers = _producers(view)
    tracker = TransactionTracker(producers.aborted)
    for raw in view.batches_from(view.log_start_offset):
        h = raw.header
        path = view.segment_path(h.base_offset)
        if h.magic >= 2 and h.is_control:
            tracker.on_control_batch(h, control_type_of(raw, path))
            continue
        aborted = h.magic >= 2 and tracker.on_data_batch(h)
        for r in decode_batch(raw, path=path):
            if r.offset < view.log_start_offset or r.key is None:
                continue
            report.records_read += 1
            if key is not None and r.key == key:
                (values if r.value is not None else tombstones).append(r.offset)
            if aborted or r.offset >= producers.last_stable_offset:
                continue  # replaces nothing, and goes with any cleaning that reaches it
            due = lag != UNBOUNDED and r.timestamp + lag <= now_ms
            if winners is not None:
                winner = winners.offer(r)
                if winner is not None:
                    if due:  # lost to its key's winner when it was written
                        report.add(Remnant(r.offset, winner[1], r.timestamp, now_ms - (r.timestamp + lag)))
                    elif lag != UNBOUNDED:
                        report.superseded_later(r.timestamp + lag)
                    continue
            pending = unsuperseded.setdefault(r.key, [])
            if pending and due:
                for offset in pending:
                    report.add(Remnant(offset, r.offset, r.timestamp, now_ms - (r.timestamp + lag)))
                pending.clear()
            elif pending and lag != UNBOUNDED:
                report.superseded_later(r.timestamp + lag)
            pending.append(r.offset)
    if report.oldest is not None and candidacy is not None:
        report.held_by = why_kept(report.oldest, candidacy)
    if key is not None:
        report.key = KeyRecords(tuple(values), tuple(tombstones), tuple(_offsets_in_deleted_files(log.dir, key)))
    return report


def _producers(view: TieredLog) -> ProducerSnapshot:
    """The aborted transactions and the last stable offset, from a first pass over the batch
    headers (the aborted ones are known only at their ABORT markers, after their batches)."""
    builder = ProducerStateBuilder()
    for raw in view.batches_from(view.log_start_offset):
        h = raw.header
        control = h.magic >= 2 and h.is_control
        builder.observe(h, control_type_of(raw, view.segment_path(h.base_offset)) if control else None)
    return builder.snapshot(view.log_end_offset)


def log_candidacy(log: Log, now_ms: int) -> LogToClean | None:
    """The partition's candidacy (its erasure deadline and cleanable section) as the sensors see
    it: the engine's ``candidacy_from_stats`` from the open log's stats (``live_stats``), which
    are the files' metadata as the sensors plan from it, or the view's cut when recovery is
    pending."""
    if not log.config.compact:
        return None
    return candidacy_from_stats(live_stats(log), log.config, now_ms)


def why_kept(remnant: Remnant, candidacy: LogToClean) -> str:
    """Why ``remnant`` is still on disk: a cleaning removes it once its offset map holds the
    record that superseded it, so what matters is where that record lies."""
    by = remnant.superseded_by
    if candidacy.active_base_offset is not None and by >= candidacy.active_base_offset:
        return (f"held by the active segment (from offset {candidacy.active_base_offset}), which holds the "
                f"superseding record at offset {by}: the cleaner never cleans the active segment, and Kafka rolls "
                "it only on an append (logplat.roll.idle.segments=true lets a compaction run roll it)")
    if by >= candidacy.first_uncleanable_offset:
        return (f"held by the {candidacy.bound_reason}: the cleanable section ends at offset "
                f"{candidacy.first_uncleanable_offset}, before the superseding record at offset {by}")
    return (f"not cleaned yet: the superseding record at offset {by} is cleanable (below offset "
            f"{candidacy.first_uncleanable_offset}), so the cleaner is behind max.compaction.lag.ms")


def _offsets_in_deleted_files(directory: Path, key: bytes) -> list[int]:
    """Offsets of ``key``'s records in the partition's ``.log.deleted`` files (read as they are;
    a damaged one is read up to the damage)."""
    out: list[int] = []
    for name in sorted(os.listdir(directory)):
        if not name.endswith(LOG_SUFFIX + DELETED_SUFFIX):
            continue
        file_path = directory / name
        fd = open_nofollow(file_path, os.O_RDONLY)
        try:
            for raw, _, _ in read_batches(fd, end=os.fstat(fd).st_size, chunk=_CHUNK, path=str(file_path)):
                if raw.header.magic >= 2 and raw.header.is_control:
                    continue
                out.extend(r.offset for r in decode_batch(raw, path=str(file_path)) if r.key == key)
        except LogError:
            pass
        finally:
            os.close(fd)
    return sorted(out)
