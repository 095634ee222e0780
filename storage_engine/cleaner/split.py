"""A split partition's round as tasks another process runs: the task API of a partition cleaned
by many workers at once (the Spark job's split partitions).

A :class:`~.partition_cleaning.PartitionCleaning` holds the partition and its planned round;
:func:`split_round` turns that round into :class:`SplitRound`, whose groups the caller cuts into
*spans* (runs of consecutive groups, in offset order; how many is the distributor's choice).
Each span is cleaned in two stages:

1. *Keys* (:class:`KeysTask`, :func:`scan_span_keys`): the engine's map-building walk over the
   span's part of the dirty range, reduced to the latest offset of each key and written as a
   map file (``map_file``) in the partition's staging directory, so a task hands back one small
   map, never a row per record.
2. *Recopy* (:class:`SpanTask`, :func:`recopy_spans`): the engine's ``BatchFilter`` and
   ``recopy_group`` over the span's groups (:class:`GroupTask`), with the transaction state the
   header replay computed for each group's start, and the map merged from the span's own keys
   and every later span's, in offset order. A record can only be superseded by a later one, so
   that map decides each record of the span as the partition's whole map would.

Each recopy leaves its group's staged segment in a directory of its own per attempt (retried or
speculative attempts never collide), for ``PartitionCleaning.commit`` to adopt and swap in.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .. import native
from ..config.topic import LogConfig
from ..errors import LogChangedError, LogError
from ..outcomes import COMPACTED
from .batch_filter import BatchFilter
from .dirty_scan import UNBOUNDED, segment_latest_keys, segment_latest_offsets, transaction_states
from .inputs import InputSegment, SegmentRef
from .map_file import encode_map, load_map, read_map, write_map_bytes
from .offset_map import OffsetMap
from .outcome import PARTITION_ERRORS, outcome_of
from .partition_cleaning import PartitionCleaning
from .recopy import recopy_group
from .rules import AbortedTxn, LastRecord, TransactionTracker
from .staging import make_remote_staging
from .stats import CleanerStats


@dataclass(frozen=True)
class KeysTask:
    """Stage 1: the latest offset of each key in one span's part of the dirty range."""

    tp: int
    span: int  # the span's place in its partition (spans run in offset order)
    segments: tuple[tuple[SegmentRef, tuple[AbortedTxn, ...]], ...]  # each with the aborted
    # transactions reaching into its dirty part, in offset order
    dirty_from: int
    dirty_to: int
    chunk: int  # the cleaner's I/O buffer (log.cleaner.io.buffer.size)
    staging_dir: str  # where the task leaves its map (``map_file``)

    @property
    def size(self) -> int:
        return sum(ref.size for ref, _ in self.segments)


@dataclass
class GroupTask:
    """Stage 2: recopy one group of segments into one replacement segment."""

    tp: int
    grp: int
    directory: str
    staging_dir: str
    config: LogConfig
    segments: tuple[SegmentRef, ...]
    legacy_delete_horizon_ms: int
    tracker: TransactionTracker
    last_records: dict[int, LastRecord]
    now_ms: int
    map_latest_offset: int
    last_batch_base_offset: int | None
    chunk: int  # read and write chunk: the local cleaner's, so index entries fall where its do


@dataclass
class SpanTask:
    """Stage 2: the groups of one span, recopied with one map: the keys of this span and of every
    later one (``map_paths``, the stage 1 maps in offset order). A record's later copies can
    only be in its own span or a later one, so that map decides every record of the span as the
    whole partition's map would, at a fraction of its size for all but the first."""

    tp: int
    span: int
    map_paths: tuple[str, ...]
    groups: tuple[GroupTask, ...]

    @property
    def size(self) -> int:
        return sum(ref.size for g in self.groups for ref in g.segments)


@dataclass
class SplitRound:
    """One partition's planned round, ready to be cut into spans: each group's size, and the
    tasks of any run of consecutive groups (:meth:`keys_task`, :meth:`span_task`)."""

    tp: int
    group_sizes: list[int]
    group_tasks: list[GroupTask]
    dirty_parts: list[tuple[tuple[SegmentRef, tuple[AbortedTxn, ...]], ...]]  # by group: its dirty segments
    dirty_from: int
    dirty_to: int
    chunk: int
    staging_dir: str

    def keys_task(self, span: int, groups: range) -> KeysTask | None:
        """The span's stage 1 task; None when no group of it reaches into the dirty range."""
        dirty = tuple(part for grp in groups for part in self.dirty_parts[grp])
        if not dirty:
            return None
        return KeysTask(self.tp, span, dirty, self.dirty_from, self.dirty_to, self.chunk, self.staging_dir)

    def span_task(self, span: int, groups: range) -> SpanTask:
        """The span's stage 2 task (its map paths are filled in once the key tasks have run)."""
        return SpanTask(self.tp, span, (), tuple(self.group_tasks[grp] for grp in groups))


