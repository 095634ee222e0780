"""Loading a partition directory: Kafka's ``LogLoader`` rules, written down next to the code.

The loader runs with the partition lock held, so nothing else changes the directory while it
looks; any temporary file it finds was left by a process that died. In order:

1. ``*.deleted`` files are removed: their segment was already dropped from the log.
2. ``*.cleaned`` files are removed: a cleaning that had not reached its swap. ``*.swap`` files
   whose base offset is at or above the smallest ``.cleaned`` offset are removed too: that
   swap was only partly prepared when the process died.
   Staged output of a cleaner (``.cleaning`` files, ``.logplat-staging-*`` directories, see
   ``log/staging.py``) is removed too, but only when no cleaner holds the partition's cleaner lock:
   a live cleaner writes them without the partition lock.
3. For the remaining ``.log.swap`` files (a complete swap interrupted half way), every
   non-swap file whose base offset lies in ``[min swap base, max swap next offset)`` is
   deleted (the segments the swap replaces), then the ``.swap`` suffixes are dropped.
4. Index files without a ``.log`` are deleted (orphans); a read-only view (``verify``) names them.
5. A segment whose ``.index`` or ``.timeindex`` is missing or fails its sanity check, or whose
   ``.txnindex`` is damaged, is recovered, which rebuilds all three from the ``.log`` (Kafka
   only rebuilds on a missing offset index or a corrupt transaction index; rebuilding the time
   index too keeps timestamp lookups and retention right). A missing ``.txnindex`` is no
   reason: it means "no aborted transaction here", to Kafka and to us. A recovery rebuilds the
   transaction index from the transactions open at the segment's base offset, which the
   producer snapshots and the batches before it give (``transactions_open_at``, Kafka's
   ``LogLoader.recoverSegment``).
6. Segments wholly below the checkpointed log start offset are deleted: retention commits a
   deletion by writing that checkpoint first, so these are deletions a crash interrupted, or
   what ``delete-records`` left for the next retention (a read-only view just leaves them out).
   Which files go and which swaps complete is decided by ``temp_files.plan_temp_files``, so
   the read-only view (``verify``, consumers) refuses exactly where this load would change
   segments, naming what it would do. A ``.log.swap`` the cleaner cannot have written (one
   that does not parse, reaches past the active segment, holds batches below its name's
   offset or starts inside a segment it does not replace) is removed instead of completed.
   An empty segment whose base offset lies inside the previous segment's offsets is removed
   (appends would reuse offsets); a non-empty overlap is refused.
7. After an unclean shutdown, every segment from the one holding the recovery point to the
   end is recovered: CRCs and structure are revalidated, indexes rebuilt, and at the first
   bad or torn batch the segment is truncated and every later segment deleted.
   Whatever the shutdown, the active segment's unindexed tail is revalidated too: with
   several processes a writer can die while others keep the log dir open, so the log dir's
   clean-shutdown marker alone cannot vouch for every partition. A torn batch or a header no
   batch can have (zeros, a size below the batch overhead) is cut there; a complete batch
   failing its CRC after a clean shutdown is only reported. A read-only view reads up to such
   a header and names what recovery would do there; when the next writable open will recover
   (the last writer did not close cleanly and none has the dir open, ``LogDir``), the view
   reads the log as that recovery leaves it (``segment_recovery.valid_prefix``) and names the cut.
8. A log start offset checkpoint beyond the log end as found is ignored (Kafka deletes every
   segment instead); one within it is a committed deletion: the segments wholly below it go
   before recovery, which need not revalidate them; a log recovery cuts below it restarts
   there, empty, as Kafka's does. Offsets never go backwards: the log end offset is at least
   the recovery point (flushed offsets lost to damage leave a gap), and a log with no
   segment starts at ``max(log start, recovery point)``.
9. ``log start offset = max(checkpointed value, first segment's base offset)``; the recovery
   point becomes the log end offset after a clean shutdown, else ``min(checkpoint, LEO)``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..config.topic import LogConfig
from ..errors import (
    CheckpointError,
    CorruptRecordError,
    InvalidSegmentNameError,
    LogError,
    NeedsRecoveryError,
    NotRegularFileError,
    UnsafePathError,
)
from ..files.naming import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    check_partition_entry,
    is_segment_file,
    offset_from_file_name,
)
from ..record import verify_batch
from .aborted_txns import AbortedTxnTracker
from .producer_state import transactions_open_at
from .segment import LogSegment
from .segment_recovery import index_problem, read_end, tail_state, valid_prefix
from .staging import remove_staging_if_idle
from .temp_files import TempFilePlan, plan_temp_files

_INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)

#: What a load refuses before it changes anything: a file name, a path, a file's kind or a
#: checkpoint, each validated before the loader writes. A load that fails otherwise may have
#: repaired part of the partition and not the rest.
REFUSED_UNCHANGED = (InvalidSegmentNameError, UnsafePathError, NotRegularFileError, CheckpointError)


@dataclass
class LoadResult:
    """What loading found and did; ``actions`` is a human-readable account of every repair."""

    segments: list[LogSegment]
    log_start_offset: int
    recovery_point: int
    log_end_offset: int
    actions: list[str] = field(default_factory=list)  # repairs that changed files
    warnings: list[str] = field(default_factory=list)  # problems found and left alone
    segments_changed: bool = False  # the repairs changed which segments the log has


@dataclass(frozen=True)
class RecoveryStart:
    """``LogLoader._recovery_start``: the index of the first segment recovery revalidates (None:
    no recovery), and why, for the notes."""

    index: int | None
    why: str


def find_overlaps(spans: list[tuple[int, int, int]]) -> tuple[set[int], list[str]]:
    """For segments as ``(base offset, next offset, size in bytes)`` in base order: the bases of
    empty segments that start inside an earlier segment's offsets, and a description of each
    non-empty one that does (two segments claiming the same offsets)."""
    strays: set[int] = set()
    conflicts: list[str] = []
    reach = None  # the offset after the last offset held so far
    for base, nxt, size in spans:
        if reach is not None and base < reach:
            if size == 0:
                strays.add(base)
                continue
            conflicts.append(f"segment {base} starts below offset {reach}, already held by an earlier segment")
        reach = nxt if reach is None else max(reach, nxt)
    return strays, conflicts


class LogLoader:
    """Loads one partition directory into segments, repairing what a crash left behind."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        *,
        log_start_offset_checkpoint: int | None,
        recovery_point: int,
        had_clean_shutdown: bool,
        read_only: bool = False,
    ) -> None:
        self.read_only = read_only
        self.dir = Path(directory)
        self.config = config
        self.log_start_offset_checkpoint = log_start_offset_checkpoint or 0
        self.recovery_point = recovery_point
        self.had_clean_shutdown = had_clean_shutdown
        self.actions: list[str] = []
        self.warnings: list[str] = []

    def load(self) -> LoadResult:
        self._check_entries()
        if self.read_only:
            return self._load_read_only()
        bases_before = self._live_bases()
        self._remove_temp_files_and_complete_swaps()
        for name in remove_staging_if_idle(self.dir):
            self.actions.append(f"removed {name} (output of a cleaner that died)")
        segments = self._load_segment_files()
        segments = self._without_strays(segments)
        if segments:
            self._ignore_log_start_beyond_end(segments, self.actions)
        segments = self._drop_segments_below_log_start(segments)  # committed deletions: never revalidated
        segments = self._restart_at_log_start(self._recover(segments))
        segments_changed = [s.base_offset for s in segments] != bases_before
        if not segments:
            # Kafka restarts an empty log at the log start offset checkpoint, which can send
            # offsets backwards when every segment was lost; the recovery point is a known
            # lower bound of the old log end, so start no lower than it.
            base = self._empty_log_base()
            segments = [LogSegment(self.dir, base, self.config, create=True)]
        leo = self._log_end_offset(segments)
        segments[-1].resize_indexes(self.config.segment_index_bytes)
        log_start = max(self.log_start_offset_checkpoint, segments[0].base_offset)
        recovery_point = leo if self.had_clean_shutdown else min(self.recovery_point, leo)
        return LoadResult(segments, log_start, recovery_point, leo, self.actions, self.warnings,
                          segments_changed=segments_changed)

    def _live_bases(self) -> list[int]:
        return sorted(offset_from_file_name(n) for n in os.listdir(self.dir) if n.endswith(LOG_SUFFIX) and is_segment_file(n))

    def _load_read_only(self) -> LoadResult:
        """What a writable open would make of the directory, changing nothing (``logctl verify``,
        consumers): temporary files are left out of the view as that open would remove them;
        a swap it would complete is refused, naming what it would do."""
        plan = self._temp_file_plan()
        if plan.changes_segments:
            raise NeedsRecoveryError(f"{self.dir}: interrupted swap: a writable open would {plan.describe()}")
        for name, why in plan.remove:
            if not name.endswith(DELETED_SUFFIX):
                self.warnings.append(f"{self.dir / name}: a writable open would remove it ({why})")
        for name in self._orphaned_index_files():
            self.warnings.append(f"{self.dir / name}: a writable open would remove it (an index file without its .log)")
        segments = [LogSegment(self.dir, b, self.config, writable=False) for b in self._live_bases()]
        for seg in segments:
            self._read_past_an_index_problem(seg)
        segments = self._without_strays(segments)
        if not segments:
            base = self._empty_log_base()
            return LoadResult([], base, base, base, [], self.warnings)
        self._ignore_log_start_beyond_end(segments, self.warnings)
        segments = self._drop_segments_below_log_start(segments)
        start = self._recovery_start(segments)
        if start.index is not None:
            segments = self._view_recovery_cut(segments, start.index, start.why)
        self._note_invalid_headers(segments)
        segments = self._restart_at_log_start(segments)
        if not segments:
            base = self._empty_log_base()
            return LoadResult([], base, base, base, [], self.warnings)
        leo = self._log_end_offset(segments)
        log_start = max(self.log_start_offset_checkpoint, segments[0].base_offset)
        return LoadResult(segments, log_start, min(self.recovery_point, leo), leo, [], self.warnings)

    def _first_recovered(self, segments: list[LogSegment]) -> int:
        """The index of the segment holding the recovery point (the first when none is at or
        below it): after an unclean shutdown recovery revalidates it and every later one, as
        Kafka's ``LogLoader.recoverLog`` does from the recovery point."""
        return max((i for i, s in enumerate(segments) if s.base_offset <= self.recovery_point), default=0)

    def _recovery_start(self, segments: list[LogSegment]) -> RecoveryStart:
        """Where recovery starts (``_recover``; read-only, ``_view_recovery_cut``). After an
        unclean shutdown: the segment holding the recovery point, as Kafka's
        ``LogLoader.recoverLog`` does. After a clean one: the active segment, when its unindexed
        tail is torn or holds a header no batch can have (several processes share a log dir, so
        the marker cannot vouch for every partition); a complete batch failing its CRC there is
        damage, reported, not cut."""
        if not self.had_clean_shutdown:
            return RecoveryStart(self._first_recovered(segments), "the log dir was not shut down cleanly")
        state, position = tail_state(segments[-1])
        name = segments[-1].log_path.name
        if state == "ok":
            return RecoveryStart(None, "")
        if state == "corrupt":
            return RecoveryStart(None, f"{segments[-1].log_path} has a corrupt batch at position {position}; it was "
                                       f"not truncated because the log dir was shut down cleanly")
        what = "a torn write" if state == "partial" else "a header no batch can have"
        return RecoveryStart(len(segments) - 1, f"{name} ends in {what} at position {position}")

    def _view_recovery_cut(self, segments: list[LogSegment], first: int, why: str) -> list[LogSegment]:
        """Read-only: read the log as the recovery a writable open makes (``_recover``) leaves
        it: cut at the end of the first valid prefix (``segment_recovery.valid_prefix``, the rule
        ``recover`` applies) from segment ``first`` on, without the later segments, and name the
        cut with ``why`` recovery runs. Every segment recovery revalidates is read without its
        indexes, which it rebuilds. A segment whose indexes the view left out (``indexes_forgotten``) is skipped: the view
        already reads it as step 5's index rebuild leaves it, and that rebuild is a ``recover``,
        so ``_recover`` finds nothing more to cut there."""
        for i in range(first, len(segments)):
            seg = segments[i]
            if seg.indexes_forgotten:
                continue
            prefix = valid_prefix(seg)
            if prefix.problem is None:
                seg.forget_indexes()  # recovery rebuilds them, so no entry of the old ones counts
                continue
            seg.limit_view(prefix.size)
            later = segments[i + 1:]
            for dropped in later:
                dropped.close(trim_indexes=False)
            self.warnings.append(
                f"{prefix.problem}: {why}, so a writable open truncates {seg.log_path.name} to {prefix.size} "
                f"bytes (log end offset {prefix.next_offset})"
                + (f" and deletes the {len(later)} later segment(s)" if later else ""))
            return segments[: i + 1]
        return segments

    def _note_invalid_headers(self, segments: list[LogSegment]) -> None:
        """Read-only: a header no batch can have (a size below the minimum batch overhead, a bad
        magic: Kafka's ``CorruptRecordException``) ends the batches a view reads in its segment.
        Those recovery cuts are cut in the view already (``_view_recovery_cut``); any left lies
        where no recovery looks, so a writable open leaves it too."""
        for seg in segments:
            invalid = read_end(seg).invalid
            if invalid is not None:
                self.warnings.append(f"{invalid}: before the segments recovery revalidates, so a writable open "
                                     f"leaves it; reads stop there")

    def _check_entries(self) -> None:
        """Before anything changes, refuse what no partition dir may hold (``check_partition_entry``:
        a symlink, a FIFO, a misnamed segment file, a directory where a segment's file belongs),
        naming it: found here, not when a later step reaches it after earlier repairs, and on a
        reload too."""
        with os.scandir(self.dir) as it:
            for entry in sorted(it, key=lambda e: e.name):
                check_partition_entry(self.dir, entry)

    def _read_past_an_index_problem(self, seg: LogSegment) -> None:
        """Read-only: indexes that a writable open rebuilds (step 5: one missing, or failing its
        sanity check) are left out of the view, which then reads the ``.log`` from its start as
        the rebuilt ones would; the warning says so (``verify`` reports it for the partition).
        A missing time index read as an empty one would understate the segment's largest
        timestamp, where the rebuilt one will not. The rebuild is recovery of that segment, so
        the view also ends it where recovery truncates it (a gap before the next segment, as in
        Kafka's ``LogLoader``, which keeps the later segments there)."""
        problem = index_problem(seg)
        if not problem:
            return
        rebuild = f"{problem}; a writable open rebuilds the indexes of {seg.log_path.name} from it"
        prefix = valid_prefix(seg)  # that rebuild is ``recover``: it also truncates, after any shutdown
        if prefix.problem is None:
            seg.forget_indexes()
            self.warnings.append(rebuild)
        else:
            seg.limit_view(prefix.size)
            self.warnings.append(f"{rebuild} and truncates it to {prefix.size} bytes at {prefix.problem}, keeping "
                                 f"the later segments")

    def _empty_log_base(self) -> int:
        """Where a log without segments (re)starts: see ``load``."""
        return max(self.log_start_offset_checkpoint, self.recovery_point)

    def _ignore_log_start_beyond_end(self, segments: list[LogSegment], notes: list[str]) -> None:
        """A checkpointed log start offset above the end of the log as found, before any
        recovery, cannot come from a delete-records or retention (both stay at or below the high
        watermark): it is damage. Kafka's ``LogLoader`` then deletes every segment; we keep the
        records and ignore the checkpoint, so a bad checkpoint file never costs data. One within
        the log as found is a committed deletion, kept even where recovery then cuts the log
        below it (``_restart_at_log_start``)."""
        leo = segments[-1].read_next_offset()
        if self.log_start_offset_checkpoint > leo:
            notes.append(
                f"{self.dir}: the log start offset checkpoint {self.log_start_offset_checkpoint} is beyond the log "
                f"end offset {leo}: a writable open ignores it and keeps the log from offset {segments[0].base_offset}"
            )
            self.log_start_offset_checkpoint = segments[0].base_offset

    def _restart_at_log_start(self, segments: list[LogSegment]) -> list[LogSegment]:
        """A log that recovery cut below its (kept, see ``_ignore_log_start_beyond_end``) log
        start offset holds only deleted records: as Kafka's ``LogLoader`` does, it restarts
        empty, where a log without segments starts (``_empty_log_base``: no lower than the
        recovery point either), and the old segments go, so deleted records never come back and
        their offsets are never given again. The new segment is made
        before the old ones go, so a kill between never leaves the log ending below where it
        restarts (a kill there does leave the old segments before it, read as a gap up to the
        restart: they hold only deleted records). A read-only view shows the empty log the open
        leaves."""
        lso = self.log_start_offset_checkpoint
        if not segments or segments[-1].read_next_offset() >= lso:
            return segments
        base = self._empty_log_base()
        note = (f"{self.dir}: recovery cut the log below its log start offset {lso}: every record left is deleted, "
                f"so the log restarts empty at {base}")
        if self.read_only:
            self.warnings.append(note)
            for seg in segments:
                seg.close(trim_indexes=False)
            return []
        segments[-1].on_become_inactive()
        segments[-1].flush()
        restarted = LogSegment(self.dir, base, self.config, create=True)
        self.actions.append(note)
        for seg in segments:
            seg.close()
            seg.delete_files()
            self.actions.append(f"deleted {seg.log_path.name}, all of it below the log start offset {lso}")
        return [restarted]

    def _log_end_offset(self, segments: list[LogSegment]) -> int:
        """Offsets never go backwards: the log end offset is at least the recovery point
        checkpoint, where the next append goes. Offsets below it were flushed, so a log ending
        below it lost them to damage (its last segments removed, flushed bytes cut), never to
        a torn write, which only ever lies above it; appending at the end of the last batch
        would give offsets already acknowledged to other records (Kafka does so unless no
        segment is left). The offsets in between are a gap readers refuse to step over
        (``LogReader``), as for a segment lost in the middle; the note names the cause."""
        end, floor = segments[-1].read_next_offset(), self.recovery_point  # the end is at least the log start here
        if end < floor:
            self.warnings.append(f"{self.dir}: the last batch ends at offset {end}, below the recovery point "
                                 f"checkpoint {floor}: offsets {end}..{floor - 1} were flushed and are lost (a segment "
                                 f"removed, or damaged); the log end offset stays {floor}, so no offset is given twice")
        return max(end, floor)

    def _without_strays(self, segments: list[LogSegment]) -> list[LogSegment]:
        """Segments whose base offset lies inside the previous segment's offsets: an empty one
        is a stray (a writable open removes it; appends would otherwise reuse offsets), a
        non-empty one is refused."""
        spans = [(s.base_offset, s.read_next_offset(), s.size) for s in segments]
        strays, conflicts = find_overlaps(spans)
        if conflicts:
            for seg in segments:  # the open is refused: nothing of it stays open
                seg.close(trim_indexes=False)
            raise LogError(f"{self.dir}: segments overlap: {'; '.join(conflicts)}; move one of them away by hand")
        kept = []
        for seg in segments:
            if seg.base_offset not in strays:
                kept.append(seg)
                continue
            seg.close(trim_indexes=False)
            if self.read_only:
                self.warnings.append(f"{seg.log_path}: empty segment inside the previous segment's offsets; "
                                     f"a writable open would remove it")
            else:
                seg.delete_files()
                self.actions.append(f"removed {seg.log_path.name} (empty segment inside the previous segment's offsets)")
        return kept

    # -------------------------------------------------------------- steps 1 to 3

    def _temp_file_plan(self) -> TempFilePlan:
        names = sorted(os.listdir(self.dir))
        spans = {n: self._swap_span(n) for n in names if is_segment_file(n) and n.endswith(LOG_SUFFIX + SWAP_SUFFIX)}
        return plan_temp_files(names, spans, self._live_next_offset)

    def _swap_span(self, name: str) -> tuple[int, int] | None:
        """The offsets of a ``.log.swap``'s first batch and after its last (its base offset for
        both when empty); None unless it is all complete, CRC-valid batches."""
        seg = LogSegment(self.dir, offset_from_file_name(name), self.config, file_suffix=SWAP_SUFFIX, writable=False)
        try:
            first, nxt, end = None, seg.base_offset, 0
            for raw in seg.batches(0):
                verify_batch(raw, path=str(seg.log_path))
                first = raw.header.base_offset if first is None else first
                nxt, end = raw.header.next_offset, raw.position + raw.header.size_in_bytes
            return (seg.base_offset if first is None else first, nxt) if end == seg.size else None
        except CorruptRecordError:
            return None
        finally:
            seg.close(trim_indexes=False)

    def _live_next_offset(self, base: int) -> int:
        """A live segment's next offset, for the swap plan (read only when a swap is left)."""
        seg = LogSegment(self.dir, base, self.config, writable=False)
        try:
            return seg.read_next_offset()
        finally:
            seg.close(trim_indexes=False)

    def _remove_temp_files_and_complete_swaps(self) -> None:
        plan = self._temp_file_plan()
        for name, why in plan.remove:
            os.unlink(self.dir / name)
            self.actions.append(f"removed {name} ({why})")
        for src, dst in plan.rename:
            os.replace(self.dir / src, self.dir / dst)
            self.actions.append(f"completed swap: {src} -> {dst}")

    # -------------------------------------------------------------- steps 4 and 5

    def _orphaned_index_files(self) -> list[str]:
        """Index files whose segment has no ``.log`` (Kafka's ``LogLoader`` deletes them): left by
        a crash between a segment's deletions, and named like a later segment's indexes."""
        names = sorted(os.listdir(self.dir))
        logs = set(self._live_bases())
        return [n for n in names if is_segment_file(n) and n.endswith(_INDEX_SUFFIXES)
                and offset_from_file_name(n) not in logs]

    def _load_segment_files(self) -> list[LogSegment]:
        for name in self._orphaned_index_files():
            os.unlink(self.dir / name)
            self.actions.append(f"removed orphaned index file {name}")
        segments: list[LogSegment] = []
        carried: AbortedTxnTracker | None = None  # the open transactions after the segment just recovered
        for base in self._live_bases():
            seg = LogSegment(self.dir, base, self.config)
            problem = index_problem(seg)
            if not problem:
                carried = None
            else:
                transactions = carried or transactions_open_at(self.dir, [*segments, seg], len(segments))
                truncated = seg.recover(transactions)
                carried = transactions
                self.actions.append(f"rebuilt indexes of {seg.log_path.name} ({problem})")
                if truncated:
                    self.actions.append(f"truncated {truncated} invalid bytes from {seg.log_path.name}")
            segments.append(seg)
        return segments

    # -------------------------------------------------------------- step 6

    def _drop_segments_below_log_start(self, segments: list[LogSegment]) -> list[LogSegment]:
        """Segments wholly below the checkpointed log start offset are a deletion that was
        committed (retention writes the checkpoint first, ``delete-records`` leaves them for
        the next retention) but not finished: finish it. A read-only view leaves them out
        without a word: they are no longer part of the log, and nothing is wrong."""
        lso = self.log_start_offset_checkpoint
        while len(segments) > 1 and segments[1].base_offset <= lso:
            seg = segments.pop(0)
            if self.read_only:
                seg.close(trim_indexes=False)
                continue
            seg.close()
            seg.delete_files()
            self.actions.append(f"deleted {seg.log_path.name}, wholly below the log start offset {lso}")
        return segments

    def _recover(self, segments: list[LogSegment]) -> list[LogSegment]:
        """Step 7: from ``_recovery_start`` on, every segment is recovered (revalidated, its
        indexes rebuilt); the first one truncated ends the log, and the later ones are deleted."""
        if not segments:
            return segments
        start = self._recovery_start(segments)
        if start.index is None:
            if start.why:  # a batch failing its CRC after a clean shutdown: reads of it fail
                self.warnings.append(start.why)
            return segments
        if self.had_clean_shutdown:
            self.actions.append(start.why)
        transactions = transactions_open_at(self.dir, segments, start.index)
        for i in range(start.index, len(segments)):
            seg = segments[i]
            truncated = seg.recover(transactions)
            if truncated:
                self.actions.append(
                    f"recovered {seg.log_path.name}: truncated {truncated} bytes of torn or corrupt batches"
                )
                for later in segments[i + 1 :]:
                    later.close()
                    later.delete_files()
                    self.actions.append(f"deleted {later.log_path.name}, which followed a truncated segment")
                return segments[: i + 1]
        return segments
