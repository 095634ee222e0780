"""Loading a partition directory: Kafka's ``LogLoader`` rules, written down next to the code.

The loader runs with the partition lock held, so nothing else changes the directory while it
looks; any temporary file it finds was left by a process that died. In order:

1. ``*.deleted`` files are removed: their segment was already dropped from the log.
2. ``*.cleaned`` files are removed: a cleaning that had not reached its swap. ``*.swap`` files
   whose base offset is at or above the smallest ``.cleaned`` offset are removed too: that
   swap was only partly prepared when the process died.
   Staged output of a cleaner (``.cleaning`` files, ``.logplat-staging-*`` directories, see
   ``staging.py``) is removed too, but only when no cleaner holds the partition's cleaner lock:
   a live cleaner writes them without the partition lock.
3. For the remaining ``.log.swap`` files (a complete swap interrupted half way), every
   non-swap file whose base offset lies in ``[min swap base, max swap next offset)`` is
   deleted (the segments the swap replaces), then the ``.swap`` suffixes are dropped.
4. Index files without a ``.log`` are deleted (orphans).
5. A segment whose ``.index`` or ``.timeindex`` is missing or fails its sanity check is
   recovered, which rebuilds both from the ``.log`` (Kafka only rebuilds on a missing offset
   index; rebuilding the time index too keeps timestamp lookups and retention right).
6. Segments wholly below the checkpointed log start offset are deleted: retention commits a
   deletion by writing that checkpoint first, so these are deletions a crash interrupted.
7. After an unclean shutdown, every segment from the one holding the recovery point to the
   end is recovered: CRCs and structure are revalidated, indexes rebuilt, and at the first
   bad or torn batch the segment is truncated and every later segment deleted.
   Whatever the shutdown, the active segment's unindexed tail is revalidated too: with
   several processes a writer can die while others keep the log dir open, so the log dir's
   clean-shutdown marker alone cannot vouch for every partition.
8. A log whose end is below the log start offset loses all segments; a log with no segment
   gets an empty one at the log start offset.
9. ``log start offset = max(checkpointed value, first segment's base offset)``; the recovery
   point becomes the log end offset after a clean shutdown, else ``min(checkpoint, LEO)``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from .config import LogConfig
from .errors import CorruptIndexError, CorruptRecordError, LogError
from .naming import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    offset_from_file_name,
)
from .staging import remove_staging_if_idle
from .record import verify_batch
from .segment import LogSegment

_INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


@dataclass
class LoadResult:
    """What loading found and did; ``actions`` is a human-readable account of every repair."""

    segments: list[LogSegment]
    log_start_offset: int
    recovery_point: int
    log_end_offset: int
    actions: list[str] = field(default_factory=list)  # repairs that changed files
    warnings: list[str] = field(default_factory=list)  # problems found and left alone


def _is_segment_file(name: str) -> bool:
    return name.split(".", 1)[0].isdigit() and "." in name


def _base_suffix(name: str, temp_suffix: str) -> str:
    """``00..0.log.swap`` with temp suffix ``.swap`` -> ``.log``."""
    stem = name[: -len(temp_suffix)]
    return "." + stem.split(".", 1)[1]


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
        if self.read_only:
            return self._load_read_only()
        self._remove_temp_files_and_complete_swaps()
        for name in remove_staging_if_idle(self.dir):
            self.actions.append(f"removed {name} (output of a cleaner that died)")
        segments = self._load_segment_files()
        segments = self._recover(segments)
        segments = self._drop_segments_below_log_start(segments)
        leo = segments[-1].read_next_offset() if segments else self.log_start_offset_checkpoint
        if segments and leo < self.log_start_offset_checkpoint:
            self.actions.append(
                f"log end offset {leo} is below the log start offset {self.log_start_offset_checkpoint}: all segments deleted"
            )
            for seg in segments:
                seg.close()
                seg.delete_files()
            segments = []
        if not segments:
            # Kafka restarts an empty log at the log start offset checkpoint, which can send
            # offsets backwards when every segment was lost; the recovery point is a known
            # lower bound of the old log end, so start no lower than it.
            base = max(self.log_start_offset_checkpoint, self.recovery_point, leo)
            segments = [LogSegment(self.dir, base, self.config, create=True)]
            leo = base
        segments[-1].resize_indexes(self.config.segment_index_bytes)
        log_start = max(self.log_start_offset_checkpoint, segments[0].base_offset)
        recovery_point = leo if self.had_clean_shutdown else min(self.recovery_point, leo)
        return LoadResult(segments, log_start, recovery_point, leo, self.actions, self.warnings)

    def _load_read_only(self) -> LoadResult:
        """Open the segments as they are, repairing nothing (``logctl verify``, consumers)."""
        names = sorted(os.listdir(self.dir))
        bases = sorted(offset_from_file_name(n) for n in names if n.endswith(LOG_SUFFIX) and _is_segment_file(n))
        if not bases:
            raise LogError(f"{self.dir} has no segment files (open it for writing to create one)")
        segments = [LogSegment(self.dir, b, self.config, writable=False) for b in bases]
        for n in names:
            if n.endswith((CLEANED_SUFFIX, SWAP_SUFFIX)) and _is_segment_file(n):
                self.warnings.append(f"{self.dir / n} is left from an interrupted cleaning; a writable open resolves it")
        leo = segments[-1].read_next_offset()
        log_start = max(self.log_start_offset_checkpoint, segments[0].base_offset)
        return LoadResult(segments, log_start, min(self.recovery_point, leo), leo, [], self.warnings)

    # -------------------------------------------------------------- steps 1 to 3

    def _remove_temp_files_and_complete_swaps(self) -> None:
        names = sorted(os.listdir(self.dir))
        cleaned = [n for n in names if n.endswith(CLEANED_SUFFIX) and _is_segment_file(n)]
        swaps = [n for n in names if n.endswith(SWAP_SUFFIX) and _is_segment_file(n)]
        for name in names:
            if name.endswith(DELETED_SUFFIX) and _is_segment_file(name):
                os.unlink(self.dir / name)
                self.actions.append(f"removed {name} (segment already deleted)")
        if cleaned:
            min_cleaned = min(offset_from_file_name(n) for n in cleaned)
            for name in cleaned:
                os.unlink(self.dir / name)
                self.actions.append(f"removed {name} (cleaning interrupted before its swap)")
            for name in list(swaps):
                if offset_from_file_name(name) >= min_cleaned:
                    os.unlink(self.dir / name)
                    swaps.remove(name)
                    self.actions.append(f"removed {name} (swap interrupted while it was being prepared)")
        log_swaps = [n for n in swaps if _base_suffix(n, SWAP_SUFFIX) == LOG_SUFFIX]
        if log_swaps:
            lo, hi = None, None
            for name in log_swaps:
                seg = LogSegment(self.dir, offset_from_file_name(name), self.config, file_suffix=SWAP_SUFFIX,
                                 writable=False)
                try:
                    nxt = max(seg.base_offset, self._next_offset_by_scan(seg))
                finally:
                    seg.close()
                lo = seg.base_offset if lo is None else min(lo, seg.base_offset)
                hi = nxt if hi is None else max(hi, nxt)
            for name in sorted(os.listdir(self.dir)):
                if not _is_segment_file(name) or name.endswith(SWAP_SUFFIX) or not (self.dir / name).is_file():
                    continue
                try:
                    base = offset_from_file_name(name)
                except ValueError:
                    continue
                if lo <= base < hi:
                    os.unlink(self.dir / name)
                    self.actions.append(f"removed {name} (replaced by an interrupted swap)")
        for name in swaps:
            os.replace(self.dir / name, self.dir / name[: -len(SWAP_SUFFIX)])
            self.actions.append(f"completed swap: {name} -> {name[: -len(SWAP_SUFFIX)]}")

    @staticmethod
    def _next_offset_by_scan(seg: LogSegment) -> int:
        nxt = seg.base_offset
        for raw in seg.batches(0):
            nxt = raw.header.next_offset
        return nxt

    # -------------------------------------------------------------- steps 4 and 5

    def _load_segment_files(self) -> list[LogSegment]:
        names = sorted(os.listdir(self.dir))
        logs = {offset_from_file_name(n) for n in names if n.endswith(LOG_SUFFIX) and _is_segment_file(n)}
        for name in names:
            if _is_segment_file(name) and name.endswith(_INDEX_SUFFIXES):
                if offset_from_file_name(name) not in logs:
                    os.unlink(self.dir / name)
                    self.actions.append(f"removed orphaned index file {name}")
        segments = []
        for base in sorted(logs):
            seg = LogSegment(self.dir, base, self.config)
            problem = self._index_problem(seg)
            if problem:
                truncated = seg.recover()
                self.actions.append(f"rebuilt indexes of {seg.log_path.name} ({problem})")
                if truncated:
                    self.actions.append(f"truncated {truncated} invalid bytes from {seg.log_path.name}")
            segments.append(seg)
        return segments

    @staticmethod
    def _index_problem(seg: LogSegment) -> str | None:
        if not seg.offset_index.path.exists():
            return "offset index missing"
        if not seg.time_index.path.exists():
            return "time index missing"
        try:
            seg.sanity_check_indexes()
        except CorruptIndexError as exc:
            return f"corrupt index: {exc}"
        return None

    # -------------------------------------------------------------- step 6

    def _drop_segments_below_log_start(self, segments: list[LogSegment]) -> list[LogSegment]:
        """Segments wholly below the checkpointed log start offset are a deletion that was
        committed (retention writes the checkpoint first) but not finished: finish it."""
        lso = self.log_start_offset_checkpoint
        while len(segments) > 1 and segments[1].base_offset <= lso:
            seg = segments.pop(0)
            seg.close()
            seg.delete_files()
            self.actions.append(f"deleted {seg.log_path.name}, wholly below the log start offset {lso}")
        return segments

    def _recover(self, segments: list[LogSegment]) -> list[LogSegment]:
        if not segments:
            return segments
        if self.had_clean_shutdown:
            start = len(segments) - 1
            state, position = self._tail_state(segments[-1])
            if state == "ok":
                return segments
            if state == "corrupt":
                # Complete batches that fail their CRC after a clean shutdown are damage, not a
                # torn write: report it (verify shows it, reads of it fail) and cut nothing.
                self.warnings.append(
                    f"{segments[-1].log_path} has a corrupt batch at position {position}; it was not "
                    f"truncated because the log dir was shut down cleanly"
                )
                return segments
            self.actions.append(f"{segments[-1].log_path.name} ends in a torn write at position {position}")
        else:
            start = 0
            for i, seg in enumerate(segments):
                if seg.base_offset <= self.recovery_point:
                    start = i
        for i in range(start, len(segments)):
            seg = segments[i]
            truncated = seg.recover()
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

    @staticmethod
    def _tail_state(seg: LogSegment) -> tuple[str, int]:
        """Check the batches after the last index entry: ("ok" | "partial" | "corrupt", position)."""
        start = seg.offset_index.lookup(2**63 - 1).position if seg.offset_index.entries else 0
        end = start
        try:
            for raw in seg.batches(start, seg.refresh_size()):
                verify_batch(raw, path=str(seg.log_path))
                end = raw.position + raw.header.size_in_bytes
        except CorruptRecordError:
            return "corrupt", end
        return ("ok" if end == seg.size else "partial"), end
