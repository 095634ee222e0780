"""Producer state of one partition: Kafka's ``ProducerStateManager`` for what this engine needs.

State is the latest valid ``<offset>.snapshot`` at or below the recovery point plus a replay of
the batches after it (Kafka's ``LogLoader``/``rebuildProducerState``). It is what tells the
cleaner which batch is a producer's last (``UnifiedLog.lastRecordsOfActiveProducers``): a
rebuild from the cleaned log cannot, because an emptied control batch carries no marker any
more and Kafka's replay, like ours, skips it.

Snapshots are taken at every roll and at clean shutdown (at the log end offset), deleted with
the segments retention removes, and on load the stray ones (no segment at that base, except the
newest above every segment: the clean-shutdown one, Kafka's ``removeStraySnapshots``), those
below the log start offset and those above the log end offset go; so after a load there are at
most one per segment plus one, and each roll adds one for the segment it adds. Producer-id expiry (``producer.id.expiration.ms``) is not modelled: an idle
producer stays in the state (and its last batch header in the log) for good.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InvalidProducerEpochError, TransactionCoordinatorFencedError
from ..limits import INT_MAX
from ..record import RawBatch
from ..record.control import EndTransactionMarker, read_end_txn_marker
from ..record.records import BatchHeader
from .aborted_txns import AbortedTxnTracker
from .producer_snapshot import (
    CorruptSnapshotError,
    SnapshotEntry,
    is_snapshot_temp,
    list_snapshots,
    read_snapshot,
    write_snapshot,
)

if TYPE_CHECKING:
    from .segment import LogSegment

_MAX_SEQUENCE = INT_MAX


def _with_epoch(entry: SnapshotEntry, epoch: int) -> SnapshotEntry:
    """Kafka's ``maybeUpdateProducerEpoch``: a new epoch forgets the last data batch."""
    if entry.producer_epoch == epoch:
        return entry
    return replace(entry, producer_epoch=epoch, last_sequence=-1, last_offset=-1, offset_delta=0)


def apply_batch(entry: SnapshotEntry | None, header: BatchHeader, marker: EndTransactionMarker | None) -> SnapshotEntry | None:
    """A producer's entry after one of its batches (Kafka's ``ProducerAppendInfo.append``): a data
    batch becomes its last batch; a marker ends its transaction and records the coordinator
    epoch; an emptied control batch changes nothing."""
    if header.is_control and marker is None:
        return entry
    if entry is None:
        entry = SnapshotEntry(header.producer_id, header.producer_epoch, -1, -1, 0, -1, -1, -1)
    entry = _with_epoch(entry, header.producer_epoch)
    if header.is_control:
        assert marker is not None  # an emptied control batch returned above
        return replace(entry, current_txn_first_offset=-1, coordinator_epoch=marker.coordinator_epoch,
                       timestamp=marker.timestamp)
    delta = header.last_offset_delta
    last_seq = -1 if header.base_sequence < 0 else (header.base_sequence + delta) % (_MAX_SEQUENCE + 1)
    txn_first = entry.current_txn_first_offset
    if header.is_transactional and txn_first < 0:
        txn_first = header.base_offset
    return replace(entry, last_sequence=last_seq, last_offset=header.last_offset, offset_delta=delta,
                   timestamp=header.max_timestamp, current_txn_first_offset=txn_first)