def split_round(cleaning: PartitionCleaning, tp: int, staging_dir: Path, now_ms: int) -> SplitRound:
    """The tasks of ``cleaning``'s round: a recopy task per group, with the transaction state at
    its start, and each group's segments that reach into the dirty range, with the aborted
    transactions from their dirty part on. ``tp`` names the partition in the tasks' results."""
    prepared, rnd, log = cleaning.prepared, cleaning.round, cleaning.log
    chunk = cleaning.cleaner.chunk
    ltc, producers = prepared.ltc, prepared.producers
    by_group = prepared.groups(rnd)
    trackers = transaction_states(prepared.snap.segments, producers.aborted, [g[0].base_offset for g in by_group])
    last_base = by_group[-1][-1].last_batch_base
    staging = str(staging_dir)
    segments = [seg for group in by_group for seg in group]
    ends = dict(zip([s.base_offset for s in segments], [s.base_offset for s in segments[1:]] + [rnd.end_offset],
                    strict=True))
    dirty_parts = [tuple((seg.ref, tuple(producers.aborted_overlapping(max(seg.base_offset, ltc.first_dirty_offset),
                                                                       rnd.end_offset)))
                         for seg in group
                         if ends[seg.base_offset] > ltc.first_dirty_offset and seg.base_offset < rnd.end_offset)
                   for group in by_group]
    group_tasks = [GroupTask(tp, grp, str(log.dir), staging, log.config, tuple(s.ref for s in group),
                             rnd.legacy_delete_horizon_ms, trackers[group[0].base_offset], producers.last_records,
                             now_ms, rnd.end_offset - 1, last_base, chunk)
                   for grp, group in enumerate(by_group)]
    return SplitRound(tp, [sum(s.size for s in g) for g in by_group], group_tasks, dirty_parts,
                      ltc.first_dirty_offset, rnd.end_offset, chunk, staging)


def scan_span_keys(task: KeysTask, attempt: str) -> tuple[int, int, str, float]:
    """``(tp, span, map file, seconds)``: the engine's share of the offset map from this span's
    segments (:func:`~.dirty_scan.segment_latest_offsets`, one table for all of them; under the
    compiled core one ``KeyMap``, :func:`~.dirty_scan.segment_latest_keys`), written to a file
    in the partition's staging directory, named for the task ``attempt``. A segment that is gone
    or replaced, or that cannot be read, adds nothing: its group's recopy (or the commit)
    notices the change or the damage and the partition is not swapped."""
    started = time.monotonic()
    core = native.compiled()
    latest: dict[bytes, int] = {}
    keymap = None if core is None else core.KeyMap(UNBOUNDED)
    for ref, aborted in task.segments:
        try:
            seg = InputSegment.from_ref(ref, task.chunk)
        except LogChangedError:
            continue
        try:
            if keymap is None:
                segment_latest_offsets(seg, task.dirty_from, task.dirty_to, aborted, into=latest)
            else:
                segment_latest_keys(seg, task.dirty_from, task.dirty_to, aborted, keymap)
        except LogError:
            pass
        finally:
            seg.close()
    staging = make_remote_staging(Path(task.staging_dir))
    path = staging / f"keys-{task.tp}-{task.span}-attempt-{attempt}.map"
    write_map_bytes(path, encode_map(latest) if keymap is None else keymap.to_map_file())
    return task.tp, task.span, str(path), time.monotonic() - started


def span_map(map_paths: Sequence[str]) -> OffsetMap:
    """The merge of a span's maps (later spans' offsets replace earlier ones), as an
    ``OffsetMap.exact``. Under the compiled core the files load straight into one ``KeyMap``
    (``map_file.load_map``), with no Python object per key, unless their offsets are further
    apart than that map holds."""
    core = native.compiled()
    if core is not None:
        keymap = core.KeyMap(UNBOUNDED)
        try:
            for path in map_paths:
                load_map(keymap, Path(path))
            return OffsetMap.over_keymap(core, keymap, -1)
        except OverflowError:  # offsets further apart than its 48-bit deltas: the reference's dict
            pass
    latest: dict[bytes, int] = {}
    for path in map_paths:
        table = read_map(Path(path))
        if latest:
            latest.update(table)
        else:
            latest = table
    return OffsetMap.exact(latest, -1)


def recopy_spans(spans: Sequence[SpanTask], attempt: str) -> list[dict]:
    """One task's spans, each recopied with the merge of its maps (:func:`span_map`); each row
    also says how many keys that map held."""
    rows = []
    for span in spans:
        omap = span_map(span.map_paths)  # once per span: its groups share the map
        for group in span.groups:
            rows.append(recopy_task(group, omap, attempt) | {"map_keys": len(omap)})
    return rows


def recopy_task(task: GroupTask, omap: OffsetMap, attempt: str) -> dict:
    """Recopy one group with the engine's rules, against ``omap`` (its span's merged map, an
    ``OffsetMap.exact``); a result row for the commit (never raises for a problem of this
    partition's files: its outcome is in the row, and the partition is not swapped)."""
    result = {"tp": task.tp, "grp": task.grp, "status": COMPACTED, "detail": None, "staging": None, "stats": None}
    omap.latest_offset = task.map_latest_offset
    stats = CleanerStats()
    bfilter = BatchFilter(
        omap,
        task.tracker,
        task.last_records,
        now_ms=task.now_ms,
        delete_retention_ms=task.config.delete_retention_ms,
        last_batch_base_offset=task.last_batch_base_offset,
        stats=stats,
        path=task.directory,
    )
    inputs: list[InputSegment] = []
    staging = Path(task.staging_dir) / f"group-{task.grp}-attempt-{attempt}"
    t0 = time.monotonic()
    try:
        inputs = [InputSegment.from_ref(ref, task.chunk) for ref in task.segments]
        make_remote_staging(staging)
        cleaned = recopy_group(staging, task.config, inputs, task.legacy_delete_horizon_ms, bfilter,
                               tp=Path(task.directory).name, chunk_limit=task.chunk)
        cleaned.close(trim_indexes=False)
    except PARTITION_ERRORS as exc:
        status, detail = outcome_of(exc)
        result.update(status=status, detail=detail)
        return result
    finally:
        for seg in inputs:
            seg.close()
    stats.clean_seconds = time.monotonic() - t0
    result.update(staging=str(staging), stats=stats)
    return result
