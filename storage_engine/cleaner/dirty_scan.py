"""Map building's walk over the dirty section and the header scans it needs (a batch's keys,
transaction states), shared by the local cleaner and the Spark tasks."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from .. import native
from ..record import RawBatch, decode_batch, verify_batch
from ..record.control import control_type_of
from ..record.rewrite import corrupt_batch, record_bytes
from ..record.v2 import walk_records as walk_v2_records
from ..record.varint import VarintError
from .inputs import InputSegment
from .plan import SegmentFacts, segments_in_range
from .rules import AbortedTxn, TransactionTracker
from .stats import CleanerStats
from .strategy import MISSING_VERSION, VersionRule


def dirty_segments(segments: list[InputSegment], start: int, end: int) -> list[InputSegment]:
    """The segments holding offsets of ``[start, end)``, in order."""
    facts = [SegmentFacts(s.base_offset, s.size, s.mtime_ms, s.is_active) for s in segments]
    wanted = {f.base_offset for f in segments_in_range(facts, start, end)}
    return [s for s in segments if s.base_offset in wanted]


def dirty_start_position(seg: InputSegment, start: int) -> int:
    """Byte position of the first batch of ``seg`` that reaches offset ``start``."""
    if seg.base_offset >= start:
        return 0
    for header, pos in seg.headers():
        if header.last_offset >= start:
            return pos
    return seg.size


def map_walk(
    seg: InputSegment,
    position: int,
    tracker: TransactionTracker,
    stats: CleanerStats,
    throttle: Callable[[int], None] = lambda n: None,
) -> Iterator[tuple[RawBatch, bytes, int, bool]]:
    """Every batch of ``seg`` from ``position``, CRC-checked (v2), with whether its records go into
    the offset map: data batches outside aborted transactions and legacy messages do; markers and
    aborted batches only move the transaction state along. Counts what it reads in ``stats``."""
    path = str(seg.path)
    for raw, chunk, chunk_offset in seg.batches_in_chunks(position):
        h = raw.header
        stats.map_bytes_read += h.size_in_bytes
        throttle(h.size_in_bytes)
        if h.magic < 2:
            yield raw, chunk, chunk_offset, True
            continue
        verify_batch(raw, path=path)
        stats.map_records_read += h.records_count
        if h.is_control:
            tracker.on_control_batch(h, control_type_of(raw, path))
            yield raw, chunk, chunk_offset, False
        elif tracker.on_data_batch(h):
            yield raw, chunk, chunk_offset, False
        else:
            yield raw, chunk, chunk_offset, h.records_count > 0


def batch_keys(raw: RawBatch, chunk: bytes | None = None, chunk_offset: int = 0,
               path: str | None = None) -> list[tuple[int, bytes | None]]:
    """``(offset, key)`` of every record of a data batch, any magic (keys None when absent)."""
    h = raw.header
    if h.magic < 2:
        return [(r.offset, r.key) for r in decode_batch(raw, path=path)]
    try:
        buf, start, stop = record_bytes(raw, path, chunk, chunk_offset)
        return [(h.base_offset + r[2], r[4]) for r in walk_v2_records(buf, h.records_count, start, stop, h.base_offset)]
    except (IndexError, VarintError, ValueError) as exc:
        raise corrupt_batch(f"malformed records in batch: {exc}", raw, path) from None


def batch_versions(raw: RawBatch, rule: VersionRule, chunk: bytes | None = None, chunk_offset: int = 0,
                   path: str | None = None) -> list[tuple[int, bytes | None, int]]:
    """``(offset, key, version)`` of every record of a data batch, any magic, under a version
    strategy (keys None when absent; the version of an unkeyed record is never read)."""
    h = raw.header
    if h.magic < 2:
        return [(r.offset, r.key, rule.of_record(r) if r.key is not None else MISSING_VERSION)
                for r in decode_batch(raw, path=path)]
    try:
        buf, start, stop = record_bytes(raw, path, chunk, chunk_offset)
        version_of = rule.for_batch(h)
        return [(h.base_offset + od, key, version_of(buf, pos, end, tsd) if key is not None else MISSING_VERSION)
                for pos, end, od, tsd, key, _tomb in walk_v2_records(buf, h.records_count, start, stop, h.base_offset)]
    except (IndexError, VarintError, ValueError) as exc:
        raise corrupt_batch(f"malformed records in batch: {exc}", raw, path) from None


def segment_latest_offsets(seg: InputSegment, dirty_from: int, dirty_to: int,
                           aborted: Iterable[AbortedTxn], into: dict[bytes, int] | None = None) -> dict[bytes, int]:
    """The latest offset of every key the map-building walk puts into the offset map from this
    segment's part of the dirty range ``[dirty_from, dirty_to)``: one segment's share of the map,
    already reduced (a distributed map build merges them in offset order). ``aborted``: the
    aborted transactions reaching into that part. ``into``: a table of earlier segments' keys to
    add to (this segment's offsets replace theirs), returned. Under the compiled core the walk
    fills a ``KeyMap`` (:func:`segment_latest_keys`), read back into the table at the end."""
    latest: dict[bytes, int] = {} if into is None else into
    core = native.compiled()
    if core is None:
        for raw, chunk, chunk_offset in _mapped_batches(seg, dirty_from, dirty_to, aborted):
            for off, key in batch_keys(raw, chunk, chunk_offset, str(seg.path)):
                if key is not None and dirty_from <= off < dirty_to:
                    latest[key] = off
        return latest
    keymap = core.KeyMap(UNBOUNDED)
    segment_latest_keys(seg, dirty_from, dirty_to, aborted, keymap)
    latest.update(keymap.to_dict())
    return latest


#: A byte budget no map reaches: the distributed map build's tables are complete, not bounded.
UNBOUNDED = 1 << 62


def segment_latest_keys(seg: InputSegment, dirty_from: int, dirty_to: int, aborted: Iterable[AbortedTxn],
                        keymap: Any) -> None:
    """:func:`segment_latest_offsets` into a compiled ``KeyMap`` (made with :data:`UNBOUNDED`,
    holding earlier segments' keys, which this segment's offsets replace): a v2 batch's keys go
    in without a Python object per record; a legacy batch's one by one, in offset order."""
    core = native.compiled()
    path = str(seg.path)
    for raw, chunk, chunk_offset in _mapped_batches(seg, dirty_from, dirty_to, aborted):
        h = raw.header
        if h.magic < 2:
            for off, key in batch_keys(raw, chunk, chunk_offset, path):
                if key is not None and dirty_from <= off < dirty_to:
                    keymap.put(key, off)
            continue
        buf, start, stop = record_bytes(raw, path, chunk, chunk_offset)
        try:
            core.latest_offsets(keymap, buf, start, stop, h.records_count, h.base_offset,  # type: ignore[union-attr]
                                dirty_from, dirty_to)
        except native.REJECTIONS:
            raise native.reference_error(lambda r=raw, c=chunk, o=chunk_offset: batch_keys(r, c, o, path),
                                         "a batch") from None


def _mapped_batches(seg: InputSegment, dirty_from: int, dirty_to: int,
                    aborted: Iterable[AbortedTxn]) -> Iterator[tuple[RawBatch, bytes, int]]:
    """The batches of ``seg`` whose records the map-building walk maps, up to ``dirty_to``."""
    walk = map_walk(seg, dirty_start_position(seg, dirty_from), TransactionTracker(aborted), CleanerStats())
    for raw, chunk, chunk_offset, is_mapped in walk:
        if raw.header.base_offset >= dirty_to:
            return
        if is_mapped:
            yield raw, chunk, chunk_offset


def transaction_states(segments: list[InputSegment], aborted: Iterable[AbortedTxn],
                       starts: Iterable[int]) -> dict[int, TransactionTracker]:
    """The recopy's :class:`TransactionTracker` as it stands when it reaches each base offset of
    ``starts`` (group starts), from a replay of the batch headers: its state depends on headers
    and marker types only. Lets groups be recopied independently, in any order, with the same
    decisions as one pass over the whole log."""
    wanted = set(starts)
    tracker = TransactionTracker(aborted)
    out: dict[int, TransactionTracker] = {}
    for seg in segments:
        if seg.base_offset in wanted:
            out[seg.base_offset] = copy.deepcopy(tracker)
            if len(out) == len(wanted):
                break
        for header, pos in seg.headers():
            if header.magic < 2:
                continue
            if header.is_control:
                tracker.on_control_batch(header, control_type_of(seg.read_batch(pos, header.size_in_bytes), str(seg.path)))
            else:
                tracker.on_data_batch(header)
    return out