class ProducerStateManager:
    """The producers of one partition up to ``map_end_offset``, and its snapshot files."""

    def __init__(self, directory: Path) -> None:
        self.dir = Path(directory)
        self.producers: dict[int, SnapshotEntry] = {}
        self.snapshots: dict[int, Path] = {}
        self.map_end_offset = 0
        self.last_snap_offset = 0
        self.actions: list[str] = []  # files removed
        self.warnings: list[str] = []  # files a writable open would remove, or could not

    def load(self, *, log_start_offset: int, recovery_point: int, log_end_offset: int,
             segment_bases: list[int], writable: bool) -> None:
        """Kafka's ``removeStraySnapshots`` + ``truncateAndReload`` + ``loadFromSnapshot``: forget
        snapshots that cannot apply (deleting them when ``writable``), then load the latest one at
        or below the recovery point; a corrupt one is deleted and the next older one tried.
        Without one, state starts empty at the log start offset and the replay rebuilds it."""
        snaps = list_snapshots(self.dir)
        for name in os.listdir(self.dir):
            if is_snapshot_temp(name):
                self._drop(self.dir / name, "interrupted producer snapshot", writable)
        bases = set(segment_bases)
        newest_stray = max((o for o in snaps if o not in bases and o > max(bases, default=-1)), default=None)
        for offset in list(snaps):
            if offset > log_end_offset:
                self._drop(snaps.pop(offset), "above the log end offset", writable)
            elif offset < log_start_offset or (offset not in bases and offset != newest_stray):
                # routine: retention moved the log start past it, or a later snapshot at close
                # superseded it (Kafka's removeStraySnapshots); no view reports these
                self._drop(snaps.pop(offset), "below the log start offset" if offset < log_start_offset
                           else "no segment starts there", writable, routine=True)
        self.snapshots = snaps
        self.producers = {}
        self.map_end_offset = self.last_snap_offset = log_start_offset
        for offset in sorted((o for o in snaps if o <= recovery_point), reverse=True):
            try:
                entries = read_snapshot(snaps[offset])
            except CorruptSnapshotError as exc:
                self._drop(self.snapshots.pop(offset), f"corrupt: {exc}", writable)
                continue
            self.producers = {e.producer_id: e for e in entries}
            self.map_end_offset = self.last_snap_offset = offset
            return

    def _drop(self, path: Path, why: str, writable: bool, *, routine: bool = False) -> None:
        """Delete a snapshot that cannot apply; a read-only view, or a directory that refuses the
        delete, only reports it (a read-only view not a ``routine`` one, which every writer's
        close leaves for the next open): the file is ignored either way."""
        if not writable:
            if not routine:
                self.warnings.append(f"producer snapshot {path.name} is ignored ({why}); a writable open removes it")
            return
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            self.warnings.append(f"producer snapshot {path.name} is ignored ({why}) but could not be removed: {exc.strerror}")
            return
        self.actions.append(f"removed producer snapshot {path.name} ({why})")

    def replay(self, batches: Iterable[RawBatch], end_offset: int, path: str | None = None) -> None:
        """Apply the batches from ``map_end_offset`` up to ``end_offset`` (batches ending below
        ``map_end_offset`` are skipped). Only the data of the batches :func:`replay_needs_data`
        names is read: the others may come with their header only."""
        for raw in batches:
            h = raw.header
            if h.last_offset < self.map_end_offset or h.base_offset >= end_offset:
                continue
            if h.magic >= 2 and h.producer_id >= 0:
                marker = read_end_txn_marker(raw, path) if replay_needs_data(h) else None
                entry = apply_batch(self.producers.get(h.producer_id), h, marker)
                if entry is not None:
                    self.producers[h.producer_id] = entry
        self.map_end_offset = max(self.map_end_offset, end_offset)

    def take_snapshot(self) -> Path | None:
        """Kafka's ``takeSnapshot``: write the state at ``map_end_offset`` unless the last snapshot
        is already there. Like Kafka, it deletes nothing: stray snapshots go at the next load,
        so a produce call that is undone (``LogAppender._rollback``) can restore the directory exactly."""
        if self.map_end_offset <= self.last_snap_offset:
            return None
        entries = sorted(self.producers.values(), key=lambda e: e.producer_id)
        written = write_snapshot(self.dir, self.map_end_offset, entries)
        self.snapshots[self.map_end_offset] = written
        self.last_snap_offset = self.map_end_offset
        return written

    def delete_snapshots(self, offsets: Iterable[int]) -> None:
        """Kafka's ``deleteProducerSnapshots``: the snapshots of segments retention deleted."""
        for offset in offsets:
            path = self.snapshots.pop(offset, None)
            if path is not None:
                path.unlink(missing_ok=True)

    def open_transactions(self) -> dict[int, int]:
        """Producer id -> first offset of its open transaction (Kafka's ``ongoingTxns``)."""
        return {pid: e.current_txn_first_offset for pid, e in self.producers.items() if e.current_txn_first_offset >= 0}

    def first_unstable_offset(self, log_end_offset: int) -> int:
        """Kafka's ``firstUnstableOffset``: the first offset of the oldest open transaction, or
        ``log_end_offset`` when none is open (the last stable offset of a single replica)."""
        return min([*self.open_transactions().values(), log_end_offset])

    def check_end_txn_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, *,
                             offset: int, tp: str) -> None:
        """Refuse a coordinator's marker for ``offset`` that a fenced party sent, in the broker's
        words (Kafka's ``ProducerAppendInfo.appendEndTxnMarker`` for a non-replication append:
        ``checkProducerEpoch``, then ``checkCoordinatorEpoch``). A producer the partition has not
        seen has epoch and coordinator epoch -1, so any marker passes."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if producer_epoch < entry.producer_epoch:
            raise InvalidProducerEpochError(
                f"Epoch of producer {producer_id} at offset {offset} in {tp} is {producer_epoch}, which is smaller "
                f"than the last seen epoch {entry.producer_epoch}")
        if coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"Invalid coordinator epoch for producerId {producer_id} at offset {offset} in partition {tp}: "
                f"{coordinator_epoch} (zombie), {entry.coordinator_epoch} (current)")

    def last_records(self) -> dict[int, tuple[int | None, int]]:
        """Kafka's ``lastRecordsOfActiveProducers``: producer id -> (last data offset, or None when
        its current epoch has only markers; epoch)."""
        return {pid: (e.last_offset if e.last_offset >= 0 else None, e.producer_epoch)
                for pid, e in self.producers.items()}


def replay_needs_data(h: BatchHeader) -> bool:
    """Whether :meth:`ProducerStateManager.replay` reads a batch's records: a producer's control
    batch (its marker); every other batch counts by its header alone, as Kafka's replay over
    ``FileRecords`` loads only the headers of the batches it does not open."""
    return h.magic >= 2 and h.producer_id >= 0 and h.is_control


def transactions_open_at(directory: Path, segments: Sequence[LogSegment], i: int) -> AbortedTxnTracker:
    """The transactions open at the base offset of ``segments[i]``, which rebuilding or checking
    its ``.txnindex`` starts from (Kafka's ``LogLoader.recoverSegment`` rebuilds producer state
    up to there): the latest producer snapshot at or below that offset (read only: nothing is
    removed here), then the batches of the segments before it from the snapshot on."""
    base = segments[i].base_offset
    producers = ProducerStateManager(directory)
    producers.load(log_start_offset=segments[0].base_offset, recovery_point=base, log_end_offset=base,
                   segment_bases=[s.base_offset for s in segments], writable=False)
    start = producers.map_end_offset
    earlier = [s for s, after in zip(segments[:i], segments[1:i + 1], strict=True) if after.base_offset > start]
    producers.replay((raw for s in earlier for raw in s.batches()), base, str(directory))
    return AbortedTxnTracker(producers.open_transactions())
