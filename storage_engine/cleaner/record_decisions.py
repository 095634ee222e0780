"""The per-record loops over one v2 batch's bytes: map building (each key's latest offset)
and recopying (which records survive). The offset strategy's loops inline
:func:`~storage_engine.cleaner.rules.retain_record` for speed (the tests run both against each
other); the version strategies' recopy calls
:func:`~storage_engine.cleaner.rules.retain_versioned_record` as it is.

:func:`map_batch` and :func:`filter_batch` are what the cleaner calls: when the offset map keeps
its keys in the compiled core's ``KeyMap`` (see ``offset_map``), the compiled twins of
:func:`map_v2_records` and :func:`filter_v2_records` (``native/src/compact.rs``) run instead,
with the same rules and results; bytes they refuse are re-walked here by ``walk_records``, whose
error the caller reports, so a malformed batch reads the same under both cores.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import native
from ..record.v2 import walk_records as walk_v2_records
from .rules import RecordOutcome, retain_versioned_record

if TYPE_CHECKING:
    from .offset_map import OffsetMap
    from .strategy import RecordVersion


def _rejected(buf: bytes, count: int, start: int, stop: int, base_offset: int) -> BaseException:
    """The error for records the compiled core refused: ``walk_records``' own (IndexError,
    VarintError or ValueError, raised from here for the caller to report), or
    ``CoreDivergenceError`` if the reference reads them."""
    return native.reference_error(lambda: walk_v2_records(buf, count, start, stop, base_offset), "a batch's records")


def map_batch(omap: OffsetMap, buf: bytes, start: int, stop: int, count: int, base_offset: int,
              min_offset: int) -> tuple[bool, int]:
    """Put a batch's keyed records at or above ``min_offset`` into ``omap``'s exact layout
    (``omap.exact_table()`` or its compiled ``keymap``), stopping at the first new key that does
    not fit. Returns ``(complete, records without a key)``."""
    keymap = omap.keymap
    if keymap is None:
        before = omap.capacity_bytes - omap.used_bytes
        complete, remaining, added, last, unkeyed = map_v2_records(
            buf, start, stop, count, base_offset, min_offset, omap.exact_table(), before,  # type: ignore[arg-type]
            omap.overhead)
        omap.account(added, before - remaining, last)
        return complete, unkeyed
    try:
        complete, _added, last, unkeyed = omap.core.map_v2_records(  # type: ignore[union-attr]
            keymap, buf, start, stop, count, base_offset, min_offset)
    except native.REJECTIONS:
        raise _rejected(buf, count, start, stop, base_offset) from None
    omap.account_compiled(last)
    return complete, unkeyed


def filter_batch(omap: OffsetMap, buf: bytes, start: int, stop: int, count: int, base_offset: int,
                 retain_tombstones: bool, dirty_start: int | None = None, all_kept_as_none: bool = False,
                 ) -> tuple[list[tuple[int, int, int]] | None, bool, int, int, int]:
    """:func:`filter_v2_records` against ``omap`` (any unversioned layout), compiled when its keys
    are in the compiled ``keymap``.

    ``dirty_start``, when the map was built by the cleaner from the dirty range starting there
    (every keyed record of it up to ``omap.latest_offset`` was put), lets the compiled walk decide
    those records without looking their keys up: while the map's puts came in strictly
    increasing offsets, a record put into it is the latest of its key exactly when its offset is
    a mapped offset, which is ``retain_record``'s ``offset < latest_offset_of_key`` test for it
    (the batch skip of ``BatchFilter.use_winners`` rests on the same fact). The reference looks
    every key up.

    ``all_kept_as_none``: the compiled walk may answer None instead of the spans when every
    record survives (a batch copied as it is needs no list); call again without it for them."""
    keymap = omap.keymap
    if keymap is None:
        table_get = omap.raw_table_get()
        if table_get is None:
            get = omap.get
            table_get = lambda key, _default: get(key)  # noqa: E731
        return filter_v2_records(buf, start, stop, count, base_offset, omap.latest_offset, table_get,
                                 retain_tombstones)
    try:
        return omap.core.filter_v2_records(  # type: ignore[union-attr]
            keymap, buf, start, stop, count, base_offset, omap.latest_offset, retain_tombstones, dirty_start,
            all_kept_as_none)
    except native.REJECTIONS:
        raise _rejected(buf, count, start, stop, base_offset) from None


def map_v2_records(buf: bytes, start: int, stop: int, count: int, base_offset: int, min_offset: int,
                   table: dict, remaining: int, overhead: int) -> tuple[bool, int, int, int, int]:
    """Map building's hot loop: put every keyed record of a batch at or above ``min_offset`` into
    ``table`` (key -> offset), charging ``offset_map.entry_cost`` per new key against
    ``remaining``. Stops at the first new key that does not fit.

    Returns ``(complete, remaining, new_keys, last_offset_put, unkeyed)`` (``last_offset_put`` -1
    if none; ``unkeyed`` counts records without a key).
    """
    check_min = base_offset < min_offset
    added = 0
    last = -1
    unkeyed = 0
    for _pos, _end, od, _tsd, key, _tomb in walk_v2_records(buf, count, start, stop, base_offset):
        if key is None:
            unkeyed += 1
            continue
        off = base_offset + od
        if check_min and off < min_offset:
            continue
        if key in table:
            table[key] = off
        else:
            cost = overhead + ((len(key) + 48) & ~15)  # offset_map.key_object_size, inlined: once per record
            if cost > remaining:
                return False, remaining, added, last, unkeyed
            table[key] = off
            remaining -= cost
            added += 1
        last = off
    return True, remaining, added, last, unkeyed


def filter_v2_records(buf: bytes, start: int, stop: int, count: int, base_offset: int, map_latest_offset: int,
                      table_get, retain_tombstones: bool) -> tuple[list[tuple[int, int, int]], bool, int, int, int]:
    """Recopying's hot loop: :func:`retain_record` for every record of a batch (``buf[start:stop]``).

    ``table_get(key, -1)`` is the offset map's lookup. Returns ``(kept, a kept record is a
    tombstone, duplicates, tombstones, unkeyed)`` where ``kept`` holds ``(start, end, timestamp
    delta)`` per surviving record and ``buf[start:end]`` is its bytes as stored.
    """
    kept: list[tuple[int, int, int]] = []
    keep = kept.append
    has_tomb = False
    dup = tomb = unkeyed = 0
    for pos, end, od, tsd, key, is_tomb in walk_v2_records(buf, count, start, stop, base_offset):
        off = base_offset + od
        if key is None:
            if off <= map_latest_offset:
                unkeyed += 1
                continue
        elif off <= map_latest_offset:
            if off < table_get(key, -1):
                dup += 1
                continue
            if is_tomb and not retain_tombstones:
                tomb += 1
                continue
        if is_tomb:
            has_tomb = True
        keep((pos, end, tsd))
    return kept, has_tomb, dup, tomb, unkeyed


def filter_versioned_records(buf: bytes, start: int, stop: int, count: int, base_offset: int,
                             version_of: RecordVersion, omap: OffsetMap,
                             retain_tombstones: bool) -> tuple[list[tuple[int, int, int]], bool, int, int, int]:
    """:func:`filter_v2_records` under a version strategy: each keyed record of the mapped range
    is compared with its key's winner in the versioned ``omap`` by ``(version, offset)``; a
    record of the clean section that beats the winner takes its place in the map, so the
    recopy must run in offset order. Same return value as :func:`filter_v2_records`."""
    kept = []
    has_tomb = False
    dup = tomb = unkeyed = 0
    latest = omap.latest_offset
    for pos, end, od, tsd, key, is_tomb in walk_v2_records(buf, count, start, stop, base_offset):
        off = base_offset + od
        version, winner = 0, None
        if key is not None and off <= latest:
            version, winner = version_of(buf, pos, end, tsd), omap.winner(key)
        outcome, beats = retain_versioned_record(off, key, is_tomb, version, winner=winner, map_latest_offset=latest,
                                                 retain_tombstones=retain_tombstones, newest=omap.newest)
        if beats:
            omap.take(key, version, off)  # type: ignore[arg-type]
        if outcome is RecordOutcome.KEEP:
            has_tomb = has_tomb or is_tomb
            kept.append((pos, end, tsd))
        elif outcome is RecordOutcome.DROP_DUPLICATE:
            dup += 1
        elif outcome is RecordOutcome.DROP_TOMBSTONE:
            tomb += 1
        else:
            unkeyed += 1
    return kept, has_tomb, dup, tomb, unkeyed
